#include "nyx_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int
nyx_dl_bind(const char *soname, const struct nyx_dl_sym *syms, size_t n,
    void *table, size_t table_size, char *why, size_t why_size)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	size_t i;

	if (h == NULL) {
		snprintf(why, why_size, "%s", dlerror());
		return -1;
	}
	for (i = 0; i < n; i++) {
		/* POSIX: a function's address fits the object pointer dlsym
		 * returns; it is stored through that type */
		*syms[i].slot = dlsym(h, syms[i].name);
		if (*syms[i].slot == NULL) {
			snprintf(why, why_size, "%s has no %s", soname,
			    syms[i].name);
			memset(table, 0, table_size);
			return -1;
		}
	}
	return 0;
}
