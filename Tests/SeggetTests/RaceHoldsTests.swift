import Testing
@testable import Segget

@Suite struct RaceHoldsTests {
    /// The first failure holds the chunk for its backoff; the next ones for longer ones; other
    /// chunks are free.
    @Test func eachFailureHoldsTheChunkForItsBackoff() {
        var h = RaceHolds()
        #expect(h.isEmpty && !h.isHeld(chunk: 3, now: 0))
        h.racerFailed(chunk: 3, now: 10, ownerDue: nil) { Double(1 << ($0 - 1)) }
        #expect(h.failures(chunk: 3) == 1)
        #expect(h.isHeld(chunk: 3, now: 10.9) && !h.isHeld(chunk: 3, now: 11))
        #expect(!h.isHeld(chunk: 2, now: 10.5))
        h.racerFailed(chunk: 3, now: 11, ownerDue: nil) { Double(1 << ($0 - 1)) }
        #expect(h.failures(chunk: 3) == 2)
        #expect(h.isHeld(chunk: 3, now: 12.9) && !h.isHeld(chunk: 3, now: 13))
    }

    /// A chunk whose owner waits out a retry is held until the owner's next request, however
    /// short the racers' own backoff.
    @Test func aWaitingOwnersChunkIsHeldUntilItsNextAttempt() {
        var h = RaceHolds()
        h.racerFailed(chunk: 0, now: 5, ownerDue: 13) { _ in 1 }
        #expect(h.isHeld(chunk: 0, now: 12.99) && !h.isHeld(chunk: 0, now: 13))
        // The server's wait (as the backoff) when it is the later.
        h.racerFailed(chunk: 1, now: 5, ownerDue: 6) { _ in 10 }
        #expect(h.isHeld(chunk: 1, now: 14.9) && !h.isHeld(chunk: 1, now: 15))
    }

    /// A later failure never shortens a hold already set.
    @Test func aHoldIsNeverShortened() {
        var h = RaceHolds()
        h.racerFailed(chunk: 7, now: 0, ownerDue: 30) { _ in 1 }
        h.racerFailed(chunk: 7, now: 1, ownerDue: nil) { _ in 1 }
        #expect(h.isHeld(chunk: 7, now: 29) && !h.isHeld(chunk: 7, now: 30))
    }
}
