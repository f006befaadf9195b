import Segget
import SeggetTestServer
import SeggetVerify
import Testing

// Piece hashes (a Metalink's), end to end against test servers: each piece is hashed as it is
// written, a bad one is fetched again from another server and the server that sent it gets no more
// work; Metalink/HTTP brings mirrors and the pieces from a redirector's `Link` fields.

/// The piece hashes of `bytes` in pieces of `length`.
func pieceHashes(_ bytes: [UInt8], length: Int, algorithm: DigestAlgorithm = .sha256) -> PieceHashes {
    var digests: [UInt8] = []
    let d = Digester(algorithm)
    var at = 0
    while at < bytes.count {
        d.update(Array(bytes[at..<min(at + length, bytes.count)]))
        digests += d.finalize()
        at += length
    }
    return PieceHashes(algorithm: algorithm, length: Int64(length), digests: digests)!
}

/// `bytes` with `count` bytes from `offset` flipped.
func corrupted(_ bytes: [UInt8], at offset: Int, count: Int) -> [UInt8] {
    var b = bytes
    for i in offset..<min(offset + count, b.count) { b[i] ^= 0x5A }
    return b
}

private func serving(_ name: String, _ bytes: [UInt8], etag: String) throws -> TestServer {
    let s = try TestServer()
    s.addResource(name: name, bytes: bytes, etag: etag)
    try s.start()
    return s
}

@Suite(.serialized) struct PieceTests {
    static let size = 8 << 20

    /// Four servers, one of which serves every byte altered (same length and ETag): whatever it
    /// served fails its piece hash, is fetched again from the others, and it is named and gets no
    /// more work. The file is identical.
    @Test func aServerThatServesBadPiecesIsDemotedAndThePiecesFetchedElsewhere() async throws {
        let body = TestFiles.pattern(Self.size, seed: 40)
        let bad = corrupted(body, at: 0, count: body.count)
        let main = try serving("f.bin", body, etag: "\"f\"")
        let good1 = try serving("f.bin", body, etag: "\"f\"")
        let good2 = try serving("f.bin", body, etag: "\"other-inode\"")
        let liar = try serving("f.bin", bad, etag: "\"f\"")
        defer { [main, good1, good2, liar].forEach { $0.stop() } }
        let dir = try TempDir(prefix: "segget-pieces")
        var o = DownloadOptions()
        o.connections = 8
        o.outputPath = dir.path("f.bin")
        o.pieces = pieceHashes(body, length: 256 << 10)
        o.expectedLength = Int64(Self.size)
        // Paced so that every connection serves for a while before any steals.
        let query = "rate=4m"
        o.mirrors = [good1, liar, good2].map { $0.url("f.bin", query: query) }
        let log = EventLog()
        let opts = o
        let result = try await blocking {
            try Download(url: main.url("f.bin", query: query), options: opts).run(events: { log.append($0) })
        }
        #expect(fileBytes(dir.path("f.bin")) == body)
        let report = try #require(result.pieces)
        #expect(report.pieceCount == 32 && report.verifiedPieces == 32)
        #expect(!report.failedPieces.isEmpty, "the altered server's pieces failed")
        #expect(report.badSources == [liar.url("f.bin", query: query)])
        #expect(log.hasNotice(containing: "failed SHA-256 check"), "\(log.notices)")
        #expect(log.hasNotice(containing: "gets no more work"), "\(log.notices)")
        // A mirror with another ETag is kept: the pieces vouch for its bytes.
        #expect(!log.hasNotice(containing: "dropping mirror"), "\(log.notices)")
        #expect(good2.requests.filter { $0.status == 206 }.count >= 2)
        // Nothing the liar sent after its demotion was asked for: it sent less than the file.
        #expect(liar.bodyBytesSent < Int64(Self.size))
    }

    /// One bad MiB on one mirror: only the pieces there fail, and are fetched again (so the
    /// servers send the file plus about a MiB, not the file twice).
    @Test func oneBadMiBCostsAboutAMiB() async throws {
        let body = TestFiles.pattern(Self.size, seed: 41)
        let main = try serving("f.bin", body, etag: "\"f\"")
        let liar = try serving("f.bin", corrupted(body, at: 5 << 20, count: 1 << 20), etag: "\"f\"")
        defer { [main, liar].forEach { $0.stop() } }
        let dir = try TempDir(prefix: "segget-pieces")
        var o = DownloadOptions()
        o.connections = 4
        o.outputPath = dir.path("f.bin")
        o.pieces = pieceHashes(body, length: 1 << 20)
        o.mirrors = [liar.url("f.bin", query: "rate=8m")]
        let opts = o
        let result = try await blocking { try Download(url: main.url("f.bin", query: "rate=8m"), options: opts).run() }
        #expect(fileBytes(dir.path("f.bin")) == body)
        let sent = main.bodyBytesSent + liar.bodyBytesSent
        #expect(sent <= Int64(Self.size) + (3 << 20), "sent \(sent)")
        if let failed = result.pieces?.failedPieces, !failed.isEmpty {
            #expect(Set(failed) == [5], "only piece 5 was bad: \(failed)")
        }
    }

    /// With no other server, a bad piece ends the download: exit 6 (verification), no file under
    /// the final name.
    @Test func aBadPieceWithNoOtherServerFails() async throws {
        let body = TestFiles.pattern(4 << 20, seed: 42)
        let liar = try serving("f.bin", corrupted(body, at: 3 << 20, count: 100), etag: "\"f\"")
        defer { liar.stop() }
        let dir = try TempDir(prefix: "segget-pieces")
        var o = DownloadOptions()
        o.connections = 4
        o.outputPath = dir.path("f.bin")
        o.pieces = pieceHashes(body, length: 1 << 20)
        let opts = o
        await #expect {
            _ = try await blocking { try Download(url: liar.url("f.bin"), options: opts).run() }
        } throws: { error in
            (error as? SeggetError)?.kind == .verification
        }
        #expect(!TestFiles.exists(dir.path("f.bin")))
    }

    /// A small file the probe brings whole is checked piece by piece in memory.
    @Test func aSmallFileIsCheckedInMemory() async throws {
        let body = TestFiles.pattern(200_000, seed: 43)
        let liar = try serving("f.bin", corrupted(body, at: 150_000, count: 1), etag: "\"f\"")
        let honest = try serving("f.bin", body, etag: "\"f\"")
        defer { [liar, honest].forEach { $0.stop() } }
        let dir = try TempDir(prefix: "segget-pieces")
        var o = DownloadOptions()
        o.outputPath = dir.path("f.bin")
        o.pieces = pieceHashes(body, length: 64 << 10)
        let first = o
        _ = try await blocking { try Download(url: honest.url("f.bin"), options: first).run() }
        #expect(fileBytes(dir.path("f.bin")) == body)
        o.outputPath = dir.path("g.bin")
        let second = o
        await #expect {
            _ = try await blocking { try Download(url: liar.url("f.bin"), options: second).run() }
        } throws: { error in
            (error as? SeggetError)?.kind == .verification && "\(error)".contains("piece 2")
        }
        #expect(!TestFiles.exists(dir.path("g.bin")))
    }

    /// A redirector as openSUSE's: a 302 to one mirror with `Link` duplicates (priorities), a
    /// `describedby` Metalink with piece hashes, and a `Digest`. The download uses the mirrors, checks
    /// every piece and the digest; a second redirect's `Link` (a mirror's) is not followed.
    @Test func metalinkHTTPBringsMirrorsPiecesAndTheDigest() async throws {
        let body = TestFiles.pattern(Self.size, seed: 44)
        let mirrors = try (0..<3).map { _ in try serving("f.bin", body, etag: "\"f\"") }
        let trap = try serving("f.bin", body, etag: "\"f\"")
        let redirector = try TestServer()
        try redirector.start()
        defer { (mirrors + [trap, redirector]).forEach { $0.stop() } }
        let pieces = pieceHashes(body, length: 1 << 20)
        let meta4 = metalinkDocument(name: "f.bin", size: body.count, urls: [], pieces: pieces)
        redirector.addFixedAnswer(
            path: "/f.bin.meta4", status: 200, headers: [("Content-Type", "application/metalink4+xml")], body: Array(meta4.utf8))
        let d = Digester(.sha256)
        d.update(body)
        let digest = base64(d.finalize())
        let q = "rate=8m"
        redirector.addFixedAnswer(
            path: "/f.bin", status: 302,
            headers: [
                ("Location", redirector.baseURL + "/hop"),
                ("Link", "<\(mirrors[1].url("f.bin", query: q))>; rel=duplicate; pri=2"),
                ("Link", "<\(mirrors[2].url("f.bin", query: q))>; rel=duplicate; pri=1, <\(redirector.baseURL)/f.bin.meta4>; rel=describedby; type=\"application/metalink4+xml\""),
                ("Digest", "SHA-256=\(digest)"),
            ])
        redirector.addFixedAnswer(
            path: "/hop", status: 302,
            headers: [("Location", mirrors[0].url("f.bin", query: q)), ("Link", "<\(trap.url("f.bin"))>; rel=duplicate; pri=1")])
        let dir = try TempDir(prefix: "segget-metalink-http")
        var o = DownloadOptions()
        o.connections = 6
        o.outputPath = dir.path("f.bin")
        let log = EventLog()
        let opts = o
        let result = try await blocking {
            try Download(url: redirector.baseURL + "/f.bin", options: opts).run(events: { log.append($0) })
        }
        #expect(fileBytes(dir.path("f.bin")) == body)
        #expect(result.pieces?.verifiedPieces == 8 && result.pieces?.pieceCount == 8)
        #expect(result.verified.contains { $0.hasPrefix("SHA-256=") })
        for m in mirrors { #expect(m.requests.contains { $0.status == 206 }, "\(m.baseURL) served no range") }
        #expect(trap.requests.isEmpty, "a mirror's redirect Link was followed")
        #expect(log.hasNotice(containing: "2 other copies"), "\(log.notices)")
        #expect(log.hasNotice(containing: "8 piece hashes"), "\(log.notices)")
    }
}

extension PieceTests {
    /// `FileRepair` through the library: a file short of its end and with a bad piece is repaired
    /// from two servers, one of which sends bad bytes and is named; only the bad pieces are fetched.
    @Test func repairFetchesOnlyBadPiecesAndDemotesALiar() async throws {
        let body = TestFiles.pattern(4 << 20, seed: 46)
        let liar = try serving("f.bin", corrupted(body, at: 0, count: body.count), etag: "\"f\"")
        let good = try serving("f.bin", body, etag: "\"g\"")
        defer { [liar, good].forEach { $0.stop() } }
        let dir = try TempDir(prefix: "segget-repair")
        let path = dir.path("f.bin")
        try TestFiles.write(path, Array(corrupted(body, at: 100, count: 1).prefix(body.count - 300_000)))
        let file = MetalinkDownload(
            url: liar.url("f.bin"), mirrors: [good.url("f.bin")], name: "f.bin", size: Int64(body.count),
            checksums: [], pieces: pieceHashes(body, length: 256 << 10))
        let checked = try FileRepair.run(path: path, file: file, repair: false)
        #expect(checked.badPieces == [0, 14, 15] && !checked.repaired)
        var two = DownloadOptions()
        two.connections = 2
        let o = two
        let log = EventLog()
        let report = try await blocking { try FileRepair.run(path: path, file: file, repair: true, options: o, events: { log.append($0) }) }
        #expect(report.repaired && report.badPieces == [0, 14, 15])
        #expect(fileBytes(path) == body)
        #expect(report.badSources == [liar.url("f.bin")], "\(log.notices)")
        #expect(liar.bodyBytesSent + good.bodyBytesSent <= 6 * (256 << 10) + 2, "no more than the bad pieces, twice at worst")
    }
}

/// A Metalink 4 document of one file.
func metalinkDocument(name: String, size: Int, urls: [String], pieces: PieceHashes?, hash: [UInt8]? = nil) -> String {
    var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n"
    xml += "<file name=\"\(name)\"><size>\(size)</size>\n"
    if let hash { xml += "<hash type=\"sha-256\">\(hexString(hash))</hash>\n" }
    for (i, u) in urls.enumerated() { xml += "<url priority=\"\(i + 1)\">\(u)</url>\n" }
    if let pieces {
        xml += "<pieces length=\"\(pieces.length)\" type=\"\(pieces.algorithm.textualName)\">"
        for p in 0..<pieces.count { xml += "<hash>\(hexString(Array(pieces.digest(of: p))))</hash>" }
        xml += "</pieces>\n"
    }
    return xml + "</file>\n</metalink>\n"
}

func base64(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    var out = ""
    var i = 0
    while i < bytes.count {
        let chunk = Array(bytes[i..<min(i + 3, bytes.count)])
        let n = (UInt32(chunk[0]) << 16) | (UInt32(chunk.count > 1 ? chunk[1] : 0) << 8) | UInt32(chunk.count > 2 ? chunk[2] : 0)
        out.append(alphabet[Int(n >> 18) & 63])
        out.append(alphabet[Int(n >> 12) & 63])
        out.append(chunk.count > 1 ? alphabet[Int(n >> 6) & 63] : "=")
        out.append(chunk.count > 2 ? alphabet[Int(n) & 63] : "=")
        i += 3
    }
    return out
}
