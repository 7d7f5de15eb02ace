#include "nyx_sqlite.h"

#include "nyx_dl.h"

#include <pthread.h>
#include <stdbool.h>

struct nyx_sqlite_api nyx_sqlite;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char why[256]; /* the reason it could not be loaded */

/* Each entry: SQLite's name and where its address goes. */
#define SYM(field)                                                             \
	{                                                                      \
		"sqlite3_" #field, (void **)&nyx_sqlite.field                  \
	}

static void
load(void)
{
	static const struct nyx_dl_sym syms[] = {
	    SYM(open_v2),
	    SYM(close),
	    SYM(busy_timeout),
	    SYM(db_config),
	    SYM(wal_autocheckpoint),
	    SYM(exec),
	    SYM(errmsg),
	    SYM(changes),
	    SYM(get_autocommit),
	    SYM(prepare_v2),
	    SYM(step),
	    SYM(finalize),
	    SYM(bind_int),
	    SYM(bind_int64),
	    SYM(bind_null),
	    SYM(bind_text),
	    SYM(column_int),
	    SYM(column_int64),
	    SYM(column_text),
	    SYM(column_type),
	};
	if (nyx_dl_bind(NYX_SQLITE_SONAME, syms, sizeof(syms) / sizeof(syms[0]),
	        &nyx_sqlite, sizeof(nyx_sqlite), why, sizeof(why)) < 0)
		return;
	loaded = true;
}

int
nyx_sqlite_load(struct nyx_err *err)
{
	pthread_once(&once, load);
	if (loaded)
		return 0;
	return nyx_err_set(err, NYX_EXIT_OSERR, "sqlite_unavailable",
	    "cannot start SQLite: %s", why);
}
