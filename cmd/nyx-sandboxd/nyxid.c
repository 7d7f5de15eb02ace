/*
 * nyxid: nyx-sandboxd's NyxID API: per-caller inventory views, route
 * writes, NyxID's own approval gate, SSH exec behind the Codex wrapper,
 * and the credential proxy in front of the Chrono emulation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nyx_codex.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_time.h"
#include "srv_int.h"

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
	srv_answer_json(a, 200, v);
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
		srv_answer_error(
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
		srv_cache_flush(s);
	srv_answer_json(a, st, out);
}

/* The NyxID management subset.  Caller holds the lock. */
void
srv_handle_api(struct nyx_srv *s, struct MHD_Connection *c, const char *method,
    const char *path, const struct req *r, struct answer *a)
{
	struct nyx_principal p;
	const char *token = srv_request_token(c);
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
		srv_note_caller(a, &p);
	if (!write && !read) {
		srv_answer_error(a, 404, "not_found", 1003, "Not found");
		return;
	}
	/* NyxID authenticates and applies its router rules first */
	if (token != NULL && !known) {
		srv_answer_error(a, 401, "unauthorized", 1001,
		    "Unauthorized: Invalid token");
		return;
	}
	if (nyx_world_human_gate(known ? &p : NULL, method, &status, &err) <
	    0) {
		srv_answer_json(a, status, err);
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
		srv_answer_json(a, 200, nyx_world_me(s->world, p.user));
	} else {
		jv k = nyx_world_key(s->world, p.user, path + 13, s->base);

		if (jv_is_valid(k)) {
			srv_answer_json(a, 200, k);
		} else {
			jv_free(k);
			srv_answer_error(a, 404, "not_found", 1003,
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
	const char *token = srv_request_token(c);

	pthread_mutex_lock(&s->mu);
	if (token == NULL || nyx_world_auth(s->world, token, p) < 0) {
		pthread_mutex_unlock(&s->mu);
		srv_answer_error(a, 401, "unauthorized", 1001,
		    "Unauthorized: Invalid token");
		return -1;
	}
	srv_note_caller(a, p);
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
		/* a consumed or denied request is over: a new call asks
		 * anew */
		if (u && r && st && strcmp(u, user) == 0 &&
		    strcmp(r, route) == 0 && strcmp(st, "consumed") != 0 &&
		    strcmp(st, "denied") != 0) {
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
	srv_answer_json(a, 403, body);
	return 1;
}

/* GET /api/v1/approvals/requests/{id}/status, for its user only. */
void
srv_handle_approval_status(struct nyx_srv *s, struct MHD_Connection *c,
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
			srv_answer_json(a, 200, o);
			return;
		}
		jv_free(e);
	}
	pthread_mutex_unlock(&s->mu);
	srv_answer_error(
	    a, 404, "not_found", 1003, "Not found: no such approval");
}

/*
 * NyxID's SSH exec: POST /api/v1/ssh/{catalog_service_id}/exec for a
 * service the caller can see, {"command","principal","timeout_secs"}.
 * The emulated host runs only the fixed Codex wrapper (anything else
 * exits 126, as the forced-command wrapper would) and gives the decoded
 * task to the Codex runner.
 */
void
srv_handle_ssh(struct nyx_srv *s, struct MHD_Connection *c, const char *method,
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
		srv_answer_error(a, 404, "target_not_allowed", 1003,
		    "Not found: no SSH service of yours with that id");
		return;
	}
	body = nyx_json_parse(r->body.data ? r->body.data : "", r->body.len);
	cmd = nyx_json_peek_str(body, "command");
	principal = nyx_json_peek_str(body, "principal");
	t = nyx_json_get(body, "timeout_secs");
	if (cmd == NULL || principal == NULL || *principal == '\0' ||
	    !nyx_json_integral(t, 1, 300)) {
		srv_answer_error(a, 400, "bad_request", 1000,
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
			srv_answer_error(a, 502, "node_offline", 1006,
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
	srv_answer_json(a, 200, o);
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

/*
 * NyxID's proxy: authenticate, check the route and the caller's access
 * under the lock, then call the upstream without it (a program may run
 * for minutes).  Only the built-in Chrono Sandbox is an upstream here.
 */
void
srv_handle_proxy(struct nyx_srv *s, struct MHD_Connection *c,
    const char *method, const char *url, const struct req *r, struct answer *a)
{
	const char *rest = url + strlen("/api/v1/proxy/s/");
	const char *slash = strchr(rest, '/');
	const char *token = srv_request_token(c);
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
		srv_note_caller(a, &p);
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
		srv_answer_json(a, status, body);
		return;
	}
	if (!t.chrono) {
		/* NyxID's answer when the upstream cannot be reached */
		srv_answer_error(a, 500, "internal_error", 1006,
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
