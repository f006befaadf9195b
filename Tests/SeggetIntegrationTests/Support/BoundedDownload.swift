import Segget
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How a download with a hard time limit ended: its result or error, how long it took, and how far
/// it had got (the last progress snapshot) when it ended or was stopped.
struct BoundedRun: Sendable, CustomStringConvertible {
    var seconds: Double
    var result: DownloadResult?
    var error: SeggetError?
    /// True when the hard limit stopped it (its error is then `.interrupted`).
    var hitHardLimit: Bool
    var completedBytes: Int64
    var totalBytes: Int64?
    var bytesPerSecond: Double
    var retries: Int
    var redials: Int

    var description: String {
        let end: String
        if hitHardLimit {
            end = "stopped at the hard limit"
        } else if let error {
            end = "failed: \(error.kind) \(error.message)"
        } else {
            end = "finished"
        }
        let total = totalBytes.map { " of \($0)" } ?? ""
        let tenths = (seconds * 10).rounded() / 10
        return "\(end) after \(tenths) s, \(completedBytes)\(total) bytes, last rate \(Int(bytesPerSecond)) B/s, "
            + "\(retries) retries, \(redials) re-dials"
    }
}

/// Runs a library download on a thread of its own (see `blocking`) and interrupts it after
/// `hardLimit` seconds, so that an engine that never finishes fails the test instead of hanging
/// the suite.
func boundedDownload(_ url: String, _ options: DownloadOptions, hardLimit: Double) async -> BoundedRun {
    let interrupt = InterruptFlag()
    let state = Mutex(RunState())
    let started = nowSeconds()
    let watchdog = DownloadThread.start {
        while nowSeconds() - started < hardLimit {
            if state.withLock({ $0.done }) { return }
            usleep(20_000)
        }
        state.withLock { $0.hitHardLimit = !$0.done }
        interrupt.set()
    }
    if !watchdog { interrupt.set() }
    let outcome = try? await blocking { () -> BoundedOutcome in
        let result = Result { () throws(SeggetError) -> DownloadResult in
            try Download(url: url, options: options).run(
                progress: { p in state.withLock { $0.progress = p } },
                events: { e in
                    state.withLock { s in
                        if case .retry = e { s.retries += 1 }
                        if case .redial = e { s.redials += 1 }
                    }
                },
                interrupt: interrupt)
        }
        state.withLock { $0.done = true }
        switch result {
        case .success(let r): return BoundedOutcome(result: r, error: nil)
        case .failure(let e): return BoundedOutcome(result: nil, error: e)
        }
    }
    let seconds = nowSeconds() - started
    let s = state.withLock { $0 }
    return BoundedRun(
        seconds: seconds, result: outcome?.result,
        error: outcome == nil ? SeggetError(.internalError, "could not start a thread") : outcome?.error,
        hitHardLimit: s.hitHardLimit, completedBytes: outcome?.result?.bytes ?? s.progress?.completedBytes ?? 0,
        totalBytes: s.progress?.totalBytes ?? outcome?.result?.bytes, bytesPerSecond: s.progress?.bytesPerSecond ?? 0,
        retries: s.retries, redials: s.redials)
}

private struct RunState {
    var done = false
    var hitHardLimit = false
    var progress: DownloadProgress?
    var retries = 0
    var redials = 0
}

private struct BoundedOutcome: Sendable {
    var result: DownloadResult?
    var error: SeggetError?
}
