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
#include "world.h"

#define REQ_BODY_MAX (8u * 1024 * 1024)
#define LOG_MAX 200000
#define CACHE_MAX 64

struct cache_ent {
	char *user;
	int endpoint; /* 0 user-services, 1 keys */
	char *body;
	size_t len;
};

struct nyx_srv {
	struct MHD_Daemon *d;
	pthread_mutex_t mu;
	struct nyx_world *world;
	struct nyx_faults faults;
	jv log; /* array of request entries */
	long seq;
	bool control;
	int port;
	char base[96];
	struct cache_ent cache[CACHE_MAX];
	size_t ncache;
	struct nyx_chronod *chrono;
	jv approvals; /* NyxID's approval requests: [{id,user,route,state}] */
};

/* Per-request state across libmicrohttpd's callbacks. */
struct req {
	struct nyx_buf body;
	bool too_big;
};

/* What a handler decided to answer. */
struct answer {
	int status;
	char *body; /* heap, may be NULL */
	size_t len;
	jv headers; /* object of strings */
	bool chunked;
	bool drop;
	/* copies, so a world swapped meanwhile cannot pull them away */
	char principal[128];
	char kind[32];
	/* proxy calls: what NyxID forwarded (never the credentials) */
	bool proxied;
	bool forwarded_auth;
	char delegation_scope[512];
	char upstream[192];
	/* a management write's body (policy fields, labels; never a proxy
	 * body, which carries source), for request-log assertions */
	jv logged_body;
};

static void
cache_flush(struct nyx_srv *s)
{
	size_t i;

	for (i = 0; i < s->ncache; i++) {
		free(s->cache[i].user);
		free(s->cache[i].body);
	}
	s->ncache = 0;
}

static void
answer_json(struct answer *a, int status, jv body)
{
	a->status = status;
	a->body = nyx_json_dump(body);
	a->len = a->body ? strlen(a->body) : 0;
}

static void
answer_error(
    struct answer *a, int status, const char *error, int code, const char *msg)
{
	answer_json(a, status, nyx_world_error(error, code, msg));
}

/* The bearer token or X-API-Key of a request (borrowed), or NULL. */
static const char *
request_token(struct MHD_Connection *c)
{
	const char *auth =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

	if (auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0)
		return auth + 7;
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-API-Key");
}

static void
note_caller(struct answer *a, const struct nyx_principal *p)
{
	snprintf(a->principal, sizeof(a->principal), "%s", p->user);
	snprintf(
	    a->kind, sizeof(a->kind), "%s", nyx_principal_kind_name(p->kind));
}

/* Serve a cached view, building it on a miss.  Caller holds the lock. */
static void
answer_view(struct nyx_srv *s, struct answer *a, const char *user, int endpoint)
{
	size_t i;
	jv v;

	for (i = 0; i < s->ncache; i++)
		if (s->cache[i].endpoint == endpoint &&
		    strcmp(s->cache[i].user, user) == 0) {
			a->status = 200;
			a->body = malloc(s->cache[i].len + 1);
			if (a->body != NULL) {
				memcpy(a->body, s->cache[i].body,
				    s->cache[i].len + 1);
				a->len = s->cache[i].len;
			}
			return;
		}
	v = endpoint == 0 ? nyx_world_user_services(s->world, user)
	                  : nyx_world_keys(s->world, user, s->base);
	answer_json(a, 200, v);
	if (a->body != NULL && s->ncache < CACHE_MAX) {
		struct cache_ent *e = &s->cache[s->ncache];

		e->user = strdup(user);
		e->body = strdup(a->body);
		e->endpoint = endpoint;
		e->len = a->len;
		if (e->user && e->body)
			s->ncache++;
		else {
			free(e->user);
			free(e->body);
		}
	}
}

/* PUT /user-services/{id} or POST /keys for an authorised caller. */
static void
handle_write(struct nyx_srv *s, const char *method, const char *path,
    const struct req *r, const char *user, struct answer *a)
{
	jv doc = nyx_json_parse(r->body.data ? r->body.data : "", r->body.len),
	   out;
	int st;

	if (!jv_is_valid(doc)) {
		jv_free(doc);
		answer_error(
		    a, 400, "bad_request", 1000, "Bad request: invalid JSON");
		return;
	}
	a->logged_body = jv_copy(doc);
	if (strcmp(method, "PUT") == 0)
		st = nyx_world_update_route(
		    s->world, user, path + 22, doc, &out);
	else
		st = nyx_world_create_key(s->world, user, doc, s->base, &out);
	if (st == 200)
		cache_flush(s);
	answer_json(a, st, out);
}

/* The NyxID management subset.  Caller holds the lock. */
static void
handle_api(struct nyx_srv *s, struct MHD_Connection *c, const char *method,
    const char *path, const struct req *r, struct answer *a)
{
	struct nyx_principal p;
	const char *token = request_token(c);
	bool known = token != NULL && nyx_world_auth(s->world, token, &p) == 0;
	bool write = (strncmp(path, "/api/v1/user-services/", 22) == 0 &&
	                 strcmp(method, "PUT") == 0) ||
	    (strcmp(path, "/api/v1/keys") == 0 && strcmp(method, "POST") == 0);
	bool read = strcmp(path, "/api/v1/user-services") == 0 ||
	    strcmp(path, "/api/v1/keys") == 0 ||
	    strncmp(path, "/api/v1/keys/", 13) == 0 ||
	    strcmp(path, "/api/v1/users/me") == 0;
	int status;
	jv err;

	if (known)
		note_caller(a, &p);
	if (!write && !read) {
		answer_error(a, 404, "not_found", 1003, "Not found");
		return;
	}
	/* NyxID authenticates and applies its router rules first */
	if (token != NULL && !known) {
		answer_error(a, 401, "unauthorized", 1001,
		    "Unauthorized: Invalid token");
		return;
	}
	if (nyx_world_human_gate(known ? &p : NULL, method, &status, &err) <
	    0) {
		answer_json(a, status, err);
		return;
	}
	if (write) {
		handle_write(s, method, path, r, p.user, a);
		return;
	}
	if (strcmp(method, "GET") != 0) {
		a->status = 405;
		return;
	}
	if (strcmp(path, "/api/v1/user-services") == 0) {
		answer_view(s, a, p.user, 0);
	} else if (strcmp(path, "/api/v1/keys") == 0) {
		answer_view(s, a, p.user, 1);
	} else if (strcmp(path, "/api/v1/users/me") == 0) {
		answer_json(a, 200, nyx_world_me(s->world, p.user));
	} else {
		jv k = nyx_world_key(s->world, p.user, path + 13, s->base);

		if (jv_is_valid(k)) {
			answer_json(a, 200, k);
		} else {
			jv_free(k);
			answer_error(a, 404, "not_found", 1003,
			    "Not found: Key not found");
		}
	}
}

/*
 * Authenticate the caller and take the lock (held on success): 0, or -1
 * with a 401 answered and the lock released.
 */
static int
lock_caller(struct nyx_srv *s, struct MHD_Connection *c,
    struct nyx_principal *p, struct answer *a)
{
	const char *token = request_token(c);

	pthread_mutex_lock(&s->mu);
	if (token == NULL || nyx_world_auth(s->world, token, p) < 0) {
		pthread_mutex_unlock(&s->mu);
		answer_error(a, 401, "unauthorized", 1001,
		    "Unauthorized: Invalid token");
		return -1;
	}
	note_caller(a, p);
	return 0;
}

/*
 * NyxID's human approval gate on a route with approval_required: a call
 * without an approved request answers 403 approval_required with the
 * request's id and approve URL; an approved request lets exactly one call
 * through (it is consumed).  Caller holds the lock.  Returns 0 to let the
 * call through.
 */
static int
approval_gate(
    struct nyx_srv *s, const char *user, const char *route, struct answer *a)
{
	int i, n = jv_array_length(jv_copy(s->approvals));
	char id[40], hex[17], url[256];
	jv e, body;

	for (i = 0; i < n; i++) {
		const char *st, *u, *r;

		e = jv_array_get(jv_copy(s->approvals), i);
		u = nyx_json_peek_str(e, "user");
		r = nyx_json_peek_str(e, "route");
		st = nyx_json_peek_str(e, "state");
		if (u && r && st && strcmp(u, user) == 0 &&
		    strcmp(r, route) == 0 && strcmp(st, "consumed") != 0) {
			if (strcmp(st, "approved") == 0) {
				e = jv_object_set(e, jv_string("state"),
				    jv_string("consumed"));
				s->approvals = jv_array_set(s->approvals, i, e);
				return 0;
			}
			snprintf(
			    id, sizeof(id), "%s", nyx_json_peek_str(e, "id"));
			jv_free(e);
			goto refuse;
		}
		jv_free(e);
	}
	if (nyx_random_hex(hex, 8) < 0)
		return -1;
	snprintf(id, sizeof(id), "apr_%s", hex);
	e = jv_object();
	e = jv_object_set(e, jv_string("id"), jv_string(id));
	e = jv_object_set(e, jv_string("user"), jv_string(user));
	e = jv_object_set(e, jv_string("route"), jv_string(route));
	e = jv_object_set(e, jv_string("state"), jv_string("pending"));
	s->approvals = jv_array_append(s->approvals, e);
refuse:
	snprintf(url, sizeof(url), "%s/approvals/%s", s->base, id);
	body = nyx_world_error("approval_required", 1010,
	    "Forbidden: this call needs a human approval");
	body = jv_object_set(body, jv_string("request_id"), jv_string(id));
	body = jv_object_set(body, jv_string("approve_url"), jv_string(url));
	answer_json(a, 403, body);
	return 1;
}

/* GET /api/v1/approvals/requests/{id}/status, for its user only. */
static void
handle_approval_status(struct nyx_srv *s, struct MHD_Connection *c,
    const char *url, struct answer *a)
{
	const char *id = url + strlen("/api/v1/approvals/requests/");
	const char *slash = strchr(id, '/');
	struct nyx_principal p;
	int i, n;

	if (lock_caller(s, c, &p, a) < 0)
		return;
	n = jv_array_length(jv_copy(s->approvals));
	for (i = 0; slash != NULL && strcmp(slash, "/status") == 0 && i < n;
	     i++) {
		jv e = jv_array_get(jv_copy(s->approvals), i);
		const char *eid = nyx_json_peek_str(e, "id");
		const char *u = nyx_json_peek_str(e, "user");

		if (eid && u && strlen(eid) == (size_t)(slash - id) &&
		    strncmp(eid, id, (size_t)(slash - id)) == 0 &&
		    strcmp(u, p.user) == 0) {
			const char *st = nyx_json_peek_str(e, "state");
			jv o = jv_object();

			o = jv_object_set(o, jv_string("id"), jv_string(eid));
			/* a consumed approval was approved */
			o = jv_object_set(o, jv_string("status"),
			    jv_string(
			        strcmp(st, "consumed") == 0 ? "approved" : st));
			jv_free(e);
			pthread_mutex_unlock(&s->mu);
			answer_json(a, 200, o);
			return;
		}
		jv_free(e);
	}
	pthread_mutex_unlock(&s->mu);
	answer_error(a, 404, "not_found", 1003, "Not found: no such approval");
}

/*
 * NyxID's SSH exec: POST /api/v1/ssh/{catalog_service_id}/exec for a
 * service the caller can see, {"command","principal","timeout_secs"}.
 * The emulated host runs only the fixed Codex wrapper (anything else
 * exits 126, as the forced-command wrapper would) and gives the decoded
 * task to the Codex runner.
 */
static void
handle_ssh(struct nyx_srv *s, struct MHD_Connection *c, const char *method,
    const char *url, const struct req *r, struct answer *a)
{
	const char *id = url + strlen("/api/v1/ssh/");
	const char *slash = strchr(id, '/');
	struct nyx_principal p;
	struct nyx_sandbox_result res;
	struct nyx_err err = NYX_ERR_ZERO;
	char svc[160], *task = NULL;
	const char *cmd, *principal;
	size_t tlen = 0;
	jv body = jv_invalid(), t, o, keys;
	int i, n, visible = 0, code = 126;
	long ms = 0;

	snprintf(svc, sizeof(svc), "%.*s",
	    (int)(slash ? (size_t)(slash - id) : 0), id);
	if (lock_caller(s, c, &p, a) < 0)
		return;
	o = nyx_world_keys(s->world, p.user, s->base);
	pthread_mutex_unlock(&s->mu);
	keys = nyx_json_get(o, "keys");
	jv_free(o);
	n = jv_get_kind(keys) == JV_KIND_ARRAY ? jv_array_length(jv_copy(keys))
	                                       : 0;
	for (i = 0; i < n && !visible; i++) {
		jv k = jv_array_get(jv_copy(keys), i);
		const char *cs = nyx_json_peek_str(k, "catalog_service_id");

		visible = cs != NULL && strcmp(cs, svc) == 0;
		jv_free(k);
	}
	jv_free(keys);
	if (slash == NULL || strcmp(slash, "/exec") != 0 ||
	    strcmp(method, "POST") != 0 || !visible) {
		answer_error(a, 404, "target_not_allowed", 1003,
		    "Not found: no SSH service of yours with that id");
		return;
	}
	body = nyx_json_parse(r->body.data ? r->body.data : "", r->body.len);
	cmd = nyx_json_peek_str(body, "command");
	principal = nyx_json_peek_str(body, "principal");
	t = nyx_json_get(body, "timeout_secs");
	if (cmd == NULL || principal == NULL || *principal == '\0' ||
	    !nyx_json_integral(t, 1, 300)) {
		answer_error(a, 400, "bad_request", 1000,
		    "command, principal and timeout_secs 1..300 are required");
		jv_free(t);
		jv_free(body);
		return;
	}
	task = nyx_codex_ssh_task(cmd, &tlen);
	memset(&res, 0, sizeof(res));
	if (task != NULL) {
		if (nyx_chronod_codex_run(s->chrono, task, tlen,
		        (int)jv_number_value(t), &res, &err) < 0) {
			answer_error(a, 502, "node_offline", 1006,
			    "The node could not run the command");
			goto out;
		}
		code = res.exit_code;
		ms = res.elapsed_ms;
	}
	o = jv_object();
	o = jv_object_set(o, jv_string("exit_code"), jv_number(code));
	o = jv_object_set(o, jv_string("stdout"),
	    task ? jv_string_sized(
	               res.out.data ? res.out.data : "", (int)res.out.len)
	         : jv_string(""));
	o = jv_object_set(o, jv_string("stderr"),
	    task ? jv_string_sized(
	               res.err.data ? res.err.data : "", (int)res.err.len)
	         : jv_string("forced-command: refused\n"));
	o = jv_object_set(o, jv_string("duration_ms"), jv_number((double)ms));
	o = jv_object_set(
	    o, jv_string("timed_out"), jv_bool(task != NULL && res.timed_out));
	answer_json(a, 200, o);
	snprintf(a->upstream, sizeof(a->upstream), "ssh %s as %s: exit %d", svc,
	    principal, code);
	if (task != NULL)
		nyx_sandbox_result_free(&res);
out:
	if (task != NULL) {
		nyx_secure_zero(task, tlen);
		free(task);
	}
	jv_free(t);
	jv_free(body);
}

/* Parse a YAML or JSON request body. */
static int
body_doc(const struct req *r, jv *out, char *why, size_t whysz)
{
	struct nyx_err err = NYX_ERR_ZERO;

	if (nyx_yaml_load_buf(r->body.data ? r->body.data : "", r->body.len,
	        "request body", out, &err) < 0) {
		snprintf(why, whysz, "%s", err.message);
		return -1;
	}
	return 0;
}

static void
log_lines(struct nyx_srv *s, struct answer *a)
{
	struct nyx_buf b = NYX_BUF_ZERO;
	int i, n = jv_array_length(jv_copy(s->log));

	for (i = 0; i < n; i++) {
		char *line = nyx_json_dump(jv_array_get(jv_copy(s->log), i));

		if (line != NULL) {
			nyx_buf_addstr(&b, line);
			nyx_buf_addstr(&b, "\n");
		}
		free(line);
	}
	a->status = 200;
	a->len = b.len;
	a->body = nyx_buf_take(&b);
	nyx_buf_free(&b);
	a->headers = jv_object_set(a->headers, jv_string("Content-Type"),
	    jv_string("application/x-ndjson"));
}

/* /_nyx/ control endpoints.  Caller holds the lock. */
static void
handle_control(struct nyx_srv *s, const char *method, const char *path,
    const struct req *r, struct answer *a)
{
	char why[512];
	jv doc;

	if (strcmp(path, "/_nyx/requests") == 0 && strcmp(method, "GET") == 0) {
		log_lines(s, a);
	} else if (strncmp(path, "/_nyx/approvals/", 16) == 0 &&
	    strcmp(method, "POST") == 0) {
		/* a human decides: /_nyx/approvals/{id}/approve or /deny */
		const char *id = path + 16, *verb = strrchr(path, '/');
		int i, n = jv_array_length(jv_copy(s->approvals));

		a->status = 404;
		for (i = 0; verb != NULL && verb > id && i < n; i++) {
			jv e = jv_array_get(jv_copy(s->approvals), i);
			const char *eid = nyx_json_peek_str(e, "id");

			if (eid != NULL && strlen(eid) == (size_t)(verb - id) &&
			    strncmp(eid, id, (size_t)(verb - id)) == 0 &&
			    (strcmp(verb, "/approve") == 0 ||
			        strcmp(verb, "/deny") == 0)) {
				e = jv_object_set(e, jv_string("state"),
				    jv_string(verb[1] == 'a' ? "approved"
				                             : "denied"));
				s->approvals = jv_array_set(s->approvals, i, e);
				a->status = 204;
				break;
			}
			jv_free(e);
		}
	} else if (strcmp(path, "/_nyx/executions") == 0 &&
	    strcmp(method, "GET") == 0) {
		a->status = 200;
		a->body = nyx_chronod_list(s->chrono);
		a->len = a->body ? strlen(a->body) : 0;
	} else if (strcmp(path, "/_nyx/requests") == 0 &&
	    strcmp(method, "DELETE") == 0) {
		jv_free(s->log);
		s->log = jv_array();
		a->status = 204;
	} else if ((strcmp(path, "/_nyx/world") == 0 ||
	               strcmp(path, "/_nyx/faults") == 0) &&
	    strcmp(method, "PUT") == 0) {
		int rc;

		if (body_doc(r, &doc, why, sizeof(why)) < 0) {
			answer_error(a, 400, "bad_request", 1000, why);
			return;
		}
		rc = path[6] == 'w'
		    ? nyx_srv_set_world(s, doc, why, sizeof(why))
		    : nyx_srv_set_faults(s, doc, why, sizeof(why));
		if (rc < 0)
			answer_error(a, 400, "bad_request", 1000, why);
		else
			a->status = 204;
	} else {
		answer_error(a, 404, "not_found", 1003, "Not found");
	}
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

/*
 * NyxID's proxy: authenticate, check the route and the caller's access
 * under the lock, then call the upstream without it (a program may run
 * for minutes).  Only the built-in Chrono Sandbox is an upstream here.
 */
static void
handle_proxy(struct nyx_srv *s, struct MHD_Connection *c, const char *method,
    const char *url, const struct req *r, struct answer *a)
{
	const char *rest = url + strlen("/api/v1/proxy/s/");
	const char *slash = strchr(rest, '/');
	const char *token = request_token(c);
	const char *auth =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	const char *via =
	    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "_nyxid_via");
	bool bearer = auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0;
	struct nyx_proxy_target t;
	struct nyx_chronod_req cr;
	struct nyx_chronod_resp cres;
	struct nyx_principal p;
	char slug[160], user[128] = "", *deleg = NULL, *fwd = NULL;
	char prefix[256];
	int status = 0, rc = -1;
	jv body = jv_invalid();

	a->proxied = true;
	snprintf(slug, sizeof(slug), "%.*s",
	    (int)(slash ? (size_t)(slash - rest) : strlen(rest)), rest);
	pthread_mutex_lock(&s->mu);
	if (token == NULL || nyx_world_auth(s->world, token, &p) < 0) {
		status = 401;
		body = nyx_world_error("unauthorized", 1001,
		    token ? "Unauthorized: Invalid token"
		          : "Unauthorized: No valid authentication "
		            "credentials provided");
	} else {
		note_caller(a, &p);
		snprintf(user, sizeof(user), "%s", p.user);
		rc = nyx_world_proxy_target(
		    s->world, &p, slug, via, &t, &status, &body);
		if (rc == 0 && t.approval &&
		    approval_gate(s, p.user, t.route_id, a) != 0) {
			pthread_mutex_unlock(&s->mu);
			return;
		}
	}
	pthread_mutex_unlock(&s->mu);
	if (rc < 0) {
		answer_json(a, status, body);
		return;
	}
	if (!t.chrono) {
		/* NyxID's answer when the upstream cannot be reached */
		answer_error(a, 500, "internal_error", 1006,
		    "An internal error occurred");
		return;
	}
	/* what NyxID injects: the route's policy decides */
	if (t.forward_token && bearer)
		fwd = strdup(token);
	if (t.inject)
		deleg = nyx_chronod_mint(user, t.slug, t.scope, nyx_now_ms());
	a->forwarded_auth = fwd != NULL;
	if (t.inject)
		snprintf(a->delegation_scope, sizeof(a->delegation_scope), "%s",
		    t.scope);
	memset(&cr, 0, sizeof(cr));
	snprintf(prefix, sizeof(prefix), "/api/v1/proxy/s/%s", t.slug);
	cr.proxy_prefix = prefix;
	cr.idempotency_key =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
	cr.if_none_match =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match");
	cr.method = method;
	cr.path = slash ? slash : "/";
	cr.authorization = fwd;
	cr.delegation = deleg;
	cr.body = r->body.data;
	cr.body_len = r->body.len;
	cr.base_url = s->base;
	nyx_chronod_handle(s->chrono, &cr, &cres);
	/* the response headers NyxID passes through */
	if (cres.etag[0])
		a->headers = jv_object_set(
		    a->headers, jv_string("ETag"), jv_string(cres.etag));
	if (cres.retry_after[0])
		a->headers = jv_object_set(a->headers, jv_string("Retry-After"),
		    jv_string(cres.retry_after));
	if (cres.location[0])
		a->headers = jv_object_set(a->headers, jv_string("Location"),
		    jv_string(cres.location));
	snprintf(a->upstream, sizeof(a->upstream), "chrono %s: %s", cr.path,
	    cres.summary);
	a->status = cres.status;
	a->body = cres.body;
	a->len = cres.body ? strlen(cres.body) : 0;
	if (fwd != NULL) {
		nyx_secure_zero(fwd, strlen(fwd));
		free(fwd);
	}
	if (deleg != NULL) {
		nyx_secure_zero(deleg, strlen(deleg));
		free(deleg);
	}
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
	control = s->control && strncmp(url, "/_nyx/", 6) == 0;

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
		const char *tok = request_token(c);

		pthread_mutex_lock(&s->mu);
		if (tok != NULL && nyx_world_auth(s->world, tok, &p) == 0)
			note_caller(&a, &p);
		pthread_mutex_unlock(&s->mu);
	} else if (r->too_big) {
		answer_error(
		    &a, 413, "payload_too_large", 1009, "Payload too large");
	} else if (control) {
		pthread_mutex_lock(&s->mu);
		handle_control(s, method, url, r, &a);
		pthread_mutex_unlock(&s->mu);
	} else if (strncmp(url, "/api/v1/proxy/s/", 16) == 0) {
		handle_proxy(s, c, method, url, r, &a);
	} else if (strncmp(url, "/api/v1/ssh/", 12) == 0) {
		handle_ssh(s, c, method, url, r, &a);
	} else if (strncmp(url, "/api/v1/approvals/requests/", 27) == 0 &&
	    strcmp(method, "GET") == 0) {
		handle_approval_status(s, c, url, &a);
	} else {
		pthread_mutex_lock(&s->mu);
		handle_api(s, c, method, url, r, &a);
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
			cache_flush(s);
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
	cache_flush(s);
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

struct nyx_srv *
nyx_srv_start(const char *listen, jv world, jv faults, bool control,
    const char *store, long retention_s, struct nyx_err *err)
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
	s->control = control;
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
	s->chrono = nyx_chronod_new(store, retention_s, err);
	if (s->chrono == NULL)
		goto fail;
	if (parse_listen(listen, &ss, &sslen, &v6) < 0) {
		nyx_err_set(err, NYX_EXIT_USAGE, "listen_invalid",
		    "--listen takes a numeric HOST:PORT (e.g. 127.0.0.1:0)");
		goto fail;
	}
	s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
	        MHD_USE_THREAD_PER_CONNECTION | (v6 ? MHD_USE_IPv6 : 0),
	    0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR,
	    (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120, MHD_OPTION_END);
	if (s->d == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "listen_failed",
		    "cannot listen on %s", listen);
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
	cache_flush(s);
	jv_free(s->log);
	jv_free(s->approvals);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
