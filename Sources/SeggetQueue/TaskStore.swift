import CSQLite
import FoundationEssentials
import Glibc
import Segget
import SeggetVerify

/// One task as stored: everything a restart needs to carry on.
struct TaskRecord: Sendable, Equatable {
    var id: TaskID
    var urls: [String]
    var options: TaskOptions
    var status: TaskStatus
    /// ``QueueState/Entry/order``.
    var order: Int
    /// The resolved directory the file goes into.
    var directory: String
    /// The output path, fixed when the task first starts, so that a restart resumes the same file.
    var path: String?
    var totalLength: Int64 = 0
    var completedLength: Int64 = 0
    var errorCode: Int?
    var failure: FailureKind?
    var errorMessage: String?
    var createdAt: Int64
    var finishedAt: Int64?
    /// A Metalink's piece hashes of the file, checked while it downloads; written once, with the row.
    var pieces: PieceHashes? = nil
}

/// The queue's tables in SQLite: one row per task, written through before any API call returns.
///
/// Durability: WAL journal mode. State changes commit with `synchronous=FULL` (the WAL is synced at
/// every commit, so a committed add survives a power cut); progress counters commit with `NORMAL`
/// (they reach the disk with the next FULL commit or checkpoint; losing one only shows an older
/// count, since the download's own journal is the truth about finished bytes).
final class TaskStore {
    /// The schema version in `PRAGMA user_version`; each step in ``migrations`` raises it by one.
    static let schemaVersion = 4

    /// Migration `i` takes the schema from version `i` to `i + 1`.
    static let migrations: [String] = [
        """
        CREATE TABLE tasks (
            gid INTEGER PRIMARY KEY,
            urls TEXT NOT NULL,
            options TEXT NOT NULL,
            status TEXT NOT NULL,
            ord INTEGER NOT NULL,
            directory TEXT NOT NULL,
            path TEXT,
            total_length INTEGER NOT NULL DEFAULT 0,
            completed_length INTEGER NOT NULL DEFAULT 0,
            error_code INTEGER,
            error_kind TEXT,
            error_message TEXT,
            created_at INTEGER NOT NULL,
            finished_at INTEGER
        );
        CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
        """,
        // 2: queue-wide settings kept across restarts (the speed schedule), as text by name.
        """
        CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        """,
        // 3: no table changes; every row's options are rewritten to StoredOptions (OptionsMigration).
        "SELECT 1;",
        // 4: a Metalink task's piece hashes ("ALGORITHM LENGTH HEX", see `PieceHashes.stored`), so that
        // a restarted daemon still checks every piece.
        "ALTER TABLE tasks ADD COLUMN pieces TEXT;",
    ]

    private let db: SQLiteDatabase
    private let insertStatement: SQLiteStatement
    private let updateStatement: SQLiteStatement
    private let progressStatement: SQLiteStatement
    private let orderStatement: SQLiteStatement
    private let deleteStatement: SQLiteStatement

    init(path: String) throws(SQLiteError) {
        db = try SQLiteDatabase(path: path)
        let mode = try Self.enableWAL(db)
        guard mode == "wal" else {
            throw SQLiteError(
                operation: "PRAGMA journal_mode=WAL", code: 0, message: "the database stayed in \(mode ?? "?") mode")
        }
        try db.execute("PRAGMA synchronous=FULL")
        try Self.migrate(db)
        let columns =
            "gid, urls, options, status, ord, directory, path, total_length, completed_length, error_code, error_kind, error_message, created_at, finished_at, pieces"
        insertStatement = try db.prepare(
            "INSERT INTO tasks (\(columns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)")
        updateStatement = try db.prepare(
            "UPDATE tasks SET urls = ?2, options = ?3, status = ?4, ord = ?5, directory = ?6, path = ?7, total_length = ?8, completed_length = ?9, error_code = ?10, error_kind = ?11, error_message = ?12, finished_at = ?14 WHERE gid = ?1 AND created_at = ?13"
        )
        progressStatement = try db.prepare("UPDATE tasks SET total_length = ?2, completed_length = ?3 WHERE gid = ?1")
        orderStatement = try db.prepare("UPDATE tasks SET ord = ?2 WHERE gid = ?1")
        deleteStatement = try db.prepare("DELETE FROM tasks WHERE gid = ?1")
    }

    func close() { db.close() }

    /// Switches to WAL (a lasting property of the file). Changing the mode needs an exclusive lock,
    /// for which SQLite does not wait, so a concurrent first open is retried for up to 5 s.
    private static func enableWAL(_ db: SQLiteDatabase) throws(SQLiteError) -> String? {
        var attempt = 0
        while true {
            do {
                return try text(db, "PRAGMA journal_mode=WAL")
            } catch  where error.code == SQLITE_BUSY && attempt < 250 {
                attempt += 1
                usleep(20_000)
            }
        }
    }

    private static func text(_ db: SQLiteDatabase, _ sql: String) throws(SQLiteError) -> String? {
        let s = try db.prepare(sql)
        guard try s.step() else { return nil }
        return s.text(0)
    }

    /// Brings an older schema up to date, one version per transaction. A newer schema (written by a
    /// later segget) is refused rather than damaged.
    private static func migrate(_ db: SQLiteDatabase) throws(SQLiteError) {
        // The version is read again under the write lock of each step: two processes opening a new
        // database at once must not both run the same step.
        while true {
            let done = try db.transaction { () throws(SQLiteError) -> Bool in
                let version = Int(try db.integer("PRAGMA user_version"))
                guard version <= schemaVersion else {
                    throw SQLiteError(
                        operation: "opening the queue", code: 0,
                        message:
                            "the database has schema version \(version), newer than this segget's \(schemaVersion); use a newer segget"
                    )
                }
                guard version < schemaVersion else { return true }
                try db.execute(migrations[version])
                if version == 2 { try OptionsMigration.run(db) }
                try db.execute("PRAGMA user_version = \(version + 1)")
                return false
            }
            if done { return }
        }
    }

    // MARK: Rows

    private static let encoder = JSONEncoder()

    private func values(_ r: TaskRecord) throws(SQLiteError) -> [SQLiteStatement.Value] {
        let urls: String
        let options: String
        do {
            urls = String(decoding: try Self.encoder.encode(r.urls), as: UTF8.self)
            options = try StoredOptions.encoded(r.options)
        } catch {
            throw SQLiteError(operation: "encoding task \(r.id.gid)", code: 0, message: "\(error)")
        }
        return [
            .int(Int64(bitPattern: r.id.value)), .text(urls), .text(options), .text(r.status.rawValue), .int(r.order),
            .text(r.directory), .optional(r.path), .int(r.totalLength), .int(r.completedLength), .optional(r.errorCode),
            .optional(r.failure?.rawValue), .optional(r.errorMessage), .int(r.createdAt), .optional(r.finishedAt),
        ]
    }

    /// Inserts a new task, durably.
    func insert(_ r: TaskRecord) throws(SQLiteError) {
        try insertStatement.run(values(r) + [.optional(r.pieces?.stored)])
    }

    /// Rewrites a task's row, durably.
    func update(_ r: TaskRecord) throws(SQLiteError) {
        try updateStatement.run(values(r))
    }

    /// Stores the order keys of many tasks in one transaction.
    func updateOrders(_ orders: [(TaskID, Int)]) throws(SQLiteError) {
        guard !orders.isEmpty else { return }
        try db.transaction { () throws(SQLiteError) in
            for (id, order) in orders { try orderStatement.run([.int(Int64(bitPattern: id.value)), .int(order)]) }
        }
    }

    /// Stores byte counts of running tasks in one transaction, without waiting for the disk.
    func updateProgress(_ rows: [(TaskID, total: Int64, completed: Int64)]) throws(SQLiteError) {
        guard !rows.isEmpty else { return }
        try db.execute("PRAGMA synchronous=NORMAL")
        defer { try? db.execute("PRAGMA synchronous=FULL") }
        try db.transaction { () throws(SQLiteError) in
            for r in rows {
                try progressStatement.run([.int(Int64(bitPattern: r.0.value)), .int(r.total), .int(r.completed)])
            }
        }
    }

    func delete(_ ids: [TaskID]) throws(SQLiteError) {
        guard !ids.isEmpty else { return }
        try db.transaction { () throws(SQLiteError) in
            for id in ids { try deleteStatement.run([.int(Int64(bitPattern: id.value))]) }
        }
    }

    /// A named counter (e.g. stopped tasks ever), 0 when never set.
    func counter(_ name: String) throws(SQLiteError) -> Int64 {
        let s = try db.prepare("SELECT value FROM counters WHERE name = ?1")
        try s.bind([.text(name)])
        return try s.step() ? s.int64(0) : 0
    }

    /// A stored queue-wide setting (see migration 2), nil when never stored.
    func setting(_ name: String) throws(SQLiteError) -> String? {
        let s = try db.prepare("SELECT value FROM settings WHERE name = ?1")
        try s.bind([.text(name)])
        return try s.step() ? s.text(0) : nil
    }

    func setSetting(_ name: String, _ value: String) throws(SQLiteError) {
        try db.prepare("INSERT INTO settings (name, value) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET value = ?2")
            .run([.text(name), .text(value)])
    }

    func deleteSetting(_ name: String) throws(SQLiteError) {
        try db.prepare("DELETE FROM settings WHERE name = ?1").run([.text(name)])
    }

    func setCounter(_ name: String, _ value: Int64) throws(SQLiteError) {
        try db.prepare("INSERT INTO counters (name, value) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET value = ?2")
            .run([.text(name), .int(value)])
    }

    /// Every stored task this segget can read, and the rows it cannot (`LeftAsideTask`): options
    /// of a newer segget's shape or with an option it does not know, a status it does not know, a
    /// damaged field. Those are reported, not dropped: their rows stay as they are (nothing here
    /// rewrites or deletes a row it did not load), for the segget that wrote them.
    func loadAll() throws(SQLiteError) -> (records: [TaskRecord], leftAside: [LeftAsideTask]) {
        let s = try db.prepare(
            "SELECT gid, urls, options, status, ord, directory, path, total_length, completed_length, error_code, error_kind, error_message, created_at, finished_at, pieces FROM tasks ORDER BY ord, gid"
        )
        var out: [TaskRecord] = []
        var leftAside: [LeftAsideTask] = []
        let decoder = JSONDecoder()
        while try s.step() {
            let gid = TaskID(UInt64(bitPattern: s.int64(0)))
            let options: TaskOptions
            do {
                options = try StoredOptions.decoded(s.text(2) ?? "")
            } catch {
                leftAside.append(LeftAsideTask(gid: gid.gid, path: s.text(6), why: Self.unreadOptions(error)))
                continue
            }
            let storedPieces = s.text(14)
            let pieces = storedPieces.flatMap(PieceHashes.init(stored:))
            guard let status = s.text(3).flatMap(TaskStatus.init(rawValue:)),
                storedPieces == nil || pieces != nil,
                let urls = try? decoder.decode([String].self, from: Data((s.text(1) ?? "").utf8)),
                let directory = s.text(5)
            else {
                leftAside.append(LeftAsideTask(gid: gid.gid, path: s.text(6), why: "its row is damaged or of a newer segget (status \(s.text(3) ?? "none"))"))
                continue
            }
            out.append(
                TaskRecord(
                    id: gid, urls: urls, options: options, status: status, order: Int(s.int64(4)), directory: directory,
                    path: s.text(6), totalLength: s.int64(7), completedLength: s.int64(8),
                    errorCode: s.optionalInt64(9).map { Int($0) },
                    failure: s.text(10).flatMap(FailureKind.init(rawValue:)),
                    errorMessage: s.text(11), createdAt: s.int64(12), finishedAt: s.optionalInt64(13),
                    pieces: pieces))
        }
        return (out, leftAside)
    }
}

extension TaskStore {
    /// Why a row's options could not be read, as a clause: the option, where one is to blame.
    static func unreadOptions(_ error: any Error) -> String {
        guard let e = error as? OptionError else { return "its options cannot be read: \(error)" }
        return e.key == "v" ? "its options are \(e.message)" : "its option '\(e.key)' cannot be read: \(e.message)"
    }
}

/// A task whose row the queue cannot read (see `TaskStore.loadAll`): not run, not listed, and its
/// row left in the database as it is; the daemon names it at start.
public struct LeftAsideTask: Sendable, Equatable {
    /// Its GID, as aria2 writes one.
    public let gid: String
    /// Where it saves, where its row says (a new task is refused that name).
    public let path: String?
    /// Why it cannot be read, as a clause ("its options cannot be read: …").
    public let why: String
}

extension StoredOptions {
    /// The options column's text (keys sorted, so that equal options are equal text).
    static func encoded(_ options: FileOptions) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(StoredOptions(options)), as: UTF8.self)
    }

    static func decoded(_ text: String) throws -> FileOptions {
        try JSONDecoder().decode(StoredOptions.self, from: Data(text.utf8)).options
    }
}

extension OptionsMigration {
    /// Rewrites every row's options; a row that cannot be read is reported, not dropped.
    static func run(_ db: SQLiteDatabase) throws(SQLiteError) {
        let select = try db.prepare("SELECT gid, options FROM tasks")
        var rows: [(Int64, String)] = []
        while try select.step() { rows.append((select.int64(0), select.text(1) ?? "")) }
        let update = try db.prepare("UPDATE tasks SET options = ?2 WHERE gid = ?1")
        for (gid, text) in rows {
            let new: String
            do {
                let old = try JSONDecoder().decode(Version2.self, from: Data(text.utf8))
                new = try StoredOptions.encoded(try old.options)
            } catch {
                throw SQLiteError(
                    operation: "migrating the queue to schema 3", code: 0,
                    message: "the options of task \(TaskID(UInt64(bitPattern: gid)).gid) cannot be read: \(error)")
            }
            try update.run([.int(gid), .text(new)])
        }
    }
}
