import SeggetSystem

/// Where a `DownloadLoop`'s blocking steps run: a worker thread of their own, or the loop thread
/// between two passes (`DownloadLoop(stepsOnLoop: true)`). One step at a time either way.
public final class LoopSteps: @unchecked Sendable {
    /// The worker the steps run on; nil when they run on the loop thread.
    let worker: SerialWorker?
    /// Set once, by the loop's `init`.
    unowned(unsafe) var loop: DownloadLoop!

    init(worker: SerialWorker?) { self.worker = worker }

    /// Runs `work` later: on the steps' worker, or on the loop thread at the top of its next pass.
    public func async(_ work: @escaping @Sendable () -> Void) {
        if let worker { worker.async(work) } else { loop.post(work) }
    }

    /// Runs `work` after every step given before it and returns what it returns. Not from the steps'
    /// own thread; with the steps on the loop, only on the loop's thread while the loop is not
    /// running (after `run` returned).
    public func sync<T>(_ work: @escaping () -> T) -> T {
        guard let worker else {
            loop.drainPosted()
            return work()
        }
        return worker.sync(work)
    }
}

/// What ended each engine of `DownloadLoop.run(_:)`, set on the loop thread.
final class LoopResults {
    private(set) var values: [(any Error)?]
    private var ended: Int = 0

    init(count: Int) { values = Array(repeating: nil, count: count) }
    func set(_ i: Int, _ error: (any Error)?) {
        values[i] = error
        ended += 1
    }
    var allSet: Bool { ended == values.count }
}
