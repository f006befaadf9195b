import SeggetJournal
import Testing

@testable import Segget

/// A data file in memory, for the voucher.
private final class MemoryStorage: BlockStorage, @unchecked Sendable {
    var bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        let start = Int(offset)
        guard start < bytes.count else { return 0 }
        let n = min(buffer.count, bytes.count - start)
        for k in 0..<n { buffer[k] = bytes[start + k] }
        return n
    }
    func write(_ data: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        for k in 0..<data.count { bytes[Int(offset) + k] = data[k] }
    }
    func sync() throws(Errno) {}
    func size() throws(Errno) -> Int64 { Int64(bytes.count) }
    func truncate(to length: Int64) throws(Errno) {}
}

@Suite struct ChunkChecksumsTests {
    static let plan = ChunkPlan(totalLength: 10_000, chunkSize: 1_000)
    static let data: [UInt8] = {
        var g = FuzzRandom(seed: 44)
        return (0..<10_000).map { _ in UInt8.random(in: 0...255, using: &g) }
    }()
    static func crc(_ range: Range<Int>) -> UInt32 { CRC32C.checksum(data[range]) }

    func add(_ t: ChunkChecksums, _ range: Range<Int>) {
        Self.data.withUnsafeBytes { t.add(UnsafeRawBufferPointer(rebasing: $0[range]), at: Int64(range.lowerBound)) }
    }

    /// Random pieces tiling the file, across chunk boundaries.
    func randomPieces(seed: UInt64) -> [Range<Int>] {
        var g = FuzzRandom(seed: seed)
        var pieces: [Range<Int>] = []
        var at = 0
        while at < 10_000 {
            let n = min(10_000 - at, Int.random(in: 1...2_500, using: &g))
            pieces.append(at..<(at + n))
            at += n
        }
        return pieces
    }

    @Test func piecesInOrderAcrossChunkBoundariesGiveEachChunksChecksum() {
        let t = ChunkChecksums(plan: Self.plan)
        for p in randomPieces(seed: 1) { add(t, p) }
        for k in 0..<10 {
            #expect(t.takeFinished(k) == Self.crc((k * 1000)..<((k + 1) * 1000)), "chunk \(k)")
            #expect(t.takeFinished(k) == nil, "taken once")
        }
    }

    @Test func piecesInAnyOrderGiveTheSameChecksums() {
        for seed in UInt64(2)...20 {
            var g = FuzzRandom(seed: seed)
            let t = ChunkChecksums(plan: Self.plan)
            for p in randomPieces(seed: seed).shuffled(using: &g) { add(t, p) }
            for k in 0..<10 { #expect(t.takeFinished(k) == Self.crc((k * 1000)..<((k + 1) * 1000)), "seed \(seed), chunk \(k)") }
        }
    }

    @Test func anEndGameRaceWithOverlappingPiecesStillGivesTheRightChecksum() {
        let t = ChunkChecksums(plan: Self.plan)
        add(t, 2000..<2300)  // the owner
        add(t, 2300..<2700)  // the racer, from where the owner had got
        add(t, 2300..<2500)  // the owner goes on over the same bytes
        add(t, 2500..<2800)
        add(t, 2700..<3000)  // the racer finishes
        #expect(t.takeFinished(2) == Self.crc(2000..<3000))
    }

    @Test func aGapLeavesTheChunkWithoutAChecksum() {
        let t = ChunkChecksums(plan: Self.plan)
        add(t, 0..<400)
        add(t, 500..<1000)
        #expect(t.takeFinished(0) == nil)
        // Bytes that start mid-chunk with nothing before them are not a checksum either.
        add(t, 1500..<2000)
        #expect(t.takeFinished(1) == nil)
    }

    @Test func prefixChecksumsForSlotsAndSeedsForResumedPartials() {
        let t = ChunkChecksums(plan: Self.plan)
        add(t, 3000..<3400)
        add(t, 3400..<3700)
        #expect(t.crc(ofChunk: 3, upTo: 3400) == Self.crc(3000..<3400))
        #expect(t.crc(ofChunk: 3, upTo: 3700) == Self.crc(3000..<3700))
        #expect(t.crc(ofChunk: 3, upTo: 3300) == nil)
        // A rerun continues chunk 3 at 3400 from the checksum its slot recorded.
        let resumed = ChunkChecksums(plan: Self.plan)
        resumed.seed(chunk: 3, upTo: 3400, crc: Self.crc(3000..<3400))
        add(resumed, 3400..<4000)
        #expect(resumed.takeFinished(3) == Self.crc(3000..<4000))
        // A chunk fetched again from its start after `forget` does not reuse the old state.
        let again = ChunkChecksums(plan: Self.plan)
        again.seed(chunk: 4, upTo: 4500, crc: 0xBAD)
        again.forget(4)
        add(again, 4000..<4500)
        add(again, 4500..<5000)
        #expect(again.takeFinished(4) == Self.crc(4000..<5000))
    }
}

@Suite struct ChunkVoucherTests {
    @Test func reportsEachClaimAndOnlyMatchingOnesPass() {
        let plan = ChunkPlan(totalLength: 5 << 20, chunkSize: 1 << 20)
        var g = FuzzRandom(seed: 9)
        let bytes = (0..<(5 << 20)).map { _ in UInt8.random(in: 0...255, using: &g) }
        let storage = MemoryStorage(bytes)
        let good = { (k: Int) in CRC32C.checksum(bytes[(k << 20)..<((k + 1) << 20)]) }
        storage.bytes[(2 << 20) + 77] ^= 1  // chunk 2 changed on disk
        let claims = [0, 2, 3, 4].map { ChunkVoucher.Claim(chunk: $0, crc: good($0)) }
            + [ChunkVoucher.Claim(chunk: 1, crc: 0)]  // a claim without a recorded checksum
        let voucher = ChunkVoucher(data: storage, plan: plan, claims: claims)
        var results: [Int: Bool] = [:]
        let deadline = ContinuousClock.now + .seconds(30)
        while !voucher.isDone && ContinuousClock.now < deadline {
            for (k, ok) in voucher.take() { results[k] = ok }
        }
        voucher.stop()
        #expect(results == [0: true, 1: false, 2: false, 3: true, 4: true])
    }

    @Test func stopWaitsForTheReaderAndEndsEarly() {
        let plan = ChunkPlan(totalLength: 64 << 20, chunkSize: 1 << 20)
        let storage = MemoryStorage([UInt8](repeating: 0, count: 64 << 20))
        let voucher = ChunkVoucher(data: storage, plan: plan, claims: (0..<64).map { .init(chunk: $0, crc: 0) })
        voucher.stop()
        #expect(voucher.take().count < 64)
        #expect(!voucher.isDone)
    }

    @Test func partialsKeepOnlyPrefixesThatMatch() {
        let plan = ChunkPlan(totalLength: 4_000, chunkSize: 1_000)
        let bytes = (0..<4_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let storage = MemoryStorage(bytes)
        let honest = PartialChunk(upTo: 1_600, crc: CRC32C.checksum(bytes[1_000..<1_600]))
        let lying = PartialChunk(upTo: 2_900, crc: CRC32C.checksum(bytes[2_000..<2_300]))
        let (kept, rejected) = ChunkVoucher.keepMatchingPartials([1: honest, 2: lying], data: storage, plan: plan)
        #expect(kept == [1: honest])
        #expect(rejected == 1)
    }
}

@Suite struct SchedulerReopenTests {
    @Test func aReopenedChunkIsUnfinishedAndHandedOutAgain() {
        let plan = ChunkPlan(totalLength: 80, chunkSize: 10)
        var s = Scheduler(plan: plan, connections: 2, isFinished: { $0 != 6 })
        #expect(s.run(of: 0) == 6..<7)
        _ = s.chunkFinished(6, by: 0)
        #expect(s.isComplete)
        s.reopen(3)
        s.reopen(3)  // twice is once
        #expect(!s.isComplete && s.finishedCount == 7 && !s.finished[3])
        #expect(s.nextAssignment(for: 1) == .run(3..<4))
        s.reopen(5)
        #expect(s.nextAssignment(for: 0) == .run(5..<6))
        _ = s.chunkFinished(3, by: 1)
        _ = s.chunkFinished(5, by: 0)
        #expect(s.isComplete)
    }
}
