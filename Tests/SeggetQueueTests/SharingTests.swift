import Glibc
import Segget
import SeggetTestServer
import Testing

@testable import SeggetQueue

/// How the running tasks share the daemon's connections and its overall speed limit, on real
/// downloads from the test server (exploratory run 7 found both shared badly: a raised
/// `max-concurrent-downloads` started nothing, and one task took the whole overall limit).
@Suite(.serialized) struct SharingTests {
    /// Total bytes of `ids` now.
    static func bytes(_ queue: DownloadQueue, _ ids: [TaskID]) -> [Int64] {
        ids.map { queue.snapshot($0)?.completedLength ?? 0 }
    }

    @Test func raisingMaxActiveStartsWaitingTasksAtOnce() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(48 << 20, seed: 31)
        let server = try QueueIntegrationTests.server(["slow.bin": bytes])
        defer { server.stop() }
        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.maxActive = 2
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        queue.start()
        // 256 KiB/s a connection: each task takes many seconds whatever it is given.
        let ids = try (0..<6).map { n in
            try queue.add(urls: [server.url("slow.bin", query: "rate=256k")], options: TaskOptions(outputName: "s\(n).bin"))
        }
        #expect(await eventually(timeout: 5) { queue.active().count == 2 })
        settings.maxActive = 6
        try queue.changeSettings(settings)
        #expect(await eventually(timeout: 3) { queue.active().count == 6 }, "\(queue.active().count) active after the raise")
        #expect(queue.waiting(offset: 0, count: 10).isEmpty)
        // The first two came down from 8 of their own each to 2 (16 over 6 slots) and call the rest
        // back: every task gets a connection (all on one host, whose cap of 16 they had filled) and
        // the connections in use come back within the budget.
        let counts = { ids.map { queue.snapshot($0)?.connections ?? 0 } }
        #expect(await eventually(timeout: 20) { counts().allSatisfy { $0 >= 1 } && counts().reduce(0, +) <= 16 }, "\(counts())")
        for id in ids { try queue.remove(id, force: true) }
        await queue.shutdown()
    }

    /// A task alone starts with what it asks for: its own share and, borrowed at once, the rest
    /// (it started on its own 3 and borrowed later, which through WAN link a took 1.4 times the
    /// command line's time).
    @Test func aLoneTaskStartsWithTheConnectionsItAsksFor() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(16 << 20, seed: 35)
        let server = try QueueIntegrationTests.server(["one.bin": bytes])
        defer { server.stop() }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: QueueSettings(downloadRoot: dir.path("root")))
        queue.start()
        let id = try queue.add(urls: [server.url("one.bin", query: "rate=512k")], options: TaskOptions())
        #expect(await eventually(timeout: 3) { (queue.snapshot(id)?.connections ?? 0) == 8 },
                "\(queue.snapshot(id)?.connections ?? -1) connections")
        // The first requests split the file in 8 equal runs (borrowed one a pass later, the loans
        // would steal from the 3 runs of its own, at other offsets).
        try? await Task.sleep(for: .seconds(1))
        let starts = server.requests.filter { $0.path.hasSuffix("one.bin") }.compactMap { r -> Int? in
            guard let range = r.headers["range"], range.hasPrefix("bytes=") else { return nil }
            return Int(range.dropFirst(6).prefix { $0 != "-" })
        }
        let eighth = (16 << 20) / 8
        #expect(Set(starts).isSuperset(of: (1..<8).map { $0 * eighth }), "range starts \(starts.sorted())")
        #expect(starts.count <= 9, "\(starts.count) range requests")
        try queue.remove(id, force: true)
        // Its loans and its own share are back once it has ended.
        #expect(await eventually(timeout: 10) { queue.connectionLender.spare == 16 }, "spare \(queue.connectionLender.spare)")
        await queue.shutdown()
    }

    /// A task alone borrows what the budget has spare; one that starts beside it gets its own
    /// share back from those loans within a chunk's time, without a restart, and the connections
    /// in use settle within the budget. Both files come out whole.
    @Test func aTaskStartingLaterGetsItsShareFromTheLoans() async throws {
        let dir = try QueueTempDir()
        let a = QueueTestFiles.randomBytes(16 << 20, seed: 32)
        let b = QueueTestFiles.randomBytes(16 << 20, seed: 33)
        let server = try QueueIntegrationTests.server(["a.bin": a, "b.bin": b])
        defer { server.stop() }
        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.maxActive = 2
        settings.connectionBudget = 4
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        queue.start()
        let first = try queue.add(urls: [server.url("a.bin", query: "rate=1m")], options: TaskOptions(connections: 4))
        // Its own 2 (4 over 2 slots) and 2 borrowed.
        #expect(await eventually(timeout: 5) { (queue.snapshot(first)?.connections ?? 0) == 4 })
        let second = try queue.add(urls: [server.url("b.bin", query: "rate=1m")], options: TaskOptions(connections: 4))
        #expect(await eventually(timeout: 4) {
            let (x, y) = (queue.snapshot(first)?.connections ?? 0, queue.snapshot(second)?.connections ?? 0)
            return x <= 2 && y == 2
        }, "connections \(queue.snapshot(first)?.connections ?? -1) and \(queue.snapshot(second)?.connections ?? -1)")
        #expect(await eventually(timeout: 40) {
            queue.snapshot(first)?.status == .complete && queue.snapshot(second)?.status == .complete
        })
        #expect(QueueTestFiles.read(queue.snapshot(first)!.path!) == a)
        #expect(QueueTestFiles.read(queue.snapshot(second)!.path!) == b)
        #expect(await eventually(timeout: 10) { queue.connectionLender.spare == 4 }, "spare \(queue.connectionLender.spare)")
        await queue.shutdown()
    }

    /// Three equal tasks under an overall limit of 3 MiB/s each get about a third of it (before, one
    /// got about 3,100 KiB/s and the others 0-12).
    @Test func theOverallLimitIsSharedAmongTheRunningTasks() async throws {
        let dir = try QueueTempDir()
        let bytes = QueueTestFiles.randomBytes(48 << 20, seed: 34)
        let server = try QueueIntegrationTests.server(["big.bin": bytes])
        defer { server.stop() }
        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.maxOverallSpeed = 3 << 20
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        queue.start()
        let ids = try (0..<3).map { n in
            try queue.add(
                urls: [server.url("big.bin", query: "rate=4m")], options: TaskOptions(outputName: "b\(n).bin", connections: 2))
        }
        #expect(await eventually(timeout: 5) { Self.bytes(queue, ids).allSatisfy { $0 > 0 } },
                "\(ids.map { queue.snapshot($0)?.errorMessage ?? "-" })")
        try? await Task.sleep(for: .seconds(2))
        let before = Self.bytes(queue, ids)
        let started = monotonicSeconds()
        try? await Task.sleep(for: .seconds(3))
        let after = Self.bytes(queue, ids)
        let seconds = monotonicSeconds() - started
        let rates = zip(after, before).map { Double($0 - $1) / seconds }
        let kib = rates.map { Int($0 / 1024) }
        #expect(rates.allSatisfy { $0 >= 0.5 * Double(1 << 20) }, "KiB/s each: \(kib)")
        #expect(rates.reduce(0, +) <= 3.5 * Double(1 << 20), "KiB/s each: \(kib)")
        for id in ids { try queue.remove(id, force: true) }
        await queue.shutdown()
    }
}
