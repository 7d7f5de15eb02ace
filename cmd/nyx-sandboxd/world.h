/*
 * world: the state nyx-sandboxd serves, and NyxID's rules over it.
 *
 * A world (YAML, see nyx-sandboxd(8)) holds users, organizations with
 * member roles, tokens (each naming its user and credential kind), and
 * routes with their key facts.  This module validates a world, identifies
 * callers by token, applies NyxID's human-only rule, and builds each
 * caller's view of /user-services, /keys, /keys/{id-or-slug} and
 * /users/me, with credential_source computed from ownership and role.
 *
 * Pure: no I/O, no locking (the server serialises access).  Returned jv
 * values are owned by the caller.
 */
#ifndef NYX_WORLD_H
#define NYX_WORLD_H

#include <stdbool.h>
#include <stddef.h>

#include <jv.h>

enum nyx_principal_kind {
	NYX_P_USER = 0,
	NYX_P_AGENT_KEY,
	NYX_P_API_KEY,
	NYX_P_DELEGATION,
	NYX_P_SERVICE_ACCOUNT,
	NYX_P_RELAY,
};

struct nyx_principal {
	const char *user; /* the subject user id (borrowed from the world) */
	enum nyx_principal_kind kind;
	const char *scope; /* the token's scope, or NULL */
	jv allowed_routes; /* Agent Key allowlist, or invalid (world-owned) */
};

/* Where an authorised proxy call goes, and with which credentials. */
struct nyx_proxy_target {
	char route_id[160];
	char slug[160];
	bool forward_token; /* forward the caller's bearer as Authorization */
	bool inject; /* add X-NyxID-Delegation-Token */
	char scope[512]; /* the delegation token's scope */
	bool chrono; /* the route's service is the Chrono Sandbox */
	bool approval; /* NyxID asks a human before each proxied call */
};

struct nyx_world;

/* Validate and adopt doc (consumed).  NULL with why filled on error. */
struct nyx_world *nyx_world_new(jv doc, char *why, size_t whysz);
void nyx_world_free(struct nyx_world *w);

/* Identify a caller by token; 0 found, -1 unknown. */
int nyx_world_auth(
    const struct nyx_world *w, const char *token, struct nyx_principal *p);

const char *nyx_principal_kind_name(enum nyx_principal_kind k);

/*
 * NyxID's human-only router for management endpoints: 0 when p may call
 * `method` there, else -1 with *status and *body (NyxID's error envelope).
 * p NULL means no valid credential (401).
 */
int nyx_world_human_gate(
    const struct nyx_principal *p, const char *method, int *status, jv *body);

/* NyxID's error envelope {"error","error_code","message"}. */
jv nyx_world_error(const char *error, int code, const char *message);

/* The caller's views; base is the server's own URL for proxy_url fields. */
jv nyx_world_user_services(const struct nyx_world *w, const char *user);
jv nyx_world_keys(
    const struct nyx_world *w, const char *user, const char *base);
/* One key by id or slug; invalid jv when not visible (404). */
jv nyx_world_key(const struct nyx_world *w, const char *user,
    const char *id_or_slug, const char *base);
jv nyx_world_me(const struct nyx_world *w, const char *user);

/*
 * NyxID's proxy checks for /api/v1/proxy/s/{slug}/...: the caller's proxy
 * scope, the exact route from _nyxid_via (via may be NULL: then the
 * caller's own route with that slug, else an organization's), the slug
 * constraint, proxy access by role and admin_only, and an Agent Key's
 * allowlist.  0 with *t, or -1 with NyxID's *status and *body.
 */
int nyx_world_proxy_target(const struct nyx_world *w,
    const struct nyx_principal *p, const char *slug, const char *via,
    struct nyx_proxy_target *t, int *status, jv *body);

/*
 * PUT /api/v1/user-services/{id}: a partial update of the policy fields
 * (no compare-and-swap, as in NyxID).  404 when the caller cannot see the
 * route, 403 org_role_insufficient for org members and viewers, 400
 * validation_error for an unknown delegation scope.  The answer is the
 * single-item response, whose credential_source always says personal.
 * patch is consumed.  Returns the HTTP status with *body set.
 */
int nyx_world_update_route(
    struct nyx_world *w, const char *user, const char *id, jv patch, jv *body);

/*
 * POST /api/v1/keys: create a route from a catalog slug for the caller
 * (a personal alias).  409 conflict when the caller already has an active
 * route with that slug, 404 for an unknown catalog slug, 400 for a
 * missing label.  doc is consumed.  Returns the HTTP status with *body.
 */
int nyx_world_create_key(
    struct nyx_world *w, const char *user, jv doc, const char *base, jv *body);

/*
 * Apply fields to a route directly (a fault plan's concurrent edit).
 * Returns 0, or -1 when no route has that id.
 */
int nyx_world_edit_route(struct nyx_world *w, const char *id, jv fields);

/* Routes in the world (for start-up logging). */
size_t nyx_world_nroutes(const struct nyx_world *w);

#endif
