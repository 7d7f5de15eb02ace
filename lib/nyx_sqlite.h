/*
 * nyx_sqlite: SQLite, loaded when the first state file is opened.
 * Private to the ledger (nyx_ledger_int.h) and the server's store, the
 * two users of SQLite.
 *
 * Mapping libsqlite3 and binding its symbols costs a process about
 * 0.3 ms before main().  A local run opens its ledger while bubblewrap
 * sets up the sandbox, beside it on the other core: loaded there, the
 * library is off the run's way (bench/README.md).  Every other program
 * loads it where it used to, at its first ledger open.
 *
 * The calls keep SQLite's names: after this header, sqlite3_step() is a
 * call through the table nyx_sqlite_load() filled.
 */
#ifndef NYX_SQLITE_H
#define NYX_SQLITE_H

#include <sqlite3.h>

#include "nyx_err.h"

/* The shared object opened: Debian's libsqlite3-0 since SQLite 3.0. */
#ifndef NYX_SQLITE_SONAME
#define NYX_SQLITE_SONAME "libsqlite3.so.0"
#endif

struct nyx_sqlite_api {
	int (*open_v2)(const char *, sqlite3 **, int, const char *);
	int (*close)(sqlite3 *);
	int (*busy_timeout)(sqlite3 *, int);
	int (*db_config)(sqlite3 *, int, ...);
	int (*wal_autocheckpoint)(sqlite3 *, int);
	int (*exec)(sqlite3 *, const char *,
	    int (*)(void *, int, char **, char **), void *, char **);
	const char *(*errmsg)(sqlite3 *);
	int (*changes)(sqlite3 *);
	int (*get_autocommit)(sqlite3 *);
	int (*prepare_v2)(
	    sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
	int (*step)(sqlite3_stmt *);
	int (*finalize)(sqlite3_stmt *);
	int (*bind_int)(sqlite3_stmt *, int, int);
	int (*bind_int64)(sqlite3_stmt *, int, sqlite3_int64);
	int (*bind_null)(sqlite3_stmt *, int);
	int (*bind_text)(
	    sqlite3_stmt *, int, const char *, int, void (*)(void *));
	int (*column_int)(sqlite3_stmt *, int);
	sqlite3_int64 (*column_int64)(sqlite3_stmt *, int);
	const unsigned char *(*column_text)(sqlite3_stmt *, int);
	int (*column_type)(sqlite3_stmt *, int);
};

/* Filled by nyx_sqlite_load(); zero before. */
extern struct nyx_sqlite_api nyx_sqlite;

/*
 * Open libsqlite3, once per process (thread-safe).  -1 with err 71
 * ("sqlite_unavailable") when it cannot be opened or lacks a symbol;
 * every later call answers the same.
 */
int nyx_sqlite_load(struct nyx_err *err);

#define sqlite3_open_v2 nyx_sqlite.open_v2
#define sqlite3_close nyx_sqlite.close
#define sqlite3_busy_timeout nyx_sqlite.busy_timeout
#define sqlite3_db_config nyx_sqlite.db_config
#define sqlite3_wal_autocheckpoint nyx_sqlite.wal_autocheckpoint
#define sqlite3_exec nyx_sqlite.exec
#define sqlite3_errmsg nyx_sqlite.errmsg
#define sqlite3_changes nyx_sqlite.changes
#define sqlite3_get_autocommit nyx_sqlite.get_autocommit
#define sqlite3_prepare_v2 nyx_sqlite.prepare_v2
#define sqlite3_step nyx_sqlite.step
#define sqlite3_finalize nyx_sqlite.finalize
#define sqlite3_bind_int nyx_sqlite.bind_int
#define sqlite3_bind_int64 nyx_sqlite.bind_int64
#define sqlite3_bind_null nyx_sqlite.bind_null
#define sqlite3_bind_text nyx_sqlite.bind_text
#define sqlite3_column_int nyx_sqlite.column_int
#define sqlite3_column_int64 nyx_sqlite.column_int64
#define sqlite3_column_text nyx_sqlite.column_text
#define sqlite3_column_type nyx_sqlite.column_type

#endif
