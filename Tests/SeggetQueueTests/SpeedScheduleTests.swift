import Glibc
import SeggetTestServer
import Synchronization
import Testing

@testable import SeggetQueue

@Suite struct SpeedScheduleTests {
    @Test func parsesAndReadsWindowsAcrossMidnight() throws {
        let s = try SpeedSchedule(parsing: "08:00-18:00=2M, 18:00-08:00=0")
        #expect(s.windows.count == 2)
        #expect(s.limit(atMinute: 8 * 60, otherwise: 5) == 2 << 20)
        #expect(s.limit(atMinute: 18 * 60 - 1, otherwise: 5) == 2 << 20)
        // 18:00 onwards, through midnight, until 07:59: the window of 0 (no limit).
        #expect(s.limit(atMinute: 18 * 60, otherwise: 5) == nil)
        #expect(s.limit(atMinute: 23 * 60 + 59, otherwise: 5) == nil)
        #expect(s.limit(atMinute: 0, otherwise: 5) == nil)
        #expect(s.limit(atMinute: 7 * 60 + 59, otherwise: 5) == nil)
        // Minutes wrap by the day.
        #expect(s.limit(atMinute: 24 * 60 + 9 * 60, otherwise: 5) == 2 << 20)
        #expect(s.description == "08:00-18:00=2M,18:00-08:00=0")
        #expect(try SpeedSchedule(parsing: s.description) == s)
    }

    @Test func gapsFallBackToTheDaemonsLimit() throws {
        let s = try SpeedSchedule(parsing: "22:30-06:00=512k")
        #expect(s.limit(atMinute: 23 * 60, otherwise: 1000) == 512 << 10)
        #expect(s.limit(atMinute: 5 * 60 + 59, otherwise: 1000) == 512 << 10)
        #expect(s.limit(atMinute: 6 * 60, otherwise: 1000) == 1000)
        #expect(s.limit(atMinute: 12 * 60, otherwise: nil) == nil)
        let whole = try SpeedSchedule(parsing: "00:00-24:00=1M")
        #expect(whole.limit(atMinute: 0, otherwise: nil) == 1 << 20 && whole.limit(atMinute: 1439, otherwise: nil) == 1 << 20)
        #expect(try SpeedSchedule(parsing: "").windows.isEmpty)
        #expect(try SpeedSchedule(parsing: "none").description == "none")
    }

    @Test func nextChangeFindsTheNextBoundary() throws {
        let s = try SpeedSchedule(parsing: "08:00-18:00=2M,22:00-06:00=1M")
        #expect(s.minutesUntilNextChange(after: 7 * 60 + 59) == 1)
        #expect(s.minutesUntilNextChange(after: 8 * 60) == 10 * 60)
        #expect(s.minutesUntilNextChange(after: 18 * 60) == 4 * 60)
        // Across midnight: from 23:00 the 22:00-06:00 window ends at 06:00, 7 hours later.
        #expect(s.minutesUntilNextChange(after: 23 * 60) == 7 * 60)
        #expect(try SpeedSchedule(parsing: "00:00-24:00=1M").minutesUntilNextChange(after: 5) == nil)
        #expect(try SpeedSchedule(parsing: "none").minutesUntilNextChange(after: 5) == nil)
    }

    @Test func refusesBadTextWithASentence() {
        for (text, words) in [
            ("08:00-18:00", "not a window"), ("8:00-18:00=1M", "HH:MM"), ("08:00-25:00=1M", "HH:MM"),
            ("08:61-09:00=1M", "HH:MM"), ("08:00-08:00=1M", "starts where it ends"), ("08:00-09:00=fast", "not a rate"),
            ("08:00-12:00=1M,11:00-13:00=2M", "overlap"), ("20:00-04:00=1M,03:00-05:00=0", "overlap"),
            ("08:00-09:00=1M,", "not a window"),
        ] {
            do {
                _ = try SpeedSchedule(parsing: text)
                Issue.record("\(text) was accepted")
            } catch {
                #expect(error.message.contains(words), "\(text): \(error.message)")
            }
        }
    }
}

/// The schedule in the daemon's queue: applied live with an injected clock, kept across a reopen,
/// and the schema migration that stores it.
@Suite(.serialized) struct QueueScheduleTests {
    final class Clock: Sendable {
        let minute = Mutex(0)
        var read: @Sendable () -> Int { { [self] in minute.withLock { $0 } } }
        func set(_ m: Int) { minute.withLock { $0 = m } }
    }

    /// Crossing 08:00 lowers the overall limit from none to 512 KiB/s, and a running download slows
    /// down accordingly; crossing 09:00 lifts it again.
    @Test func crossingABoundaryChangesTheRateLive() async throws {
        let dir = try QueueTempDir()
        let size = 24 << 20
        let bytes = QueueTestFiles.randomBytes(size, seed: 77)
        let server = try TestServer()
        server.addResource(name: "s.bin", bytes: bytes, etag: "\"s\"")
        try server.start()
        defer { server.stop() }
        let clock = Clock()
        clock.set(7 * 60 + 58)
        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.speedSchedule = try SpeedSchedule(parsing: "08:00-09:00=512k")
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings, minuteOfDay: clock.read)
        #expect(queue.currentOverallSpeed == nil)
        queue.start()
        // 2 connections of 4 MiB/s each: 8 MiB/s without the schedule's limit.
        let id = try queue.add(urls: [server.url("s.bin", query: "rate=4m")], options: TaskOptions(connections: 2))
        // Over the time that really passed: a sleep on a loaded machine's cooperative pool may end
        // late, and dividing by the time asked would overstate the rate.
        func rate(over seconds: Double) async -> Double {
            let from = queue.snapshot(id)?.completedLength ?? 0
            let started = monotonicSeconds()
            try? await Task.sleep(for: .seconds(seconds))
            let to = queue.snapshot(id)?.completedLength ?? 0
            return Double(to - from) / (monotonicSeconds() - started)
        }
        #expect(await eventually(timeout: 20) { (queue.snapshot(id)?.completedLength ?? 0) > 1 << 20 })
        let before = await rate(over: 1)
        clock.set(8 * 60)
        queue.applySchedule()
        #expect(queue.currentOverallSpeed == 512 << 10)
        try? await Task.sleep(for: .milliseconds(500))
        let during = await rate(over: 2)
        #expect(before > 2 * Double(1 << 20), "before 08:00: \(before) B/s")
        #expect(during < 0.8 * Double(1 << 20), "from 08:00: \(during) B/s against 512 KiB/s")
        clock.set(9 * 60)
        queue.applySchedule()
        #expect(queue.currentOverallSpeed == nil)
        #expect(await eventually(timeout: 30) { queue.snapshot(id)?.status == .complete })
        #expect(QueueTestFiles.read(queue.snapshot(id)!.path!) == bytes)
        await queue.shutdown()
    }

    /// Outside its windows the queue's own limit applies; changing the schedule is stored, and a
    /// queue opened again without one keeps the stored schedule, while one given replaces it.
    @Test func scheduleIsKeptAcrossReopen() async throws {
        let dir = try QueueTempDir()
        let clock = Clock()
        clock.set(12 * 60)
        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.maxOverallSpeed = 3000
        do {
            let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings, minuteOfDay: clock.read)
            #expect(queue.currentOverallSpeed == 3000)
            var s = queue.settings
            s.speedSchedule = try SpeedSchedule(parsing: "11:00-13:00=1M")
            try queue.changeSettings(s)
            #expect(queue.currentOverallSpeed == 1 << 20)
            await queue.shutdown()
        }
        do {
            let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings, minuteOfDay: clock.read)
            #expect(queue.settings.speedSchedule?.description == "11:00-13:00=1M")
            #expect(queue.currentOverallSpeed == 1 << 20)
            await queue.shutdown()
        }
        settings.speedSchedule = try SpeedSchedule(parsing: "none")
        do {
            let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings, minuteOfDay: clock.read)
            #expect(queue.currentOverallSpeed == 3000)
            await queue.shutdown()
        }
        settings.speedSchedule = nil
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings, minuteOfDay: clock.read)
        #expect(queue.settings.speedSchedule?.windows.isEmpty == true)
        await queue.shutdown()
    }

    /// A stored value this segget does not take (a timeout of 1200 s from a segget with wider ranges,
    /// or written by hand) is left out alone and named; the others still apply. Before, one bad
    /// value made the daemon drop every stored one.
    @Test func aStoredValueOutOfRangeIsLeftOutAlone() {
        let settings = QueueSettings(downloadRoot: "/tmp")
        let stored = DownloadQueue.StoredGlobals([.maxActive: 3, .timeout: 1200, .maxTries: 4, .connectTimeout: 0])
        let s = stored.applied(to: settings)
        #expect(s.maxActive == 3 && s.taskRetries.maxTries == 4)
        #expect(s.taskRetries.timeout == settings.taskRetries.timeout && s.taskRetries.connectTimeout == settings.taskRetries.connectTimeout)
        #expect(stored.refused(by: settings) == [.connectTimeout, .timeout])
        #expect(DownloadQueue.StoredGlobals([.maxActive: 3]).refused(by: settings).isEmpty)
    }

    /// The global settings a client changes are stored, only those that changed, and read back
    /// after a reopen; forgetting one drops it.
    @Test func changedGlobalsAreStoredAndReadBack() async throws {
        let dir = try QueueTempDir()
        let settings = QueueSettings(downloadRoot: dir.path("root"))
        do {
            let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
            #expect(queue.storedGlobals() == .init())
            var s = queue.settings
            s.maxActive = 2
            s.maxOverallSpeed = 3000
            try queue.changeSettings(s)
            s.maxOverallSpeed = nil
            try queue.changeSettings(s)
            await queue.shutdown()
        }
        let queue = try DownloadQueue(databasePath: dir.path("q.sqlite"), settings: settings)
        #expect(queue.storedGlobals() == .init([.maxActive: 2, .maxOverallSpeed: 0]))
        #expect(queue.storedGlobals().applied(to: settings).maxActive == 2)
        try queue.forgetStoredGlobals([.maxActive])
        #expect(queue.storedGlobals() == .init([.maxOverallSpeed: 0]))
        // A database another process holds locked (past the 5 s the queue waits): the failure is
        // said, not dropped, and the value stays.
        let other = try SQLiteDatabase(path: dir.path("q.sqlite"))
        try other.execute("BEGIN EXCLUSIVE")
        #expect(throws: QueueError.self) { try queue.forgetStoredGlobals([.maxOverallSpeed]) }
        // The stored value is still read, and a start that gave the option keeps its own.
        var given = settings
        given.maxOverallSpeed = 5000
        #expect(queue.storedGlobals().without([.maxOverallSpeed]).applied(to: given).maxOverallSpeed == 5000)
        #expect(queue.storedGlobals().applied(to: given).maxOverallSpeed == nil)
        try other.execute("ROLLBACK")
        #expect(queue.storedGlobals() == .init([.maxOverallSpeed: 0]))
        await queue.shutdown()
    }

    /// A database made by the schema before the settings table (version 1, as the previous segget
    /// wrote it) opens with its tasks, gains the table, and stores a schedule.
    @Test func schemaOneDatabaseIsMigrated() async throws {
        let dir = try QueueTempDir()
        let path = dir.path("old.sqlite")
        let options = #"{"headers":[]}"#
        let sql =
            TaskStore.migrations[0]
            + "INSERT INTO tasks (gid, urls, options, status, ord, directory, created_at) VALUES (42, '[\"http://127.0.0.1:1/x\"]', '\(options)', 'paused', 0, '\(dir.path("root"))', 1);"
            + "PRAGMA user_version = 1;"
        let db = try SQLiteDatabase(path: path)
        try db.execute(sql)
        db.close()
        var settings = QueueSettings(downloadRoot: dir.path("root"))
        settings.speedSchedule = try SpeedSchedule(parsing: "01:00-02:00=1k")
        let queue = try DownloadQueue(databasePath: path, settings: settings, minuteOfDay: { 90 })
        #expect(queue.waiting(offset: 0, count: 10).count == 1)
        #expect(queue.currentOverallSpeed == 1024)
        await queue.shutdown()
        settings.speedSchedule = nil
        let again = try DownloadQueue(databasePath: path, settings: settings, minuteOfDay: { 90 })
        #expect(again.settings.speedSchedule?.description == "01:00-02:00=1k")
        await again.shutdown()
        let store = try TaskStore(path: path)
        #expect(try store.setting("speed-schedule") == "01:00-02:00=1k")
        store.close()
    }
}
