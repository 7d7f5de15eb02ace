#include "nyx_curl.h"

#include "nyx_dl.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct nyx_curl_api nyx_curl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char why[256]; /* the reason it could not be loaded */

/* Each entry: libcurl's name and where its address goes. */
#define SYM(field, name)                                                       \
	{                                                                      \
		name, (void **)&nyx_curl.field                                 \
	}

static void
load(void)
{
	static const struct nyx_dl_sym syms[] = {
	    SYM(global_init, "curl_global_init"),
	    SYM(global_cleanup, "curl_global_cleanup"),
	    SYM(easy_init, "curl_easy_init"),
	    SYM(easy_setopt, "curl_easy_setopt"),
	    SYM(easy_getinfo, "curl_easy_getinfo"),
	    SYM(easy_perform, "curl_easy_perform"),
	    SYM(easy_reset, "curl_easy_reset"),
	    SYM(easy_cleanup, "curl_easy_cleanup"),
	    SYM(easy_strerror, "curl_easy_strerror"),
	    SYM(easy_escape, "curl_easy_escape"),
	    SYM(free, "curl_free"),
	    SYM(slist_append, "curl_slist_append"),
	    SYM(slist_free_all, "curl_slist_free_all"),
	    SYM(url, "curl_url"),
	    SYM(url_cleanup, "curl_url_cleanup"),
	    SYM(url_set, "curl_url_set"),
	    SYM(url_get, "curl_url_get"),
	    SYM(multi_init, "curl_multi_init"),
	    SYM(multi_setopt, "curl_multi_setopt"),
	    SYM(multi_add_handle, "curl_multi_add_handle"),
	    SYM(multi_remove_handle, "curl_multi_remove_handle"),
	    SYM(multi_perform, "curl_multi_perform"),
	    SYM(multi_poll, "curl_multi_poll"),
	    SYM(multi_info_read, "curl_multi_info_read"),
	    SYM(multi_cleanup, "curl_multi_cleanup"),
	};
	if (nyx_dl_bind(NYX_CURL_SONAME, syms, sizeof(syms) / sizeof(syms[0]),
	        &nyx_curl, sizeof(nyx_curl), why, sizeof(why)) < 0)
		return;
	if (nyx_curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(why, sizeof(why), "curl_global_init failed");
		memset(&nyx_curl, 0, sizeof(nyx_curl));
		return;
	}
	loaded = true;
}

int
nyx_curl_load(struct nyx_err *err)
{
	pthread_once(&once, load);
	if (loaded)
		return 0;
	return nyx_err_set(err, NYX_EXIT_OSERR, "http_init_failed",
	    "cannot start libcurl: %s", why);
}

void
nyx_curl_unload(void)
{
	if (loaded)
		nyx_curl.global_cleanup();
}
