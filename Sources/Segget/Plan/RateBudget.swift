/// `--max-speed` for the whole download: a token bucket that every connection draws from.
///
/// Bytes are paid for when they arrive. While the bucket is empty or in debt, connections that
/// receive data are paused (libcurl stops reading their sockets, so TCP slows the server down) and
/// are resumed once the debt is paid off. A per-connection libcurl limit cannot share a total: a
/// connection's share would have to change whenever another one starts, finishes or stalls.
public struct RateBudget: Sendable, Equatable {
    public let bytesPerSecond: Double
    /// The most that can be saved up while nobody receives: a tenth of a second's worth, at least
    /// 64 KiB (a burst larger than that would show up as a spike above the cap).
    public let burst: Double
    public private(set) var tokens: Double
    public private(set) var updatedAt: Double

    /// The bucket starts empty: nothing is saved up before time has earned it. (A full burst at the
    /// start let a stream, whose probe brings no bytes to charge, and a daemon's shared cap, charged
    /// with the probe's bytes, take a tenth of a second's worth, at least 64 KiB, past the cap.)
    public init(bytesPerSecond: Int64, now: Double) {
        self.bytesPerSecond = Double(max(1, bytesPerSecond))
        burst = Double(Self.burst(bytesPerSecond: bytesPerSecond))
        tokens = 0
        updatedAt = now
    }

    /// The same bucket at another rate: what it holds, refilled to `now` at the old rate and kept
    /// within the new burst, or what it owes.
    public func changing(to bytesPerSecond: Int64, now: Double) -> RateBudget {
        var old = self
        old.refill(now: now)
        var b = RateBudget(bytesPerSecond: bytesPerSecond, now: now)
        b.tokens = min(b.burst, old.tokens)
        return b
    }

    /// The burst a cap of `bytesPerSecond` allows (see `burst`).
    public static func burst(bytesPerSecond: Int64) -> Int64 { max(max(1, bytesPerSecond) / 10, 64 * 1024) }

    /// Adds what the time since the last update earned, up to `burst`.
    public mutating func refill(now: Double) {
        guard now > updatedAt else { return }
        tokens = min(burst, tokens + (now - updatedAt) * bytesPerSecond)
        updatedAt = now
    }

    /// True when a callback of `bytes` may be taken now: the bucket holds them (or a full burst,
    /// for a callback larger than that). Taking one whenever the bucket held anything let each
    /// callback's bytes past the cap, which at `--max-speed 1k` brought the 34 KB left of a
    /// 100,000-byte file in one go.
    public func allows(_ bytes: Int) -> Bool { tokens > 0 && tokens >= min(Double(bytes), burst) }

    /// Seconds until a callback of `bytes` is allowed (see `allows`).
    public func secondsUntil(allowing bytes: Int) -> Double {
        let need = max(min(Double(bytes), burst), 1)
        return tokens >= need ? 0 : (need - tokens) / bytesPerSecond + 1e-6
    }

    /// Pays for `bytes` received; the balance may go negative (debt), which later receivers wait off.
    public mutating func spend(_ bytes: Int) { tokens -= Double(bytes) }
}
