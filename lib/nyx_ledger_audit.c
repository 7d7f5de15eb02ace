/*
 * The ledger's part of the audit trail (see nyx_ledger.h): frozen
 * intents and the index of what audit.jsonl holds.
 */
#include "nyx_ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_ledger_int.h"

/* ---- the audit trail's intents and index ---- */

int
nyx_ledger_intent_put(struct nyx_ledger *l, const char *id, const char *record,
    const char *handle, struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(l->db,
	        "INSERT OR IGNORE INTO audit_intents (audit_id, record, "
	        "handle, created_at_ms) VALUES (?, ?, ?, "
	        "CAST(strftime('%s','now') AS INTEGER) * 1000)",
	        -1, &st, NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "intent");
	nyx_ledger_bind_text(st, 1, id);
	nyx_ledger_bind_text(st, 2, record);
	if (handle != NULL)
		nyx_ledger_bind_text(st, 3, handle);
	else
		sqlite3_bind_null(st, 3);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return nyx_ledger_db_fail(l, err, "intent");
	if (sqlite3_changes(l->db) == 1)
		return 1;
	/* frozen: an existing intent is never replaced */
	{
		char *old = NULL;
		int same;

		if (sqlite3_prepare_v2(l->db,
		        "SELECT record FROM audit_intents WHERE audit_id = ?",
		        -1, &st, NULL) != SQLITE_OK)
			return nyx_ledger_db_fail(l, err, "intent");
		nyx_ledger_bind_text(st, 1, id);
		if (sqlite3_step(st) == SQLITE_ROW)
			old = strdup((const char *)sqlite3_column_text(st, 0));
		sqlite3_finalize(st);
		same = old != NULL && strcmp(old, record) == 0;
		free(old);
		return same ? 0 : 2;
	}
}

char *
nyx_ledger_intent_get(struct nyx_ledger *l, const char *id)
{
	sqlite3_stmt *st;
	char *out = NULL;

	if (sqlite3_prepare_v2(l->db,
	        "SELECT record FROM audit_intents WHERE audit_id = ?", -1, &st,
	        NULL) != SQLITE_OK)
		return NULL;
	nyx_ledger_bind_text(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW)
		out = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return out;
}

int
nyx_ledger_intents(
    struct nyx_ledger *l, const char *handle, char ***ids, struct nyx_err *err)
{
	return nyx_ledger_strings_of(l->db,
	           handle == NULL
	               ? "SELECT audit_id FROM audit_intents ORDER BY "
	                 "created_at_ms, audit_id"
	               : "SELECT audit_id FROM audit_intents WHERE handle = ?1 "
	                 "ORDER BY created_at_ms, audit_id",
	           handle, ids) == 0
	    ? 0
	    : nyx_ledger_db_fail(l, err, "intents");
}

int
nyx_ledger_intent_done(
    struct nyx_ledger *l, const char *id, struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(l->db,
	        "DELETE FROM audit_intents WHERE audit_id = ?", -1, &st,
	        NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "intent");
	nyx_ledger_bind_text(st, 1, id);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : nyx_ledger_db_fail(l, err, "intent");
}

int
nyx_ledger_audit_lookup(struct nyx_ledger *l, const char *id, char content[65],
    char semantic[65], struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(l->db,
	        "SELECT content_hash, semantic_hash FROM audit_index WHERE "
	        "audit_id = ?",
	        -1, &st, NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "audit index");
	nyx_ledger_bind_text(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		nyx_ledger_col_text(st, 0, content, 65);
		nyx_ledger_col_text(st, 1, semantic, 65);
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0
	                         : nyx_ledger_db_fail(l, err, "audit index");
}

int
nyx_ledger_audit_index(struct nyx_ledger *l, const char *id,
    const char *content, const char *semantic, int64_t covered,
    const char *intent_done, struct nyx_err *err)
{
	sqlite3_stmt *st;
	/* one commit for the whole step, unless the caller already holds a
	 * transaction */
	bool own = sqlite3_get_autocommit(l->db) != 0;
	int rc = SQLITE_DONE, out = -1;

	/*
	 * The index is a cache of audit.jsonl, whose lines are fsync'd
	 * before they are indexed: its commit is not synced (WAL, NORMAL).
	 * Lost to a power cut, it is rebuilt from the file, and an intent it
	 * deleted is replayed as a duplicate; the next synced commit of the
	 * ledger makes it durable.  SQLite takes the level outside a
	 * transaction only.
	 */
	if (own &&
	    (nyx_ledger_exec_sql(l, "PRAGMA synchronous = NORMAL", err) < 0 ||
	        nyx_ledger_exec_sql(l, "BEGIN IMMEDIATE", err) < 0))
		goto restore;
	if (id != NULL) {
		if (sqlite3_prepare_v2(l->db,
		        "INSERT OR IGNORE INTO audit_index (audit_id, "
		        "content_hash, semantic_hash) VALUES (?, ?, ?)",
		        -1, &st, NULL) != SQLITE_OK)
			goto fail;
		nyx_ledger_bind_text(st, 1, id);
		nyx_ledger_bind_text(st, 2, content);
		nyx_ledger_bind_text(st, 3, semantic);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
	}
	if (rc != SQLITE_DONE ||
	    sqlite3_prepare_v2(l->db,
	        "INSERT OR REPLACE INTO audit_meta (k, v) VALUES "
	        "('covered', ?)",
	        -1, &st, NULL) != SQLITE_OK)
		goto fail;
	sqlite3_bind_int64(st, 1, covered);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		goto fail;
	if (intent_done != NULL) {
		if (sqlite3_prepare_v2(l->db,
		        "DELETE FROM audit_intents WHERE audit_id = ?", -1, &st,
		        NULL) != SQLITE_OK)
			goto fail;
		nyx_ledger_bind_text(st, 1, intent_done);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			goto fail;
	}
	if (own && nyx_ledger_exec_sql(l, "COMMIT", err) < 0)
		goto rollback;
	/* the caller's own transaction may still roll back */
	l->audit_covered = own ? covered : -1;
	out = 0;
	goto restore;
fail:
	nyx_ledger_db_fail(l, err, "audit index");
rollback:
	if (own)
		sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
restore:
	/* every other commit of the ledger stays synced */
	if (own &&
	    sqlite3_exec(l->db, "PRAGMA synchronous = FULL", NULL, NULL,
	        NULL) != SQLITE_OK &&
	    out == 0)
		out = nyx_ledger_db_fail(l, err, "audit index");
	return out;
}

int
nyx_ledger_audit_covered(
    struct nyx_ledger *l, int64_t *covered, struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc;

	*covered = 0;
	if (l->audit_covered >= 0) { /* this connection's own last commit */
		*covered = l->audit_covered;
		return 0;
	}
	if (sqlite3_prepare_v2(l->db,
	        "SELECT v FROM audit_meta WHERE k = 'covered'", -1, &st,
	        NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "audit index");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*covered = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return nyx_ledger_db_fail(l, err, "audit index");
	l->audit_covered = *covered;
	return 0;
}

int
nyx_ledger_audit_reset(struct nyx_ledger *l, struct nyx_err *err)
{
	l->audit_covered = -1;
	return nyx_ledger_exec_sql(
	    l, "DELETE FROM audit_index; DELETE FROM audit_meta", err);
}
