import Glibc
import Segget
import SeggetTestServer
import SeggetVerify
import Testing

@testable import SeggetQueue

/// Options other than the speed cap changed on a running task (aria2's `changeOption`) restart its
/// download from what it saved, as aria2 does. Before, they were stored and answered "OK" but the
/// running download went on with the old ones: a task told to drop a wrong checksum still failed on
/// it at the end.
@Suite(.serialized) struct LiveOptionsTests {
    static func sha256(_ bytes: [UInt8]) -> ExpectedDigest {
        let d = Digester(.sha256)
        d.update(bytes)
        return ExpectedDigest(algorithm: .sha256, bytes: d.finalize())!
    }

    @Test func aRunningTasksNewChecksumIsTheOneItIsCheckedAgainst() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(12 << 20, seed: 98)
        let server = try QueueIntegrationTests.server(["big.bin": bytes])
        defer { server.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        var options = TaskOptions(outputName: "big.bin")
        options.connections = 2
        options.checksums = [try ExpectedDigest(parsing: "sha-256=" + String(repeating: "ab", count: 32))]
        // 2 × 2 MiB/s: about 3 s for the file.
        let id = try queue.add(urls: [server.url("big.bin", query: "rate=2m")], options: options)
        queue.start()
        #expect(await eventually(timeout: 10) { (queue.snapshot(id)?.completedLength ?? 0) > 2 << 20 })
        let requestsBefore = server.requests.count
        options.checksums = [Self.sha256(bytes)]
        try queue.changeOptions(id, options)
        #expect(await eventually(timeout: 30) { queue.snapshot(id)?.status.isStopped == true })
        let done = try #require(queue.snapshot(id))
        #expect(done.status == .complete, "\(done.status) \(done.errorMessage ?? "")")
        #expect(QueueTestFiles.read(try #require(done.path)) == bytes)
        // Restarted from what it had: more requests, but not the whole file again.
        #expect(server.requests.count > requestsBefore)
        #expect(server.bodyBytesSent < Int64(bytes.count) + (4 << 20), "\(server.bodyBytesSent)")
        await queue.shutdown()
    }

    /// A small file (the probe brings it whole) that fails its checksum: nothing is kept, but the
    /// task answers the file's length, as aria2 does (exploratory run 3: `totalLength` "0").
    @Test func aSmallFileThatFailsItsChecksumKeepsItsLength() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(100_000, seed: 97)
        let server = try QueueIntegrationTests.server(["small.bin": bytes])
        defer { server.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        var options = TaskOptions(outputName: "small.bin")
        options.checksums = [try ExpectedDigest(parsing: "sha-256=" + String(repeating: "ab", count: 32))]
        let id = try queue.add(urls: [server.url("small.bin")], options: options)
        queue.start()
        #expect(await eventually(timeout: 10) { queue.snapshot(id)?.status.isStopped == true })
        let failed = try #require(queue.snapshot(id))
        #expect(failed.status == .error && failed.errorCode == 32, "\(failed.status) \(failed.errorMessage ?? "")")
        #expect(failed.totalLength == Int64(bytes.count), "\(failed.totalLength)")
        #expect(failed.completedLength == 0)
        await queue.shutdown()
    }

    /// The directory getOption answers (the root, for a task added without one), written back to a
    /// running task, is no change: accepted, nothing restarted. It was refused as a move ("has already
    /// started writing its file"), so a front-end sending its whole option form back got error 1.
    /// A real move of a running task is refused, saying why.
    @Test func aRunningTasksOwnDirectoryWrittenBackIsNoChange() async throws {
        let (dir, server, queue, id, options0) = try await Self.runningTask(seed: 99)
        defer { withExtendedLifetime(dir) { server.stop() } }
        var options = options0
        let root = try #require(queue.snapshot(id)?.directory)
        options.directory = root
        try queue.changeOptions(id, options)
        #expect(queue.snapshot(id)?.status == .active, "written back, the root restarted the task")
        options.directory = root + "/"
        try queue.changeOptions(id, options)
        #expect(queue.snapshot(id)?.status == .active)
        options.directory = "sub"
        #expect { try queue.changeOptions(id, options) } throws: { ($0 as? QueueError)?.message.contains("started writing its file") == true }
        try queue.remove(id, force: true)
        await queue.shutdown()
    }

    static let settings = QueueSettings(downloadRoot: "/srv")

    /// A queue running one task: 8 MiB at 1 MiB/s a connection over 2 connections, past its first
    /// 256 KiB. The caller stops the server (the directory lives as long as it keeps it).
    static func runningTask(seed: UInt64) async throws
        -> (QueueTempDir, TestServer, DownloadQueue, TaskID, TaskOptions)
    {
        let dir = try QueueTempDir()
        let server = try QueueIntegrationTests.server(["big.bin": QueueTestFiles.randomBytes(8 << 20, seed: seed)])
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        var options = TaskOptions(outputName: "big.bin")
        options.connections = 2
        let id = try queue.add(urls: [server.url("big.bin", query: "rate=1m")], options: options)
        queue.start()
        #expect(await eventually(timeout: 10) { (queue.snapshot(id)?.completedLength ?? 0) > 256 << 10 })
        return (dir, server, queue, id, options)
    }

    /// The queue's tries and time limits (`changeGlobalOption`) reach a task that sets none, and a
    /// task's own win, laid on in one go: a queue without a limit on tries and with no wait, under a
    /// task of 3 tries, waits 0 s (the 1 s floor of a retry without end is the download's, not a
    /// layer's), and without the task's own the floor holds.
    @Test func theQueuesTriesAndLimitsReachTasksThatSetNone() async throws {
        let dir = try QueueTempDir()
        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.taskRetries.maxTries = 0
        settings.taskRetries.retryWait = 0
        settings.taskRetries.timeout = 5
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        func options(_ o: TaskOptions) -> DownloadOptions {
            let r = TaskRecord(
                id: TaskID(7), urls: ["http://127.0.0.1:1/f.bin"], options: o, status: .waiting, order: 0,
                directory: dir.path("root"), path: nil, createdAt: 0)
            return queue.downloadOptions(r, settings: queue.settings, grant: nil)
        }
        let plain = options(TaskOptions())
        #expect(plain.retries == OptionSchema.unlimitedRetries && plain.retryWait == 1)
        #expect(plain.transfer.stallTimeout == 5 && plain.transfer.connectTimeout == DownloadOptions().transfer.connectTimeout)
        var own = TaskOptions()
        own.maxTries = 3
        own.stallTimeout = 7
        let mine = options(own)
        #expect(mine.retries == 2 && mine.retryWait == 0 && mine.transfer.stallTimeout == 7, "\(mine.retries) \(mine.retryWait) \(mine.transfer.stallTimeout)")
        await queue.shutdown()
    }

    /// A running download keeps the queue's values it started with: after `changeGlobalOption`
    /// lowers the timeout, the same timeout given to the task as its own is a change, and restarts
    /// it with that value (compared with the queue's values now, it was taken for no change and the
    /// download went on with the old one).
    @Test func aRunningTaskIsComparedWithWhatItStartedWith() async throws {
        let (dir, server, queue, id, options0) = try await Self.runningTask(seed: 91)
        defer { withExtendedLifetime(dir) { server.stop() } }
        var options = options0
        func runsWith() -> Double? { queue.core.withLock { $0.live[id]?.runsWith.stallTimeout } }
        #expect(runsWith() == DownloadOptions().transfer.stallTimeout)
        var s = queue.settings
        s.taskRetries.timeout = 5
        try queue.changeSettings(s)
        #expect(runsWith() == DownloadOptions().transfer.stallTimeout, "a queue-wide change restarted a running task")
        options.stallTimeout = 5
        try queue.changeOptions(id, options)
        #expect(await eventually(timeout: 10) { runsWith() == 5 })
        try queue.remove(id, force: true)
        await queue.shutdown()
    }

    /// An option left to the daemon and the daemon's value for it given explicitly are the same
    /// download: no restart. A different value is a change; so is a task's own value where the queue's
    /// default moved.
    @Test func theDaemonsOwnValueGivenIsNoChange() {
        var s = Self.settings
        s.defaultConnections = 5
        s.taskRetries.timeout = 33
        let unset = TaskOptions(outputName: "x")
        var given = unset
        given.connections = 5
        given.maxConnectionsPerServer = 16
        given.maxTries = 6
        given.retryWait = 1
        given.stallTimeout = 33
        given.connectTimeout = 15
        given.userAgent = DownloadOptions().transfer.userAgent
        #expect(!DownloadQueue.needsRestart(from: unset, to: given, settings: s))
        #expect(!DownloadQueue.needsRestart(from: given, to: unset, settings: s))
        for change in [\TaskOptions.stallTimeout, \.connectTimeout, \.retryWait] {
            var other = given
            other[keyPath: change] = 7
            #expect(DownloadQueue.needsRestart(from: unset, to: other, settings: s))
        }
        var fewer = given
        fewer.connections = 4
        #expect(DownloadQueue.needsRestart(from: unset, to: fewer, settings: s))
        var noLimit = given
        noLimit.maxTries = 0
        #expect(DownloadQueue.needsRestart(from: unset, to: noLimit, settings: s))
        s.taskRetries.timeout = 20
        #expect(DownloadQueue.needsRestart(from: unset, to: given, settings: s))
    }

    /// A change of nothing but the speed cap, or no change at all, does not restart the download.
    @Test func anUnchangedOrSpeedOnlyChangeDoesNotRestart() {
        var a = TaskOptions(outputName: "x", headers: ["A: 1"], connections: 4)
        var b = a
        #expect(!DownloadQueue.needsRestart(from: a, to: b, settings: Self.settings))
        b.maxSpeed = 1000
        #expect(!DownloadQueue.needsRestart(from: a, to: b, settings: Self.settings))
        b.connections = 8
        #expect(DownloadQueue.needsRestart(from: a, to: b, settings: Self.settings))
        a.maxSpeed = 5
        b = a
        b.headers = []
        #expect(DownloadQueue.needsRestart(from: a, to: b, settings: Self.settings))
    }
}
