import Segget
import SeggetTestServer
import SeggetVerify
import Testing

// A partial download continued from another URL (exploratory run 4): two different files of one
// length whose servers give them the same validators, as nginx does for files written in the same
// second (its ETag is the time and size). Before, the second URL continued the first's partial
// download and published a file that was neither (exit 0).

private final class TwoFiles: @unchecked Sendable {
    static let size = 2 * 1024 * 1024 + 777
    let server: TestServer
    let dir: TempDir
    let first = TestFiles.pattern(TwoFiles.size, seed: 71)
    let second = TestFiles.pattern(TwoFiles.size, seed: 72)

    /// `a.bin` and `b.bin` are different files with one `ETag` and `Last-Modified`; `copy.bin` is
    /// `a.bin`'s bytes under another path (a true second URL of it).
    init() throws {
        server = try TestServer()
        let etag = "\"6b0b9673-200309\""
        let modified = "Tue, 01 Dec 2026 10:00:00 GMT"
        server.addResource(name: "a.bin", bytes: first, etag: etag, lastModified: modified)
        server.addResource(name: "b.bin", bytes: second, etag: etag, lastModified: modified)
        server.addResource(name: "copy.bin", bytes: first, etag: etag, lastModified: modified)
        try server.start()
        dir = try TempDir(prefix: "segget-other-url")
    }

    deinit { server.stop() }

    func url(_ name: String, _ query: String = "rate=1m") -> String { "\(server.baseURL)/\(name)?\(query)" }
    var output: String { dir.path("img.bin") }
    var part: String { output + ".segget-part" }
    var journal: String { output + ".segget-journal" }

    func options(checksum: [UInt8]? = nil, mirrors: [String] = []) throws -> DownloadOptions {
        var o = DownloadOptions()
        o.outputPath = output
        o.connections = 4
        o.chunkSize = 64 * 1024
        o.retryWait = 0.05
        o.syncBeforeRename = false
        o.mirrors = mirrors
        if let checksum { o.checksums = [try ExpectedDigest(parsing: "sha256=\(sha256Text(checksum))")] }
        return o
    }

    /// The first file's download, interrupted near half way: its part file and journal are left.
    func interruptFirst() async throws {
        let error = try await interrupted(Download(url: url("a.bin"), options: try options()), atCompleted: Int64(Self.size / 2))
        #expect(error?.kind == .interrupted, "\(String(describing: error))")
        #expect(TestFiles.exists(part) && TestFiles.exists(journal))
    }

    func run(_ url: String, _ o: DownloadOptions) async throws -> (SeggetError?, EventLog) {
        let log = EventLog()
        let error = try await failure(of: Download(url: url, options: o), events: { log.append($0) })
        return (error, log)
    }
}

@Suite(.serialized) struct OtherURLResumeTests {
    /// Another path with the same length and validators is refused: the partial download is left
    /// byte for byte, nothing is published, and the first URL then finishes its own file.
    @Test func anotherPathWithTheSameValidatorsDoesNotContinueThePartialDownload() async throws {
        let f = try TwoFiles()
        try await f.interruptFirst()
        let part = TestFiles.read(f.part)
        let journal = TestFiles.read(f.journal)
        let (error, log) = try await f.run(f.url("b.bin"), try f.options())
        #expect(error?.kind == .fileSystem && error?.exitCode == 5, "\(String(describing: error))")
        #expect(error?.message.contains("is a partial download of another URL") == true, "\(String(describing: error))")
        #expect(error?.message.contains("--no-continue") == true && error?.message.contains("--checksum") == true)
        #expect(!log.hasNotice(containing: "continues from there"), "\(log.notices)")
        #expect(!TestFiles.exists(f.output), "nothing is published")
        // (Compared apart: a failed #expect would print every byte.)
        let partKept = TestFiles.read(f.part) == part
        let journalKept = TestFiles.read(f.journal) == journal
        #expect(partKept, "the part file is as the first URL left it")
        #expect(journalKept, "the journal is as the first URL left it")
        // The first URL continues its own partial download.
        let (again, resumed) = try await f.run(f.url("a.bin"), try f.options())
        #expect(again == nil, "\(String(describing: again))")
        #expect(resumed.hasNotice(containing: "resuming:"), "\(resumed.notices)")
        #expect(TestFiles.fileDifference(f.output, f.first) == nil)
    }

    /// `--no-continue` starts the other URL's file over: the second file, whole.
    @Test func noContinueStartsTheOtherURLsFileOver() async throws {
        let f = try TwoFiles()
        try await f.interruptFirst()
        var o = try f.options()
        o.resume = false
        let (error, _) = try await f.run(f.url("b.bin"), o)
        #expect(error == nil, "\(String(describing: error))")
        #expect(TestFiles.fileDifference(f.output, f.second) == nil)
    }

    /// The same path with another query (a fresh signed link) continues, with a notice.
    @Test func theSamePathWithAnotherQueryContinues() async throws {
        let f = try TwoFiles()
        try await f.interruptFirst()
        let (error, log) = try await f.run(f.url("a.bin", "rate=1m&signature=fresh"), try f.options())
        #expect(error == nil, "\(String(describing: error))")
        #expect(log.hasNotice(containing: "the same path on the same server"), "\(log.notices)")
        #expect(log.hasNotice(containing: "resuming:"), "\(log.notices)")
        #expect(TestFiles.fileDifference(f.output, f.first) == nil)
    }

    /// A URL the user names for the file (a `--mirror` of this download) continues it.
    @Test func aURLNamedAsThisDownloadsMirrorContinues() async throws {
        let f = try TwoFiles()
        try await f.interruptFirst()
        let (error, log) = try await f.run(f.url("copy.bin"), try f.options(mirrors: [f.url("a.bin")]))
        #expect(error == nil, "\(String(describing: error))")
        #expect(log.hasNotice(containing: "one of this download's own URLs"), "\(log.notices)")
        #expect(log.hasNotice(containing: "resuming:"), "\(log.notices)")
        #expect(TestFiles.fileDifference(f.output, f.first) == nil)
    }

    /// With a checksum, another path continues: a true copy finishes identical, and a different
    /// file's mix fails its digest (exit 6) and is never published.
    @Test func aChecksumLetsAnotherPathContinueAndCatchesAMix() async throws {
        let f = try TwoFiles()
        try await f.interruptFirst()
        let (error, log) = try await f.run(f.url("copy.bin"), try f.options(checksum: f.first))
        #expect(error == nil, "\(String(describing: error))")
        #expect(log.hasNotice(containing: "the checksum checks every byte"), "\(log.notices)")
        #expect(TestFiles.fileDifference(f.output, f.first) == nil)

        let g = try TwoFiles()
        try await g.interruptFirst()
        let (mixed, _) = try await g.run(g.url("b.bin"), try g.options(checksum: g.second))
        #expect(mixed?.kind == .verification && mixed?.exitCode == 6, "\(String(describing: mixed))")
        #expect(!TestFiles.exists(g.output), "a mixed file is never published")
    }
}
