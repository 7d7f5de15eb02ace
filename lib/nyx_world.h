/*
 * nyx_world: the state nyx-sandboxd serves, and NyxID's rules over it.
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
	const char *scope; /* delegation scope, or NULL */
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

/* Routes in the world (for start-up logging). */
size_t nyx_world_nroutes(const struct nyx_world *w);

#endif
