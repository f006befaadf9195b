import Segget
import SeggetTestServer
import Testing

@testable import SeggetQueue

/// A task removed a moment ago is forgotten at once, as aria2 forgets it: its download takes a
/// moment more to stop (20-90 ms measured), and `removeDownloadResult` in that moment was refused
/// ("Task … is removed, not stopped; remove it first."), `purgeDownloadResult` kept it (exploratory
/// run 11: `segget rm` twice in a row, `aria2p remove(clean=True)`).
@Suite(.serialized) struct RemovedResultTests {
    /// A test server serving `files` (name: size, seed), and settings of 4 connections a task.
    static func serving(_ files: [String: (size: Int, seed: UInt64)], dir: QueueTempDir) throws -> (TestServer, QueueSettings) {
        let server = try TestServer()
        for (name, f) in files {
            server.addResource(name: name, bytes: QueueTestFiles.randomBytes(f.size, seed: f.seed), etag: "\"\(name)-1\"")
        }
        try server.start()
        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.defaultConnections = 4
        return (server, settings)
    }

    @Test func aTaskRemovedAMomentAgoIsForgottenAtOnce() async throws {
        let dir = try QueueTempDir()
        let (server, settings) = try Self.serving(["a.bin": (8 << 20, 41), "b.bin": (8 << 20, 42)], dir: dir)
        defer { server.stop() }
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

    /// After a restart a paused task's piece map is the chunks its journal records, as before the
    /// restart: read as a prefix of the file from its completed length, a task at split 4 showed
    /// pieces done that were not and hid others that were (exploratory run 11: 8080808080808080
    /// became ffe0000000000000).
    @Test func aPausedTasksPieceMapSurvivesARestart() async throws {
        let dir = try QueueTempDir()
        let (server, settings) = try Self.serving(["p.bin": (16 << 20, 43)], dir: dir)
        defer { server.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        queue.start()
        let id = try queue.add(urls: [server.url("p.bin", query: "rate=512k")], options: TaskOptions())
        func setPieces(_ s: TaskSnapshot?) -> Int {
            (s?.bitfield ?? "").compactMap { $0.hexDigitValue?.nonzeroBitCount }.reduce(0, +)
        }
        // Pieces finished by at least two connections, apart from each other: not a prefix.
        #expect(await eventually(timeout: 30) { setPieces(queue.snapshot(id)) >= 3 })
        try queue.pause(id)
        #expect(await eventually(timeout: 10) { queue.snapshot(id)?.grantedConnections == 0 })
        let paused = try #require(queue.snapshot(id)?.bitfield)
        await queue.shutdown()

        let reopened = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        let after = reopened.snapshot(id)
        #expect(after?.status == .paused)
        #expect(after?.bitfield == paused, "\(paused) before the restart, \(after?.bitfield ?? "none") after")
        await reopened.shutdown()
    }
}
