import Glibc
import Segget
import Testing

@testable import SeggetQueue

/// The options column across versions: a database written by segget at e393d89 (schema 2,
/// `Fixtures/queue-v2.sqlite`, see its README) opens with every task's every option, and the shape
/// written now (``StoredOptions``) reads back what was written.
@Suite struct OptionsMigrationTests {
    static let fixture: String = {
        var parts = String(#filePath).split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast()
        return parts.joined(separator: "/") + "/Fixtures/queue-v2.sqlite"
    }()

    static let sha = "sha-256=" + String(repeating: "ab", count: 32)
    static let md5 = "md5=" + String(repeating: "0f", count: 16)

    /// The options the fixture's tasks were added with, by URL.
    static func expected() throws -> [String: TaskOptions] {
        [
            "http://127.0.0.1:1/every.iso": TaskOptions(
                directory: "sub/dir", outputName: "every.iso", headers: ["X-One: 1", "Authorization: Bearer abc"],
                userAgent: "agent/1.0", referer: "https://example.com/page", proxy: "http://127.0.0.1:3128",
                connections: 12, maxSpeed: 2_000_000, checksums: [try ExpectedDigest(parsing: sha)],
                maxConnectionsPerServer: 4),
            "http://127.0.0.1:1/none.bin": TaskOptions(),
            "http://127.0.0.1:1/some.bin": TaskOptions(
                headers: ["X-Two: 2"], referer: "r", checksums: [try ExpectedDigest(parsing: md5)]),
        ]
    }

    /// A copy of the fixture in a fresh directory (the test must not change the committed file).
    static func copy(into dir: QueueTempDir) throws -> String {
        let path = dir.path("queue.sqlite")
        guard system("cp '\(fixture)' '\(path)'") == 0 else { throw QueueTestError("cannot copy \(fixture)") }
        return path
    }

    @Test func fixtureIsSchemaTwo() throws {
        let db = try SQLiteDatabase(path: Self.fixture)
        defer { db.close() }
        #expect(try db.integer("PRAGMA user_version") == 2)
    }

    @Test func everyTaskKeepsEveryOption() async throws {
        let dir = try QueueTempDir()
        let path = try Self.copy(into: dir)
        let queue = try DownloadQueue(databasePath: path, settings: QueueSettings(downloadRoot: dir.path("root")))
        let tasks = queue.waiting(offset: 0, count: 10)
        let expected = try Self.expected()
        #expect(tasks.count == 3)
        for t in tasks {
            #expect(t.status == .paused)
            #expect(t.options == expected[t.urls[0]], "\(t.urls[0])")
        }
        #expect(tasks.first { $0.urls[0].hasSuffix("every.iso") }?.urls.count == 2)
        #expect(tasks.first { $0.urls[0].hasSuffix("every.iso") }?.directory == "/tmp/segget-fixture-root/sub/dir")
        #expect(queue.settings.speedSchedule?.description == "01:00-02:00=1k")
        await queue.shutdown()

        // Migrated once: the rows are in the new shape, the version is the latest (3 rewrote the
        // options, 4 added the pieces column), and a second open reads the same.
        let db = try SQLiteDatabase(path: path)
        #expect(try db.integer("PRAGMA user_version") == 4)
        let s = try db.prepare("SELECT options FROM tasks")
        var rows: [String] = []
        while try s.step() { rows.append(s.text(0) ?? "") }
        db.close()
        #expect(rows.count == 3)
        #expect(rows.contains(#"{"v":1}"#))
        #expect(rows.contains(#"{"checksum":["\#(Self.md5)"],"header":["X-Two: 2"],"referer":"r","v":1}"#))
        let again = try DownloadQueue(databasePath: path, settings: QueueSettings(downloadRoot: dir.path("root")))
        for t in again.waiting(offset: 0, count: 10) { #expect(t.options == expected[t.urls[0]]) }
        await again.shutdown()
    }

    @Test func storedShapeRoundTripsEveryOption() throws {
        for options in try Self.expected().values {
            let text = try StoredOptions.encoded(options)
            #expect(try StoredOptions.decoded(text) == options, "\(text)")
        }
        // The fixture's fullest task with the options added since (retries and time limits): every
        // option of the schema is set on it, so the round trip covers each one.
        var every = try Self.expected()["http://127.0.0.1:1/every.iso"]!
        every.maxTries = 0
        every.retryWait = 2.5
        every.stallTimeout = 30
        every.connectTimeout = 5
        #expect(every.fields.map(\.key) == OptionSchema.all.map(\.key))
        let text = try StoredOptions.encoded(every)
        #expect(try StoredOptions.decoded(text) == every, "\(text)")
    }

    @Test(arguments: [
        #"{"v":2,"referer":"r"}"#, #"{"referer":"r"}"#, #"{"v":1,"colour":"blue"}"#, #"{"v":1,"split":"0"}"#,
        #"{"v":1,"header":"X: 1"}"#, #"{"v":1,"referer":"a\r\nX-Evil: 1"}"#,
    ])
    func unreadableOptionsAreRefused(_ text: String) {
        #expect(throws: (any Error).self) { try StoredOptions.decoded(text) }
    }

    /// A row of a later shape, or with an option this segget does not know, is left aside with a
    /// sentence that says so (not read as empty options, and not a refusal of the whole queue): the
    /// queue opens with the other tasks, the row stays byte for byte as it was through adds, removals
    /// and a restart, and its GID and file are kept from new tasks.
    @Test(arguments: [
        (#"{"v":2,"referer":"r"}"#, "its options are of shape 2, not this segget's 1 (written by a newer segget?)"),
        (#"{"v":1,"referer":"r","tos":"8"}"#, "its option 'tos' cannot be read: an option this segget does not know (written by a newer segget?)"),
    ])
    func aRowOfANewerSeggetIsLeftAsideUntouched(_ row: String, _ why: String) async throws {
        let dir = try QueueTempDir()
        let path = try Self.copy(into: dir)
        _ = try TaskStore(path: path)  // migrates
        func stored() throws -> [String] {
            let db = try SQLiteDatabase(path: path)
            defer { db.close() }
            let s = try db.prepare("SELECT gid, urls, options, status, ord, directory, path, completed_length FROM tasks WHERE urls LIKE '%none.bin%'")
            var out: [String] = []
            while try s.step() { out.append((0..<8).map { s.text($0) ?? "NULL" }.joined(separator: "|")) }
            return out
        }
        do {
            let db = try SQLiteDatabase(path: path)
            try db.execute("UPDATE tasks SET options = '\(row)', path = '\(dir.path("root/none.bin"))' WHERE urls LIKE '%none.bin%'")
            db.close()
        }
        let before = try stored()
        #expect(before.count == 1)
        let queue = try DownloadQueue(databasePath: path, settings: QueueSettings(downloadRoot: dir.path("root")))
        let aside = try #require(queue.tasksLeftAside.first)
        #expect(queue.tasksLeftAside.count == 1)
        #expect(aside.why == why, "\(aside.why)")
        #expect(aside.path == dir.path("root/none.bin"))
        let listed = queue.waiting(offset: 0, count: 10)
        #expect(listed.map { $0.urls[0] }.sorted() == ["http://127.0.0.1:1/every.iso", "http://127.0.0.1:1/some.bin"])
        #expect(queue.snapshot(TaskID(gid: aside.gid)!) == nil)
        // Its GID and its file are not given to a new task; other adds and removals leave it alone.
        #expect {
            try queue.add(urls: ["http://127.0.0.1:1/new.bin"], options: TaskOptions(), paused: true, id: TaskID(gid: aside.gid)!)
        } throws: { error in
            "\(error)".contains("is already a task's")
        }
        // Named from the URL when it starts: the same name as the left-aside task's file is numbered.
        #expect(DownloadQueue.freePath(
            name: "none.bin", directory: dir.path("root"), records: [:], except: TaskID(7), url: "http://127.0.0.1:1/none.bin",
            leftAside: queue.tasksLeftAside) == dir.path("root/none.1.bin"))
        #expect {
            try queue.add(urls: ["http://127.0.0.1:1/new.bin"], options: TaskOptions(outputName: "none.bin"), paused: true)
        } throws: { error in
            "\(error)".contains("Task \(aside.gid), which this segget cannot read")
        }
        let added = try queue.add(urls: ["http://127.0.0.1:1/new.bin"], options: TaskOptions(), paused: true)
        #expect {
            try queue.changeOptions(added, TaskOptions(outputName: "none.bin"))
        } throws: { error in
            "\(error)".contains("Task \(aside.gid), which this segget cannot read")
        }
        for t in listed { try queue.remove(t.id) }
        try queue.remove(added)
        await queue.shutdown()
        #expect(try stored() == before)
        let again = try DownloadQueue(databasePath: path, settings: QueueSettings(downloadRoot: dir.path("root")))
        #expect(again.tasksLeftAside == queue.tasksLeftAside)
        #expect(again.waiting(offset: 0, count: 10).isEmpty)
        await again.shutdown()
        #expect(try stored() == before)
    }

    /// A damaged row stops the migration with a message naming the task, instead of dropping it.
    @Test func damagedSchemaTwoRowIsReported() throws {
        let dir = try QueueTempDir()
        let path = try Self.copy(into: dir)
        do {
            let db = try SQLiteDatabase(path: path)
            try db.execute(#"UPDATE tasks SET options = '{"headers":[],"checksum":"crc32=00"}' WHERE urls LIKE '%none.bin%'"#)
            db.close()
        }
        #expect {
            _ = try TaskStore(path: path)
        } throws: { error in
            "\(error)".contains("cannot be read") && "\(error)".contains("migrating")
        }
    }
}
