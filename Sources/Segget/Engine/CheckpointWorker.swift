import Dispatch
import SeggetJournal
import SeggetSystem
import Synchronization

/// Runs journal checkpoints with the data file's `fdatasync` on a background queue, so that a sync
/// never stalls the fetch loop. The journal itself is only touched on the loop thread.
final class CheckpointWorker {
    private let journal: Journal
    private let data: BlockStorage
    private let interval: Double
    private let queue: SerialWorker
    /// Where the checkpoints of downloads not on a `DownloadLoop` run, one at a time. On a loop they
    /// run on its steps queue (`DownloadLoop.join`), between the downloads' blocking steps: no
    /// thread of their own (40 files of 8 MiB capped, `-j 16 -n 4`: 4 threads at most, not 5).
    static let sharedQueue = SerialWorker(name: "segget-ckpts")
    private let finished = ResultSlot()
    private var lastCheckpoint = monotonicSeconds()
    private var inFlight = false

    struct CheckpointResult: Sendable {
        let snapshot: CheckpointSnapshot
        let ok: Bool
    }

    /// The background sync's result, handed back to the loop thread.
    final class ResultSlot: Sendable {
        private let slot = Mutex<CheckpointResult?>(nil)
        func put(_ r: CheckpointResult) { slot.withLock { $0 = r } }
        func take() -> CheckpointResult? { slot.withLock { r in defer { r = nil }; return r } }
    }

    /// `on`: the worker the syncs run on, one at a time with its other work.
    init(journal: Journal, data: BlockStorage, interval: Double, on queue: SerialWorker = CheckpointWorker.sharedQueue) {
        self.journal = journal
        self.data = data
        self.interval = interval
        self.queue = queue
    }

    /// Called on every tick of the loop: completes a finished sync, starts the next one when due.
    func poke() {
        if let done = finished.take() {
            if done.ok { try? journal.completeCheckpoint(done.snapshot) }
            inFlight = false
        }
        let now = monotonicSeconds()
        guard !inFlight, now - lastCheckpoint >= interval else { return }
        lastCheckpoint = now
        inFlight = true
        let snapshot = journal.beginCheckpoint()
        let box = UncheckedBox(data)
        let finished = self.finished
        queue.async {
            let ok = (try? box.value.sync()) != nil
            finished.put(CheckpointResult(snapshot: snapshot, ok: ok))
        }
    }

    /// Waits for a sync in flight (so no background work outlives the download). Only then: the
    /// queue's target may be busy with other work, which the loop thread should not wait for.
    func stop() {
        if inFlight { queue.sync {} }
        poke()
    }
}

/// Carries a non-Sendable reference to a queue that is the only other user while it runs.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
