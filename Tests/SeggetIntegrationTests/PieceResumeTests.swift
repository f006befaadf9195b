import Segget
import SeggetJournal
import SeggetTestServer
import SeggetVerify
import Testing

// The journal's record of verified pieces, end to end: pieces hashed in one run are recorded, and a
// resume keeps them on their chunks' checksums without hashing them again; anything that changed
// under them, or other hashes, is hashed (or fetched) again.

@Suite(.serialized) struct PieceResumeTests {
    static let size = 8 << 20
    let body = TestFiles.pattern(PieceResumeTests.size, seed: 77)
    let server: TestServer
    let dir: TempDir

    init() throws {
        server = try TestServer()
        server.addResource(name: "f.bin", bytes: body, etag: "\"p\"")
        try server.start()
        dir = try TempDir(prefix: "segget-piece-resume")
    }

    var url: String { server.url("f.bin", query: "rate=6m") }
    var output: String { dir.path("f.bin") }
    var journalPath: String { output + ".segget-journal" }

    func options(pieceLength: Int = 256 << 10) -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = 4
        o.outputPath = output
        o.pieces = pieceHashes(body, length: pieceLength)
        o.retryWait = 0.05
        return o
    }

    /// Stops a download at about half; returns the journal's verified chunks, checked to be under
    /// the pieces' fingerprint and among the chunks it claims.
    func interruptedRun() async throws -> (verified: [Int], chunkSize: Int64) {
        let flag = InterruptFlag()
        let download = Download(url: url, options: options())
        let half = Int64(Self.size / 2)
        _ = try? await blocking {
            try download.run(progress: { p in if p.completedBytes >= half { flag.set() } }, interrupt: flag)
        }
        try await Task.sleep(for: .milliseconds(150))
        let (j, trusted) = try Journal.open(path: journalPath, currentBootID: Journal.currentBootID())
        defer { j.close() }
        #expect(j.version == JournalCodec.currentVersion)
        #expect(j.piecesFingerprint == options().pieces?.fingerprint)
        #expect(j.verified.isSubset(of: trusted), "a verified chunk the journal does not claim")
        return (j.verified.setIndices, j.header.chunkSize)
    }

    @Test func aResumeKeepsRecordedPiecesWithoutHashingThem() async throws {
        let (verified, chunkSize) = try await interruptedRun()
        #expect(!verified.isEmpty, "the first run verified and recorded some pieces")
        let log = EventLog()
        let opts = options()
        let result = try await blocking { try Download(url: url, options: opts).run(events: { log.append($0) }) }
        #expect(fileBytes(output) == body)
        let report = try #require(result.pieces)
        #expect(report.verifiedPieces == report.pieceCount)
        // Pieces of 256 KiB line up with chunks of a multiple of it: every recorded chunk's pieces.
        let recorded = verified.count * Int(chunkSize / (256 << 10))
        #expect(report.recordedPieces == recorded, "\(report)")
        #expect(report.summary.contains("by the journal's record"))
    }

    @Test func bytesChangedUnderARecordedPieceAreFetchedAgain() async throws {
        let (verified, chunkSize) = try await interruptedRun()
        let k = try #require(verified.first)
        // Other bytes under a chunk the journal recorded verified: its checksum no longer matches.
        var image = try #require(TestFiles.read(output + ".segget-part"))
        let at = Int(Int64(k) * chunkSize) + 100
        image[at] ^= 0xFF
        try TestFiles.write(output + ".segget-part", image)
        let opts = options()
        let result = try await blocking { try Download(url: url, options: opts).run() }
        #expect(fileBytes(output) == body)
        let report = try #require(result.pieces)
        #expect(report.verifiedPieces == report.pieceCount)
        #expect(report.recordedPieces == (verified.count - 1) * Int(chunkSize / (256 << 10)), "\(report)")
    }

    @Test func otherPieceHashesTrustNothingRecorded() async throws {
        let (verified, _) = try await interruptedRun()
        #expect(!verified.isEmpty)
        // Pieces of another length: another fingerprint, so every kept chunk is hashed.
        let opts = options(pieceLength: 512 << 10)
        let result = try await blocking { try Download(url: url, options: opts).run() }
        #expect(fileBytes(output) == body)
        let report = try #require(result.pieces)
        #expect(report.recordedPieces == 0)
        #expect(report.verifiedPieces == report.pieceCount)
    }
}
