#include "srv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "nyx_buf.h"
#include "chronod.h"
#include "nyx_codex.h"
#include "nyx_config.h"
#include "fault.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_time.h"
#include "srv_int.h"
#include "world.h"

void
srv_cache_flush(struct nyx_srv *s)
{
	size_t i;

	for (i = 0; i < s->ncache; i++) {
		free(s->cache[i].user);
		free(s->cache[i].body);
	}
	s->ncache = 0;
}

void
srv_answer_json(struct answer *a, int status, jv body)
{
	a->status = status;
	a->body = nyx_json_dump(body);
	a->len = a->body ? strlen(a->body) : 0;
}

void
srv_answer_error(
    struct answer *a, int status, const char *error, int code, const char *msg)
{
	srv_answer_json(a, status, nyx_world_error(error, code, msg));
}

/* The bearer token or X-API-Key of a request (borrowed), or NULL. */
const char *
srv_request_token(struct MHD_Connection *c)
{
	const char *auth =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

	if (auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0)
		return auth + 7;
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-API-Key");
}

void
srv_note_caller(struct answer *a, const struct nyx_principal *p)
{
	snprintf(a->principal, sizeof(a->principal), "%s", p->user);
	snprintf(
	    a->kind, sizeof(a->kind), "%s", nyx_principal_kind_name(p->kind));
}

static ssize_t
chunk_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct answer *a = cls;
	size_t n;

	if (pos >= a->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	n = a->len - (size_t)pos;
	if (n > max)
		n = max;
	memcpy(buf, a->body + pos, n);
	return (ssize_t)n;
}

static void
chunk_free(void *cls)
{
	struct answer *a = cls;

	free(a->body);
	jv_free(a->headers);
	free(a);
}

static void
add_headers(struct MHD_Response *resp, jv headers)
{
	jv keys = jv_keys(jv_copy(headers));
	int i, n = jv_array_length(jv_copy(keys));

	for (i = 0; i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i);
		const char *v = nyx_json_peek_str(headers, jv_string_value(k));

		if (v != NULL)
			MHD_add_response_header(resp, jv_string_value(k), v);
		jv_free(k);
	}
	jv_free(keys);
}

static enum MHD_Result
queue(struct MHD_Connection *c, struct answer *a)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;
	bool has_ct = nyx_json_has(a->headers, "Content-Type");

	if (a->chunked) {
		struct answer *copy = malloc(sizeof(*copy));

		if (copy == NULL)
			return MHD_NO;
		*copy = *a;
		a->body = NULL;
		a->headers = jv_object();
		resp = MHD_create_response_from_callback(
		    MHD_SIZE_UNKNOWN, 16384, chunk_reader, copy, chunk_free);
		if (resp == NULL)
			return MHD_NO;
		add_headers(resp, copy->headers);
	} else {
		/* libmicrohttpd takes the heap body over: no second copy */
		resp = MHD_create_response_from_buffer(a->len,
		    a->body ? a->body : (char *)"",
		    a->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
		if (resp == NULL)
			return MHD_NO;
		a->body = NULL;
		add_headers(resp, a->headers);
	}
	if (!has_ct && a->status != 204 && a->status != 304)
		MHD_add_response_header(
		    resp, "Content-Type", "application/json");
	rc = MHD_queue_response(c, (unsigned)a->status, resp);
	MHD_destroy_response(resp);
	return rc;
}

static void
record(struct nyx_srv *s, struct MHD_Connection *c, const char *method,
    const char *path, const struct answer *a, long fault, long ms)
{
	const char *via =
	    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "_nyxid_via");
	jv e = jv_object();

	e = jv_object_set(e, jv_string("seq"), jv_number(++s->seq));
	e = jv_object_set(e, jv_string("method"), jv_string(method));
	e = jv_object_set(e, jv_string("path"), jv_string(path));
	e = jv_object_set(
	    e, jv_string("status"), a->drop ? jv_null() : jv_number(a->status));
	e = jv_object_set(e, jv_string("dropped"), jv_bool(a->drop));
	e = jv_object_set(e, jv_string("principal"),
	    a->principal[0] ? jv_string(a->principal) : jv_null());
	e = jv_object_set(
	    e, jv_string("kind"), a->kind[0] ? jv_string(a->kind) : jv_null());
	e = jv_object_set(e, jv_string("fault"),
	    fault >= 0 ? jv_number((double)fault) : jv_null());
	e = jv_object_set(e, jv_string("nyxid_via"), nyx_json_str_or_null(via));
	{
		/* what a durable client sent: the key only as a digest */
		const char *k = MHD_lookup_connection_value(
		    c, MHD_HEADER_KIND, "Idempotency-Key");
		const char *inm = MHD_lookup_connection_value(
		    c, MHD_HEADER_KIND, "If-None-Match");
		char sha[NYX_SHA256_HEX];

		if (k != NULL && nyx_sha256_hex(k, strlen(k), sha) == 0)
			e = jv_object_set(e,
			    jv_string("idempotency_key_sha256"),
			    jv_string(sha));
		if (inm != NULL)
			e = jv_object_set(
			    e, jv_string("if_none_match"), jv_string(inm));
	}
	if (a->proxied) {
		e = jv_object_set(e, jv_string("forwarded_authorization"),
		    jv_bool(a->forwarded_auth));
		e = jv_object_set(e, jv_string("delegation_scope"),
		    a->delegation_scope[0] ? jv_string(a->delegation_scope)
		                           : jv_null());
		e = jv_object_set(e, jv_string("upstream"),
		    a->upstream[0] ? jv_string(a->upstream) : jv_null());
	} else if (a->upstream[0]) {
		/* the SSH emulation's outcome */
		e = jv_object_set(
		    e, jv_string("upstream"), jv_string(a->upstream));
	}
	if (jv_is_valid(a->logged_body))
		e = jv_object_set(
		    e, jv_string("body"), jv_copy(a->logged_body));
	if (jv_array_length(jv_copy(s->log)) < LOG_MAX)
		s->log = jv_array_append(s->log, e);
	else
		jv_free(e);
	nyx_log_line("%s %s%s -> %s%d %s%s%s%s%s %ld ms", method, path,
	    via ? "?_nyxid_via=" : "", a->drop ? "dropped " : "",
	    a->drop ? 0 : a->status, a->principal[0] ? a->principal : "-",
	    a->kind[0] ? "/" : "", a->kind, a->upstream[0] ? " " : "",
	    a->upstream, ms);
}

/* The control plane's bearer, compared in constant time. */
static bool
control_allowed(const struct nyx_srv *s, struct MHD_Connection *c)
{
	const char *auth =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

	return auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0 &&
	    nyx_secure_equal(auth + 7, s->control_token);
}

static enum MHD_Result
handler(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **con_cls)
{
	struct nyx_srv *s = cls;
	struct req *r = *con_cls;
	struct answer a;
	long fault_idx = -1, delay = 0, delay_after = 0;
	bool drop_after = false;
	jv after = jv_invalid();
	int64_t t0 = nyx_mono_ms();
	enum MHD_Result rc;
	bool control;

	if (r == NULL) {
		r = calloc(1, sizeof(*r));
		if (r == NULL)
			return MHD_NO;
		nyx_buf_init(&r->body, REQ_BODY_MAX);
		*con_cls = r;
		return MHD_YES;
	}
	if (*upload_size > 0) {
		if (!r->too_big &&
		    nyx_buf_add(&r->body, upload, *upload_size) < 0)
			r->too_big = true;
		*upload_size = 0;
		return MHD_YES;
	}
	memset(&a, 0, sizeof(a));
	a.headers = jv_object();
	a.logged_body = jv_invalid();
	control = s->control_token != NULL && strncmp(url, "/_nyx/", 6) == 0;

	pthread_mutex_lock(&s->mu);
	if (!control) {
		struct nyx_fault *f = nyx_faults_match(&s->faults, method, url);

		if (f != NULL) {
			fault_idx = (long)(f - s->faults.v);
			delay = f->delay_ms;
			delay_after = f->delay_after_ms;
			drop_after = f->drop_after;
			after = jv_copy(f->after);
			a.drop = f->drop;
			if (f->status != 0) {
				a.status = f->status;
				a.chunked = f->chunked;
				jv_free(a.headers);
				a.headers = jv_copy(f->headers);
				if (f->body != NULL) {
					a.body = malloc(f->body_len + 1);
					if (a.body != NULL) {
						memcpy(a.body, f->body,
						    f->body_len + 1);
						a.len = f->body_len;
					}
				}
			}
		}
	}
	pthread_mutex_unlock(&s->mu);

	if (delay > 0) {
		struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	if (a.drop || a.status != 0) {
		/* the fault answers; still say who called */
		struct nyx_principal p;
		const char *tok = srv_request_token(c);

		pthread_mutex_lock(&s->mu);
		if (tok != NULL && nyx_world_auth(s->world, tok, &p) == 0)
			srv_note_caller(&a, &p);
		pthread_mutex_unlock(&s->mu);
	} else if (r->too_big) {
		srv_answer_error(
		    &a, 413, "payload_too_large", 1009, "Payload too large");
	} else if (control && !control_allowed(s, c)) {
		srv_answer_error(&a, 401, "unauthorized", 1001,
		    "The control plane needs its bearer token");
	} else if (control) {
		pthread_mutex_lock(&s->mu);
		srv_handle_control(s, method, url, r, &a);
		pthread_mutex_unlock(&s->mu);
	} else if (strncmp(url, "/api/v1/proxy/s/", 16) == 0) {
		srv_handle_proxy(s, c, method, url, r, &a);
	} else if (strncmp(url, "/api/v1/ssh/", 12) == 0) {
		srv_handle_ssh(s, c, method, url, r, &a);
	} else if (strncmp(url, "/api/v1/approvals/requests/", 27) == 0 &&
	    strcmp(method, "GET") == 0) {
		srv_handle_approval_status(s, c, url, &a);
	} else {
		pthread_mutex_lock(&s->mu);
		srv_handle_api(s, c, method, url, r, &a);
		pthread_mutex_unlock(&s->mu);
	}
	if (delay_after > 0) {
		/* the work is done; only the answer is held back */
		struct timespec ts = {
		    delay_after / 1000, (delay_after % 1000) * 1000000L};

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	if (drop_after)
		a.drop = true;
	if (jv_is_valid(after) && !a.drop) {
		/* the fault plan's concurrent edit, after the real answer */
		pthread_mutex_lock(&s->mu);
		if (nyx_world_edit_route(s->world,
		        nyx_json_peek_str(after, "route"),
		        nyx_json_get(after, "set")) == 0)
			srv_cache_flush(s);
		pthread_mutex_unlock(&s->mu);
	}
	jv_free(after);
	if (!control) {
		pthread_mutex_lock(&s->mu);
		record(s, c, method, url, &a, fault_idx,
		    (long)(nyx_mono_ms() - t0));
		pthread_mutex_unlock(&s->mu);
	}
	rc = a.drop ? MHD_NO : queue(c, &a);
	free(a.body);
	jv_free(a.headers);
	jv_free(a.logged_body);
	return rc;
}

static void
completed(void *cls, struct MHD_Connection *c, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct req *r = *con_cls;

	if (r != NULL) {
		nyx_buf_free(&r->body);
		free(r);
		*con_cls = NULL;
	}
}

int
nyx_srv_set_world(struct nyx_srv *s, jv doc, char *why, size_t whysz)
{
	struct nyx_world *w = nyx_world_new(doc, why, whysz);

	if (w == NULL)
		return -1;
	/* the caller may or may not hold the lock: it is recursive */
	pthread_mutex_lock(&s->mu);
	nyx_world_free(s->world);
	s->world = w;
	srv_cache_flush(s);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int
nyx_srv_set_faults(struct nyx_srv *s, jv doc, char *why, size_t whysz)
{
	struct nyx_faults f;

	if (nyx_faults_parse(doc, &f, why, whysz) < 0)
		return -1;
	pthread_mutex_lock(&s->mu);
	nyx_faults_free(&s->faults);
	s->faults = f;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int
parse_listen(
    const char *listen, struct sockaddr_storage *ss, socklen_t *len, bool *v6)
{
	char host[128];
	const char *colon = strrchr(listen, ':');
	struct addrinfo hints, *res = NULL;
	size_t hl;

	if (colon == NULL)
		return -1;
	hl = (size_t)(colon - listen);
	if (hl >= sizeof(host))
		return -1;
	memcpy(host, listen, hl);
	host[hl] = '\0';
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || res == NULL)
		return -1;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	*v6 = res->ai_family == AF_INET6;
	freeaddrinfo(res);
	return 0;
}

/* Whether an address is on loopback (127.0.0.0/8, ::1). */
static bool
loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss->ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(
		    &((const struct sockaddr_in6 *)ss)->sin6_addr);
	return false;
}

struct nyx_srv *
nyx_srv_start(
    const struct nyx_srv_opts *o, jv world, jv faults, struct nyx_err *err)
{
	struct nyx_srv *s = calloc(1, sizeof(*s));
	struct sockaddr_storage ss;
	socklen_t sslen;
	pthread_mutexattr_t ma;
	const union MHD_DaemonInfo *info;
	char why[512], host[64];
	bool v6 = false;

	if (s == NULL) {
		jv_free(world);
		jv_free(faults);
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		return NULL;
	}
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&s->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	s->log = jv_array();
	s->approvals = jv_array();
	if (o->control_token != NULL &&
	    (s->control_token = strdup(o->control_token)) == NULL) {
		jv_free(world);
		jv_free(faults);
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto fail;
	}
	if (nyx_srv_set_world(s, world, why, sizeof(why)) < 0) {
		jv_free(faults);
		nyx_err_set(err, NYX_EXIT_DATAERR, "world_invalid",
		    "the world is invalid: %s", why);
		goto fail;
	}
	if (nyx_srv_set_faults(s, faults, why, sizeof(why)) < 0) {
		nyx_err_set(err, NYX_EXIT_DATAERR, "faults_invalid",
		    "the fault plan is invalid: %s", why);
		goto fail;
	}
	if (parse_listen(o->listen, &ss, &sslen, &v6) < 0) {
		nyx_err_set(err, NYX_EXIT_USAGE, "listen_invalid",
		    "--listen takes a numeric HOST:PORT (e.g. 127.0.0.1:0)");
		goto fail;
	}
	if (!loopback(&ss) && !o->allow_remote) {
		nyx_err_set(err, NYX_EXIT_USAGE, "listen_not_loopback",
		    "%s is not a loopback address: this server's tokens are "
		    "public test values; pass --allow-remote to serve it "
		    "anyway",
		    o->listen);
		goto fail;
	}
	s->chrono = nyx_chronod_new(o->store, o->retention_s, err);
	if (s->chrono == NULL)
		goto fail;
	s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
	        MHD_USE_THREAD_PER_CONNECTION | (v6 ? MHD_USE_IPv6 : 0),
	    0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR,
	    (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120,
	    /* room for a fault plan's oversized headers (WIRE 1): MHD builds
	     * the whole header block in the connection's pool */
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(1u << 20),
	    MHD_OPTION_END);
	if (s->d == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "listen_failed",
		    "cannot listen on %s", o->listen);
		goto fail;
	}
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : 0;
	if (v6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
		    host, sizeof(host));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host,
		    sizeof(host));
	snprintf(s->base, sizeof(s->base),
	    v6 ? "http://[%s]:%d" : "http://%s:%d", host, s->port);
	return s;
fail:
	nyx_srv_stop(s);
	return NULL;
}

int
nyx_srv_set_codex_runner(
    struct nyx_srv *s, const char *cmd, struct nyx_err *err)
{
	return nyx_chronod_set_runner(s->chrono, cmd, err);
}

int
nyx_srv_port(const struct nyx_srv *s)
{
	return s->port;
}

const char *
nyx_srv_base(const struct nyx_srv *s)
{
	return s->base;
}

void
nyx_srv_stop(struct nyx_srv *s)
{
	if (s == NULL)
		return;
	if (s->d != NULL)
		MHD_stop_daemon(s->d);
	nyx_chronod_free(s->chrono);
	nyx_world_free(s->world);
	nyx_faults_free(&s->faults);
	srv_cache_flush(s);
	jv_free(s->log);
	jv_free(s->approvals);
	pthread_mutex_destroy(&s->mu);
	if (s->control_token != NULL) {
		nyx_secure_zero(s->control_token, strlen(s->control_token));
		free(s->control_token);
	}
	free(s);
}
