import Testing
@testable import Segget

/// A slow connection is not re-dialled while the host's named wait runs (a refusal's `Retry-After`):
/// the re-dial is a request like any other, and went out at once, against the wait.
@Suite struct QuietHostRedialTests {
    /// `FourConnectionsOneSlow` at 1.1 s, with the host quiet until `quietUntil`: whether connection 3
    /// is re-dialled.
    static func redialled(quietUntil: Double?) -> Bool {
        let now = 1.1
        guard var c = FourConnectionsOneSlow.coordinator(now: now, prepare: { c in if let quietUntil { c.host.asked(wait: quietUntil - 0.5, now: 0.5) } }) else { return false }
        return FourConnectionsOneSlow.redialsTheSlowOne(&c, now: now)
    }

    @Test func aSlowConnectionWaitsForTheHostsWait() {
        #expect(Self.redialled(quietUntil: nil), "the counter-case: re-dialled when the host named no wait")
        #expect(!Self.redialled(quietUntil: 2.0), "re-dialled 0.9 s before the host's wait was over")
        #expect(Self.redialled(quietUntil: 1.0), "the wait is over: re-dialled as usual")
    }
}
