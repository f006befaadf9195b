import Synchronization

/// One receive rate cap for several downloads at once (a daemon's `max-overall-download-limit`),
/// changeable while they run: a `RateBudget` behind a lock that every connection of every download
/// sharing it pays into. A change takes effect at the next bytes received (the bucket starts afresh
/// at the new rate); nil lifts the cap.
///
/// A cap set where there was none starts with its bucket empty, as a download's own `--max-speed`
/// does (`FetchEngine`): a daemon task's `max-download-limit` is set as its download starts, and a
/// full burst let the probe's bytes, which the download charges to it, come free (a tenth of a
/// second's worth, at least 64 KiB: a 160,000-byte file at 100 KiB/s took about 0.9 s, not 1.56 s).
///
/// Safe from any thread.
public final class SharedRateLimit: Sendable {
    private let state: Mutex<RateBudget?>

    public init(bytesPerSecond: Int64? = nil) {
        state = Mutex(bytesPerSecond.map { RateBudget(bytesPerSecond: $0, now: monotonicSeconds()) })
    }

    /// The cap now; nil: none.
    public var bytesPerSecond: Int64? {
        get { state.withLock { $0.map { Int64($0.bytesPerSecond) } } }
        set {
            state.withLock { b in
                guard newValue != b.map({ Int64($0.bytesPerSecond) }) else { return }
                let now = monotonicSeconds()
                // A new rate keeps what the bucket holds or owes (a daemon task's share changes
                // every second; a fresh bucket gave it a full burst and forgot its debt each time).
                b = newValue.map { rate in b.map { $0.changing(to: rate, now: now) } ?? RateBudget(bytesPerSecond: rate, now: now) }
            }
        }
    }

    /// Whether a callback of `bytes` may be taken now (see `RateBudget.allows`).
    func allowsReceiving(now: Double, bytes: Int) -> Bool {
        state.withLock { b in
            guard b != nil else { return true }
            b!.refill(now: now)
            return b!.allows(bytes)
        }
    }

    /// Seconds until a callback of `bytes` is allowed (0 now or without a cap).
    func secondsUntil(allowing bytes: Int) -> Double { state.withLock { $0?.secondsUntil(allowing: bytes) ?? 0 } }

    func spend(_ bytes: Int) { state.withLock { b in b?.spend(bytes) } }

}

extension SharedRateLimit: Equatable {
    /// The same limit (a daemon's), not an equal rate.
    public static func == (a: SharedRateLimit, b: SharedRateLimit) -> Bool { a === b }
}
