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

    @Test(arguments: ["noranges", "range200", "chunked", "close-delimited"], [1, 8])
    func aLargeFileFromAServerWithoutRangesTakesOneRequest(_ mode: String, connections: Int) throws {
        let server = try TestServer.serving(Self.body)
        defer { server.stop() }
        let dir = try TempDir()
        // Paced, so that the probe holds the answer after its first bytes rather than at their end.
        let result = try Download(url: server.baseURL + "/\(mode)/f?rate=64m", options: Self.options(connections, dir: dir)).run()
        #expect(TestFiles.fileDifference(dir.path("out.bin"), Self.body) == nil)
        #expect(!result.usedRanges)
        #expect(server.requests.count == 1, "\(Self.requests(server))")
        #expect(server.bodyBytesSent == Int64(Self.body.count), "\(Self.requests(server))")
        #expect(result.receivedBytes == Int64(Self.body.count))
        #expect(result.tally.requests == 1, "\(result.tally)")
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
        #expect(result.bytes == Int64(Self.body.count))
        #expect(log.notices.contains { $0.contains("one connection") }, "\(log.notices)")
    }
}
