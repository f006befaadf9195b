/// Per-connection pacing. Small slices and a burst of two slices keep the byte stream smooth, so a
/// client sees the cap from the first second rather than after a large initial burst.
struct TokenBucket {
    private(set) var rate: Double = 0
    private(set) var sliceSize = 256 * 1024
    private var burst: Double = 0
    private var tokens: Double = 0
    private var last: Double = 0

    /// nil turns pacing off. `catchUp` lets unused time pile up (up to 10 s worth), so that a client
    /// that stopped reading gets the arrears at full speed once it reads again, as nginx's
    /// `limit_rate` does (it paces by bytes sent against time since the response began).
    mutating func configure(bytesPerSecond: Int64?, catchUp: Bool = false) {
        guard let bytesPerSecond else {
            rate = 0
            sliceSize = 256 * 1024
            return
        }
        let newRate = Double(bytesPerSecond)
        // nginx paces each response from its own start: arrears never carry over between requests.
        if newRate == rate && !catchUp { return }
        rate = newRate
        // Below 512 B/s a slice is as small as one second's worth: a trickle must never pause for long.
        sliceSize = Int(min(64 * 1024, max(min(512, newRate), newRate / 50)))
        burst = catchUp ? newRate * 10 : Double(2 * sliceSize)
        tokens = min(tokens, Double(sliceSize))
        last = MonotonicClock.seconds
    }

    /// Changes the rate mid-response (a slowdown, a ramp) without losing the time already earned at
    /// the old one.
    mutating func retune(bytesPerSecond: Int64) {
        let newRate = Double(bytesPerSecond)
        guard newRate != rate else { return }
        if rate > 0 { refill() } else { last = MonotonicClock.seconds }
        rate = newRate
        sliceSize = Int(min(64 * 1024, max(min(512, newRate), newRate / 50)))
        burst = Double(2 * sliceSize)
        tokens = min(tokens, Double(sliceSize))
    }

    /// Waits until `count` bytes may go out. `pause(ms)` sleeps and returns false to give up (the
    /// server stopped or the client left); then this returns false.
    mutating func acquire(_ count: Int, pause: (Int32) -> Bool) -> Bool {
        guard rate > 0 else { return true }
        refill()
        while tokens < Double(count) {
            let waitMs = Int32(min(1000, ((Double(count) - tokens) / rate * 1000).rounded(.up)))
            if !pause(max(1, waitMs)) { return false }
            refill()
        }
        tokens -= Double(count)
        return true
    }

    private mutating func refill() {
        let now = MonotonicClock.seconds
        tokens = min(burst, tokens + (now - last) * rate)
        last = now
    }
}
