import CSQLite

/// A failed SQLite call: the operation, SQLite's result code and its message.
struct SQLiteError: Error, CustomStringConvertible {
    let operation: String
    let code: Int32
    let message: String

    var description: String { "\(operation) failed: \(message) (SQLite code \(code))" }
}

/// One SQLite connection. Only the store uses it, never from two threads at once (the queue's lock
/// sees to that), so it is opened without SQLite's own per-connection mutex.
///
/// The corresponding C functions are `sqlite3_open_v2`, `sqlite3_exec` and `sqlite3_close_v2`.
final class SQLiteDatabase {
    private var handle: OpaquePointer?

    init(path: String) throws(SQLiteError) {
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw SQLiteError(operation: "opening \(path)", code: rc, message: message)
        }
        handle = db
        // A second process (or a restarted one racing the old) waits for the lock instead of failing.
        sqlite3_busy_timeout(db, 5000)
    }

    deinit { close() }

    func close() {
        guard let h = handle else { return }
        sqlite3_close_v2(h)
        handle = nil
    }

    var isOpen: Bool { handle != nil }

    /// Runs statements that return no rows (schema, pragmas, transactions).
    func execute(_ sql: String) throws(SQLiteError) {
        guard let h = handle else {
            throw SQLiteError(operation: sql, code: SQLITE_MISUSE, message: "the database is closed")
        }
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(h, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(h))
            sqlite3_free(error)
            throw SQLiteError(operation: sql, code: rc, message: message)
        }
    }

    /// Compiles one statement. The corresponding C function is `sqlite3_prepare_v2`.
    func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        guard let h = handle else {
            throw SQLiteError(operation: sql, code: SQLITE_MISUSE, message: "the database is closed")
        }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(h, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else {
            throw SQLiteError(operation: "preparing \(sql)", code: rc, message: String(cString: sqlite3_errmsg(h)))
        }
        return SQLiteStatement(stmt, database: h, sql: sql)
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// A single integer from a query (pragmas, counts).
    func integer(_ sql: String) throws(SQLiteError) -> Int64 {
        let s = try prepare(sql)
        guard try s.step() else { return 0 }
        return s.int64(0)
    }
}

/// A prepared statement: bind (1-based), step, read columns (0-based).
///
/// The corresponding C functions are `sqlite3_bind_*`, `sqlite3_step`, `sqlite3_column_*`.
final class SQLiteStatement {
    private let stmt: OpaquePointer
    private let db: OpaquePointer
    private let sql: String

    fileprivate init(_ stmt: OpaquePointer, database: OpaquePointer, sql: String) {
        self.stmt = stmt
        self.db = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(stmt) }

    enum Value {
        case int(Int64)
        case text(String)
        case null
    }

    /// Binds values to `?1`, `?2`, … after clearing earlier bindings and rewinding.
    func bind(_ values: [Value]) throws(SQLiteError) {
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
        for (i, v) in values.enumerated() {
            let index = Int32(i + 1)
            let rc: Int32
            switch v {
            case .int(let n): rc = sqlite3_bind_int64(stmt, index, n)
            case .text(let s): rc = segget_sqlite3_bind_text(stmt, index, s, -1)
            case .null: rc = sqlite3_bind_null(stmt, index)
            }
            guard rc == SQLITE_OK else { throw error("binding parameter \(index)", rc) }
        }
    }

    /// Advances; true when a row is ready, false when done.
    func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(stmt)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw error("running", rc)
        }
    }

    /// Binds and runs a statement that returns no rows.
    func run(_ values: [Value]) throws(SQLiteError) {
        try bind(values)
        while try step() {}
        sqlite3_reset(stmt)
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(stmt, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(stmt, column) == SQLITE_NULL }
    func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }
    func text(_ column: Int32) -> String? {
        guard let p = sqlite3_column_text(stmt, column) else { return nil }
        return String(cString: p)
    }

    private func error(_ what: String, _ rc: Int32) -> SQLiteError {
        SQLiteError(operation: "\(what) \(sql)", code: rc, message: String(cString: sqlite3_errmsg(db)))
    }
}

extension SQLiteStatement.Value {
    static func int(_ n: Int) -> Self { .int(Int64(n)) }
    static func optional(_ n: Int64?) -> Self { n.map { .int($0) } ?? .null }
    static func optional(_ n: Int?) -> Self { n.map { .int(Int64($0)) } ?? .null }
    static func optional(_ s: String?) -> Self { s.map { .text($0) } ?? .null }
}
