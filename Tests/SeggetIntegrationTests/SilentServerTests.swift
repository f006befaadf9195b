import Segget
import SeggetTestServer
import Synchronization
import Testing

/// A server that takes requests and, after its first few, never answers them (it reads each and
/// holds the connection open without a byte): the slow rule re-dials the silent connections, but a
/// re-dial does not restart the silence the stall timeout counts, so the stall timeout spends the
/// retries and the download ends with a network error (exit 3), its journal kept. Before, the
/// re-dials (every 8 s at most, less than the stall timeout) went on for ever: a download that never
/// ended (found by exploratory testing: 344 re-dials in 5 minutes at `-n 8` with the defaults).
@Suite(.serialized) struct SilentServerTests {
    @Test func aServerThatStopsAnsweringEndsTheDownload() async throws {
        let body = TestFiles.pattern(8 << 20, seed: 93)
        let server = try FaultTests.server(body)
        defer { server.stop() }
        let dir = try TempDir()
        var o = FaultTests.options(8, dir: dir)
        o.chunkSize = 1 << 20
        // Longer than the slow rule's longest hold-off between re-dials (8 s).
        o.transfer.stallTimeout = 10
        o.retries = 0
        let started = nowSeconds()
        let result = Mutex<FaultOutcome?>(nil)
        let url = server.url("f", mode: .silent, query: "after=3")
        Task.detached { let r = await faultDownload(url, o); result.withLock { $0 = r } }
        // Not for ever if it never ends (the fault this checks).
        while result.withLock({ $0 == nil }) && nowSeconds() - started < 60 { try await Task.sleep(for: .milliseconds(100)) }
        let elapsed = nowSeconds() - started
        let outcome = try #require(result.withLock { $0 }, "still running after \(elapsed) s")
        #expect(outcome.error?.kind == .network, "\(String(describing: outcome.error))")
        #expect(outcome.error?.message.contains("no data for") == true, "\(outcome.error?.message ?? "")")
        #expect(FaultTests.finalIsAbsent(dir))
        #expect(TestFiles.exists(dir.path("out.bin.segget-journal")))
    }
}
