import Glibc
import Segget
import SeggetTestServer
import Testing

@testable import SeggetQueue

/// A URL added again after its task stopped unfinished (failed, or removed) continues the partial
/// download that task left: a front-end's "retry" (AriaNg's adds the URL again with the task's
/// options) started over under a numbered name, beside the bytes already saved.
@Suite(.serialized) struct AddedAgainTests {
    @Test func aRemovedTasksPartialIsContinuedByTheSameURLAddedAgain() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(6_000_000, seed: 21)
        let server = try TestServer()
        server.addResource(name: "again.bin", bytes: bytes, etag: "\"again-1\"")
        try server.start()
        defer { server.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        queue.start()
        let url = server.url("again.bin", query: "rate=1m")
        let first = try queue.add(urls: [url], options: TaskOptions(connections: 2))
        #expect(await eventually(timeout: 30) { (queue.snapshot(first)?.completedLength ?? 0) >= 2 << 20 })
        try queue.remove(first, force: true)
        #expect(await eventually(timeout: 10) { queue.snapshot(first)?.status == .removed })
        let path = try #require(queue.snapshot(first)?.path)
        let saved = try #require(queue.snapshot(first)?.completedLength)
        let sentBefore = server.bodyBytesSent

        let second = try queue.add(urls: [url], options: TaskOptions(connections: 2))
        #expect(await eventually(timeout: 60) { queue.snapshot(second)?.status == .complete })
        #expect(queue.snapshot(second)?.path == path, "the same name, not a numbered copy")
        let identical = QueueTestFiles.read(path) == bytes
        #expect(identical)
        let sentAgain = server.bodyBytesSent - sentBefore
        #expect(sentAgain <= Int64(bytes.count) - saved + (1 << 20), "\(sentAgain) bytes sent again, \(saved) were saved")
        await queue.shutdown()
    }

    /// A partial download of another URL under the name, or one a paused task holds, is not taken.
    @Test func anotherURLsPartialOrAHeldOneGetsANumberedName() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(4_000_000, seed: 22)
        let server = try TestServer()
        server.addResource(name: "same.bin", bytes: bytes, etag: "\"same-1\"")
        try server.start()
        defer { server.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        queue.start()
        let slow = server.url("same.bin", query: "rate=512k")
        let first = try queue.add(urls: [slow], options: TaskOptions(connections: 2))
        #expect(await eventually(timeout: 30) { (queue.snapshot(first)?.completedLength ?? 0) >= 1 << 20 })
        try queue.pause(first, force: true)
        #expect(await eventually(timeout: 10) { queue.snapshot(first)?.status == .paused })
        let held = try #require(queue.snapshot(first)?.path)

        // The same URL while the paused task holds the partial: a name of its own.
        let second = try queue.add(urls: [slow], options: TaskOptions(connections: 2))
        #expect(await eventually(timeout: 10) { queue.snapshot(second)?.path != nil })
        #expect(queue.snapshot(second)?.path != held)
        try queue.remove(second, force: true)
        // Another URL (another query) of the same name, once the partial is no task's.
        try queue.remove(first, force: true)
        #expect(await eventually(timeout: 10) { queue.snapshot(first)?.status == .removed })
        let other = try queue.add(urls: [server.url("same.bin", query: "v=2")], options: TaskOptions(connections: 2))
        #expect(await eventually(timeout: 30) { queue.snapshot(other)?.status == .complete })
        #expect(queue.snapshot(other)?.path != held, "another URL's partial was taken")
        let identical = QueueTestFiles.read(try #require(queue.snapshot(other)?.path)) == bytes
        #expect(identical)
        await queue.shutdown()
    }

    /// A URL added again after its task finished, once the server's file has changed length, is
    /// downloaded anew under a numbered name (as aria2 does), not taken as complete from the old
    /// file (exploratory run 3: the daemon answered `complete` with the stale bytes).
    /// At another length, or at the same length with another ETag.
    @Test(arguments: [60_000, 50_000])
    func aFinishedURLAddedAgainAfterTheServersFileChangedIsDownloadedAgain(newLength: Int) async throws {
        let dir = try QueueTempDir()
        let old = QueueTestFiles.randomBytes(50_000, seed: 23)
        let new = QueueTestFiles.randomBytes(newLength, seed: 24)
        let server = try TestServer()
        server.addResource(name: "changes.bin", bytes: old, etag: "\"changes-1\"")
        try server.start()
        defer { server.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        queue.start()
        let url = server.url("changes.bin")
        let first = try queue.add(urls: [url], options: TaskOptions(connections: 2))
        #expect(await eventually(timeout: 30) { queue.snapshot(first)?.status == .complete })
        let oldPath = try #require(queue.snapshot(first)?.path)

        // Unchanged on the server: taken as it is, nothing fetched again.
        let same = try queue.add(urls: [url], options: TaskOptions(connections: 2))
        #expect(await eventually(timeout: 30) { queue.snapshot(same)?.status == .complete })
        #expect(queue.snapshot(same)?.path == oldPath, "an unchanged file is this URL's download")

        server.replaceResource(name: "changes.bin", bytes: new, etag: "\"changes-2\"")
        let second = try queue.add(urls: [url], options: TaskOptions(connections: 2))
        #expect(await eventually(timeout: 30) { queue.snapshot(second)?.status == .complete })
        let newPath = try #require(queue.snapshot(second)?.path)
        #expect(newPath != oldPath, "the changed file was taken as complete from the old one")
        #expect(queue.snapshot(second)?.totalLength == Int64(new.count))
        let fresh = QueueTestFiles.read(newPath) == new
        let kept = QueueTestFiles.read(oldPath) == old
        #expect(fresh)
        #expect(kept, "the earlier task's file is left as it was")
        await queue.shutdown()
    }
}
