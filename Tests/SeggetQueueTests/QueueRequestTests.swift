import Segget
import SeggetTestServer
import Testing

@testable import SeggetQueue

/// What a new task costs its server in requests: its download's own probe names the file, and the
/// download goes on from that probe's answer.
@Suite(.serialized) struct QueueRequestTests {
    /// A small file the server names (`Content-Disposition`): one request, the probe that brought
    /// it whole. Before, the task sent a 1-byte request for the name first, then its download's probe.
    @Test func aNewTaskIsNamedByItsDownloadsOwnProbe() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(200_000, seed: 21)
        let server = try QueueIntegrationTests.server(["plain.bin": bytes])
        defer { server.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        queue.start()
        let cd = "attachment%3B%20filename%3D%22suggested.bin%22"
        let id = try queue.add(
            urls: [server.url("plain.bin", mode: .disposition, query: "cd=\(cd)")], options: TaskOptions(connections: 1))
        #expect(await eventually(timeout: 30) { queue.snapshot(id)?.status == .complete })
        let s = try #require(queue.snapshot(id))
        #expect(s.path == dir.path("root") + "/suggested.bin")
        #expect(QueueTestFiles.read(dir.path("root/suggested.bin")) == bytes)
        let requests = server.requests
        #expect(requests.count == 1, "\(requests)")
        #expect(requests.first?.headers["range"]?.hasPrefix("bytes=0-") == true && requests.first?.headers["range"] != "bytes=0-0")
        await queue.shutdown()
    }

    /// A file of several chunks at 2 connections: the probe (held, connection 0's) and one range.
    @Test func aNewTaskOfTwoConnectionsSendsTwoRequests() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(6 << 20, seed: 22)
        let server = try QueueIntegrationTests.server(["two.bin": bytes])
        defer { server.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        queue.start()
        // About 1.5 s at 2 MiB/s a connection: connection 1 starts long before connection 0 is done.
        let first = try queue.add(urls: [server.url("two.bin", query: "rate=2m")], options: TaskOptions(connections: 2))
        #expect(await eventually(timeout: 30) { queue.snapshot(first)?.status == .complete })
        #expect(QueueTestFiles.read(dir.path("root/two.bin")) == bytes)
        let requests = server.requests
        #expect(requests.count == 2, "\(requests)")
        #expect(requests.first?.headers["range"] == "bytes=0-")
        #expect(!requests.contains { $0.headers["range"] == "bytes=0-0" }, "\(requests)")

        await queue.shutdown()
    }
}
