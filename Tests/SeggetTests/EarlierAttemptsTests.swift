import Testing

@testable import Segget

/// What a run's earlier attempts add to its result or failure (`EarlierAttempts`).
@Suite struct EarlierAttemptsTests {
    static func result(received: Int64, tally: RequestTally) -> DownloadResult {
        DownloadResult(
            path: "/f", bytes: 100, resumedBytes: 0, receivedBytes: received, seconds: 1, connections: 4, verified: [],
            usedRanges: true, tally: tally)
    }

    @Test func nothingEarlierChangesNothing() {
        var r = Self.result(received: 100, tally: RequestTally(requests: 5, connections: 4))
        let before = r
        EarlierAttempts().onto(&r)
        #expect(r == before)
        let e = SeggetError(.network, "x")
        #expect(EarlierAttempts().onto(e).spent == nil)
    }

    /// A restart from zero: its bytes count as received and fetched twice, once (not also its own
    /// refetched bytes, which are among them); the invariant received - refetched == bytes - resumed holds.
    @Test func aRestartFromZeroCountsItsBytesAsFetchedTwice() {
        var earlier = EarlierAttempts()
        earlier.add(RequestTally(requests: 4, connections: 4, refusals: 1, refetchedBytes: 10), thrownAway: 60)
        var r = Self.result(received: 100, tally: RequestTally(requests: 5, connections: 3))
        earlier.onto(&r)
        #expect(r.tally == RequestTally(requests: 9, connections: 7, refusals: 1, refetchedBytes: 60))
        #expect(r.receivedBytes == 160)
        #expect(r.receivedBytes - r.tally.refetchedBytes == r.bytes - r.resumedBytes)
    }

    /// A renewed link's or a failed source's attempt: its own refetched bytes, no bytes thrown away.
    @Test func anAttemptWhoseBytesAreKeptAddsItsCostOnly() {
        var earlier = EarlierAttempts()
        earlier.add(RequestTally(requests: 3, connections: 2, refetchedBytes: 7))
        earlier.add(RequestTally(requests: 1, connections: 1))
        var r = Self.result(received: 100, tally: RequestTally(requests: 2, connections: 1))
        earlier.onto(&r)
        #expect(r.tally == RequestTally(requests: 6, connections: 4, refetchedBytes: 7))
        #expect(r.receivedBytes == 100)
    }

    /// A failure after earlier attempts carries their cost with its own (its fetch's, else its probe's).
    @Test func aFailureCarriesTheEarlierCost() {
        var earlier = EarlierAttempts()
        earlier.add(RequestTally(requests: 4, connections: 4), thrownAway: 50)
        let bare = earlier.onto(SeggetError(.network, "x"))
        #expect(bare.spent == RequestTally(requests: 4, connections: 4, refetchedBytes: 50))
        let costed = earlier.onto(SeggetError(.network, "x").costing(RequestTally(requests: 2, connections: 1)))
        #expect(costed.spent == RequestTally(requests: 6, connections: 5, refetchedBytes: 50))
    }
}
