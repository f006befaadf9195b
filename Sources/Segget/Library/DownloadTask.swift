import SeggetSystem
import Synchronization

/// A download running on its own thread, observed and awaited from Swift concurrency.
///
/// Create one with ``Download/start()``. The transfer itself runs on a dedicated thread (libcurl's
/// multi loop blocks), never on the cooperative pool, so any number of downloads can run at once
/// without starving other tasks.
///
/// Stopping: ``cancel()``, or cancelling a Swift task that is awaiting ``result()``, asks the
/// download to stop at the next opportunity. The journal is saved, ``result()`` throws a
/// ``SeggetError`` of kind ``FailureKind/interrupted``, and running the same download again later
/// resumes where it stopped.
///
/// ```swift
/// let task = Download(url: "https://example.com/big.iso").start()
/// Task { for await p in task.progress { print(p.completedBytes) } }
/// let result = try await task.result()
/// ```
public final class DownloadTask: Sendable {
    /// Progress snapshots a few times a second; finishes when the download ends. Only the newest
    /// snapshot is buffered, so a slow reader skips snapshots rather than falling behind.
    public let progress: AsyncStream<DownloadProgress>
    /// Notices, retries and re-dials; finishes when the download ends. The most recent 1,000
    /// events are buffered for a reader that is not keeping up.
    public let events: AsyncStream<DownloadEvent>

    private let interrupt: InterruptFlag
    private let state = Mutex(State())

    private struct State {
        var outcome: Result<DownloadResult, SeggetError>?
        var waiters: [CheckedContinuation<Result<DownloadResult, SeggetError>, Never>] = []
    }

    convenience init(download: Download) {
        self.init { progress, events, interrupt, done in
            let started = DownloadThread.startReportingError {
                do throws(SeggetError) {
                    done(.success(try download.run(progress: progress, events: events, interrupt: interrupt)))
                } catch {
                    done(.failure(error))
                }
            }
            if let error = started {
                done(.failure(SeggetError(.internalError, "could not start a thread for the download: \(error).")))
            }
        }
    }

    /// The download on `loop`, beside the other downloads there, without a thread of its own,
    /// continuing from `prepared` (its probe, made with `Download.prepare`) or counting
    /// `probeFailed` as its probe's first attempt.
    convenience init(download: Download, loop: DownloadLoop, prepared: PreparedDownload? = nil, probeFailed: SeggetError? = nil) {
        self.init { progress, events, interrupt, done in
            download.run(
                on: loop, progress: progress, events: events, interrupt: interrupt, prepared: prepared,
                probeFailed: probeFailed, completion: done)
        }
    }

    /// Sets up the streams and the interrupt, then has `start` run the download with them; `start`
    /// calls `done` once, with how it ended.
    private init(
        start: (
            _ progress: @escaping @Sendable (DownloadProgress) -> Void,
            _ events: @escaping @Sendable (DownloadEvent) -> Void,
            _ interrupt: InterruptFlag,
            _ done: @escaping @Sendable (Result<DownloadResult, SeggetError>) -> Void
        ) -> Void
    ) {
        let (progress, progressSink) = AsyncStream.makeStream(of: DownloadProgress.self, bufferingPolicy: .bufferingNewest(1))
        let (events, eventSink) = AsyncStream.makeStream(of: DownloadEvent.self, bufferingPolicy: .bufferingNewest(1000))
        self.progress = progress
        self.events = events
        let interrupt = InterruptFlag()
        self.interrupt = interrupt
        start({ progressSink.yield($0) }, { eventSink.yield($0) }, interrupt) { [self] outcome in
            progressSink.finish()
            eventSink.finish()
            complete(outcome)
        }
    }

    /// Waits for the download to end and returns what it produced.
    ///
    /// May be called any number of times, from any task; every caller gets the same outcome.
    /// Cancelling the calling task stops the download (as ``cancel()`` does); the call then
    /// throws ``FailureKind/interrupted`` once the journal is saved.
    public func result() async throws(SeggetError) -> DownloadResult {
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<DownloadResult, SeggetError>, Never>) in
                let ready: Result<DownloadResult, SeggetError>? = state.withLock { s in
                    if let o = s.outcome { return o }
                    s.waiters.append(c)
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        } onCancel: {
            interrupt.set()
        }
        return try outcome.get()
    }

    /// Asks the download to stop; returns at once. ``result()`` then throws
    /// ``FailureKind/interrupted`` and a later run of the same download resumes.
    public func cancel() { interrupt.set() }

    /// True once the download has ended, successfully or not.
    public var isFinished: Bool { state.withLock { $0.outcome != nil } }

    private func complete(_ outcome: Result<DownloadResult, SeggetError>) {
        let waiters = state.withLock { s in
            s.outcome = outcome
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume(returning: outcome) }
    }
}

extension Download {
    /// Starts the download on a dedicated thread and returns a handle to observe, await or cancel it.
    public func start() -> DownloadTask { DownloadTask(download: self) }

    /// Starts the download on `loop` (see ``DownloadLoop``) and returns a handle to observe, await or
    /// cancel it: any number of downloads started so share the loop's thread and connections.
    public func start(on loop: DownloadLoop) -> DownloadTask { DownloadTask(download: self, loop: loop) }

    /// Starts the download on `loop` as ``start(on:)`` does, continuing from its probe made earlier
    /// with ``prepare(on:interrupt:slot:slotNowIfFree:onSlot:onFileName:completion:)`` (`prepared`),
    /// or, where that probe failed, counting its failure (`probeFailed`) as the probe's first
    /// attempt: a caller that needed the probe's answer first (for the file's name) pays no second
    /// request for it.
    public func start(on loop: DownloadLoop, prepared: PreparedDownload?, probeFailed: SeggetError?) -> DownloadTask {
        DownloadTask(download: self, loop: loop, prepared: prepared, probeFailed: probeFailed)
    }

    /// Downloads the file and returns when it is in place, without blocking a cooperative thread.
    ///
    /// Cancelling the calling task stops the download, saves the journal and throws
    /// ``FailureKind/interrupted``; calling `run()` again on an equal `Download` resumes.
    public func run() async throws(SeggetError) -> DownloadResult {
        try await start().result()
    }
}

/// A detached POSIX thread for one blocking download (8 MiB stack, like the main thread).
///
/// Blocking work belongs on threads of its own: on Linux, Dispatch's global queues run about one
/// thread per CPU, so downloads started there ran two at a time on a 2-core machine however many a
/// batch asked for.
public enum DownloadThread {
    /// The stack of a download thread: like the main thread's.
    static let stackSize = 8 << 20

    /// Runs `body` on a new thread. Returns false when it could not be created.
    public static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        startReportingError(body) == nil
    }

    /// Runs `body` on a new thread; returns why it could not be created, or nil.
    static func startReportingError(_ body: @escaping @Sendable () -> Void) -> Errno? {
        do {
            try SystemThread.detach(stackSize: stackSize, body)
            return nil
        } catch {
            return error
        }
    }
}
