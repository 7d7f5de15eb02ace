/*
 * nyx_chronod: the Chrono Sandbox API behind nyx-sandboxd's NyxID proxy.
 *
 * It sees what NyxID forwards: the caller's bearer (only when the route
 * forwards it) and the X-NyxID-Delegation-Token NyxID minted with the
 * route's scope.  POST /execute requires a valid delegation token with
 * sandbox:execute, validates {"language","script","timeout_secs"} and
 * runs the program in the local sandbox (nyx_sandbox).  A forwarded Agent
 * Key is injected into the program as NYXID_API_KEY with NYXID_BASE_URL;
 * an ordinary bearer never is.  Answers use Chrono's shapes:
 * {"success","output",...} or {"error":{"code","message"},"diagnostic_id"}.
 *
 * nyx_chronod_mint() makes the delegation token NyxID would inject: an
 * unsigned JWT (this is a test server) that nyx_chronod checks for shape,
 * expiry and scope.  Responses own their body (free it).
 */
#ifndef NYX_CHRONOD_H
#define NYX_CHRONOD_H

#include <stddef.h>
#include <stdint.h>

struct nyx_chronod_req {
	const char *method;
	const char *path; /* after the route slug, e.g. "/execute" */
	const char *authorization; /* forwarded bearer token, or NULL */
	const char *delegation; /* X-NyxID-Delegation-Token, or NULL */
	const char *body;
	size_t body_len;
	const char *base_url; /* NYXID_BASE_URL for injected Agent Keys */
};

struct nyx_chronod_resp {
	int status;
	char *body;
	char summary[128]; /* safe one-line outcome for the request log */
};

void nyx_chronod_handle(
    const struct nyx_chronod_req *rq, struct nyx_chronod_resp *rs);

/* A delegation token for user, acting service slug, scope, now (ms). */
char *nyx_chronod_mint(
    const char *user, const char *slug, const char *scope, int64_t now_ms);

#endif
