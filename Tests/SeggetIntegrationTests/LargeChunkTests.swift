import Segget
import SeggetTestServer
import Testing

/// A chunk size that leaves connections without work (exploratory run 4): 30 MiB at `-n 8` with
/// `--chunk-size 16M` from nginx at 3 MiB/s a connection had every idle connection race a 16 MiB
/// chunk from its first byte a quarter second in, before any rate was known, beside an owner as
/// fast as it: 55 MiB fetched twice and no second saved. The same shape here, smaller.
@Suite(.serialized) struct LargeChunkTests {
    @Test func idleConnectionsDoNotRaceChunksNoRateShowsTheyCouldWin() async throws {
        let size = 6 << 20
        let body = TestFiles.pattern(size, seed: 404)
        let server = try TestServer()
        server.addResource(name: "f.bin", bytes: body)
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        var o = DownloadOptions()
        o.outputPath = dir.path("f.bin")
        o.connections = 8
        o.chunkSize = 4 << 20
        o.syncBeforeRename = false
        let log = EventLog()
        let download = Download(url: server.url("f.bin", query: "rate=2m"), options: o)
        let result = try await blocking { try download.run(events: { log.append($0) }) }
        #expect(TestFiles.fileDifference(dir.path("f.bin"), body) == nil)
        // Two chunks, two requests (the probe's, open-ended, continued as the first: the server
        // sends a socket buffer's worth past its chunk before it is stopped), nothing fetched twice.
        #expect(server.requests.count == 2, "\(server.requests.map(\.description))")
        #expect(result.tally.requests == 2 && result.tally.connections == 2, "\(result.tally)")
        #expect(result.tally.refetchedBytes == 0, "\(result.tally)")
        #expect(server.bodyBytesSent < Int64(size) + 512 << 10, "sent \(server.bodyBytesSent) for \(size)")
        #expect(log.hasNotice(containing: "cut the 6.0 MiB left into 2, so 2 of the 8 connections have work"), "\(log.notices)")
    }

    @Test func theNoticeOnlyWhereARaisedChunkSizeLeavesConnectionsIdle() {
        let mib: Int64 = 1 << 20
        #expect(Download.connectionsWithoutWork(left: 30 * mib, chunkSize: 16 * mib, connections: 8).map { [$0.chunks, $0.idle] } == [2, 6])
        #expect(Download.connectionsWithoutWork(left: 30 * mib, chunkSize: 4 * mib, connections: 8) == nil)  // 8 chunks
        #expect(Download.connectionsWithoutWork(left: 29 * mib, chunkSize: 4 * mib, connections: 8) == nil)  // 8 (one short)
        #expect(Download.connectionsWithoutWork(left: 28 * mib, chunkSize: 4 * mib, connections: 8).map { [$0.chunks, $0.idle] } == [7, 1])
        // The default chunk size: a small file, not a choice of the user's.
        #expect(Download.connectionsWithoutWork(left: 3 * mib, chunkSize: mib, connections: 8) == nil)
        #expect(Download.connectionsWithoutWork(left: 0, chunkSize: 16 * mib, connections: 8) == nil)
    }
}
