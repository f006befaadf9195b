import Glibc
import SeggetTestServer
import Testing

/// A file modified just now, served as Apache 2.4 serves it (the test server's `fresh` mode): its
/// `ETag` weak for a while and strong after, and an `If-Range` date refused (every range answered with
/// the whole file) until the file is 60 s old. Seen against Debian's Apache: such a file was fetched
/// over one connection, could not be streamed (`-o -`, exit 7), and a download that began while the
/// tag was weak started over once it turned strong, on a resume too.
@Suite(.serialized) struct FreshFileTests {
    static let size = 4 << 20

    static func server(_ body: [UInt8]) throws -> TestServer {
        let s = try TestServer()
        s.addResource(name: "f", bytes: body)
        try s.start()
        return s
    }

    /// Runs segget with its stdout in `dir/stdout`.
    static func segget(_ arguments: [String], dir: TempDir, interruptAfter: Double? = nil) throws -> SpawnedProcess.Outcome {
        let fd = open(dir.path("stdout"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let p = try SpawnedProcess(executable: try SpawnedProcess.seggetPath(), arguments: arguments, standardOutput: fd)
        close(fd)
        if let interruptAfter {
            usleep(useconds_t(interruptAfter * 1e6))
            p.signal(SIGINT)
        }
        return p.wait(timeout: 60)
    }

    /// Every GET with a range that the server answered.
    static func rangeAnswers(_ server: TestServer) -> [Int] {
        server.requests.filter { $0.method == "GET" && $0.headers["range"] != nil }.map(\.status)
    }

    @Test(arguments: ["file", "stream"]) func aFileModifiedJustNowIsFetchedInRanges(_ mode: String) throws {
        let body = TestFiles.pattern(Self.size, seed: 93)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let out = mode == "stream" ? dir.path("stdout") : dir.path("out.bin")
        let url = server.url("f", mode: .fresh, query: "weak=600")
        let r = try Self.segget(["-n", "4", "--chunk-size", "256k", "-o", mode == "stream" ? "-" : out, url], dir: dir)
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(TestFiles.fileDifference(out, body) == nil)
        let answers = Self.rangeAnswers(server)
        #expect(answers.count >= 2 && answers.allSatisfy { $0 == 206 }, "\(answers): \(r.stderr)")
        #expect(!server.requests.contains { $0.headers["if-range"] != nil }, "a date that young is no validator")
        #expect(!r.stderr.contains("ignored the byte range"), "\(r.stderr)")
    }

    /// The tag turns strong while the download runs: the same file, nothing fetched twice.
    @Test func aTagThatTurnsStrongMidDownloadIsTheSameFile() throws {
        let body = TestFiles.pattern(Self.size, seed: 94)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let out = dir.path("out.bin")
        // 1 MiB/s over two connections: 4 s, the tag weak for the first 2-3 of them; answers of 256 KiB
        // at most, so that requests go on after it turned strong.
        let r = try Self.segget(
            ["-n", "2", "--chunk-size", "256k", "-o", out, server.url("f", mode: .fresh, query: "weak=3&rate=512k&max=256k")], dir: dir)
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(TestFiles.fileDifference(out, body) == nil)
        #expect(!r.stderr.contains("changed"), "\(r.stderr)")
        #expect(Int64(time(nil)) >= server.startedUnix + 3, "the download ended while the tag was still weak")
        let sent = server.requests.reduce(Int64(0)) { $0 + $1.bodyBytesSent }
        #expect(sent <= Int64(Self.size) + (1 << 20), "\(server.requests.map { ($0.status, $0.bodyBytesSent) })")
    }

    /// Interrupted while the tag was weak, resumed once it is strong: continued, not started over.
    @Test func aResumeAfterTheTagTurnedStrongContinues() throws {
        let body = TestFiles.pattern(Self.size, seed: 95)
        let server = try Self.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        let out = dir.path("out.bin")
        let first = try Self.segget(
            ["-n", "2", "--chunk-size", "256k", "-o", out, server.url("f", mode: .fresh, query: "weak=4&rate=256k")], dir: dir,
            interruptAfter: 1.5)
        #expect(first.exitCode == 130, "\(first.stderr)")
        #expect(TestFiles.exists(out + ".segget-journal"))
        let sentBefore = server.requests.reduce(Int64(0)) { $0 + $1.bodyBytesSent }
        #expect(sentBefore > 256 << 10, "the first run kept something to continue from")
        while Int64(time(nil)) < server.startedUnix + 4 { usleep(100_000) }
        let second = try Self.segget(["-n", "2", "--chunk-size", "256k", "-o", out, server.url("f", mode: .fresh, query: "weak=4")], dir: dir)
        #expect(second.exitCode == 0, "\(second.stderr)")
        #expect(TestFiles.fileDifference(out, body) == nil)
        #expect(!second.stderr.contains("changed"), "\(second.stderr)")
        let sent = server.requests.reduce(Int64(0)) { $0 + $1.bodyBytesSent }
        #expect(sent <= Int64(Self.size) + (1 << 20), "\(server.requests.map { ($0.status, $0.bodyBytesSent) })")
    }
}
