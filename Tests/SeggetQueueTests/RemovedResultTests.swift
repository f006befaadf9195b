import Segget
import SeggetTestServer
import Testing

@testable import SeggetQueue

/// A task removed a moment ago is forgotten at once, as aria2 forgets it: its download takes a
/// moment more to stop (20-90 ms measured), and `removeDownloadResult` in that moment was refused
/// ("Task … is removed, not stopped; remove it first."), `purgeDownloadResult` kept it (exploratory
/// run 11: `segget rm` twice in a row, `aria2p remove(clean=True)`).
@Suite(.serialized) struct RemovedResultTests {
    @Test func aTaskRemovedAMomentAgoIsForgottenAtOnce() async throws {
        let dir = try QueueTempDir()
        let server = try TestServer()
        server.addResource(name: "a.bin", bytes: QueueTestFiles.randomBytes(8 << 20, seed: 41), etag: "\"a-1\"")
        server.addResource(name: "b.bin", bytes: QueueTestFiles.randomBytes(8 << 20, seed: 42), etag: "\"b-1\"")
        try server.start()
        defer { server.stop() }
        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.defaultConnections = 4
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        queue.start()
        let a = try queue.add(urls: [server.url("a.bin", query: "rate=256k")], options: TaskOptions())
        let b = try queue.add(urls: [server.url("b.bin", query: "rate=256k")], options: TaskOptions())
        #expect(await eventually(timeout: 20) { [a, b].allSatisfy { (queue.snapshot($0)?.completedLength ?? 0) > 0 } })

        try queue.remove(a)
        #expect(queue.snapshot(a)?.status == .removed)
        try queue.removeResult(a)
        #expect(queue.snapshot(a) == nil)
        #expect(throws: QueueError.self) { try queue.removeResult(a) }

        try queue.remove(b)
        queue.purgeResults()
        #expect(queue.snapshot(b) == nil)
        #expect(queue.stopped(offset: 0, count: 10).isEmpty)
        await queue.shutdown()

        // Forgotten in the database too.
        let reopened = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        #expect(reopened.snapshot(a) == nil && reopened.snapshot(b) == nil)
        await reopened.shutdown()
    }
}
