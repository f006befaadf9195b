import Testing

@testable import Segget

@Suite struct RateBudgetTests {
    @Test func startsEmptyAndRefillsAtTheRate() {
        var b = RateBudget(bytesPerSecond: 10 << 20, now: 99.9)
        #expect(b.burst == Double(1 << 20))  // a tenth of a second
        #expect(b.tokens == 0 && !b.allows(1))
        b.refill(now: 100)
        #expect(abs(b.tokens - b.burst) < 1e-3 && b.allows(1))
        b.spend(3 << 20)  // a large delivery runs into debt
        #expect(!b.allows(1))
        #expect(abs(b.secondsUntil(allowing: 1) - 0.2) < 1e-3)
        b.refill(now: 100.1)
        #expect(!b.allows(1))
        b.refill(now: 100.2 + 1e-3)
        #expect(b.allows(1))
        #expect(b.secondsUntil(allowing: 1) == 0)
        // Idle time saves up at most the burst.
        b.refill(now: 200)
        #expect(b.tokens == b.burst)
        // Time running backwards changes nothing.
        b.refill(now: 150)
        #expect(b.tokens == b.burst)
    }

    /// A shared cap (a daemon's overall limit, a task's `max-download-limit`) starts empty, whether
    /// made with a rate or given one later: the probe's bytes its download charges to it are owed,
    /// not taken from a burst no time paid for. A rate changed later keeps what the bucket holds.
    @Test func aSharedCapStartsEmpty() {
        let made = SharedRateLimit(bytesPerSecond: 100 << 10)
        let set = SharedRateLimit()
        set.bytesPerSecond = 100 << 10
        for cap in [made, set] {
            let now = monotonicSeconds()
            #expect(!cap.allowsReceiving(now: now, bytes: 16 << 10))
            #expect(cap.secondsUntil(allowing: 16 << 10) > 0.1)
            cap.spend(64 << 10)  // the probe's bytes
            #expect(cap.secondsUntil(allowing: 1) > 0.6)
            cap.bytesPerSecond = 200 << 10
            #expect(!cap.allowsReceiving(now: now, bytes: 1))
        }
    }

    /// Taking a callback only once the bucket holds it (`allows`), what was taken never runs ahead
    /// of the burst plus rate × time, not even by one callback: at 1 KiB/s the 34 KB left of a
    /// 100,000-byte file after its 64 KiB probe once came in at once.
    @Test func aCallbackWaitsForItsWholeAllowance() {
        var b = RateBudget(bytesPerSecond: 1024, now: -64)
        b.refill(now: 0)
        b.spend(64 * 1024)
        b.refill(now: 0.01)
        #expect(b.allows(1) && !b.allows(16 * 1024))
        #expect(abs(b.secondsUntil(allowing: 16 * 1024) - (16 * 1024 - 10.24) / 1024) < 1e-3)
        b.refill(now: 16.01)
        #expect(b.allows(16 * 1024) && b.secondsUntil(allowing: 16 * 1024) == 0)
        // A callback larger than the burst waits for a full bucket, then runs into debt.
        var big = RateBudget(bytesPerSecond: 1000, now: 0)
        #expect(!big.allows(1 << 20))
        big.refill(now: 65.536)
        #expect(big.allows(1 << 20))
        big.spend(1 << 20)
        #expect(!big.allows(1))

        var rng = FuzzRandom(seed: 7)
        for _ in 0..<50 {
            let rate = Int64.random(in: 1000...50_000_000, using: &rng)
            var budget = RateBudget(bytesPerSecond: rate, now: 0)
            var now = 0.0
            var spent = 0.0
            for _ in 0..<2000 {
                now += Double.random(in: 0...0.01, using: &rng)
                budget.refill(now: now)
                let n = Int.random(in: 1...Int(budget.burst), using: &rng)
                if budget.allows(n) {
                    budget.spend(n)
                    spent += Double(n)
                }
            }
            #expect(spent <= budget.burst + Double(rate) * now + 1e-6)
        }
    }

    @Test func smallCapsStillAllowOneReceiveBuffer() {
        let b = RateBudget(bytesPerSecond: 1000, now: 0)
        #expect(b.burst == 64 * 1024)
    }

    /// Over any long run, what was spent is at most the burst plus rate × time, whatever the
    /// pattern of deliveries, because a delivery is only accepted when the bucket holds it (or a
    /// full burst, for one larger than that) and one delivery is at most `maxDelivery`.
    @Test func spendingNeverOutrunsTheRate() {
        var rng = FuzzRandom(seed: 99)
        for _ in 0..<50 {
            let rate = Int64.random(in: 100_000...50_000_000, using: &rng)
            var b = RateBudget(bytesPerSecond: rate, now: 0)
            var now = 0.0
            var spent = 0.0
            let maxDelivery = 512 * 1024
            for _ in 0..<2000 {
                now += Double.random(in: 0...0.01, using: &rng)
                b.refill(now: now)
                let n = Int.random(in: 1...maxDelivery, using: &rng)
                if b.allows(n) {
                    b.spend(n)
                    spent += Double(n)
                }
            }
            #expect(spent <= b.burst + Double(rate) * now + Double(maxDelivery))
        }
    }
}
