import Glibc
import Segget
import SeggetTestServer
import SeggetVerify
import Testing

/// A server without ranges (it ignores them, or sends the file in chunks, or to the connection's
/// close) answers the probe with the whole file. The probe keeps the first bytes and holds that
/// answer, and the download's one stream continues it: one request for the file, every byte sent
/// once. Before, the probe cut the answer and the stream asked again from byte 0, and on loopback
/// the server had pushed up to 4 MiB into the cut connection for nothing.
@Suite(.serialized) struct NoRangesOneRequestTests {
    static let body = TestFiles.pattern(3 << 20 + 777, seed: 41)

    static func options(_ n: Int, dir: TempDir) -> DownloadOptions {
        var o = EngineTests.options(n, dir: dir)
        o.chunkSize = 256 << 10
        return o
    }

    static func requests(_ server: TestServer) -> String {
        "\(server.requests.map { "\($0.status) \($0.headers["range"] ?? "-") \($0.bodyBytesSent)" })"
    }

    /// `range200?echo=2000000` also sends `Content-Range: bytes 0-1999999/…` on its 200, as a proxy that
    /// echoes a probe's small range would: the answer is still the whole file (a version of this
    /// change ended such a download with an internal error). `rate=400k`: a slow answer, held by the probe's time limit rather than
    /// at its byte limit.
    @Test(arguments: ["noranges", "range200", "range200?echo=2000000&", "chunked", "noranges?rate=400k&"], [1, 8])
    func aLargeFileFromAServerWithoutRangesTakesOneRequest(_ mode: String, connections: Int) throws {
        let body = mode.contains("400k") ? Array(Self.body[..<700_000]) : Self.body
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        // Paced, so that the probe holds the answer after its first bytes rather than at their end
        // (the test server takes the last of two `rate`s: a mode's own comes alone).
        let path = mode.contains("?") ? mode.replacingOccurrences(of: "?", with: "/f?") : "\(mode)/f?"
        let rate = mode.contains("rate=") ? "" : "rate=64m"
        let result = try Download(url: server.baseURL + "/\(path)\(rate)", options: Self.options(connections, dir: dir)).run()
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        #expect(!result.usedRanges)
        #expect(server.requests.count == 1, "\(Self.requests(server))")
        #expect(server.bodyBytesSent == Int64(body.count), "\(Self.requests(server))")
        #expect(result.receivedBytes == Int64(body.count))
        #expect(result.tally.requests == 1, "\(result.tally)")
    }

    /// A body that ends where its connection closes (no length, not chunked) is not held: a server
    /// that closed the connection while the answer waited (a batch's file waits for its name) would
    /// end it as cleanly as the file's end. The probe cuts it, and the stream asks again.
    @Test func aCloseDelimitedAnswerIsNotHeld() throws {
        let server = try TestServer.serving(Self.body)
        defer { server.stop() }
        let dir = try TempDir()
        let result = try Download(url: server.baseURL + "/close-delimited/f?rate=64m", options: Self.options(1, dir: dir)).run()
        #expect(TestFiles.fileDifference(dir.path("out.bin"), Self.body) == nil)
        #expect(server.requests.count == 2, "\(Self.requests(server))")
        #expect(server.requests[0].bodyBytesSent < Int64(Self.body.count), "\(Self.requests(server))")
        #expect(result.tally.requests == 2, "\(result.tally)")
    }

    /// The whole-file hash takes the probe's bytes too (from memory), then the stream's.
    @Test(arguments: [1, 8])
    func theContinuedAnswerIsVerified(connections: Int) throws {
        let server = try TestServer.serving(Self.body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(connections, dir: dir)
        let sha = Digester(.sha256)
        sha.update(Self.body)
        let right = sha.finalize()
        o.checksums = [ExpectedDigest(algorithm: .sha256, bytes: right)!]
        let result = try Download(url: server.baseURL + "/noranges/f?rate=64m", options: o).run()
        #expect(result.verified.count == 1, "\(result.verified)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), Self.body) == nil)
        #expect(server.requests.count == 1, "\(Self.requests(server))")

        // A wrong digest: refused, and nothing under the name.
        let other = try TempDir()
        var wrong = Self.options(connections, dir: other)
        var digest = right
        digest[0] ^= 1
        wrong.checksums = [ExpectedDigest(algorithm: .sha256, bytes: digest)!]
        #expect(throws: SeggetError.self) { try Download(url: server.baseURL + "/noranges/f?rate=64m", options: wrong).run() }
        #expect(!TestFiles.exists(other.path("out.bin")))
    }

    /// The continued answer is cut after the probe's bytes: without ranges the retry starts over
    /// from byte 0 and writes the file again, identical.
    @Test(arguments: [1, 8])
    func aCutAfterTheProbesBytesStartsOverFromByteZero(connections: Int) throws {
        let server = try TestServer.serving(Self.body)
        defer { server.stop() }
        let dir = try TempDir()
        let (log, sink) = EngineTests.events()
        let result = try Download(
            url: server.baseURL + "/drop/f?noranges=1&after=2000000&times=1&rate=64m", options: Self.options(connections, dir: dir)
        ).run(events: sink)
        #expect(TestFiles.fileDifference(dir.path("out.bin"), Self.body) == nil)
        #expect(server.requests.count == 2, "\(Self.requests(server))")
        #expect(server.requests.allSatisfy { $0.status == 200 }, "\(Self.requests(server))")
        // The first answer, continued, was the one cut (before, the probe cut it first itself).
        #expect(server.requests.first?.bodyBytesSent == 2_000_000, "\(Self.requests(server))")
        #expect(result.receivedBytes == 2_000_000 + Int64(Self.body.count))
        #expect(result.bytes == Int64(Self.body.count))
        #expect(log.notices.contains { $0.contains("one connection") }, "\(log.notices)")
    }

    /// Stopped (Ctrl-C) or failed, a download from a server without ranges keeps nothing: a rerun starts
    /// over, so the part file (as long as the whole file) goes, and the message says so. It was kept,
    /// and Ctrl-C said "N MiB saved; run the same command to resume".
    @Test(arguments: ["interrupted", "failed"])
    func aDownloadWithoutRangesThatStopsKeepsNothing(_ how: String) throws {
        let body = TestFiles.pattern(8 << 20, seed: 42)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let out = dir.path("out.bin")
        let url = how == "interrupted" ? server.baseURL + "/noranges/f?rate=2m" : server.baseURL + "/drop/f?noranges=1&after=3000000&rate=8m"
        let p = try SpawnedProcess(executable: try SpawnedProcess.seggetPath(), arguments: ["--retries", "0", "-o", out, url])
        if how == "interrupted" {
            #expect(waitUntil(timeout: 20) { server.bodyBytesSent >= 1 << 20 || !p.isRunning })
            p.signal(SIGINT)
        }
        let r = p.wait(timeout: 30)
        #expect(r.exitCode == (how == "interrupted" ? 130 : 3), "\(r.stderr)")
        if how == "interrupted" {
            #expect(r.stderr.contains("the server sends no byte ranges") && r.stderr.contains("a rerun starts over (nothing was kept)"), "\(r.stderr)")
            #expect(!r.stderr.contains("saved; run the same command to resume"), "\(r.stderr)")
        }
        for leftover in [out, out + ".segget-part", out + ".segget-journal", out + ".segget-progress"] {
            #expect(!TestFiles.exists(leftover), "\(leftover) is there: \(r.stderr)")
        }
    }

    /// A server without ranges whose answer stalls until the retries are spent: nothing is kept, so
    /// the advice is to download it again, from the first byte (exploratory run 4: it said "run the
    /// same command to resume later", and the daemon "continues what this one saved").
    @Test func retriesSpentWithoutRangesAdviseStartingOverNotResuming() async throws {
        let server = try TestServer.serving(Self.body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = Self.options(1, dir: dir)
        o.transfer.stallTimeout = 1
        o.retries = 1
        o.retryWait = 0.05
        let url = server.baseURL + "/noranges/f?slowfirst=99&slowafter=1m&slowrate=0"
        let error = try await failure(of: Download(url: url, options: o))
        let message = error?.message ?? ""
        #expect(error?.kind == .network, "\(String(describing: error))")
        #expect(message.contains("starts over from the first byte") && message.contains("--retries"), "\(message)")
        #expect(!message.contains("resume"), "\(message)")
        #expect(NextStep.forDaemon(message).contains("add the URL again to download it anew later"), "\(message)")
        #expect(!TestFiles.exists(dir.path("out.bin") + ".segget-journal"), "nothing was kept to resume")
    }

}
