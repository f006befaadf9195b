import CSQLite
import SeggetSystem

/// A failed SQLite call: the operation, SQLite's result code and its message.
struct SQLiteError: Error, CustomStringConvertible {
    let operation: String
    let code: Int32
    let message: String

    var description: String { "\(operation) failed: \(message) (SQLite code \(code))" }
}

/// SQLite's C API (CSQLite's `segget_sqlite3_api`), loaded from libsqlite3.so.0 when the first
/// database is opened, once for the process: segget does not link SQLite, whose loading at every
/// start cost every download 0.2 ms, while only the daemon and the commands that read its queue
/// use it.
enum SQLiteLibrary {
    static let api: Result<segget_sqlite3_api, SQLiteError> = {
        do throws(SharedLibraryError) {
            return .success(try load())
        } catch {
            return .failure(SQLiteError(
                operation: "loading SQLite (libsqlite3.so.0)", code: SQLITE_ERROR,
                message: "\(error.message); install SQLite 3 (on Debian and Ubuntu: apt-get install libsqlite3-0)"))
        }
    }()

    /// SQLite's message for the last failure on `db`.
    static func message(_ api: segget_sqlite3_api, _ db: OpaquePointer?) -> String {
        api.errmsg!(db).map { String(cString: $0) } ?? "unknown error"
    }

    private static func load() throws(SharedLibraryError) -> segget_sqlite3_api {
        let library = try SharedLibrary(name: "libsqlite3.so.0")
        func function<F>(_ name: String, as _: F.Type) throws(SharedLibraryError) -> F {
            unsafeBitCast(try library.symbol(name), to: F.self)
        }
        var api = segget_sqlite3_api()
        api.open_v2 = try function("sqlite3_open_v2", as: type(of: api.open_v2))
        api.close_v2 = try function("sqlite3_close_v2", as: type(of: api.close_v2))
        api.errmsg = try function("sqlite3_errmsg", as: type(of: api.errmsg))
        api.busy_timeout = try function("sqlite3_busy_timeout", as: type(of: api.busy_timeout))
        api.exec = try function("sqlite3_exec", as: type(of: api.exec))
        api.free = try function("sqlite3_free", as: type(of: api.free))
        api.prepare_v2 = try function("sqlite3_prepare_v2", as: type(of: api.prepare_v2))
        api.finalize = try function("sqlite3_finalize", as: type(of: api.finalize))
        api.reset = try function("sqlite3_reset", as: type(of: api.reset))
        api.clear_bindings = try function("sqlite3_clear_bindings", as: type(of: api.clear_bindings))
        api.bind_int64 = try function("sqlite3_bind_int64", as: type(of: api.bind_int64))
        api.bind_text = try function("sqlite3_bind_text", as: type(of: api.bind_text))
        api.bind_null = try function("sqlite3_bind_null", as: type(of: api.bind_null))
        api.step = try function("sqlite3_step", as: type(of: api.step))
        api.column_int64 = try function("sqlite3_column_int64", as: type(of: api.column_int64))
        api.column_type = try function("sqlite3_column_type", as: type(of: api.column_type))
        api.column_text = try function("sqlite3_column_text", as: type(of: api.column_text))
        return api
    }
}

/// One SQLite connection. Only the store uses it, never from two threads at once (the queue's lock
/// sees to that), so it is opened without SQLite's own per-connection mutex.
///
/// The corresponding C functions are `sqlite3_open_v2`, `sqlite3_exec` and `sqlite3_close_v2`.
final class SQLiteDatabase {
    private var handle: OpaquePointer?
    private let api: segget_sqlite3_api

    init(path: String) throws(SQLiteError) {
        api = try SQLiteLibrary.api.get()
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = api.open_v2!(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { SQLiteLibrary.message(api, $0) } ?? "out of memory"
            _ = api.close_v2!(db)
            throw SQLiteError(operation: "opening \(path)", code: rc, message: message)
        }
        handle = db
        // A second process (or a restarted one racing the old) waits for the lock instead of failing.
        _ = api.busy_timeout!(db, 5000)
    }

    deinit { close() }

    func close() {
        guard let h = handle else { return }
        _ = api.close_v2!(h)
        handle = nil
    }

    var isOpen: Bool { handle != nil }

    /// Runs statements that return no rows (schema, pragmas, transactions).
    func execute(_ sql: String) throws(SQLiteError) {
        guard let h = handle else {
            throw SQLiteError(operation: sql, code: SQLITE_MISUSE, message: "the database is closed")
        }
        var error: UnsafeMutablePointer<CChar>?
        let rc = api.exec!(h, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? SQLiteLibrary.message(api, h)
            api.free!(error)
            throw SQLiteError(operation: sql, code: rc, message: message)
        }
    }

    /// Compiles one statement. The corresponding C function is `sqlite3_prepare_v2`.
    func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        guard let h = handle else {
            throw SQLiteError(operation: sql, code: SQLITE_MISUSE, message: "the database is closed")
        }
        var stmt: OpaquePointer?
        let rc = api.prepare_v2!(h, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else {
            throw SQLiteError(operation: "preparing \(sql)", code: rc, message: SQLiteLibrary.message(api, h))
        }
        return SQLiteStatement(stmt, database: h, sql: sql, api: api)
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
    private var api: segget_sqlite3_api

    fileprivate init(_ stmt: OpaquePointer, database: OpaquePointer, sql: String, api: segget_sqlite3_api) {
        self.stmt = stmt
        self.db = database
        self.sql = sql
        self.api = api
    }

    deinit { _ = api.finalize!(stmt) }

    enum Value {
        case int(Int64)
        case text(String)
        case null
    }

    /// Binds values to `?1`, `?2`, … after clearing earlier bindings and rewinding.
    func bind(_ values: [Value]) throws(SQLiteError) {
        _ = api.reset!(stmt)
        _ = api.clear_bindings!(stmt)
        for (i, v) in values.enumerated() {
            let index = Int32(i + 1)
            let rc: Int32
            switch v {
            case .int(let n): rc = api.bind_int64!(stmt, index, n)
            case .text(let s): rc = segget_sqlite3_bind_text(&api, stmt, index, s, -1)
            case .null: rc = api.bind_null!(stmt, index)
            }
            guard rc == SQLITE_OK else { throw error("binding parameter \(index)", rc) }
        }
    }

    /// Advances; true when a row is ready, false when done.
    func step() throws(SQLiteError) -> Bool {
        let rc = api.step!(stmt)
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
        _ = api.reset!(stmt)
    }

    func int64(_ column: Int32) -> Int64 { api.column_int64!(stmt, column) }
    func isNull(_ column: Int32) -> Bool { api.column_type!(stmt, column) == SQLITE_NULL }
    func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }
    func text(_ column: Int32) -> String? {
        guard let p = api.column_text!(stmt, column) else { return nil }
        return String(cString: p)
    }

    private func error(_ what: String, _ rc: Int32) -> SQLiteError {
        SQLiteError(operation: "\(what) \(sql)", code: rc, message: SQLiteLibrary.message(api, db))
    }
}

extension SQLiteStatement.Value {
    static func int(_ n: Int) -> Self { .int(Int64(n)) }
    static func optional(_ n: Int64?) -> Self { n.map { .int($0) } ?? .null }
    static func optional(_ n: Int?) -> Self { n.map { .int(Int64($0)) } ?? .null }
    static func optional(_ s: String?) -> Self { s.map { .text($0) } ?? .null }
}
