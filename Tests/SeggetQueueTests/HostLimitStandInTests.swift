import Segget
import SeggetTestServer
import Testing

@testable import SeggetQueue

/// A daemon task's main URL refused for the host's connection limit ("not now", while the host's
/// other tasks hold its slots) is waited for, not given up for a mirror standing in. The mirror here
/// holds another version of the file (same length, other validators), so a task that let it stand
/// in saved the mirror's bytes, where a mirror joining the main URL's fetch is dropped for its
/// validators. Before, 4 of 6 tasks saved the mirror's file: the first look at the file was refused,
/// the task's own probe asked again at once without waiting for a slot, was refused again, and the
/// mirror stood in.
@Suite(.serialized) struct HostLimitStandInTests {
    /// `named`: each task has its `out`, so its download's own probe is its first request; without,
    /// a first look (`Download.prepare`) names the file, and its refusal is handed on to the probe.
    @Test(arguments: [true, false]) func aRefusalForTheHostsLimitWaitsForASlotAndNoMirrorStandsIn(named: Bool) async throws {
        let dir = try QueueTempDir()
        let size = 1 << 20
        let mainBytes = QueueTestFiles.randomBytes(size, seed: 71)
        let mirrorBytes = QueueTestFiles.randomBytes(size, seed: 72)
        let main = try TestServer()
        main.addResource(name: "f.bin", bytes: mainBytes, etag: "\"main-1\"", lastModified: "Mon, 02 Nov 2026 10:00:00 GMT")
        try main.start()
        defer { main.stop() }
        let mirror = try TestServer()
        mirror.addResource(name: "f.bin", bytes: mirrorBytes, etag: "\"other-7\"", lastModified: "Wed, 01 Jan 2020 00:00:00 GMT")
        try mirror.start()
        defer { mirror.stop() }

        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.maxActive = 6
        settings.connectionBudget = 32
        settings.defaultConnections = 2
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        var ids: [TaskID] = []
        for i in 0..<6 {
            // At most 2 requests of this client at once, whatever the target (`scope=client`).
            let url = main.url("f.bin", query: "maxconc=2&scope=client&retryafter=1&rate=4m&t=\(i)")
            let options = named ? TaskOptions(outputName: "t\(i).bin") : TaskOptions()
            ids.append(try queue.add(urls: [url, mirror.url("f.bin")], options: options))
        }
        queue.start()
        let done = await eventually(timeout: 60) {
            ids.allSatisfy { [.complete, .error].contains(queue.snapshot($0)?.status) }
        }
        #expect(done)
        for (i, id) in ids.enumerated() {
            let snapshot = queue.snapshot(id)
            #expect(snapshot?.status == .complete, "task \(i) (named \(named)): \(String(describing: snapshot?.status))")
            let saved = snapshot?.path.flatMap(QueueTestFiles.read)
            let fromMain = saved == mainBytes
            #expect(fromMain, "task \(i) (named \(named)) saved \(saved == mirrorBytes ? "the mirror's other version" : "other bytes")")
        }
        // The host was pushed past its limit by the first looks, not by a request sent again at once
        // after each refusal.
        #expect(main.concurrency.rejected <= 5, "\(main.concurrency)")
        await queue.shutdown()
    }

    /// A first look that failed (a 503) is the task's probe's first attempt: with a mirror left to
    /// try, the mirror stands in at once, as on the command line, and the main URL is not asked
    /// again straight away (it was, once, with no wait: a second request the rule of no retries
    /// while another URL is left did not allow, sent whatever `Retry-After` said).
    @Test func aFailedFirstLookWithAMirrorLeftGoesToTheMirrorWithoutAskingAgain() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(1 << 20, seed: 73)
        // The same file and validators on both.
        let main = try QueueIntegrationTests.server(["f.bin": bytes])
        defer { main.stop() }
        let mirror = try QueueIntegrationTests.server(["f.bin": bytes])
        defer { mirror.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        let url = main.url("f.bin", mode: .status, query: "code=503&times=1&retryafter=30")
        // No `out`: the task's first look at the file (`Download.prepare`) names it.
        let id = try queue.add(urls: [url, mirror.url("f.bin")], options: TaskOptions())
        queue.start()
        let done = await eventually(timeout: 20) { [.complete, .error].contains(queue.snapshot(id)?.status) }
        #expect(done)
        #expect(queue.snapshot(id)?.status == .complete)
        let saved = queue.snapshot(id)?.path.flatMap(QueueTestFiles.read)
        let same = saved == bytes
        #expect(same)
        #expect(main.requests.count == 1, "the main URL was asked \(main.requests.map(\.description))")
        await queue.shutdown()
    }

    /// A mirror standing in on another host counts in that host's budget, not in the main URL's:
    /// under `max-connection-per-server=2`, with another task holding one of the main host's two
    /// slots, the stand-in still gets its two connections on its own host. Before, it took the main
    /// host's one free slot and ran on one connection.
    @Test func aStandInOnAnotherHostUsesThatHostsBudget() async throws {
        let dir = try QueueTempDir()
        let slow = QueueTestFiles.randomBytes(2 << 20, seed: 74)
        let gone = QueueTestFiles.randomBytes(2 << 20, seed: 75)
        let main = try QueueIntegrationTests.server(["slow.bin": slow])
        defer { main.stop() }
        let mirror = try QueueIntegrationTests.server(["gone.bin": gone])
        defer { mirror.stop() }
        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.maxActive = 2
        settings.maxConnectionsPerServer = 2
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        var one = TaskOptions(outputName: "slow.bin")
        one.connections = 1
        let a = try queue.add(urls: [main.url("slow.bin", query: "rate=256k")], options: one)
        queue.start()
        #expect(await eventually(timeout: 10) { (queue.snapshot(a)?.completedLength ?? 0) > 0 })
        // Not on the main host (404): the mirror stands in.
        var two = TaskOptions(outputName: "gone.bin")
        two.connections = 2
        let b = try queue.add(urls: [main.url("gone.bin"), mirror.url("gone.bin", query: "rate=1m")], options: two)
        #expect(await eventually(timeout: 30) { [.complete, .error].contains(queue.snapshot(b)?.status) })
        #expect(queue.snapshot(b)?.status == .complete)
        let saved = queue.snapshot(b)?.path.flatMap(QueueTestFiles.read)
        let same = saved == gone
        #expect(same)
        #expect(mirror.peakConnections >= 2, "the stand-in had \(mirror.peakConnections) connection(s) at once")
        #expect(queue.snapshot(a)?.status == .active, "the slow task is still running: the two ran side by side")
        await queue.shutdown()
    }
}
