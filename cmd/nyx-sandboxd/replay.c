#include "replay.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_buf.h"
#include "nyx_json.h"

#define CAPTURE_MAX (256u * 1024u * 1024u)

/* The whole lines of a capture (a torn last line is dropped). */
static int
read_capture(const char *path, struct nyx_buf *b, struct nyx_err *err)
{
	char *nl;

	nyx_buf_init(b, CAPTURE_MAX);
	if (nyx_buf_read_file(b, path) < 0)
		return nyx_err_set(err,
		    errno == EFBIG ? NYX_EXIT_DATAERR : NYX_EXIT_NOINPUT,
		    "capture_unreadable", "cannot read the capture %s: %s",
		    path, strerror(errno));
	nl = b->len > 0 ? memrchr(b->data, '\n', b->len) : NULL;
	b->len = nl ? (size_t)(nl - b->data) + 1 : 0;
	return 0;
}

/* Why a line is not a captured exchange, or NULL. */
static const char *
exchange(jv rec)
{
	jv_kind body = nyx_json_kind(rec, "body");

	if (jv_get_kind(rec) != JV_KIND_OBJECT ||
	    nyx_json_kind(rec, "v") != JV_KIND_NUMBER ||
	    nyx_json_peek_str(rec, "type") == NULL ||
	    strcmp(nyx_json_peek_str(rec, "type"), "http.exchange") != 0)
		return "not an http.exchange record";
	if (nyx_json_peek_str(rec, "method") == NULL ||
	    nyx_json_peek_str(rec, "path") == NULL ||
	    nyx_json_peek_str(rec, "path")[0] != '/')
		return "no method or path";
	if (nyx_json_kind(rec, "status") != JV_KIND_NUMBER ||
	    nyx_json_kind(rec, "headers") != JV_KIND_OBJECT ||
	    (body != JV_KIND_STRING && body != JV_KIND_NULL))
		return "no status, headers or body";
	return NULL;
}

/* A glob that matches exactly this path. */
static char *
exact_glob(const char *p)
{
	struct nyx_buf b = NYX_BUF_ZERO;

	nyx_buf_init(&b, 0);
	for (; *p != '\0' && *p != '?'; p++) {
		if (strchr("*?[\\", *p) != NULL)
			nyx_buf_add(&b, "\\", 1);
		nyx_buf_add(&b, p, 1);
	}
	return nyx_buf_take(&b);
}

int
nyx_replay_plan(
    const char *path, bool timing, jv *plan, size_t *n, struct nyx_err *err)
{
	struct nyx_buf b = NYX_BUF_ZERO;
	jv rules = jv_array(), seen = jv_object();
	size_t start = 0, i, line = 0;

	*n = 0;
	if (read_capture(path, &b, err) < 0)
		return -1;
	for (i = 0; i < b.len; i++) {
		jv rec, r;
		const char *why;
		char *glob, key[1200];
		int k;

		if (b.data[i] != '\n')
			continue;
		line++;
		rec = nyx_json_parse(b.data + start, i - start);
		start = i + 1;
		if ((why = exchange(rec)) != NULL) {
			jv_free(rec);
			jv_free(rules);
			jv_free(seen);
			nyx_buf_free(&b);
			return nyx_err_set(err, NYX_EXIT_DATAERR,
			    "capture_invalid", "%s:%zu: %s", path, line, why);
		}
		glob = exact_glob(nyx_json_peek_str(rec, "path"));
		/* the k-th request of this method and path */
		snprintf(key, sizeof(key), "%s %s",
		    nyx_json_peek_str(rec, "method"), glob ? glob : "");
		{
			jv cur = jv_object_get(jv_copy(seen), jv_string(key));

			k = jv_get_kind(cur) == JV_KIND_NUMBER
			    ? (int)jv_number_value(cur) + 1
			    : 1;
			jv_free(cur);
		}
		seen = jv_object_set(seen, jv_string(key), jv_number(k));
		r = jv_object();
		r = jv_object_set(r, jv_string("method"),
		    jv_string(nyx_json_peek_str(rec, "method")));
		r = jv_object_set(
		    r, jv_string("path"), jv_string(glob ? glob : "/"));
		r = jv_object_set(r, jv_string("nth"), jv_number(k));
		r = jv_object_set(r, jv_string("count"), jv_number(1));
		if (nyx_json_kind(rec, "body") == JV_KIND_STRING &&
		    jv_number_value(jv_object_get(
		        jv_copy(rec), jv_string("status"))) >= 100) {
			r = jv_object_set(r, jv_string("status"),
			    jv_object_get(jv_copy(rec), jv_string("status")));
			r = jv_object_set(r, jv_string("headers"),
			    jv_object_get(jv_copy(rec), jv_string("headers")));
			r = jv_object_set(r, jv_string("body"),
			    jv_object_get(jv_copy(rec), jv_string("body")));
		} else {
			/* no answer arrived: the connection drops again */
			r = jv_object_set(r, jv_string("drop"), jv_true());
		}
		if (timing &&
		    nyx_json_kind(rec, "elapsed_ms") == JV_KIND_NUMBER)
			r = jv_object_set(r, jv_string("delay_ms"),
			    jv_object_get(
			        jv_copy(rec), jv_string("elapsed_ms")));
		rules = jv_array_append(rules, r);
		free(glob);
		jv_free(rec);
		(*n)++;
	}
	/* the inventory stays what it was: the last captured answer of each
	 * inventory read answers every later read too */
	{
		static const char *const inventory[] = {
		    "/api/v1/user-services", "/api/v1/keys"};
		int len = jv_array_length(jv_copy(rules)), j, q;

		for (q = 0; q < 2; q++)
			for (j = len - 1; j >= 0; j--) {
				jv r = jv_array_get(jv_copy(rules), j);
				const char *m = nyx_json_peek_str(r, "method");
				const char *pp = nyx_json_peek_str(r, "path");
				bool last = m && pp && strcmp(m, "GET") == 0 &&
				    strcmp(pp, inventory[q]) == 0;

				if (last)
					rules = jv_array_set(rules, j,
					    jv_object_set(r, jv_string("count"),
					        jv_number(0)));
				else
					jv_free(r);
				if (last)
					break;
			}
	}
	jv_free(seen);
	nyx_buf_free(&b);
	*plan = jv_object_set(jv_object(), jv_string("faults"), rules);
	return 0;
}

int
nyx_replay_check(const char *path, size_t *lines, struct nyx_err *err)
{
	/* what a credential looks like (PRODUCT 10): a JWT, an Agent Key,
	 * an API key, a bearer header */
	static const char *const shapes =
	    "eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}\\.|"
	    "nyxid_ag_[0-9a-f]{32,}|nyx(id)?(_sk)?_[0-9a-f]{32,}|"
	    "[Bb]earer [A-Za-z0-9._~+/-]{16,}";
	struct nyx_buf b = NYX_BUF_ZERO;
	size_t start = 0, i, line = 0;
	regex_t re;
	int rc = 0;

	*lines = 0;
	if (regcomp(&re, shapes, REG_EXTENDED | REG_NOSUB) != 0)
		return nyx_err_set(
		    err, NYX_EXIT_SOFTWARE, "regex_failed", "regcomp failed");
	if (read_capture(path, &b, err) < 0) {
		regfree(&re);
		return -1;
	}
	for (i = 0; i < b.len && rc == 0; i++) {
		jv rec, req;
		const char *why, *rb, *script;
		char *text;

		if (b.data[i] != '\n')
			continue;
		line++;
		b.data[i] = '\0';
		text = b.data + start;
		rec = nyx_json_parse(text, i - start);
		start = i + 1;
		why = exchange(rec);
		if (why == NULL && regexec(&re, text, 0, NULL, 0) == 0)
			why = "a token-shaped string";
		rb = nyx_json_peek_str(rec, "request_body");
		req = rb ? nyx_json_parse(rb, strlen(rb)) : jv_null();
		script = nyx_json_peek_str(req, "script");
		if (why == NULL && script != NULL &&
		    strncmp(script, "sha256:", 7) != 0 &&
		    nyx_json_bool(rec, "source_kept") != 1)
			why = "the source itself, not its SHA-256";
		if (why != NULL)
			rc = nyx_err_set(err, NYX_EXIT_DATAERR,
			    "capture_unsafe", "%s:%zu: %s", path, line, why);
		jv_free(req);
		jv_free(rec);
	}
	*lines = line;
	regfree(&re);
	nyx_buf_free(&b);
	return rc;
}
