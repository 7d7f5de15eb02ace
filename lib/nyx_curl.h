/*
 * nyx_curl: libcurl, loaded on first use.  Private to lib/nyx_http.c, the
 * one file that speaks curl.
 *
 * Debian's libcurl brings 30 shared objects (gnutls, krb5, ldap, ssh2,
 * rtmp, ...) that the kernel maps into every process linked with it:
 * about 5.5 ms before main(), the largest part of a local run's overhead
 * over bare bubblewrap (bench/README.md).  The tools are not linked with
 * it; the first HTTP exchange of a process opens it with dlopen(3), and a
 * local run, an offline inventory, exec-status --list or audit-replay
 * never pay for it.
 *
 * The calls keep libcurl's names: after this header, curl_easy_init() is
 * a call through the table nyx_curl_load() filled.  libcurl's compile-time
 * option type checks (typecheck-gcc.h) are off here, as they must be for
 * a call through a pointer.
 */
#ifndef NYX_CURL_H
#define NYX_CURL_H

#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#include "nyx_err.h"

/* The shared object opened; its soname has been libcurl.so.4 since 2006. */
#ifndef NYX_CURL_SONAME
#define NYX_CURL_SONAME "libcurl.so.4"
#endif

struct nyx_curl_api {
	CURLcode (*global_init)(long);
	void (*global_cleanup)(void);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	CURLcode (*easy_perform)(CURL *);
	void (*easy_reset)(CURL *);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	char *(*easy_escape)(CURL *, const char *, int);
	void (*free)(void *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	CURLU *(*url)(void);
	void (*url_cleanup)(CURLU *);
	CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
	CURLUcode (*url_get)(const CURLU *, CURLUPart, char **, unsigned int);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_perform)(CURLM *, int *);
	CURLMcode (*multi_poll)(
	    CURLM *, struct curl_waitfd *, unsigned int, int, int *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	CURLMcode (*multi_cleanup)(CURLM *);
};

/* Filled by nyx_curl_load(); zero before. */
extern struct nyx_curl_api nyx_curl;

/*
 * Open libcurl and run curl_global_init(), once per process (thread-safe).
 * -1 with err 71 ("http_init_failed") when it cannot be opened, lacks a
 * symbol or cannot start; every later call answers the same.
 */
int nyx_curl_load(struct nyx_err *err);

/* curl_global_cleanup(), when nyx_curl_load() succeeded. */
void nyx_curl_unload(void);

/* curl.h names these three as macros of their own, typecheck or not */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_global_init nyx_curl.global_init
#define curl_global_cleanup nyx_curl.global_cleanup
#define curl_easy_init nyx_curl.easy_init
#define curl_easy_setopt nyx_curl.easy_setopt
#define curl_easy_getinfo nyx_curl.easy_getinfo
#define curl_easy_perform nyx_curl.easy_perform
#define curl_easy_reset nyx_curl.easy_reset
#define curl_easy_cleanup nyx_curl.easy_cleanup
#define curl_easy_strerror nyx_curl.easy_strerror
#define curl_easy_escape nyx_curl.easy_escape
#define curl_free nyx_curl.free
#define curl_slist_append nyx_curl.slist_append
#define curl_slist_free_all nyx_curl.slist_free_all
#define curl_url nyx_curl.url
#define curl_url_cleanup nyx_curl.url_cleanup
#define curl_url_set nyx_curl.url_set
#define curl_url_get nyx_curl.url_get
#define curl_multi_init nyx_curl.multi_init
#define curl_multi_setopt nyx_curl.multi_setopt
#define curl_multi_add_handle nyx_curl.multi_add_handle
#define curl_multi_remove_handle nyx_curl.multi_remove_handle
#define curl_multi_perform nyx_curl.multi_perform
#define curl_multi_poll nyx_curl.multi_poll
#define curl_multi_info_read nyx_curl.multi_info_read
#define curl_multi_cleanup nyx_curl.multi_cleanup

#endif
