/// The end of the time `--timeout` allows for a whole run, on the monotonic clock.
///
/// Every wait of the run (the probe, each redirect, each `Retry-After`, each backoff, the fetch)
/// is measured against the same deadline, so that no part of the run can outlast it.
public struct Deadline: Sendable, Equatable {
    /// Monotonic seconds at which the run must end.
    public let at: Double
    /// The `--timeout` the user gave, for messages.
    public let limit: Double

    public init(limit: Double, from start: Double) {
        self.limit = limit
        at = start + limit
    }

    public func remaining(now: Double) -> Double { max(0, at - now) }

    /// `--timeout 3 s` as the user typed it (whole seconds without decimals).
    var shown: String {
        limit == limit.rounded() && limit < 1e9 ? "--timeout \(Int(limit)) s" : "--timeout \(Format.seconds(limit))"
    }

    /// The advice after a deadline, which a stream words otherwise (`Download.streamError`).
    static let continueOrRaise = "run the same command to continue, or raise --timeout"

    /// The failure for a run that reached its deadline while `doing` something.
    func expired(_ doing: String) -> SeggetError {
        var e = SeggetError(.network, "\(doing) did not finish within \(shown); \(Self.continueOrRaise).", retryAdvice: .never)
        e.networkCause = .timedOut
        return e
    }
}

/// What to do before trying a failed request again.
enum RetryDecision: Equatable {
    /// Wait this many seconds; `note` says why the wait is what it is (a long or capped `Retry-After`).
    case wait(Double, note: String?)
    /// Waiting would outlast `--timeout`: fail now with this message.
    case giveUp(String)
}

enum RetryPolicy {
    /// The longest wait a `Retry-After` may impose unless `--max-retry-wait` says otherwise.
    static let defaultMaxWait = 300.0
    /// The longest backoff between two retries, whatever the attempt number.
    static let maxBackoff = 60.0
    /// A `Retry-After` at least this long is named in the retry line, so a long wait is never silent.
    static let announcedRetryAfter = 10.0

    /// Decides the wait before retry number `attempt` (from 1) after `reason`: what the server asked
    /// (`Retry-After`, at most `maxWait`), else `base` doubling per attempt up to `maxBackoff` (and
    /// `maxWait`) times `jitter` (0.5…1.5). A wait longer than what is left before `deadline` gives up
    /// at once, since sleeping into the deadline would only fail later.
    static func decide(
        attempt: Int, reason: String, base: Double, retryAfter: Double?, maxWait: Double,
        deadline: Deadline?, now: Double, jitter: Double
    ) -> RetryDecision {
        let wait: Double
        var note: String?
        if let asked = retryAfter {
            wait = min(asked, maxWait)
            if asked > maxWait {
                note = "the server asked to wait \(Format.seconds(asked)) (Retry-After); waiting \(Format.seconds(wait)), the --max-retry-wait cap"
            } else if asked >= announcedRetryAfter {
                note = "the server asked to wait \(Format.seconds(asked)) (Retry-After)"
            }
        } else {
            wait = min(maxBackoff, maxWait, base * Double(1 << min(max(attempt, 1) - 1, 10))) * jitter
        }
        if let deadline {
            let left = deadline.remaining(now: now)
            if wait > left {
                let what = retryAfter.map { "the server asked to wait \(Format.seconds($0)) before retrying (Retry-After)" }
                    ?? "retry \(attempt) would wait \(Format.seconds(wait))"
                let room = left > 0 ? "more than the \(Format.seconds(left)) left of \(deadline.shown)" : "and \(deadline.shown) is used up"
                return .giveUp("\(sentence(reason)) Giving up now: \(what), \(room). Try again later, or raise --timeout.")
            }
        }
        return .wait(wait, note: note)
    }

    /// How long a host that refused a request (429 or 503 with a limit to learn) is left alone: what
    /// it asked (`Retry-After`, the `RateLimit` reset), at most `maxWait`, the cap a retry's wait has.
    /// Uncapped, a `Retry-After: 86400` held every new request to the host for a day while the
    /// retry of a plain failure with the same field waited 300 s.
    static func hostWait(asked: Double?, maxWait: Double) -> Double? {
        asked.map { min($0, maxWait) }
    }

    /// What the notice of a learnt host limit says of the host's wait (`asked`, capped to `wait`):
    /// a long or capped one is said, so that the connections' idling is never a silent mystery.
    static func hostWaitNote(asked: Double?, wait: Double?) -> String? {
        guard let wait else { return nil }
        let capped = (asked ?? wait) > wait
        guard capped || wait >= announcedRetryAfter else { return nil }
        let why = capped ? ", the --max-retry-wait cap of the \(Format.seconds(asked ?? wait)) it asked" : " as it asked"
        return "no new request for \(Format.seconds(wait))\(why)"
    }

    /// `reason` as a sentence: a capitalised start is left alone, and it ends with exactly one period.
    static func sentence(_ reason: String) -> String {
        var r = Substring(reason).trimmingASCIIWhitespace()
        while r.last == "." || r.last == ";" { r = r.dropLast().trimmingASCIIWhitespace() }
        return r + "."
    }
}

extension Format {
    /// A retry announcement as a sentence: "could not connect to …. Retry 2 in 1.5 s."
    public static func retry(reason: String, attempt: Int, delay: Double) -> String {
        delay == 0
            ? "\(RetryPolicy.sentence(reason)) Retry \(attempt) at once."
            : "\(RetryPolicy.sentence(reason)) Retry \(attempt) in \(seconds(delay))."
    }
}

/// When a ranged transfer that was cut short is continued at once instead of after a backoff.
///
/// A transfer that brought bytes before its connection ended showed that the server serves: what
/// cut it was the connection (a server or proxy that caps a connection's bytes or time, a reset on
/// the way), and the next request continues from the byte it reached. Waiting out a backoff there
/// only wastes time (32 MiB from a server that closes every answer after 500,000 bytes took 11 s,
/// most of it in waits of 1-3 s), and a count of failures that never resets would end a download
/// that was making progress. A transfer cut before `minimumBytes` is no such progress: it counts as
/// a failure, with its backoff, as one that brought nothing does, so a server that sends a few
/// bytes and closes is not asked again and again at once. At worst the continuations cost a request
/// per `minimumBytes`, what a batch of small files costs a server.
enum CutContinuation {
    static let minimumBytes: Int64 = 64 * 1024

    /// Whether a transfer that brought `bytes` (from its head to the cut) is continued at once.
    static func continuesAtOnce(bytes: Int64) -> Bool { bytes >= minimumBytes }
}
