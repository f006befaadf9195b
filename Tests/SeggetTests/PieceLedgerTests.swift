import SeggetVerify
import Testing

@testable import Segget

@Suite struct PieceLedgerTests {
    static func pieces(_ count: Int, length: Int64) -> PieceHashes {
        PieceHashes(algorithm: .sha256, length: length, digests: [UInt8](repeating: 0, count: 32 * count))!
    }

    /// The chunk size lines up with the pieces: a divisor of a longer piece, a multiple of a shorter.
    @Test func chunkSizesLineUpWithPieces() {
        let mib: Int64 = 1 << 20
        #expect(PiecePlan.chunkSize(pieceLength: 4 * mib, requested: mib) == mib)
        #expect(PiecePlan.chunkSize(pieceLength: 3 * mib, requested: mib) == mib)
        #expect(PiecePlan.chunkSize(pieceLength: 3 * mib / 2, requested: mib) == 768 << 10)
        #expect(PiecePlan.chunkSize(pieceLength: 256 << 10, requested: mib) == mib)
        #expect(PiecePlan.chunkSize(pieceLength: 300_000, requested: mib) == 900_000)
        #expect(PiecePlan.chunkSize(pieceLength: mib, requested: mib) == mib)
        // A length with no divisor of at least 16 KiB near the request: the piece itself.
        #expect(PiecePlan.chunkSize(pieceLength: 1_048_583, requested: mib) == 1_048_583)
        for l: Int64 in [16 << 10, 100_000, 262_144, 1 << 20, 2_500_000, 4 << 20, 9_999_991] {
            let c = PiecePlan.chunkSize(pieceLength: l, requested: mib)
            #expect(l % c == 0 || c % l == 0, "piece \(l), chunk \(c)")
        }
    }

    /// Groups are whole pieces with their chunks, whole chunks with their pieces, or, for lengths that
    /// do not divide, the bytes between common boundaries; they cover the file once.
    static let geometries: [(Int64, Int64)] = [(4_194_304, 1_048_576), (262_144, 1_048_576), (786_432, 1_048_576), (1_000_000, 1_048_576)]

    @Test(arguments: 0..<4)
    func groupsCoverTheFileAndAlign(_ index: Int) throws {
        let (pieceLength, chunkSize) = Self.geometries[index]
        let size: Int64 = 37 * 1_000_003
        let plan = ChunkPlan(totalLength: size, chunkSize: chunkSize)
        let count = Int(PieceHashes.pieceCount(size: size, length: pieceLength))
        let geometry = try #require(PiecePlan(pieces: Self.pieces(count, length: pieceLength), plan: plan))
        var next: Int64 = 0
        for g in 0..<geometry.groupCount {
            let r = geometry.byteRange(ofGroup: g)
            #expect(r.lowerBound == next)
            next = r.upperBound
            let chunks = geometry.chunks(ofGroup: g)
            #expect(plan.byteRange(ofChunks: chunks) == r)
            let p = geometry.pieces(ofGroup: g)
            #expect(Int64(p.lowerBound) * pieceLength == r.lowerBound)
            #expect(min(Int64(p.upperBound) * pieceLength, size) == r.upperBound)
            for k in chunks { #expect(geometry.group(ofChunk: k) == g) }
        }
        #expect(next == size)
        #expect(PiecePlan(pieces: Self.pieces(count + 1, length: pieceLength), plan: plan) == nil)
    }

    func ledger(sources: Int = 3) -> PieceLedger {
        let plan = ChunkPlan(totalLength: 8 << 20, chunkSize: 1 << 20)
        return PieceLedger(geometry: PiecePlan(pieces: Self.pieces(4, length: 2 << 20), plan: plan)!, sources: sources)
    }

    @Test func aGroupIsHashedOnceAllItsChunksAreInTheFile() {
        var l = ledger()
        #expect(l.inFile(chunk: 0) == nil)
        #expect(l.inFile(chunk: 1) == 0)
        #expect(l.inFile(chunk: 1) == nil, "already hashing")
        #expect(l.verified(0) == 0..<2)
        #expect(!l.allVerified)
        for k in 2..<8 { if let g = l.inFile(chunk: k) { _ = l.verified(g) } }
        #expect(l.allVerified)
    }

    /// One source wrote a failed group alone: it is demoted at once; the chunks are fetched again.
    @Test func aSourceThatAloneServedABadPieceIsDemoted() {
        var l = ledger()
        l.wrote(chunk: 2, source: 1)
        l.wrote(chunk: 3, source: 1)
        _ = l.inFile(chunk: 2)
        #expect(l.inFile(chunk: 3) == 1)
        let f = l.failed(1, bad: [1])
        #expect(f == PieceLedger.Failure(reopen: 2..<4, demote: [1], writers: [1], giveUp: nil))
        #expect(l.demoted == [false, true, false])
        #expect(l.failedPieces == [1])
        // Fetched again from source 2, now good.
        l.wrote(chunk: 2, source: 2)
        l.wrote(chunk: 3, source: 2)
        _ = l.inFile(chunk: 2)
        #expect(l.inFile(chunk: 3) == 1)
    }

    /// Several sources wrote it: each gets a strike, and a second strike demotes; a group with a
    /// demoted writer strikes nobody else.
    @Test func sharedBlameNeedsTwoStrikes() {
        var l = ledger()
        l.wrote(chunk: 0, source: 0)
        l.wrote(chunk: 1, source: 2)
        _ = l.inFile(chunk: 0)
        _ = l.inFile(chunk: 1)
        #expect(l.failed(0, bad: [0]).demote == [])
        l.wrote(chunk: 4, source: 2)
        l.wrote(chunk: 5, source: 1)
        _ = l.inFile(chunk: 4)
        _ = l.inFile(chunk: 5)
        #expect(l.failed(2, bad: [2]).demote == [2])
        l.wrote(chunk: 6, source: 2)
        l.wrote(chunk: 7, source: 0)
        _ = l.inFile(chunk: 6)
        _ = l.inFile(chunk: 7)
        #expect(l.failed(3, bad: [3]).demote == [], "source 2, demoted already, takes the blame")
    }

    @Test func noSourceLeftOrTooManyFailuresGivesUp() {
        var l = ledger(sources: 1)
        l.wrote(chunk: 0, source: 0)
        _ = l.inFile(chunk: 0)
        _ = l.inFile(chunk: 1)
        #expect(l.failed(0, bad: [0]).giveUp != nil)
        var m = ledger(sources: 3)
        for round in 1...m.maxFailures {
            _ = m.inFile(chunk: 0)
            _ = m.inFile(chunk: 1)
            let f = m.failed(0, bad: [0])
            #expect((f.giveUp != nil) == (round == m.maxFailures), "round \(round)")
        }
    }
}

@Suite struct LinkHeaderTests {
    @Test func readsDuplicatesAndTheMetalinkAsOpenSUSESendsThem() {
        let value = #"<http://mirror.a/f.iso>; rel=duplicate; pri=2; geo=de, <http://mirror.b/f.iso>; rel=duplicate; pri=1; geo=us, <https://origin/f.iso.meta4>; rel=describedby; type="application/metalink4+xml", <http://mirror.c/f.iso>; rel="duplicate""#
        let h = LinkHeader(value)
        #expect(h.duplicates().map(\.target) == ["http://mirror.b/f.iso", "http://mirror.a/f.iso", "http://mirror.c/f.iso"])
        #expect(h.duplicates(preferring: "DE").first?.target == "http://mirror.a/f.iso")
        #expect(h.metalink?.target == "https://origin/f.iso.meta4")
    }

    @Test func skipsWhatItCannotReadAndKeepsTheRest() {
        let h = LinkHeader(#"garbage, <http://a/x>; rel=duplicate; pri=abc, <http://c,d/x>; rel=duplicate; title="a, \"b\"""#)
        #expect(h.links.map(\.target) == ["http://a/x", "http://c,d/x"])
        #expect(h.links[0].priority == nil)
        #expect(LinkHeader("").links.isEmpty)
        #expect(LinkHeader(#"<http://b/x>; rel="duplicate; pri=1"#).links.isEmpty, "an unclosed quoted string")
        #expect(LinkHeader("<http://a/x>; rel=describedby; type=text/html").metalink == nil)
    }
}
