import Segget
import SeggetTestServer
import Testing

/// Connections move from a mirror far slower per connection to a faster one (`SourceChoice`):
/// spread in turn over two sources, half of them would otherwise stay on the slow one to the end.
@Suite(.serialized) struct MirrorMoveTests {
    @Test func aSlowMirrorKeepsLittleOfTheFile() async throws {
        let size = 48 << 20
        let body = TestFiles.pattern(size, seed: 61)
        let slow = try TestServer()
        let fast = try TestServer()
        for s in [slow, fast] {
            s.addResource(name: "f.bin", bytes: body, etag: "\"m\"")
            try s.start()
        }
        defer { [slow, fast].forEach { $0.stop() } }
        let dir = try TempDir(prefix: "segget-mirror-move")
        var o = DownloadOptions()
        o.connections = 4
        o.outputPath = dir.path("f.bin")
        // Per answer: the slow mirror 2 MiB/s, the fast one 12 MiB/s.
        o.mirrors = [fast.url("f.bin", query: "rate=12m")]
        let opts = o
        let started = ContinuousClock.now
        _ = try await blocking { try Download(url: slow.url("f.bin", query: "rate=2m"), options: opts).run() }
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        #expect(fileBytes(dir.path("f.bin")) == body)
        // Two connections kept to the end would bring 2 x 2 MiB/s for the whole download (4 MiB a
        // second). Re-dialled to the fast mirror once they are seen to be slow (its connections are
        // 6 x faster), they bring far less: 1.7 MiB in release builds on the 2-core VM.
        let keptShare = Int64(Double(2 * (2 << 20)) * seconds)
        print("mirror move: slow sent \(slow.bodyBytesSent), fast \(fast.bodyBytesSent), \(seconds) s, kept share \(keptShare)")
        #expect(slow.bodyBytesSent < keptShare * 6 / 10, "slow sent \(slow.bodyBytesSent) of \(size) in \(seconds) s")
    }
}
