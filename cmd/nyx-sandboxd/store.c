#include "store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

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
	sqlite3_stmt *st;
	char **v = NULL;
	size_t n = 0, cap = 0;
	int rc;

	*docs = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT doc FROM executions ORDER BY id",
	        -1, &st, NULL) != SQLITE_OK)
		return store_fail(s, err, "load");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 0);

		if (n + 2 > cap) {
			char **nv =
			    realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (nv == NULL) {
				rc = SQLITE_NOMEM;
				break;
			}
			v = nv;
		}
		v[n] = strdup(t ? (const char *)t : "");
		v[++n] = NULL;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE ||
	    (v == NULL && (v = calloc(1, sizeof(*v))) == NULL)) {
		nyx_ledger_free_list(v);
		return store_fail(s, err, "load");
	}
	*docs = v;
	return 0;
}
