#include "store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_sqlite.h"

#include "nyx_ledger.h"

struct nyx_store {
	sqlite3 *db;
};

static int
store_fail(struct nyx_store *s, struct nyx_err *err, const char *what)
{
	return nyx_err_set(err, NYX_EXIT_CANTCREAT, "store_failed",
	    "the operation store: %s: %s", what,
	    s->db ? sqlite3_errmsg(s->db) : strerror(errno));
}

int
nyx_store_open(const char *path, struct nyx_store **out, struct nyx_err *err)
{
	struct nyx_store *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (s == NULL)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	if (nyx_sqlite_load(err) < 0) {
		free(s);
		return -1;
	}
	if (nyx_ledger_sqlite_open(path, &s->db) < 0 ||
	    sqlite3_exec(s->db,
	        "CREATE TABLE IF NOT EXISTS executions (id TEXT PRIMARY KEY, "
	        "doc TEXT NOT NULL)",
	        NULL, NULL, NULL) != SQLITE_OK) {
		store_fail(s, err, path);
		nyx_store_close(s);
		return -1;
	}
	*out = s;
	return 0;
}

void
nyx_store_close(struct nyx_store *s)
{
	if (s == NULL)
		return;
	if (s->db != NULL)
		sqlite3_close(s->db);
	free(s);
}

int
nyx_store_put(
    struct nyx_store *s, const char *id, const char *doc, struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db,
	        "INSERT OR REPLACE INTO executions (id, doc) VALUES (?, ?)", -1,
	        &st, NULL) != SQLITE_OK)
		return store_fail(s, err, "put");
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, doc, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : store_fail(s, err, "put");
}

int
nyx_store_load(struct nyx_store *s, char ***docs, struct nyx_err *err)
{
	return nyx_ledger_strings_of(s->db,
	           "SELECT doc FROM executions ORDER BY id", NULL, docs) == 0
	    ? 0
	    : store_fail(s, err, "load");
}
