import Segget
#if canImport(Glibc)
import Glibc
#endif

/// Runs blocking work (a whole download, waiting for a child process) on a thread of its own and
/// awaits its result, so that it never occupies one of Swift Testing's few cooperative threads (two
/// on a two-core machine): tests that wait on the network then really run in parallel.
///
/// Record expectations after the `await`, in the test's task, not inside `body`: issues recorded
/// on a foreign thread have no test to belong to.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let job = BlockingJob {
            do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
        }
        let context = Unmanaged.passRetained(job).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            Unmanaged<BlockingJob>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, context)
        if rc == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<BlockingJob>.fromOpaque(context).release()
            continuation.resume(throwing: TestSupportError("pthread_create failed: \(rc)"))
        }
    }
}

private final class BlockingJob: @unchecked Sendable {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

/// Runs `download` off the test's thread until `bytes` of it are complete, then interrupts it (as
/// Ctrl-C does); the error it ended with, nil where it finished first.
func interrupted(_ download: Download, atCompleted bytes: Int64) async throws -> SeggetError? {
    let flag = InterruptFlag()
    return try await failure(of: download, progress: { p in if p.completedBytes >= bytes { flag.set() } }, interrupt: flag)
}

/// Runs `download` off the test's thread: the error it ended with, nil where it finished.
func failure(
    of download: Download, progress: (@Sendable (DownloadProgress) -> Void)? = nil,
    events: (@Sendable (DownloadEvent) -> Void)? = nil, interrupt: InterruptFlag = InterruptFlag()
) async throws -> SeggetError? {
    try await blocking { () -> SeggetError? in
        do {
            _ = try download.run(progress: progress, events: events, interrupt: interrupt)
            return nil
        } catch let e as SeggetError {
            return e
        } catch {
            return SeggetError(.internalError, "\(error)")
        }
    }
}
