/*
 * The ledger's durable exact-call approvals (see nyx_ledger.h and
 * nyx_approval.h for the rules over them).
 */
#include "nyx_ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "nyx_hash.h"
#include "nyx_ledger_int.h"

/* ---- approvals ---- */

static void
approval_row(sqlite3_stmt *st, struct nyx_approval *a)
{
	memset(a, 0, sizeof(*a));
	nyx_ledger_col_text(st, 0, a->id, sizeof(a->id));
	nyx_ledger_col_text(st, 1, a->owner, sizeof(a->owner));
	nyx_ledger_col_text(st, 2, a->request_id, sizeof(a->request_id));
	nyx_ledger_col_text(st, 3, a->call_id, sizeof(a->call_id));
	nyx_ledger_col_text(
	    st, 4, a->arguments_sha256, sizeof(a->arguments_sha256));
	nyx_ledger_col_text(st, 5, a->secret_name, sizeof(a->secret_name));
	nyx_ledger_col_text(st, 6, a->state, sizeof(a->state));
	a->created_at_ms = sqlite3_column_int64(st, 7);
	nyx_ledger_col_text(st, 8, a->decided_by, sizeof(a->decided_by));
	a->decided_at_ms = sqlite3_column_int64(st, 9);
	a->consumed_at_ms = sqlite3_column_int64(st, 10);
}

#define APPROVAL_COLS                                                          \
	"id, owner, request_id, call_id, arguments_sha256, secret_name, "      \
	"state, created_at_ms, decided_by, decided_at_ms, consumed_at_ms"

int
nyx_ledger_approval_put(struct nyx_ledger *l, struct nyx_approval *a,
    const char *args, size_t len, struct nyx_err *err)
{
	sqlite3_stmt *st;
	char sha[NYX_SHA256_HEX];
	int rc, lk;

	/* the arguments hold the prompt: a secret file, like a source */
	if (nyx_sha256_hex(a->id, strlen(a->id), sha) < 0)
		return nyx_err_set(
		    err, NYX_EXIT_SOFTWARE, "hash_failed", "SHA-256 failed");
	snprintf(a->secret_name, sizeof(a->secret_name), "a-%.40s", sha);
	{
		char path[800];

		snprintf(
		    path, sizeof(path), "%s/%s", l->secrets, a->secret_name);
		unlink(path); /* a re-requested approval rewrites it */
	}
	/* shared lock until the row is in: see nyx_ledger_secrets_lock */
	lk = nyx_ledger_secrets_lock(l, LOCK_SH);
	if (nyx_ledger_write_secret(l, a->secret_name, args, len, err) < 0) {
		nyx_ledger_secrets_unlock(lk);
		return -1;
	}
	if (sqlite3_prepare_v2(l->db,
	        "INSERT OR REPLACE INTO approvals (" APPROVAL_COLS
	        ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, 0, 0)",
	        -1, &st, NULL) != SQLITE_OK) {
		nyx_ledger_secrets_unlock(lk);
		return nyx_ledger_db_fail(l, err, "approval");
	}
	nyx_ledger_bind_text(st, 1, a->id);
	nyx_ledger_bind_text(st, 2, a->owner);
	nyx_ledger_bind_text(st, 3, a->request_id);
	nyx_ledger_bind_text(st, 4, a->call_id);
	nyx_ledger_bind_text(st, 5, a->arguments_sha256);
	nyx_ledger_bind_text(st, 6, a->secret_name);
	nyx_ledger_bind_text(st, 7, a->state);
	sqlite3_bind_int64(st, 8, a->created_at_ms);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	nyx_ledger_secrets_unlock(lk);
	return rc == SQLITE_DONE ? 0 : nyx_ledger_db_fail(l, err, "approval");
}

int
nyx_ledger_approval_get(struct nyx_ledger *l, const char *id,
    struct nyx_approval *a, struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(l->db,
	        "SELECT " APPROVAL_COLS " FROM approvals WHERE id = ?", -1, &st,
	        NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "approval");
	nyx_ledger_bind_text(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		approval_row(st, a);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : nyx_ledger_db_fail(l, err, "approval");
}

int
nyx_ledger_approval_grant(struct nyx_ledger *l, const char *owner,
    const char *request_id, const char *call_id, struct nyx_approval *a,
    struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(l->db,
	        "SELECT " APPROVAL_COLS " FROM approvals WHERE owner = ? AND "
	        "request_id = ? AND call_id = ? AND state = 'approved' "
	        "ORDER BY decided_at_ms LIMIT 1",
	        -1, &st, NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "approval");
	nyx_ledger_bind_text(st, 1, owner);
	nyx_ledger_bind_text(st, 2, request_id);
	nyx_ledger_bind_text(st, 3, call_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		approval_row(st, a);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : nyx_ledger_db_fail(l, err, "approval");
}

int
nyx_ledger_approval_move(struct nyx_ledger *l, const char *id, const char *from,
    const char *to, const char *who, int64_t now_ms, struct nyx_err *err)
{
	sqlite3_stmt *st;
	bool consume = strcmp(to, "consumed") == 0;
	int rc;

	if (sqlite3_prepare_v2(l->db,
	        consume ? "UPDATE approvals SET state = ?, consumed_at_ms = ? "
	                  "WHERE id = ? AND state = ?"
	                : "UPDATE approvals SET state = ?, decided_at_ms = ?, "
	                  "decided_by = ? WHERE id = ? AND state = ?",
	        -1, &st, NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "approval");
	nyx_ledger_bind_text(st, 1, to);
	sqlite3_bind_int64(st, 2, now_ms);
	if (consume) {
		nyx_ledger_bind_text(st, 3, id);
		nyx_ledger_bind_text(st, 4, from);
	} else {
		nyx_ledger_bind_text(st, 3, who);
		nyx_ledger_bind_text(st, 4, id);
		nyx_ledger_bind_text(st, 5, from);
	}
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return nyx_ledger_db_fail(l, err, "approval");
	return sqlite3_changes(l->db) == 1 ? 1 : 0;
}

int
nyx_ledger_approvals(struct nyx_ledger *l, char ***ids, struct nyx_err *err)
{
	return nyx_ledger_strings_of(l->db,
	           "SELECT id FROM approvals ORDER BY created_at_ms, id", NULL,
	           ids) == 0
	    ? 0
	    : nyx_ledger_db_fail(l, err, "approval");
}

int
nyx_ledger_approval_args(struct nyx_ledger *l, const struct nyx_approval *a,
    struct nyx_buf *out, struct nyx_err *err)
{
	struct nyx_op op;

	memset(&op, 0, sizeof(op));
	snprintf(op.handle, sizeof(op.handle), "approval");
	snprintf(op.secret_name, sizeof(op.secret_name), "%s", a->secret_name);
	snprintf(op.secret_sha256, sizeof(op.secret_sha256), "%s",
	    a->arguments_sha256);
	return nyx_ledger_read_secret(l, &op, out, err);
}
