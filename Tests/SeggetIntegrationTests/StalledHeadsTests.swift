import SeggetTestServer
import Testing

/// A server that sends its answer heads and then nothing is not "a server that answers one request at
/// a time": the head says it took the request up. Counted as waiting in its queue, such requests made
/// the saturation rule lower the host's limit to 1 (a limit shared with every other download to that
/// host in a batch or the daemon) and say so on stderr within 0.2 s.
@Suite(.serialized) struct StalledHeadsTests {
    @Test func headsWithoutBodiesTeachNoHostLimit() throws {
        let body = TestFiles.pattern(32 << 20, seed: 4104)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try CLITempDir()
        let r = try SeggetCLI.run([
            "-n", "8", "--stall-timeout", "3", "--retries", "0", "-o", dir.path("out.bin"), server.url("f", mode: .stall, query: "after=0"),
        ])
        #expect(r.exitCode == 3, "\(r.stderr)")
        #expect(r.stderr.contains("stalled") || r.stderr.contains("no data"), "\(r.stderr)")
        #expect(!r.stderr.contains("request at a time"), "\(r.stderr)")
    }
}
