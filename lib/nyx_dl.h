/*
 * nyx_dl: a library opened on first use, its functions bound into a
 * table (lib/nyx_curl.c, lib/nyx_sqlite.c).  Not thread-safe by itself:
 * callers run it once (pthread_once).
 */
#ifndef NYX_DL_H
#define NYX_DL_H

#include <stddef.h>

/* One function: its name in the library, and where its address goes. */
struct nyx_dl_sym {
	const char *name;
	void **slot;
};

/*
 * dlopen(3) soname (never closed: it stays for the life of the process)
 * and fill every slot.  0, or -1 with why filled (dlerror's reason, or
 * the missing name) and the table (table_size bytes) zeroed.
 */
int nyx_dl_bind(const char *soname, const struct nyx_dl_sym *syms, size_t n,
    void *table, size_t table_size, char *why, size_t why_size);

#endif
