/*
 * nyx_http: HTTP exchanges on libcurl.  The only file that includes curl.
 *
 * Every exchange has a total time bound, a response body cap (enforced from
 * Content-Length before reading and again while reading), follows no
 * redirects, speaks only http/https, and reuses connections unless the
 * request asks for a fresh one (WIRE.md 4.4: non-retryable requests must
 * never be silently resent by libcurl on a dead reused connection).
 *
 * nyx_http_do() returns 0 when an HTTP answer arrived (of any status) and
 * -1 when none did or it was unusable, with resp->fail saying why.  A
 * response owns its buffers; nyx_http_resp_free() releases them.
 * nyx_http_do_many() runs several requests concurrently over the multi
 * interface with a bound on requests and connections in flight.
 */
#ifndef NYX_HTTP_H
#define NYX_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <jv.h>

#include "nyx_buf.h"
#include "nyx_err.h"

#define NYX_HTTP_MAX_BODY (1024u * 1024u)
#define NYX_HTTP_EXCHANGE_MS 15000L
/* the whole header block of an answer (WIRE 1): more is NYX_HTTP_TOO_LARGE */
#define NYX_HTTP_MAX_HEADERS (64u * 1024u)
/* A base URL longer than this is a configuration error (78). */
#define NYX_BASE_URL_MAX 400

enum nyx_http_fail {
	NYX_HTTP_OK = 0,
	NYX_HTTP_TRANSPORT, /* refused, reset, DNS, TLS, dropped */
	NYX_HTTP_TIMEOUT, /* the exchange's time bound passed */
	NYX_HTTP_TOO_LARGE, /* the body exceeded max_body, or the headers 64 KiB */
};

struct nyx_http_req {
	const char *method; /* "GET" when NULL */
	const char *url;
	const char *const *headers; /* NULL-terminated "Name: value" */
	const char *body; /* NULL: no body */
	size_t body_len;
	long timeout_ms; /* 0: NYX_HTTP_EXCHANGE_MS */
	size_t max_body; /* 0: NYX_HTTP_MAX_BODY */
	bool fresh_connect;
	/*
	 * When set and it becomes non-zero (a signal handler's count), the
	 * exchange is abandoned: a transport failure, with resp.sent saying
	 * whether the request had left.
	 */
	const volatile int *abort;
	/*
	 * Parse the body as one JSON document while it streams in, instead
	 * of keeping it: resp.json gets the document (resp.body stays empty).
	 */
	bool parse_json;
};

struct nyx_http_resp {
	long status; /* 0 when no HTTP answer */
	enum nyx_http_fail fail;
	struct nyx_buf body;
	char *etag;
	char *retry_after;
	char *location;
	char *content_type;
	long elapsed_ms;
	/*
	 * Whether any byte of the request was sent: false when the connection
	 * was never established (DNS, refused, TLS handshake) or it broke
	 * before the request went out, so the server cannot have acted on it
	 * (WIRE 4.4).  True whenever an answer arrived.
	 */
	bool sent;
	/* the transport's own reason (libcurl's message and the system
	 * error: "Connection refused", "Could not resolve host: x", ...),
	 * never a body */
	char errmsg[320];
	char hdr_names[512];
	/* with parse_json: the document, or invalid when it was not exactly
	 * one JSON document (zero-initialised is a valid empty jv) */
	jv json;
};

#define NYX_HTTP_RESP_ZERO                                                     \
	{                                                                      \
		0, NYX_HTTP_OK, NYX_BUF_ZERO, NULL, NULL, NULL, NULL, 0,       \
		    false, "", "",                                             \
		{                                                              \
			0                                                      \
		}                                                              \
	}

struct nyx_http;

/* libcurl, once per process: -1 with err 71 when it cannot start. */
int nyx_http_global_init(struct nyx_err *err);
void nyx_http_global_cleanup(void);

struct nyx_http *nyx_http_new(void);
void nyx_http_free(struct nyx_http *h);

int nyx_http_do(struct nyx_http *h, const struct nyx_http_req *req,
    struct nyx_http_resp *resp);

/*
 * Run n requests, at most max_inflight at once (and as many connections);
 * resps[i] answers reqs[i].  Returns the number of requests that got an
 * HTTP answer.
 */
size_t nyx_http_do_many(struct nyx_http *h, const struct nyx_http_req *reqs,
    struct nyx_http_resp *resps, size_t n, size_t max_inflight);

void nyx_http_resp_free(struct nyx_http_resp *resp);

/*
 * Validate a base URL: http or https, https unless the host is loopback
 * (127.0.0.0/8, ::1, localhost), no credentials, query or fragment.
 * Returns 0 or -1 (exit 78).
 */
/*
 * Capture every exchange of this process to path (issue 14): one
 * "http.exchange" JSON line each, appended as it happens, with the
 * response's allow-listed headers and body and the request body; loaded
 * credentials become [REDACTED] and a request's "script" its SHA-256
 * unless with_source.  A new file is created 0600 with O_EXCL; an
 * existing one must be a regular file of ours closed to others (73).
 */
int nyx_http_capture_open(
    const char *path, bool with_source, struct nyx_err *err);

int nyx_http_check_base_url(const char *url, struct nyx_err *err);

/* Percent-encode one path or query component into a new heap string. */
char *nyx_http_escape(const char *s);

/* Number of TCP connections opened by this handle so far. */
long nyx_http_connects(const struct nyx_http *h);

#endif
