import Glibc

/// The calendar clock, for timestamps that outlive the process (a journal's creation time).
public enum WallClock {
    /// Whole seconds since 1970-01-01 UTC. The corresponding C function is `time`.
    public static func secondsSinceEpoch() -> Int64 {
        Int64(time(nil))
    }
}

extension Duration {
    /// The duration in seconds, as a Double. `components` divides a 128-bit count: read once.
    public var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}

extension SystemThread {
    /// Blocks the calling thread for `seconds` (a polling wait). The corresponding C function is `usleep`.
    public static func sleep(seconds: Double) {
        guard seconds > 0 else { return }
        usleep(useconds_t(min(seconds, 4000) * 1_000_000))
    }
}
