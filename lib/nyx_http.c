#include "nyx_http.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nyx_curl.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_time.h"
#include "nyx_version.h"

struct nyx_http {
	CURL *easy; /* sequential requests share it, and its connections */
	CURLM *multi;
	long connects;
};

/* Per-transfer state handed to the callbacks. */
/* ---- capture (issue 14): one JSON line per exchange ---- */
static int capture_fd = -1;
static bool capture_with_source;

struct xfer {
	struct nyx_http_resp *resp;
	size_t max_body;
	size_t received;
	size_t header_bytes;
	bool too_large;
	bool headers_too_large;
	struct nyx_buf cap; /* the raw body, while a capture is open */
	jv_parser *parser; /* with parse_json, until the document is done */
	struct nyx_json_strict *strict; /* beside it: WIRE.md 1 */
	int ndocs;
	bool bad_json;
	struct curl_slist *hdrs;
	const struct nyx_http_req *req;
	long t0;
	char errbuf[CURL_ERROR_SIZE]; /* libcurl's detailed message */
};

/* libcurl is opened on the first exchange (nyx_curl.h says why). */
int
nyx_http_global_init(struct nyx_err *err)
{
	(void)err;
	return 0;
}

void
nyx_http_global_cleanup(void)
{
	nyx_curl_unload();
}

/* libcurl, opened now if it is not yet; the reason is logged if not. */
static bool
curl_ready(void)
{
	struct nyx_err err = NYX_ERR_ZERO;

	if (nyx_curl_load(&err) == 0)
		return true;
	nyx_log(NYX_LOG_ERROR, "%s", err.message);
	return false;
}

struct nyx_http *
nyx_http_new(void)
{
	struct nyx_http *h;

	if (!curl_ready() || (h = calloc(1, sizeof(*h))) == NULL)
		return NULL;
	h->easy = curl_easy_init();
	if (h->easy == NULL) {
		free(h);
		return NULL;
	}
	return h;
}

void
nyx_http_free(struct nyx_http *h)
{
	if (h == NULL)
		return;
	curl_easy_cleanup(h->easy);
	if (h->multi != NULL)
		curl_multi_cleanup(h->multi);
	free(h);
}

long
nyx_http_connects(const struct nyx_http *h)
{
	return h->connects;
}

void
nyx_http_resp_free(struct nyx_http_resp *r)
{
	if (r == NULL)
		return;
	nyx_buf_free(&r->body);
	free(r->etag);
	free(r->retry_after);
	free(r->location);
	free(r->content_type);
	r->etag = r->retry_after = r->location = r->content_type = NULL;
	jv_free(r->json);
	r->json = jv_invalid();
}

/* Feed bytes to the streaming parser; a second document is an error. */
static void
feed(struct xfer *x, const char *p, size_t n, bool partial)
{
	jv v;

	if (x->parser == NULL || x->bad_json)
		return;
	if ((n > 0 && nyx_json_strict_feed(x->strict, p, n) < 0) ||
	    (!partial && nyx_json_strict_end(x->strict) < 0)) {
		nyx_log(NYX_LOG_DEBUG, "the answer is not strict JSON: %s",
		    nyx_json_strict_why(x->strict));
		x->bad_json = true;
		jv_parser_free(x->parser);
		x->parser = NULL;
		return;
	}
	jv_parser_set_buf(x->parser, p, (int)n, partial);
	for (;;) {
		v = jv_parser_next(x->parser);
		if (jv_is_valid(v)) {
			if (++x->ndocs == 1) {
				jv_free(x->resp->json);
				x->resp->json = v;
			} else {
				jv_free(v);
				x->bad_json = true;
			}
			continue;
		}
		if (jv_invalid_has_msg(jv_copy(v)))
			x->bad_json = true;
		jv_free(v);
		break;
	}
	if (x->bad_json) {
		/* drop what we have; keep counting bytes for the cap */
		jv_parser_free(x->parser);
		x->parser = NULL;
	}
}

static size_t
on_body(char *p, size_t sz, size_t nm, void *ud)
{
	struct xfer *x = ud;
	size_t n = sz * nm;

	if (x->received + n > x->max_body) {
		x->too_large = true;
		return 0; /* abort the transfer: stop reading now */
	}
	x->received += n;
	if (capture_fd >= 0)
		(void)nyx_buf_add(&x->cap, p, n);
	if (x->req->parse_json) {
		feed(x, p, n, true);
		return n;
	}
	if (nyx_buf_add(&x->resp->body, p, n) < 0)
		return 0;
	return n;
}

static char *
hdr_value(const char *p, size_t n)
{
	while (n > 0 && (*p == ' ' || *p == '\t')) {
		p++;
		n--;
	}
	while (n > 0 &&
	    (p[n - 1] == '\r' || p[n - 1] == '\n' || p[n - 1] == ' ' ||
	        p[n - 1] == '\t'))
		n--;
	return strndup(p, n);
}

static void
set_hdr(char **dst, const char *p, size_t n)
{
	free(*dst);
	*dst = hdr_value(p, n);
}

/* An exchange the caller abandons (an interrupt): abort it. */
static int
on_progress(
    void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	const struct xfer *x = ud;

	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return *x->req->abort != 0;
}

static size_t
on_header(char *p, size_t sz, size_t nm, void *ud)
{
	struct xfer *x = ud;
	struct nyx_http_resp *r = x->resp;
	size_t n = sz * nm, klen;
	const char *colon;

	x->header_bytes += n;
	if (x->header_bytes > NYX_HTTP_MAX_HEADERS) {
		x->headers_too_large = true;
		return 0; /* ends the transfer */
	}
	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* a new status line (after 1xx): forget earlier headers */
		r->hdr_names[0] = '\0';
		return n;
	}
	colon = memchr(p, ':', n);
	if (colon == NULL)
		return n;
	klen = (size_t)(colon - p);
	{
		size_t used = strlen(r->hdr_names);

		if (used + klen + 3 < sizeof(r->hdr_names)) {
			if (used > 0) {
				memcpy(r->hdr_names + used, ", ", 2);
				used += 2;
			}
			memcpy(r->hdr_names + used, p, klen);
			r->hdr_names[used + klen] = '\0';
		}
	}
	colon++;
	n -= klen + 1;
	if (klen == 4 && strncasecmp(p, "etag", 4) == 0)
		set_hdr(&r->etag, colon, n);
	else if (klen == 11 && strncasecmp(p, "retry-after", 11) == 0)
		set_hdr(&r->retry_after, colon, n);
	else if (klen == 8 && strncasecmp(p, "location", 8) == 0)
		set_hdr(&r->location, colon, n);
	else if (klen == 12 && strncasecmp(p, "content-type", 12) == 0)
		set_hdr(&r->content_type, colon, n);
	else if (klen == 14 && strncasecmp(p, "content-length", 14) == 0) {
		char *v = hdr_value(colon, n), *end;
		unsigned long long len;

		if (v != NULL) {
			errno = 0;
			len = strtoull(v, &end, 10);
			/* a declared body over the cap is not read at all */
			if (errno == 0 && *end == '\0' && len > x->max_body) {
				x->too_large = true;
				free(v);
				return 0;
			}
			/* one allocation for a body of known size */
			if (errno == 0 && *end == '\0' && !x->req->parse_json)
				nyx_buf_reserve(&r->body, (size_t)len);
			free(v);
		}
	}
	return sz * nm;
}

static int
setup(CURL *c, const struct nyx_http_req *req, struct nyx_http_resp *resp,
    struct xfer *x)
{
	const char *const *hp;
	const char *method = req->method ? req->method : "GET";
	long tmo = req->timeout_ms > 0 ? req->timeout_ms : NYX_HTTP_EXCHANGE_MS;

	memset(x, 0, sizeof(*x));
	x->resp = resp;
	nyx_buf_init(&x->cap, 0);
	x->req = req;
	x->max_body = req->max_body ? req->max_body : NYX_HTTP_MAX_BODY;
	nyx_buf_init(&resp->body, 0);
	resp->status = 0;
	resp->fail = NYX_HTTP_OK;
	resp->errmsg[0] = '\0';
	resp->hdr_names[0] = '\0';
	resp->json = jv_invalid();
	if (req->parse_json) {
		x->parser = jv_parser_new(0);
		x->strict = nyx_json_strict_new();
		if (x->parser == NULL || x->strict == NULL)
			return -1;
	}

	curl_easy_reset(c); /* keeps the connection cache */
	for (hp = req->headers; hp != NULL && *hp != NULL; hp++) {
		struct curl_slist *n = curl_slist_append(x->hdrs, *hp);

		if (n == NULL)
			return -1;
		x->hdrs = n;
	}
	/* never wait for 100-continue */
	x->hdrs = curl_slist_append(x->hdrs, "Expect:");
	if (x->hdrs == NULL)
		return -1;
	curl_easy_setopt(c, CURLOPT_URL, req->url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, tmo);
	curl_easy_setopt(
	    c, CURLOPT_CONNECTTIMEOUT_MS, tmo < 10000 ? tmo : 10000L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "nyx-exec/" NYX_VERSION);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	if (req->abort != NULL) {
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	} else {
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 1L);
	}
	x->errbuf[0] = '\0';
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x->max_body);
	/* an operator proxy applies to remote hosts, never to loopback */
	curl_easy_setopt(c, CURLOPT_NOPROXY, "localhost,127.0.0.0/8,::1");
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	if (req->fresh_connect) {
		curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
		curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	}
	if (strcmp(method, "GET") != 0 || req->body != NULL) {
		curl_easy_setopt(
		    c, CURLOPT_POSTFIELDS, req->body ? req->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)(req->body ? req->body_len : 0));
		if (strcmp(method, "POST") != 0)
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	return 0;
}

static void
trace(const struct nyx_http_req *req, const struct nyx_http_resp *resp)
{
	CURLU *u;
	char *path = NULL, *query = NULL;
	char hdrs[512] = "";
	const char *const *hp;

	if (!nyx_log_enabled(NYX_LOG_TRACE))
		return;
	for (hp = req->headers; hp != NULL && *hp != NULL; hp++) {
		const char *colon = strchr(*hp, ':');
		size_t used = strlen(hdrs);
		size_t kl = colon ? (size_t)(colon - *hp) : 0;

		if (kl > 0 && used + kl + 3 < sizeof(hdrs))
			snprintf(hdrs + used, sizeof(hdrs) - used, "%s%.*s",
			    used ? ", " : "", (int)kl, *hp);
	}
	u = curl_url();
	if (u != NULL &&
	    curl_url_set(u, CURLUPART_URL, req->url, 0) == CURLUE_OK) {
		curl_url_get(u, CURLUPART_PATH, &path, 0);
		curl_url_get(u, CURLUPART_QUERY, &query, 0);
	}
	/* nyx_log masks the _nyxid_via value */
	nyx_log(NYX_LOG_TRACE,
	    "http: %s %s%s%s -> %ld in %ld ms; sent [%s]; "
	    "received [%s]",
	    req->method ? req->method : "GET", path ? path : "?",
	    query ? "?" : "", query ? query : "", resp->status,
	    resp->elapsed_ms, hdrs, resp->hdr_names);
	curl_free(path);
	curl_free(query);
	curl_url_cleanup(u);
}

static void
wipe_slist(struct curl_slist *l)
{
	struct curl_slist *p;

	for (p = l; p != NULL; p = p->next)
		nyx_secure_zero(p->data, strlen(p->data));
	curl_slist_free_all(l);
}

/*
 * The transport's own reason, as an operator needs it (PRODUCT 2):
 * libcurl's detailed message, and the system's error when it adds one
 * ("Connection refused" behind "Couldn't connect to server").
 */
static void
reason(CURL *c, CURLcode rc, const char *errbuf, char *out, size_t n)
{
	const char *m = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
	long os = 0;

	curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os);
	if (os != 0 && strstr(m, strerror((int)os)) == NULL)
		snprintf(out, n, "%s (%s)", m, strerror((int)os));
	else
		snprintf(out, n, "%s", m);
}

/* A body as the capture keeps it: registered credentials redacted; a
 * request's "script" replaced by its SHA-256 unless asked for. */
static jv
capture_body(const char *p, size_t n, bool request)
{
	jv doc, s;

	if (p == NULL || n == 0)
		return jv_null();
	if (request && !capture_with_source) {
		doc = nyx_json_parse(p, n);
		if (jv_get_kind(doc) == JV_KIND_OBJECT &&
		    nyx_json_kind(doc, "script") == JV_KIND_STRING) {
			const char *src = nyx_json_peek_str(doc, "script");
			char hex[65], tag[72];

			if (nyx_sha256_hex(src, strlen(src), hex) == 0) {
				snprintf(tag, sizeof(tag), "sha256:%s", hex);
				doc = jv_object_set(
				    doc, jv_string("script"), jv_string(tag));
				s = jv_dump_string(doc, JV_PRINT_SORTED);
				doc = nyx_log_redact_output(jv_string_value(s),
				    (size_t)jv_string_length_bytes(jv_copy(s)),
				    NULL);
				jv_free(s);
				return doc;
			}
		}
		jv_free(doc);
	}
	return nyx_log_redact_output(p, n, NULL);
}

static void
capture(const struct nyx_http_req *req, const struct nyx_http_resp *r,
    const struct nyx_buf *body)
{
	static const char *const fails[] = {
	    NULL, "transport", "timeout", "too_large"};
	const char *u = strstr(req->url, "://");
	jv rec = jv_object(), h = jv_object();
	char *line;

	u = u ? strchr(u + 3, '/') : NULL;
	rec = jv_object_set(rec, jv_string("v"), jv_number(1));
	rec = jv_object_set(rec, jv_string("type"), jv_string("http.exchange"));
	rec = jv_object_set(rec, jv_string("at"), nyx_json_time(nyx_now_ms()));
	rec = jv_object_set(rec, jv_string("method"),
	    jv_string(req->method ? req->method : "GET"));
	/* the path and query as sent: _nyxid_via is what a replay needs */
	rec = jv_object_set(rec, jv_string("path"), jv_string(u ? u : "/"));
	if (req->body != NULL) {
		rec = jv_object_set(rec, jv_string("request_body"),
		    capture_body(req->body, req->body_len, true));
		/* what --check of nyx-sandboxd accepts as asked for */
		if (capture_with_source)
			rec = jv_object_set(
			    rec, jv_string("source_kept"), jv_true());
	}
	rec = jv_object_set(rec, jv_string("status"), jv_number(r->status));
	rec = jv_object_set(rec, jv_string("fail"),
	    r->fail > 0 && r->fail < 4 ? jv_string(fails[r->fail]) : jv_null());
	if (r->content_type)
		h = jv_object_set(
		    h, jv_string("Content-Type"), jv_string(r->content_type));
	if (r->etag)
		h = jv_object_set(h, jv_string("ETag"), jv_string(r->etag));
	if (r->retry_after)
		h = jv_object_set(
		    h, jv_string("Retry-After"), jv_string(r->retry_after));
	if (r->location)
		h = jv_object_set(
		    h, jv_string("Location"), jv_string(r->location));
	rec = jv_object_set(rec, jv_string("headers"), h);
	/* null: no answer arrived; "": an answer without a body (a 304) */
	rec = jv_object_set(rec, jv_string("body"),
	    r->fail != NYX_HTTP_OK ? jv_null()
	        : body->len == 0   ? jv_string("")
	                         : capture_body(body->data, body->len, false));
	rec = jv_object_set(
	    rec, jv_string("elapsed_ms"), jv_number((double)r->elapsed_ms));
	line = nyx_json_dump(rec);
	if (line != NULL) {
		size_t n = strlen(line);

		line[n] = '\n'; /* written by length: one write, one line */
		if (write(capture_fd, line, n + 1) != (ssize_t)(n + 1))
			nyx_log(NYX_LOG_WARN, "capture: cannot write: %s",
			    strerror(errno));
		free(line);
	}
}

int
nyx_http_capture_open(const char *path, bool with_source, struct nyx_err *err)
{
	struct stat st;
	int fd;

	/* new: created 0600 with O_EXCL; existing: appended to, when it is
	 * a regular file of ours closed to others (never through a link) */
	fd = open(path,
	    O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd < 0 && errno == EEXIST)
		fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return nyx_err_set(err, NYX_EXIT_CANTCREAT, "capture_failed",
		    "cannot open the capture %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
		close(fd);
		return nyx_err_set(err, NYX_EXIT_CANTCREAT, "capture_failed",
		    "the capture %s must be a regular file of yours, mode 0600",
		    path);
	}
	capture_fd = fd;
	capture_with_source = with_source;
	return 0;
}

/*
 * libcurl refuses one header line over its own limit (100 KiB) before
 * on_header sees it: CURLE_OUT_OF_MEMORY in 7.x, CURLE_TOO_LARGE in 8.6
 * and later.  After a status line and before any body byte, that is the
 * server's oversized answer, not this process's memory.
 */
static bool
header_line_too_large(CURL *c, CURLcode rc, const struct xfer *x)
{
	long status = 0;

	if (rc != CURLE_OUT_OF_MEMORY
#if LIBCURL_VERSION_NUM >= 0x080600
	    && rc != CURLE_TOO_LARGE
#endif
	)
		return false;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	return status > 0 && x->received == 0;
}

/* Classify a finished transfer; returns 0 when an HTTP answer is usable. */
static int
finish(CURL *c, CURLcode rc, struct xfer *x, struct nyx_http *h)
{
	struct nyx_http_resp *r = x->resp;
	long status = 0, nconn = 0, reqsize = 0;
	double secs = 0;

	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &secs);
	curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &nconn);
	/* no byte of the request left: the server cannot have acted on it */
	curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &reqsize);
	r->sent = reqsize > 0;
	h->connects += nconn;
	r->elapsed_ms = (long)(secs * 1000);
	r->status = status;
	wipe_slist(x->hdrs);
	x->hdrs = NULL;
	if (x->parser != NULL && rc == CURLE_OK)
		feed(x, "", 0, false); /* end of input; may drop the parser */
	if (x->parser != NULL) {
		jv_parser_free(x->parser);
		x->parser = NULL;
	}
	nyx_json_strict_free(x->strict);
	x->strict = NULL;
	if (x->req->parse_json && (x->bad_json || x->ndocs != 1)) {
		jv_free(r->json);
		r->json = jv_invalid();
	}
	if (x->headers_too_large || header_line_too_large(c, rc, x)) {
		r->fail = NYX_HTTP_TOO_LARGE;
		snprintf(r->errmsg, sizeof(r->errmsg),
		    "headers over the size limit (%u bytes)",
		    NYX_HTTP_MAX_HEADERS);
		nyx_buf_free(&r->body);
	} else if (x->too_large || rc == CURLE_FILESIZE_EXCEEDED) {
		r->fail = NYX_HTTP_TOO_LARGE;
		snprintf(r->errmsg, sizeof(r->errmsg),
		    "a body over the size limit (%zu bytes)", x->max_body);
		nyx_buf_free(&r->body);
	} else if (rc != CURLE_OK) {
		r->fail = rc == CURLE_OPERATION_TIMEDOUT ? NYX_HTTP_TIMEOUT
		                                         : NYX_HTTP_TRANSPORT;
		r->status = 0;
		reason(c, rc, x->errbuf, r->errmsg, sizeof(r->errmsg));
	}
	trace(x->req, r);
	if (capture_fd >= 0)
		capture(x->req, r, &x->cap);
	nyx_buf_free(&x->cap);
	return r->fail == NYX_HTTP_OK ? 0 : -1;
}

int
nyx_http_do(struct nyx_http *h, const struct nyx_http_req *req,
    struct nyx_http_resp *resp)
{
	struct xfer x;
	CURLcode rc;

	if (setup(h->easy, req, resp, &x) < 0) {
		wipe_slist(x.hdrs);
		if (x.parser != NULL)
			jv_parser_free(x.parser);
		nyx_json_strict_free(x.strict);
		resp->fail = NYX_HTTP_TRANSPORT;
		snprintf(resp->errmsg, sizeof(resp->errmsg), "out of memory");
		return -1;
	}
	rc = curl_easy_perform(h->easy);
	return finish(h->easy, rc, &x, h);
}

size_t
nyx_http_do_many(struct nyx_http *h, const struct nyx_http_req *reqs,
    struct nyx_http_resp *resps, size_t n, size_t max_inflight)
{
	struct slot {
		CURL *c;
		struct xfer x;
		size_t idx;
		bool busy;
	} * slots;
	size_t next = 0, done = 0, answered = 0, i, nslots;
	int running;

	if (n == 0)
		return 0;
	if (max_inflight == 0)
		max_inflight = 1;
	nslots = n < max_inflight ? n : max_inflight;
	if (h->multi == NULL) {
		h->multi = curl_multi_init();
		if (h->multi == NULL)
			return 0;
	}
	/* the pool is sized by the bound, not by this batch: a smaller
	 * batch must not close connections a later one would reuse */
	curl_multi_setopt(
	    h->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)max_inflight);
	curl_multi_setopt(
	    h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)max_inflight);
	curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)max_inflight);
	slots = calloc(nslots, sizeof(*slots));
	if (slots == NULL)
		return 0;
	for (i = 0; i < nslots; i++) {
		slots[i].c = curl_easy_init();
		if (slots[i].c == NULL)
			goto out;
	}
	while (done < n) {
		CURLMsg *m;
		int left;

		for (i = 0; i < nslots && next < n; i++) {
			if (slots[i].busy)
				continue;
			slots[i].idx = next;
			if (setup(slots[i].c, &reqs[next], &resps[next],
			        &slots[i].x) < 0) {
				wipe_slist(slots[i].x.hdrs);
				resps[next].fail = NYX_HTTP_TRANSPORT;
				next++;
				done++;
				continue;
			}
			curl_easy_setopt(
			    slots[i].c, CURLOPT_PRIVATE, &slots[i]);
			curl_multi_add_handle(h->multi, slots[i].c);
			slots[i].busy = true;
			next++;
		}
		if (curl_multi_perform(h->multi, &running) != CURLM_OK)
			break;
		while ((m = curl_multi_info_read(h->multi, &left)) != NULL) {
			struct slot *s = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(
			    m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
			if (s == NULL)
				continue;
			if (finish(s->c, m->data.result, &s->x, h) == 0)
				answered++;
			curl_multi_remove_handle(h->multi, s->c);
			s->busy = false;
			done++;
		}
		if (done < n && running > 0)
			curl_multi_poll(h->multi, NULL, 0, 1000, NULL);
	}
out:
	for (i = 0; i < nslots; i++) {
		if (slots[i].c == NULL)
			continue;
		if (slots[i].busy) {
			curl_multi_remove_handle(h->multi, slots[i].c);
			wipe_slist(slots[i].x.hdrs);
			if (slots[i].x.parser != NULL)
				jv_parser_free(slots[i].x.parser);
			nyx_json_strict_free(slots[i].x.strict);
			nyx_buf_free(&slots[i].x.cap);
		}
		curl_easy_cleanup(slots[i].c);
	}
	free(slots);
	return answered;
}

static bool
is_loopback(const char *host)
{
	size_t i, dots = 0;

	if (strcasecmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0 ||
	    strcmp(host, "::1") == 0)
		return true;
	if (strncmp(host, "127.", 4) != 0)
		return false;
	for (i = 0; host[i] != '\0'; i++) {
		if (host[i] == '.')
			dots++;
		else if (!isdigit((unsigned char)host[i]))
			return false;
	}
	return dots == 3;
}

int
nyx_http_check_base_url(const char *url, struct nyx_err *err)
{
	CURLU *u;
	char *scheme = NULL, *host = NULL, *user = NULL, *query = NULL,
	     *frag = NULL;
	int rc = -1;

	if (nyx_curl_load(err) < 0)
		return -1;
	if ((u = curl_url()) == NULL)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	if (strlen(url) > NYX_BASE_URL_MAX) {
		nyx_err_set(err, NYX_EXIT_CONFIG, "base_url_invalid",
		    "the base URL is longer than %d characters",
		    NYX_BASE_URL_MAX);
		goto out;
	}
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    *host == '\0') {
		nyx_err_set(err, NYX_EXIT_CONFIG, "base_url_invalid",
		    "the base URL is not a valid absolute URL with a host "
		    "(write it as https://HOST[:PORT][/PATH])");
		goto out;
	}
	{
		/* the authority: libcurl takes "host:" for the default port */
		const char *a = strstr(url, "://"), *end;
		size_t n;

		a = a ? a + 3 : url;
		n = strcspn(a, "/?#");
		end = a + n;
		if (n > 0 && end[-1] == ':') {
			nyx_err_set(err, NYX_EXIT_CONFIG, "base_url_invalid",
			    "the base URL has an empty port: write the port "
			    "after ':' (http://127.0.0.1:8080), or leave out "
			    "the ':'");
			goto out;
		}
		/* the tools add /api/v1 themselves */
		n = strlen(url);
		if (n >= 7 && strcmp(url + n - 7, "/api/v1") == 0) {
			nyx_err_set(err, NYX_EXIT_CONFIG, "base_url_invalid",
			    "the base URL ends in /api/v1, which the tools add "
			    "themselves: write %.*s (without /api/v1)",
			    (int)(n - 7), url);
			goto out;
		}
	}
	curl_url_get(u, CURLUPART_USER, &user, 0);
	curl_url_get(u, CURLUPART_QUERY, &query, 0);
	curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0);
	if (user != NULL || query != NULL || frag != NULL) {
		nyx_err_set(err, NYX_EXIT_CONFIG, "base_url_invalid",
		    "the base URL must not carry credentials, a query or a "
		    "fragment");
		goto out;
	}
	if (strcmp(scheme, "https") == 0 ||
	    (strcmp(scheme, "http") == 0 && is_loopback(host)))
		rc = 0;
	else
		nyx_err_set(err, NYX_EXIT_CONFIG, "base_url_insecure",
		    "the base URL must use https unless the host is loopback");
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(user);
	curl_free(query);
	curl_free(frag);
	curl_url_cleanup(u);
	return rc;
}

char *
nyx_http_escape(const char *s)
{
	char *e, *out;

	if (!curl_ready() || (e = curl_easy_escape(NULL, s, 0)) == NULL)
		return NULL;
	out = strdup(e);
	curl_free(e);
	return out;
}
