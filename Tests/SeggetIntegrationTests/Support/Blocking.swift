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
