/*
 * chronod: the Chrono Sandbox API behind nyx-sandboxd's NyxID proxy.
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
 * The durable API (POST /executions with an Idempotency-Key, GET
 * /executions/{id} with ETag and If-None-Match, .../result, .../cancel)
 * keeps one record per operation, owned by the delegation's user, runs
 * each program on a thread of its own, and persists every change through
 * store.h when a store is given: operations and retained results
 * survive a restart.  An operation that was running when the server
 * stopped is outcome_uncertain after the restart, never run again.
 *
 * nyx_chronod_mint() makes the delegation token NyxID would inject: an
 * unsigned JWT (this is a test server) that nyx_chronod checks for shape,
 * expiry and scope.  Responses own their body (free it).
 */
#ifndef NYX_CHRONOD_H
#define NYX_CHRONOD_H

#include <stddef.h>
#include <stdint.h>

#include "nyx_err.h"
#include "nyx_sandbox.h"

struct nyx_chronod_req {
	const char *method;
	const char *path; /* after the route slug, e.g. "/execute" */
	const char *authorization; /* forwarded bearer token, or NULL */
	const char *delegation; /* X-NyxID-Delegation-Token, or NULL */
	const char *body;
	size_t body_len;
	const char *base_url; /* NYXID_BASE_URL for injected Agent Keys */
	const char *idempotency_key; /* forwarded by NyxID, or NULL */
	const char *if_none_match; /* forwarded by NyxID, or NULL */
	const char *proxy_prefix; /* the caller's path up to the slug */
};

struct nyx_chronod_resp {
	int status;
	char *body;
	char summary[128]; /* safe one-line outcome for the request log */
	char etag[64]; /* response headers, "" when absent */
	char retry_after[16];
	char location[512];
};

struct nyx_chronod;

/*
 * A Chrono Sandbox; store_path NULL keeps operations in memory only.
 * Operations expire retention_s after creation (410 afterwards).
 */
struct nyx_chronod *nyx_chronod_new(
    const char *store_path, long retention_s, struct nyx_err *err);
/* Cancels what still runs and waits for it (bounded) before freeing. */
void nyx_chronod_free(struct nyx_chronod *cd);

/*
 * Codex: the runner is a shell command line that reads the task on
 * stdin, run in the local sandbox (NULL: a deterministic built-in).
 * nyx_chronod_codex_run() runs one task (also for the SSH emulation).
 */
int nyx_chronod_set_runner(
    struct nyx_chronod *cd, const char *cmd, struct nyx_err *err);
int nyx_chronod_codex_run(struct nyx_chronod *cd, const char *prompt,
    size_t len, int timeout_secs, struct nyx_sandbox_result *res,
    struct nyx_err *err);

/*
 * Every operation as [{"operation_id","key_sha256","status","runs"}]
 * (no script, no key): the /_nyx/executions control view, so tests can
 * count executions per key.
 */
char *nyx_chronod_list(struct nyx_chronod *cd);
void nyx_chronod_handle(struct nyx_chronod *cd,
    const struct nyx_chronod_req *rq, struct nyx_chronod_resp *rs);

/* A delegation token for user, acting service slug, scope, now (ms). */
char *nyx_chronod_mint(
    const char *user, const char *slug, const char *scope, int64_t now_ms);

#endif
