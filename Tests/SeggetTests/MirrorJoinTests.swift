import Testing
@testable import Segget

/// A mirror joining a running fetch (`Coordinator.addSource`): its share of the connections, free
/// ones first, busy ones only with enough of their run left, and never connection 0.
@Suite struct MirrorJoinTests {
    typealias Script = CoordinatorTests.Script
    static let MiB = 1 << 20
    static let mirror = FetchSource(url: "http://mirror.example/f")

    static func removed(_ actions: [EngineCore.Action]) -> [Int] {
        actions.compactMap { if case .remove(let id) = $0 { id } else { nil } }
    }

    /// Before any request of the split went out, the joining mirror takes half of four connections
    /// at no cost: the two highest, which have sent nothing.
    @Test func connectionsThatSentNothingMoveAtNoCost() {
        var s = Script(size: 64 * Self.MiB, connections: 4)
        s.begin()
        let idle = s.c.connections.filter { !$0.machine.isTransferring }.map(\.id)
        #expect(idle.count >= 2, "\(idle)")
        let actions = s.handle(.sourceAdded(Self.mirror))
        #expect(Self.removed(actions).isEmpty)
        #expect(s.c.connections.map(\.source) == [0, 0, 1, 1])
        s.run(until: 30)
        #expect(s.c.isComplete)
        // Their first requests went to the mirror: each started once, after the join.
        #expect(s.starts(of: 2).count >= 1 && s.starts(of: 3).count >= 1)
    }

    /// Every connection busy, two seconds of its run left: two of them (never connection 0) stop and
    /// continue at once from where they got, on the mirror; the second mirror takes one more.
    @Test func busyConnectionsWithWorkLeftMoveAndContinueWhereTheyGot() {
        var s = Script(size: 64 * Self.MiB, connections: 4)
        s.begin()
        s.run(until: 0.5)
        #expect(s.c.connections.allSatisfy { $0.machine.isTransferring })
        let before = s.c.connections.map(\.pos)
        let first = s.handle(.sourceAdded(Self.mirror))
        let moved = Self.removed(first)
        #expect(moved.count == 2)
        #expect(!moved.contains(0))
        #expect(s.c.connections.filter { $0.source == 1 }.map(\.id).sorted() == moved.sorted())
        s.handle(.sourceAdded(FetchSource(url: "http://other.example/f")))
        #expect(s.c.connections.filter { $0.source == 2 }.count == 1)
        #expect(s.c.connections[0].source == 0)
        s.run(until: 30)
        #expect(s.c.isComplete)
        // Nobody lost a byte: each moved one asked again from where it had got, not from its run's start.
        for id in moved {
            #expect(s.starts(of: id).contains { $0.bytes.lowerBound >= before[id] && $0.bytes.lowerBound > 0 })
        }
    }

    /// A mirror that joins while connections wait for their first bytes (on a long path every request
    /// of the split is out before a mirror's probe is back) is owed its share, and takes it on later
    /// ticks once their rates are known: two connections, and never more than it was owed.
    @Test func aMirrorTakesWhatItIsOwedOnLaterTicks() {
        var s = Script(size: 64 * Self.MiB, connections: 4)
        s.begin()
        while !s.c.connections.allSatisfy({ $0.machine.isTransferring }) { s.run(until: s.now + 0.01) }
        s.handle(.sourceAdded(Self.mirror))
        let atOnce = s.c.connections.filter { $0.source == 1 }.count
        #expect(atOnce < 2, "the newest request had no rate yet, and was not moved")
        s.run(until: s.now + 1)
        #expect(s.c.connections.filter { $0.source == 1 }.count == 2)
        #expect(s.c.owedConnections.isEmpty)
        s.run(until: 30)
        #expect(s.c.isComplete)
        #expect(s.c.connections.filter { $0.source == 1 }.count <= 2)
    }

    /// `-n auto` starts with 4 of 8 connections: the mirror takes its share of the 4 in use (not of
    /// the 8, which the unused slots would fill at no cost, leaving it nothing that sends a request),
    /// and the unused slots are spread over both sources for when auto growth takes them.
    @Test func withAutoConnectionsTheShareIsOfTheConnectionsInUse() {
        var s = Script(size: 256 * Self.MiB, connections: 8) { $0.autoConnections = true }
        s.begin()
        s.run(until: 0.5)
        let inUse = s.c.connectionLimit
        #expect(inUse < 8)
        s.handle(.sourceAdded(Self.mirror))
        #expect(s.c.connections.prefix(inUse).filter { $0.source == 1 }.count == inUse / 2)
        #expect(s.c.connections.dropFirst(inUse).map(\.source) == s.c.connections.dropFirst(inUse).map { $0.id % 2 })
    }

    /// With less than a second of work left per connection, a move is not worth its request, except
    /// for the mirror's first connection (`scoutWorthSeconds`): until one of its requests runs,
    /// nothing shows its speed. One moves, not the mirror's share of two.
    @Test func nearTheEndOnlyTheMirrorsFirstConnectionMoves() {
        var s = Script(size: 32 * Self.MiB, connections: 4)
        s.begin()
        s.run(until: 0.6)
        #expect(s.c.connections.allSatisfy { $0.machine.isTransferring })
        let actions = s.handle(.sourceAdded(Self.mirror))
        #expect(Self.removed(actions).count == 1)
        #expect(s.c.connections.filter { $0.source == 1 }.count == 1)
        #expect(s.c.config.sources.count == 2)
    }

    /// With less than a tenth of a second left per connection, not even the first moves.
    @Test func nothingBusyMovesAtTheVeryEnd() {
        var s = Script(size: 32 * Self.MiB, connections: 4)
        s.begin()
        // Until every connection has under half a MiB left: 0.06 s at its 8 MiB/s.
        while s.c.connections.contains(where: { s.c.end(of: $0.id) - $0.pos >= Int64(Self.MiB / 2) }) { s.run(until: s.now + 0.01) }
        #expect(s.c.connections.allSatisfy { $0.machine.isTransferring })
        let actions = s.handle(.sourceAdded(Self.mirror))
        #expect(Self.removed(actions).isEmpty)
        #expect(s.c.connections.allSatisfy { $0.source == 0 })
    }

    /// Once every chunk is in, a join changes nothing.
    @Test func aCompleteDownloadTakesNoMirror() {
        var s = Script(size: 4 * Self.MiB, connections: 2)
        s.begin()
        s.run(until: 10)
        #expect(s.c.isComplete)
        let actions = s.handle(.sourceAdded(Self.mirror))
        #expect(actions.isEmpty)
        #expect(s.c.connections.allSatisfy { $0.source == 0 })
    }

    /// A mirror on a fast path whose runs are each over within a tenth of a second (loopback) is
    /// measured all the same, so that the main URL's slow connections re-dial to it rather than to the
    /// main URL again: with the main URL at 256 KiB/s per answer and the mirror at 40 MiB/s, 16 MiB
    /// is in within a second. Before, the mirror was never measured (a source's rate needed a request
    /// of 0.1 s), every re-dial went back to the main URL, and its last chunks came at its pace: 4 s
    /// on loopback against nginx and h2o.
    @Test func aMirrorWhoseRunsAreQuickIsMeasuredAndTheSlowSourceLeft() {
        var s = Script(size: 16 * Self.MiB, connections: 8) { $0.sources = [FetchSource(url: "http://main.example/f"), Self.mirror] }
        s.sourceRates = [0: Double(256 << 10), 1: Double(40 * Self.MiB)]
        s.begin()
        s.run(until: 30)
        #expect(s.c.isComplete)
        #expect(s.now < 1, "\(s.now) s")
        #expect(s.c.sourceRates[1] != nil)
    }
}
