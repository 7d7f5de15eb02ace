#include "world.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_cred.h"
#include "nyx_hash.h"
#include "nyx_json.h"

struct token {
	const char *token;
	struct nyx_principal p;
};

struct nyx_world {
	jv doc;
	jv users; /* array */
	jv orgs; /* array */
	jv routes; /* array */
	struct token *tokens;
	size_t ntokens;
	bool list_inactive;
};

static const char *const kind_names[] = {
    "user", "agent_key", "api_key", "delegation", "service_account", "relay"};

const char *
nyx_principal_kind_name(enum nyx_principal_kind k)
{
	return kind_names[k];
}

static jv
set(jv o, const char *k, jv v)
{
	return jv_object_set(o, jv_string(k), v);
}

jv
nyx_world_error(const char *error, int code, const char *message)
{
	jv o = jv_object();

	o = set(o, "error", jv_string(error));
	o = set(o, "error_code", jv_number(code));
	return set(o, "message", jv_string(message));
}

/* An array-of-objects field, or an empty array when absent. */
static int
list(jv doc, const char *k, jv *out, char *why, size_t whysz)
{
	jv v = nyx_json_get(doc, k);
	int i, n;

	if (jv_get_kind(v) == JV_KIND_INVALID ||
	    jv_get_kind(v) == JV_KIND_NULL) {
		jv_free(v);
		*out = jv_array();
		return 0;
	}
	if (jv_get_kind(v) != JV_KIND_ARRAY) {
		jv_free(v);
		snprintf(why, whysz, "'%s' must be a list", k);
		return -1;
	}
	n = jv_array_length(jv_copy(v));
	for (i = 0; i < n; i++) {
		jv e = jv_array_get(jv_copy(v), i);
		jv_kind kind = jv_get_kind(e);

		jv_free(e);
		if (kind != JV_KIND_OBJECT) {
			jv_free(v);
			snprintf(why, whysz, "%s[%d] must be a mapping", k, i);
			return -1;
		}
	}
	*out = v;
	return 0;
}

static jv
find_by_id(jv arr, const char *id)
{
	int i, n = jv_array_length(jv_copy(arr));

	for (i = 0; i < n; i++) {
		jv e = jv_array_get(jv_copy(arr), i);
		const char *eid = nyx_json_peek_str(e, "id");

		if (eid != NULL && strcmp(eid, id) == 0)
			return e;
		jv_free(e);
	}
	return jv_invalid();
}

static int
need_str(jv o, const char *k, const char *what, int i, char *why, size_t whysz)
{
	if (nyx_json_peek_str(o, k) == NULL) {
		snprintf(why, whysz, "%s[%d].%s must be a string", what, i, k);
		return -1;
	}
	return 0;
}

static int
parse_kind(const char *s, enum nyx_principal_kind *k)
{
	size_t i;

	for (i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
		if (strcmp(s, kind_names[i]) == 0) {
			*k = (enum nyx_principal_kind)i;
			return 0;
		}
	return -1;
}

struct nyx_world *
nyx_world_new(jv doc, char *why, size_t whysz)
{
	struct nyx_world *w = calloc(1, sizeof(*w));
	jv tokens = jv_invalid();
	int i, n;

	if (w == NULL) {
		jv_free(doc);
		snprintf(why, whysz, "out of memory");
		return NULL;
	}
	w->doc = doc;
	w->users = w->orgs = w->routes = jv_invalid();
	if (jv_get_kind(doc) != JV_KIND_OBJECT) {
		snprintf(why, whysz, "the world must be a mapping");
		goto fail;
	}
	if (list(doc, "users", &w->users, why, whysz) < 0 ||
	    list(doc, "orgs", &w->orgs, why, whysz) < 0 ||
	    list(doc, "routes", &w->routes, why, whysz) < 0 ||
	    list(doc, "tokens", &tokens, why, whysz) < 0)
		goto fail;
	w->list_inactive = nyx_json_bool(doc, "list_inactive_routes") != 0;
	n = jv_array_length(jv_copy(w->users));
	for (i = 0; i < n; i++) {
		jv u = jv_array_get(jv_copy(w->users), i);
		int rc = need_str(u, "id", "users", i, why, whysz);

		jv_free(u);
		if (rc < 0)
			goto fail;
	}
	n = jv_array_length(jv_copy(w->orgs));
	for (i = 0; i < n; i++) {
		jv o = jv_array_get(jv_copy(w->orgs), i);
		jv m = nyx_json_get(o, "members");
		int rc = need_str(o, "id", "orgs", i, why, whysz);
		int j, mn;

		if (rc == 0 && jv_get_kind(m) != JV_KIND_ARRAY &&
		    jv_get_kind(m) != JV_KIND_INVALID) {
			snprintf(
			    why, whysz, "orgs[%d].members must be a list", i);
			rc = -1;
		}
		mn = jv_get_kind(m) == JV_KIND_ARRAY
		    ? jv_array_length(jv_copy(m))
		    : 0;
		for (j = 0; rc == 0 && j < mn; j++) {
			jv e = jv_array_get(jv_copy(m), j);
			const char *role = nyx_json_peek_str(e, "role");

			if (nyx_json_peek_str(e, "user") == NULL ||
			    role == NULL ||
			    (strcmp(role, "admin") != 0 &&
			        strcmp(role, "member") != 0 &&
			        strcmp(role, "viewer") != 0)) {
				snprintf(why, whysz,
				    "orgs[%d].members[%d] needs "
				    "user and role (admin, member, viewer)",
				    i, j);
				rc = -1;
			}
			jv_free(e);
		}
		jv_free(m);
		jv_free(o);
		if (rc < 0)
			goto fail;
	}
	n = jv_array_length(jv_copy(w->routes));
	for (i = 0; i < n; i++) {
		jv r = jv_array_get(jv_copy(w->routes), i);
		int rc = need_str(r, "id", "routes", i, why, whysz);

		if (rc == 0)
			rc = need_str(r, "owner", "routes", i, why, whysz);
		if (rc == 0)
			rc = need_str(r, "slug", "routes", i, why, whysz);
		jv_free(r);
		if (rc < 0)
			goto fail;
	}
	n = jv_array_length(jv_copy(tokens));
	w->tokens = calloc(n ? (size_t)n : 1, sizeof(*w->tokens));
	if (w->tokens == NULL)
		goto fail;
	for (i = 0; i < n; i++) {
		jv t = jv_array_get(jv_copy(tokens), i);
		struct token *tk = &w->tokens[i];
		const char *kind = nyx_json_peek_str(t, "kind");

		/* strings stay valid: w->doc holds the same objects */
		tk->token = nyx_json_peek_str(t, "token");
		tk->p.user = nyx_json_peek_str(t, "user");
		tk->p.scope = nyx_json_peek_str(t, "scope");
		if (tk->token == NULL || tk->p.user == NULL || kind == NULL ||
		    parse_kind(kind, &tk->p.kind) < 0) {
			jv_free(t);
			snprintf(why, whysz,
			    "tokens[%d] needs token, user and a "
			    "kind (user, agent_key, api_key, delegation, "
			    "service_account, relay)",
			    i);
			goto fail;
		}
		/* owned by the token; freed with the world */
		tk->p.allowed_routes = nyx_json_get(t, "allowed_routes");
		jv_free(t);
		w->ntokens++;
	}
	jv_free(tokens);
	return w;
fail:
	jv_free(tokens);
	nyx_world_free(w);
	return NULL;
}

void
nyx_world_free(struct nyx_world *w)
{
	size_t i;

	if (w == NULL)
		return;
	jv_free(w->users);
	jv_free(w->orgs);
	jv_free(w->routes);
	jv_free(w->doc);
	for (i = 0; i < w->ntokens; i++)
		jv_free(w->tokens[i].p.allowed_routes);
	free(w->tokens);
	free(w);
}

size_t
nyx_world_nroutes(const struct nyx_world *w)
{
	return (size_t)jv_array_length(jv_copy(w->routes));
}

int
nyx_world_auth(
    const struct nyx_world *w, const char *token, struct nyx_principal *p)
{
	size_t i;

	if (token == NULL)
		return -1;
	for (i = 0; i < w->ntokens; i++)
		if (strcmp(w->tokens[i].token, token) == 0) {
			*p = w->tokens[i].p;
			return 0;
		}
	return -1;
}

int
nyx_world_human_gate(
    const struct nyx_principal *p, const char *method, int *status, jv *body)
{
	const char *msg = NULL;

	if (p == NULL) {
		*status = 401;
		*body = nyx_world_error("unauthorized", 1001,
		    "Unauthorized: No "
		    "valid authentication credentials provided");
		return -1;
	}
	switch (p->kind) {
	case NYX_P_USER:
		return 0;
	case NYX_P_AGENT_KEY:
	case NYX_P_API_KEY:
		msg = "Forbidden: API keys cannot access this endpoint";
		break;
	case NYX_P_SERVICE_ACCOUNT:
		msg = "Forbidden: Service accounts cannot access this endpoint";
		break;
	case NYX_P_RELAY:
		msg = "Forbidden: Relay tokens cannot access this endpoint";
		break;
	case NYX_P_DELEGATION:
		/* account:read allows GET only */
		if (strcmp(method, "GET") == 0 &&
		    nyx_scope_has(p->scope, "account:read"))
			return 0;
		msg = "Forbidden: Delegated tokens cannot access this endpoint";
		break;
	}
	*status = 403;
	*body = nyx_world_error("forbidden", 1002, msg);
	return -1;
}

/* The caller's role in org, or NULL when not a member. */
static const char *
role_in(const struct nyx_world *w, jv org, const char *user)
{
	jv m = nyx_json_get(org, "members");
	const char *role = NULL;
	int i, n;

	(void)w;
	if (jv_get_kind(m) != JV_KIND_ARRAY) {
		jv_free(m);
		return NULL;
	}
	n = jv_array_length(jv_copy(m));
	for (i = 0; i < n && role == NULL; i++) {
		jv e = jv_array_get(jv_copy(m), i);
		const char *u = nyx_json_peek_str(e, "user");

		if (u != NULL && strcmp(u, user) == 0)
			role = nyx_json_peek_str(e, "role");
		jv_free(e);
	}
	jv_free(m);
	/* role points into org, which the world keeps alive */
	return role;
}

/*
 * The credential_source of route r for user, or invalid when the route is
 * not visible to them.
 */
static jv
source_for(const struct nyx_world *w, jv r, const char *user)
{
	const char *owner = nyx_json_peek_str(r, "owner");
	jv org, src;
	const char *role;
	bool admin_only = nyx_json_bool(r, "admin_only") == 1;

	if (strcmp(owner, user) == 0)
		return set(jv_object(), "type", jv_string("personal"));
	org = find_by_id(w->orgs, owner);
	if (!jv_is_valid(org))
		return jv_invalid();
	role = role_in(w, org, user);
	if (role == NULL) {
		jv_free(org);
		return jv_invalid();
	}
	src = set(jv_object(), "type", jv_string("org"));
	src = set(src, "org_id", jv_string(owner));
	src = set(src, "org_name",
	    jv_string(nyx_json_peek_str(org, "name")
	            ? nyx_json_peek_str(org, "name")
	            : owner));
	src = set(src, "avatar_url", jv_null());
	src = set(src, "role", jv_string(role));
	src = set(src, "allowed",
	    jv_bool(
	        (strcmp(role, "admin") == 0 || strcmp(role, "member") == 0) &&
	        (!admin_only || strcmp(role, "admin") == 0)));
	jv_free(org);
	return src;
}

static bool
listed(const struct nyx_world *w, jv r)
{
	return w->list_inactive || nyx_json_bool(r, "is_active") != 0;
}

/* Copy r[k] into o when present and not null. */
static jv
copy_field(jv o, jv r, const char *k)
{
	jv v = nyx_json_get(r, k);

	if (jv_get_kind(v) == JV_KIND_INVALID ||
	    jv_get_kind(v) == JV_KIND_NULL) {
		jv_free(v);
		return o;
	}
	return set(o, k, v);
}

static jv
bool_or(jv r, const char *k, bool dflt)
{
	int b = nyx_json_bool(r, k);

	return jv_bool(b < 0 ? dflt : b == 1);
}

static jv
user_service_entry(jv r, jv src)
{
	jv o = jv_object();
	const char *id = nyx_json_peek_str(r, "id");
	char ep[256];

	snprintf(ep, sizeof(ep), "ep-%s", id);
	o = set(o, "id", jv_string(id));
	o = copy_field(o, r, "slug");
	o = set(o, "endpoint_id", jv_string(ep));
	o = set(o, "auth_method", jv_string("bearer"));
	o = set(o, "auth_key_name", jv_string("Authorization"));
	o = copy_field(o, r, "catalog_service_id");
	o = copy_field(o, r, "node_id");
	o = set(o, "node_priority", jv_number(0));
	o = set(o, "ssh_auth_mode", jv_string("proxy_only"));
	o = set(o, "ssh_node_keys_stale", jv_false());
	o = set(o, "admin_only", bool_or(r, "admin_only", false));
	o = set(o, "is_active", bool_or(r, "is_active", true));
	o = set(o, "identity_propagation_mode", jv_string("none"));
	o = set(o, "identity_include_user_id", jv_false());
	o = set(o, "identity_include_email", jv_false());
	o = set(o, "identity_include_name", jv_false());
	o = copy_field(o, r, "forward_access_token");
	o = copy_field(o, r, "inject_delegation_token");
	o = copy_field(o, r, "delegation_token_scope");
	o = copy_field(o, r, "label");
	o = set(o, "ws_frame_injections", jv_array());
	o = set(o, "created_at", jv_string("2026-01-01T00:00:00Z"));
	o = copy_field(o, r, "updated_at");
	if (!nyx_json_has(o, "updated_at"))
		o = set(o, "updated_at", jv_string("2026-01-01T00:00:00Z"));
	return set(o, "credential_source", src);
}

static jv
key_entry(jv r, jv src, const char *base)
{
	jv o = jv_object(), key = nyx_json_get(r, "key");
	const char *id = nyx_json_peek_str(r, "id");
	const char *slug = nyx_json_peek_str(r, "slug");
	const char *label = nyx_json_peek_str(r, "label");
	jv cs_override = nyx_json_get(key, "credential_source");
	char url[1024];

	if (jv_get_kind(key) != JV_KIND_OBJECT) {
		jv_free(key);
		key = jv_object();
	}
	o = set(o, "id", jv_string(id));
	o = set(o, "slug", jv_string(slug));
	o = set(o, "label", jv_string(label ? label : slug));
	o = set(o, "name", jv_string(label ? label : slug));
	o = copy_field(o, r, "catalog_service_id");
	o = copy_field(o, r, "catalog_service_slug");
	o = copy_field(o, key, "catalog_service_id"); /* key-level override */
	{
		jv ac = nyx_json_get(key, "auto_connected");

		/* an explicit null leaves the field out, like older NyxID */
		if (jv_get_kind(ac) == JV_KIND_INVALID)
			o = set(o, "auto_connected", jv_false());
		else if (jv_get_kind(ac) != JV_KIND_NULL)
			o = set(o, "auto_connected", jv_copy(ac));
		jv_free(ac);
	}
	o = set(o, "status",
	    jv_string(nyx_json_peek_str(key, "status")
	            ? nyx_json_peek_str(key, "status")
	            : "active"));
	o = set(o, "is_active",
	    bool_or(key, "is_active", nyx_json_bool(r, "is_active") != 0));
	o = set(o, "connected", bool_or(key, "connected", true));
	o = set(o, "requires_connection", jv_false());
	o = set(o, "has_node_binding", jv_bool(nyx_json_has(r, "node_id")));
	o = set(o, "admin_only", bool_or(r, "admin_only", false));
	o = copy_field(o, r, "node_id");
	if (nyx_json_has(r, "node_id"))
		o = set(o, "node_status",
		    jv_string(nyx_json_peek_str(key, "node_status")
		            ? nyx_json_peek_str(key, "node_status")
		            : "online"));
	o = set(o, "node_priority", jv_number(0));
	o = copy_field(o, r, "forward_access_token");
	o = copy_field(o, r, "inject_delegation_token");
	o = copy_field(o, r, "delegation_token_scope");
	snprintf(url, sizeof(url), "%s/api/v1/proxy/s/%s/{path}", base, slug);
	o = set(o, "proxy_url_slug", jv_string(url));
	o = set(o, "endpoint_id", jv_string(id));
	o = set(o, "auth_method", jv_string("bearer"));
	o = set(o, "service_type", jv_string("http"));
	o = set(o, "created_at", jv_string("2026-01-01T00:00:00Z"));
	if (jv_get_kind(cs_override) == JV_KIND_OBJECT) {
		jv_free(src);
		src = jv_copy(cs_override);
	}
	jv_free(cs_override);
	jv_free(key);
	return set(o, "credential_source", src);
}

/* Visible routes in NyxID's order: personal first, then each org's. */
static jv
visible(
    const struct nyx_world *w, const char *user, bool keys, const char *base)
{
	jv out = jv_array();
	int pass, i, n = jv_array_length(jv_copy(w->routes));

	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < n; i++) {
			jv r = jv_array_get(jv_copy(w->routes), i);
			bool personal =
			    strcmp(nyx_json_peek_str(r, "owner"), user) == 0;
			jv src;

			if (personal != (pass == 0) || !listed(w, r)) {
				jv_free(r);
				continue;
			}
			src = source_for(w, r, user);
			if (!jv_is_valid(src)) {
				jv_free(src);
				jv_free(r);
				continue;
			}
			out = jv_array_append(out,
			    keys ? key_entry(r, src, base)
			         : user_service_entry(r, src));
			jv_free(r);
		}
	return out;
}

jv
nyx_world_user_services(const struct nyx_world *w, const char *user)
{
	return set(jv_object(), "services", visible(w, user, false, ""));
}

jv
nyx_world_keys(const struct nyx_world *w, const char *user, const char *base)
{
	return set(jv_object(), "keys", visible(w, user, true, base));
}

jv
nyx_world_key(const struct nyx_world *w, const char *user,
    const char *id_or_slug, const char *base)
{
	jv all = visible(w, user, true, base), hit = jv_invalid();
	int i, n = jv_array_length(jv_copy(all)), pass;

	/* by id first, then by slug (personal rows come first) */
	for (pass = 0; pass < 2 && !jv_is_valid(hit); pass++)
		for (i = 0; i < n; i++) {
			jv e = jv_array_get(jv_copy(all), i);
			const char *v =
			    nyx_json_peek_str(e, pass == 0 ? "id" : "slug");

			if (v != NULL && strcmp(v, id_or_slug) == 0 &&
			    nyx_json_bool(e, "is_active") == 1) {
				jv_free(hit);
				hit = e;
				break;
			}
			jv_free(e);
		}
	jv_free(all);
	return hit;
}

jv
nyx_world_me(const struct nyx_world *w, const char *user)
{
	jv u = find_by_id(w->users, user), o = jv_object();

	o = set(o, "id", jv_string(user));
	o = set(o, "email",
	    jv_string(nyx_json_peek_str(u, "email")
	            ? nyx_json_peek_str(u, "email")
	            : "user@example.invalid"));
	o = set(o, "display_name",
	    jv_string(nyx_json_peek_str(u, "display_name")
	            ? nyx_json_peek_str(u, "display_name")
	            : user));
	o = set(o, "avatar_url", jv_null());
	o = set(o, "email_verified", jv_true());
	o = set(o, "mfa_enabled", jv_false());
	o = set(o, "is_admin", jv_false());
	o = set(o, "is_operator", jv_false());
	o = set(o, "role", jv_string("user"));
	o = set(o, "is_active", jv_true());
	o = set(o, "created_at", jv_string("2026-01-01T00:00:00Z"));
	jv_free(u);
	return o;
}

/* Whether user may proxy through route r (and r's org name for errors). */
static bool
proxy_access(const struct nyx_world *w, jv r, const char *user)
{
	const char *owner = nyx_json_peek_str(r, "owner");
	jv org;
	const char *role;
	bool ok;

	if (strcmp(owner, user) == 0)
		return true;
	org = find_by_id(w->orgs, owner);
	if (!jv_is_valid(org))
		return false;
	role = role_in(w, org, user);
	ok = role != NULL &&
	    (strcmp(role, "admin") == 0 ||
	        (strcmp(role, "member") == 0 &&
	            nyx_json_bool(r, "admin_only") != 1));
	jv_free(org);
	return ok;
}

static bool
in_allowlist(jv list, const char *id)
{
	int i, n;

	if (jv_get_kind(list) != JV_KIND_ARRAY)
		return true; /* no allowlist: every route */
	n = jv_array_length(jv_copy(list));
	for (i = 0; i < n; i++) {
		jv e = jv_array_get(jv_copy(list), i);
		bool hit = jv_get_kind(e) == JV_KIND_STRING &&
		    strcmp(jv_string_value(e), id) == 0;

		jv_free(e);
		if (hit)
			return true;
	}
	return false;
}

int
nyx_world_proxy_target(const struct nyx_world *w, const struct nyx_principal *p,
    const char *slug, const char *via, struct nyx_proxy_target *t, int *status,
    jv *body)
{
	char msg[512];
	jv r = jv_invalid();
	int i, n = jv_array_length(jv_copy(w->routes)), pass;

	memset(t, 0, sizeof(*t));
	/* REST proxy needs a proxy scope; first-party user tokens carry it */
	if ((p->scope != NULL || p->kind == NYX_P_DELEGATION) &&
	    p->kind != NYX_P_AGENT_KEY && p->kind != NYX_P_API_KEY &&
	    !nyx_scope_has(p->scope, "proxy") &&
	    !nyx_scope_has(p->scope, "proxy:*")) {
		*status = 403;
		*body = nyx_world_error("forbidden", 1002,
		    "Forbidden: Missing required scope for proxy access. "
		    "Expected one of: proxy, proxy:*");
		return -1;
	}
	if (via != NULL) {
		r = find_by_id(w->routes, via);
		if (!jv_is_valid(r) || nyx_json_bool(r, "is_active") == 0) {
			jv_free(r);
			snprintf(msg, sizeof(msg),
			    "Not found: UserService '%s' not found", via);
			*status = 404;
			*body = nyx_world_error("not_found", 1003, msg);
			return -1;
		}
		if (strcmp(nyx_json_peek_str(r, "slug"), slug) != 0) {
			snprintf(msg, sizeof(msg),
			    "Bad request: _nyxid_via UserService '%s' has slug "
			    "'%s', but the route requested '%s'",
			    via, nyx_json_peek_str(r, "slug"), slug);
			jv_free(r);
			*status = 400;
			*body = nyx_world_error("bad_request", 1000, msg);
			return -1;
		}
		if (!proxy_access(w, r, p->user)) {
			jv_free(r);
			*status = 403;
			*body = nyx_world_error("org_role_insufficient", 8103,
			    "Forbidden: you do not have proxy access to this "
			    "service");
			return -1;
		}
	} else {
		/* no exact route: the caller's own, then an org's */
		for (pass = 0; pass < 2 && !jv_is_valid(r); pass++)
			for (i = 0; i < n; i++) {
				jv e = jv_array_get(jv_copy(w->routes), i);
				bool mine =
				    strcmp(nyx_json_peek_str(e, "owner"),
				        p->user) == 0;

				if (mine == (pass == 0) &&
				    strcmp(nyx_json_peek_str(e, "slug"),
				        slug) == 0 &&
				    nyx_json_bool(e, "is_active") != 0 &&
				    proxy_access(w, e, p->user)) {
					r = e;
					break;
				}
				jv_free(e);
			}
		if (!jv_is_valid(r)) {
			jv_free(r);
			*status = 404;
			*body = nyx_world_error(
			    "not_found", 1003, "Not found: Service not found");
			return -1;
		}
	}
	if ((p->kind == NYX_P_AGENT_KEY || p->kind == NYX_P_API_KEY) &&
	    !in_allowlist(p->allowed_routes, nyx_json_peek_str(r, "id"))) {
		jv_free(r);
		*status = 403;
		*body = nyx_world_error("api_key_scope_forbidden", 9000,
		    "Forbidden: API key does not have access to this service");
		return -1;
	}
	snprintf(
	    t->route_id, sizeof(t->route_id), "%s", nyx_json_peek_str(r, "id"));
	snprintf(t->slug, sizeof(t->slug), "%s", slug);
	t->forward_token = nyx_json_bool(r, "forward_access_token") == 1;
	t->inject = nyx_json_bool(r, "inject_delegation_token") == 1;
	t->approval = nyx_json_bool(r, "approval_required") == 1;
	/* NyxID's default scope when none is set */
	snprintf(t->scope, sizeof(t->scope), "%s",
	    nyx_json_peek_str(r, "delegation_token_scope")
	        ? nyx_json_peek_str(r, "delegation_token_scope")
	        : "llm:proxy");
	t->chrono = nyx_json_peek_str(r, "catalog_service_slug") != NULL &&
	    strcmp(nyx_json_peek_str(r, "catalog_service_slug"),
	        "chrono-sandbox") == 0;
	jv_free(r);
	return 0;
}

/* The index of the route with this id, or -1. */
static int
route_index(const struct nyx_world *w, const char *id)
{
	int i, n = jv_array_length(jv_copy(w->routes));

	for (i = 0; i < n; i++) {
		jv e = jv_array_get(jv_copy(w->routes), i);
		const char *eid = nyx_json_peek_str(e, "id");
		bool hit = eid != NULL && strcmp(eid, id) == 0;

		jv_free(e);
		if (hit)
			return i;
	}
	return -1;
}

int
nyx_world_edit_route(struct nyx_world *w, const char *id, jv fields)
{
	int i = route_index(w, id), k, n;
	jv r, keys;

	if (i < 0 || jv_get_kind(fields) != JV_KIND_OBJECT) {
		jv_free(fields);
		return -1;
	}
	r = jv_array_get(jv_copy(w->routes), i);
	keys = jv_keys(jv_copy(fields));
	n = jv_array_length(jv_copy(keys));
	for (k = 0; k < n; k++) {
		jv key = jv_array_get(jv_copy(keys), k);

		r = jv_object_set(
		    r, jv_copy(key), jv_object_get(jv_copy(fields), key));
	}
	jv_free(keys);
	jv_free(fields);
	w->routes = jv_array_set(w->routes, i, r);
	return 0;
}

/* NyxID's accepted delegation scopes (SERVICE_DELEGATION_SCOPES). */
static const char *const delegation_scopes[] = {"llm:proxy", "proxy:*",
    "llm:status", "account:read", "sandbox:execute", NULL};

/* Normalise a scope string; NULL with *bad set to an unknown scope. */
static char *
normalise_scope(const char *in, char *bad, size_t badsz)
{
	char *out = malloc(strlen(in) + 16), *o = out;
	const char *p = in;

	if (out == NULL)
		return NULL;
	*o = '\0';
	while (*p != '\0') {
		size_t n;
		const char *const *ok;

		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		n = strcspn(p, " \t\n\r");
		if (n == 0)
			break;
		for (ok = delegation_scopes; *ok != NULL; ok++)
			if (strlen(*ok) == n && strncmp(*ok, p, n) == 0)
				break;
		if (*ok == NULL) {
			snprintf(bad, badsz, "%.*s", (int)n, p);
			free(out);
			return NULL;
		}
		if (o != out)
			*o++ = ' ';
		memcpy(o, p, n);
		o += n;
		*o = '\0';
		p += n;
	}
	if (o == out)
		snprintf(
		    out, strlen(in) + 16, "llm:proxy"); /* NyxID's default */
	return out;
}

static jv
scope_error(const char *bad)
{
	char msg[400];

	snprintf(msg, sizeof(msg),
	    "Validation error: Invalid delegation_token_scope '%s'. Must be "
	    "one of: llm:proxy, proxy:*, llm:status, account:read, "
	    "sandbox:execute",
	    bad);
	return nyx_world_error("validation_error", 1008, msg);
}

int
nyx_world_update_route(
    struct nyx_world *w, const char *user, const char *id, jv patch, jv *body)
{
	static const char *const flags[] = {"forward_access_token",
	    "inject_delegation_token", "is_active", "admin_only"};
	int i = route_index(w, id);
	const char *owner, *role = NULL;
	jv r = jv_invalid(), src, scope;
	size_t k;

	if (i >= 0)
		r = jv_array_get(jv_copy(w->routes), i);
	src = i >= 0 ? source_for(w, r, user) : jv_invalid();
	if (i < 0 || !listed(w, r) || !jv_is_valid(src)) {
		/* existence is not leaked */
		jv_free(r);
		jv_free(src);
		jv_free(patch);
		*body = nyx_world_error(
		    "not_found", 1003, "Not found: User service not found");
		return 404;
	}
	owner = nyx_json_peek_str(r, "owner");
	if (strcmp(owner, user) != 0) {
		role = nyx_json_peek_str(src, "role");
		if (role == NULL || strcmp(role, "admin") != 0) {
			jv_free(r);
			jv_free(src);
			jv_free(patch);
			*body = nyx_world_error("org_role_insufficient", 8103,
			    "Forbidden: you do not have permission to modify "
			    "this service");
			return 403;
		}
	}
	jv_free(src);
	if (jv_get_kind(patch) != JV_KIND_OBJECT) {
		jv_free(r);
		jv_free(patch);
		*body = nyx_world_error("bad_request", 1000,
		    "Bad request: the body must be a JSON object");
		return 400;
	}
	for (k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
		jv_kind kind = nyx_json_kind(patch, flags[k]);

		if (kind == JV_KIND_TRUE || kind == JV_KIND_FALSE)
			r = jv_object_set(r, jv_string(flags[k]),
			    nyx_json_get(patch, flags[k]));
		else if (kind != JV_KIND_INVALID && kind != JV_KIND_NULL) {
			jv_free(r);
			jv_free(patch);
			*body = nyx_world_error("validation_error", 1008,
			    "Validation error: invalid field type");
			return 400;
		}
	}
	scope = nyx_json_get(patch, "delegation_token_scope");
	if (jv_get_kind(scope) == JV_KIND_STRING) {
		char bad[128] = "",
		     *norm = normalise_scope(
		         jv_string_value(scope), bad, sizeof(bad));

		if (norm == NULL) {
			jv_free(scope);
			jv_free(r);
			jv_free(patch);
			*body = scope_error(bad);
			return 400;
		}
		r = jv_object_set(
		    r, jv_string("delegation_token_scope"), jv_string(norm));
		free(norm);
	}
	jv_free(scope);
	jv_free(patch);
	r = jv_object_set(
	    r, jv_string("updated_at"), jv_string("2026-06-01T00:00:00Z"));
	w->routes = jv_array_set(w->routes, i, jv_copy(r));
	/* NyxID's single-item response always says personal */
	*body = user_service_entry(r,
	    jv_object_set(
	        jv_object(), jv_string("type"), jv_string("personal")));
	jv_free(r);
	return 200;
}

int
nyx_world_create_key(
    struct nyx_world *w, const char *user, jv doc, const char *base, jv *body)
{
	const char *svc = nyx_json_peek_str(doc, "service_slug");
	const char *slug = nyx_json_peek_str(doc, "slug");
	const char *label = nyx_json_peek_str(doc, "label");
	const char *cat_id = NULL;
	int i, n = jv_array_length(jv_copy(w->routes)), k;
	char msg[400], id[64], hex[17];
	jv r, key, src;
	bool identity = false;
	static const char *const idf[] = {"forward_access_token",
	    "inject_delegation_token", "delegation_token_scope"};

	if (jv_get_kind(doc) != JV_KIND_OBJECT || label == NULL ||
	    strlen(label) < 1 || strlen(label) > 200) {
		jv_free(doc);
		*body = nyx_world_error("validation_error", 1008,
		    "Validation error: label is required (1-200 characters)");
		return 400;
	}
	/* the catalog: any route of that service names its id */
	for (i = 0; svc != NULL && i < n && cat_id == NULL; i++) {
		jv e = jv_array_get(jv_copy(w->routes), i);
		const char *cs = nyx_json_peek_str(e, "catalog_service_slug");

		if (cs != NULL && strcmp(cs, svc) == 0 &&
		    nyx_json_peek_str(e, "catalog_service_id") != NULL) {
			/* the string lives in w->routes, which outlives this */
			cat_id = nyx_json_peek_str(e, "catalog_service_id");
		}
		jv_free(e);
	}
	if (svc == NULL || cat_id == NULL) {
		snprintf(msg, sizeof(msg),
		    "Not found: Catalog service '%s' not "
		    "found",
		    svc ? svc : "");
		jv_free(doc);
		*body = nyx_world_error("not_found", 1003, msg);
		return 404;
	}
	if (slug == NULL)
		slug = svc;
	for (i = 0; i < n; i++) {
		jv e = jv_array_get(jv_copy(w->routes), i);
		bool clash = strcmp(nyx_json_peek_str(e, "owner"), user) == 0 &&
		    strcmp(nyx_json_peek_str(e, "slug"), slug) == 0 &&
		    nyx_json_bool(e, "is_active") != 0;

		jv_free(e);
		if (clash) {
			snprintf(msg, sizeof(msg),
			    "Conflict: Service slug '%s' "
			    "is already in use",
			    slug);
			jv_free(doc);
			*body = nyx_world_error("conflict", 1004, msg);
			return 409;
		}
	}
	for (k = 0; k < 3; k++)
		identity |= nyx_json_has(doc, idf[k]);
	if (nyx_random_hex(hex, 8) < 0)
		snprintf(hex, sizeof(hex), "0000000000000000");
	snprintf(id, sizeof(id), "us-%s", hex);
	r = jv_object();
	r = jv_object_set(r, jv_string("id"), jv_string(id));
	r = jv_object_set(r, jv_string("owner"), jv_string(user));
	r = jv_object_set(r, jv_string("slug"), jv_string(slug));
	r = jv_object_set(r, jv_string("label"), jv_string(label));
	r = jv_object_set(
	    r, jv_string("catalog_service_id"), jv_string(cat_id));
	r = jv_object_set(r, jv_string("catalog_service_slug"), jv_string(svc));
	if (nyx_json_peek_str(doc, "node_id") != NULL)
		r = jv_object_set(
		    r, jv_string("node_id"), nyx_json_get(doc, "node_id"));
	if (identity) {
		/* any identity field given: the others take NyxID's defaults */
		const char *sc =
		    nyx_json_peek_str(doc, "delegation_token_scope");
		char bad[128] = "",
		     *norm = normalise_scope(sc ? sc : "", bad, sizeof(bad));

		if (norm == NULL) {
			jv_free(r);
			jv_free(doc);
			*body = scope_error(bad);
			return 400;
		}
		r = jv_object_set(r, jv_string("forward_access_token"),
		    jv_bool(nyx_json_bool(doc, "forward_access_token") == 1));
		r = jv_object_set(r, jv_string("inject_delegation_token"),
		    jv_bool(
		        nyx_json_bool(doc, "inject_delegation_token") == 1));
		r = jv_object_set(
		    r, jv_string("delegation_token_scope"), jv_string(norm));
		free(norm);
	}
	key =
	    jv_object_set(jv_object(), jv_string("auto_connected"), jv_false());
	r = jv_object_set(r, jv_string("key"), key);
	jv_free(doc);
	w->routes = jv_array_append(w->routes, jv_copy(r));
	src = jv_object_set(
	    jv_object(), jv_string("type"), jv_string("personal"));
	*body = key_entry(r, src, base);
	jv_free(r);
	return 200;
}
