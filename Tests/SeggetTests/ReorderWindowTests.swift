import Testing

@testable import Segget

/// The reorder window of a stream, and work handed out only inside it.
@Suite struct ReorderWindowTests {
    @Test func bytesAreHandedOnInOrderOnlyOnceTheGapBeforeThemIsFilled() {
        var w = ReorderWindow(capacity: 100)
        w.arrived(40..<60)
        #expect(w.ready == nil)
        w.arrived(0..<10)
        #expect(w.ready == 0..<10)
        w.handOn(4)
        #expect(w.ready == 4..<10)
        #expect(w.limit == 104)
        w.arrived(10..<40)
        #expect(w.ready == 4..<60)
        #expect(w.held == [4..<60])
        w.handOn(56)
        #expect(w.ready == nil)
        #expect(w.held.isEmpty)
        #expect(w.handedOn == 60)
    }

    @Test func overlapsMergeAndDuplicatesOfBytesHandedOnAreDropped() {
        var w = ReorderWindow(capacity: 100)
        w.arrived(20..<30)
        w.arrived(50..<60)
        w.arrived(25..<55)
        #expect(w.held == [20..<60])
        w.arrived(60..<70)
        #expect(w.held == [20..<70])
        w.arrived(0..<20)
        w.handOn(70)
        #expect(w.toStore(10..<70) == nil)
        #expect(w.toStore(60..<80) == 70..<80)
        w.arrived(60..<80)
        #expect(w.held == [70..<80])
        #expect(w.heldBytes == 10)
    }

    @Test func aStreamFromAnOffsetStartsThere() {
        var w = ReorderWindow(capacity: 10, start: 1000)
        #expect(w.limit == 1010)
        w.arrived(1000..<1004)
        #expect(w.ready == 1000..<1004)
    }

    /// Whatever order the pieces come in, what is handed on is every byte once, in order, and the
    /// bytes held never exceed the capacity (the caller pauses what lies beyond the limit).
    @Test(arguments: [1, 2, 3, 4, 5])
    func randomArrivalsNeverExceedTheCapacity(_ seed: UInt64) {
        var rng = WindowShuffle(seed)
        let total: Int64 = 10_000
        var w = ReorderWindow(capacity: 700)
        var pieces: [Range<Int64>] = []
        var at: Int64 = 0
        while at < total {
            let n = Int64(rng.next() % 97 + 1)
            pieces.append(at..<min(total, at + n))
            at += n
        }
        var waiting = pieces
        while w.handedOn < total {
            // Deliver a random piece that fits; hand on some of what is ready.
            let fits = waiting.indices.filter { waiting[$0].upperBound <= w.limit }
            if !fits.isEmpty && rng.next() % 3 != 0 {
                let i = fits[Int(rng.next() % UInt64(fits.count))]
                w.arrived(waiting.remove(at: i))
                #expect(w.heldBytes <= w.capacity)
            } else if let r = w.ready {
                w.handOn(Int64(rng.next() % UInt64(r.count)) + 1)
            }
        }
        #expect(waiting.isEmpty)
        #expect(w.held.isEmpty)
    }

    /// A window that drops rather than pauses (the hasher's): what to store of an arrival, and the
    /// hole at its head that must come from elsewhere.
    @Test func unheldPartsAndTheFirstGap() {
        var w = ReorderWindow(capacity: 100)
        #expect(w.firstGap == 0..<100)
        #expect(w.unheld(in: 90..<130) == [90..<100], "beyond the limit falls out")
        w.arrived(20..<30)
        w.arrived(50..<60)
        #expect(w.unheld(in: 0..<100) == [0..<20, 30..<50, 60..<100])
        #expect(w.unheld(in: 25..<55) == [30..<50])
        #expect(w.unheld(in: 20..<30).isEmpty)
        #expect(w.firstGap == 0..<20)
        w.arrived(0..<20)
        #expect(w.firstGap == 30..<50, "after the bytes ready at the head")
        w.handOn(25)
        #expect(w.unheld(in: 0..<40) == [30..<40], "bytes handed on are not stored again")
        w.arrived(30..<50)
        #expect(w.firstGap == 60..<125)
        w.arrived(60..<125)
        #expect(w.firstGap == nil, "the whole window is held")
    }

    @Test func runsAreCutAtTheHandOutLimit() {
        let plan = ChunkPlan(totalLength: 20 << 20, chunkSize: 1 << 20)
        var s = Scheduler(plan: plan, connections: 2, maxRunChunks: 4)
        #expect(s.run(of: 0) == 0..<4)
        #expect(s.run(of: 1) == 4..<8)
        s.handOutLimit = 10
        _ = s.chunkFinished(0, by: 0)
        _ = s.chunkFinished(1, by: 0)
        _ = s.chunkFinished(2, by: 0)
        _ = s.chunkFinished(3, by: 0)
        // The free run 8..<12 is cut at the limit; the rest waits.
        #expect(s.nextAssignment(for: 0, worthStealing: { _, _ in false }) == .run(8..<10))
        _ = s.chunkFinished(8, by: 0)
        _ = s.chunkFinished(9, by: 0)
        // Nothing below the limit is free, and work beyond it is no end game: no race.
        #expect(s.nextAssignment(for: 0, worthStealing: { _, _ in false }) == nil)
        s.handOutLimit = 20
        #expect(s.nextAssignment(for: 0, worthStealing: { _, _ in false }) == .run(10..<12))
    }
}

/// A small deterministic generator for the shuffles above.
struct WindowShuffle {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
