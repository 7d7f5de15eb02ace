#include "nyx_sqlite.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

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
	static const struct {
		const char *name;
		void **slot;
	} syms[] = {
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
	/* never closed: SQLite stays for the life of the process */
	void *h = dlopen(NYX_SQLITE_SONAME, RTLD_NOW | RTLD_LOCAL);
	size_t i;

	if (h == NULL) {
		snprintf(why, sizeof(why), "%s", dlerror());
		return;
	}
	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		/* POSIX: a function's address fits the object pointer dlsym
		 * returns; it is stored through that type */
		*syms[i].slot = dlsym(h, syms[i].name);
		if (*syms[i].slot == NULL) {
			snprintf(why, sizeof(why), "%s has no %s",
			    NYX_SQLITE_SONAME, syms[i].name);
			memset(&nyx_sqlite, 0, sizeof(nyx_sqlite));
			return;
		}
	}
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
