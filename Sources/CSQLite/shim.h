// SQLite for the queue's store, loaded when the first database is opened (`dlopen`), not linked:
// only the daemon and the commands that read its queue use it, and loading libsqlite3.so.0 at
// every start of segget cost every download 0.2 ms on this project's VM. This header gives Swift
// SQLite's declarations and constants, and a table of the functions the store calls, filled from
// the loaded library (see SQLite.swift). Header-only, no C compile unit.
#ifndef SEGGET_CSQLITE_SHIM_H
#define SEGGET_CSQLITE_SHIM_H

#include <sqlite3.h>

/// The functions of SQLite's C API that the store calls, each as a pointer of its own type.
typedef struct {
    __typeof__(sqlite3_open_v2) *open_v2;
    __typeof__(sqlite3_close_v2) *close_v2;
    __typeof__(sqlite3_errmsg) *errmsg;
    __typeof__(sqlite3_busy_timeout) *busy_timeout;
    __typeof__(sqlite3_exec) *exec;
    __typeof__(sqlite3_free) *free;
    __typeof__(sqlite3_prepare_v2) *prepare_v2;
    __typeof__(sqlite3_finalize) *finalize;
    __typeof__(sqlite3_reset) *reset;
    __typeof__(sqlite3_clear_bindings) *clear_bindings;
    __typeof__(sqlite3_bind_int64) *bind_int64;
    __typeof__(sqlite3_bind_text) *bind_text;
    __typeof__(sqlite3_bind_null) *bind_null;
    __typeof__(sqlite3_step) *step;
    __typeof__(sqlite3_column_int64) *column_int64;
    __typeof__(sqlite3_column_type) *column_type;
    __typeof__(sqlite3_column_text) *column_text;
} segget_sqlite3_api;

/// Binds text that SQLite copies before returning (SQLITE_TRANSIENT, a cast of -1 to a function
/// pointer that Swift cannot import), so Swift's buffer may go away.
static inline int segget_sqlite3_bind_text(const segget_sqlite3_api *api, sqlite3_stmt *s, int i, const char *v, int n) {
    return api->bind_text(s, i, v, n, SQLITE_TRANSIENT);
}

#endif
