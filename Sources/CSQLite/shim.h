// libsqlite3 for the queue's store. The C API is plain (not variadic) except sqlite3_config, which
// segget does not call; the one thing Swift cannot import is SQLITE_TRANSIENT (a cast of -1 to a
// function pointer), so typed binders that pass it live here. Header-only, no C compile unit.
#ifndef SEGGET_CSQLITE_SHIM_H
#define SEGGET_CSQLITE_SHIM_H

#include <sqlite3.h>

/// Binds text that SQLite copies before returning (SQLITE_TRANSIENT), so Swift's buffer may go away.
static inline int segget_sqlite3_bind_text(sqlite3_stmt *s, int i, const char *v, int n) {
    return sqlite3_bind_text(s, i, v, n, SQLITE_TRANSIENT);
}

#endif
