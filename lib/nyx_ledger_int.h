/*
 * nyx_ledger_int: what the ledger's files share and nothing else sees:
 * the handle, and the SQLite helpers (this module is SQLite's one user
 * in lib/).  Bound values are always parameters, never spliced in.
 */
#ifndef NYX_LEDGER_INT_H
#define NYX_LEDGER_INT_H

#include <stddef.h>

#include "nyx_sqlite.h" /* SQLite, loaded on first open */

#include "nyx_err.h"
#include "nyx_ledger.h"

#define SECRET_MAX (4u * 1024 * 1024)

struct nyx_ledger {
	sqlite3 *db;
	char dir[512];
	char secrets[600];
	/* how far this connection last saw the audit index reach, -1 when
	 * unknown: at worst behind, when another process indexed more, and
	 * then catching up indexes those lines again, which changes nothing */
	int64_t audit_covered;
};

/* -1 with err 73 ledger_failed, naming the step and SQLite's reason. */
int nyx_ledger_db_fail(
    struct nyx_ledger *l, struct nyx_err *err, const char *what);
int nyx_ledger_exec_sql(
    struct nyx_ledger *l, const char *sql, struct nyx_err *err);
void nyx_ledger_bind_text(sqlite3_stmt *st, int i, const char *s);
/* Column i as text into dst (n bytes, "" for NULL). */
void nyx_ledger_col_text(sqlite3_stmt *st, int i, char *dst, size_t n);
/* A 0600 secrets/ file written whole and fsync'd. */
/*
 * The secrets directory's lock: a writer holds it shared from writing a
 * secret file until its row is committed, so a sweep that holds it
 * exclusively knows that a file no row names is a crashed writer's
 * leftover.  Returns a descriptor to pass to nyx_ledger_secrets_unlock
 * (-1 when the lock is unavailable: LOCK_NB, or no directory).
 */
int nyx_ledger_secrets_lock(struct nyx_ledger *l, int how);
void nyx_ledger_secrets_unlock(int fd);

int nyx_ledger_write_secret(struct nyx_ledger *l, const char *name,
    const char *data, size_t n, struct nyx_err *err);

#endif
