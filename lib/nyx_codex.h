/*
 * nyx_codex: delegating a task to Codex, client side (WIRE.md 8;
 * reference/codex-and-sandbox.md A.4, A.6, A.7).
 *
 * A call is admitted before any request (target, prompt, timeout); then
 * the managed sandbox gets exactly {"prompt","timeout_secs","workspace"}
 * on the codex_managed route, and a private host gets a fixed shell
 * wrapper over NyxID SSH exec that carries the prompt only as base64.
 * The classifiers turn any answer (or none) into a codex outcome with a
 * fixed message: the 37-row CODEX_* table, NyxID's own approval gate, and
 * the SSH exec shapes.  The canonical arguments of a private_ssh call are
 * what its durable approval is bound to (nyx_approval).
 *
 * Ownership: a call owns its prompt buffer (secret: wiped on free); an
 * outcome owns its output and stderr jv (nyx_codex_outcome_free).  Built
 * strings are new heap strings (NULL when out of memory) that hold the
 * prompt: wipe them before freeing.  Classifiers borrow the response.
 */
#ifndef NYX_CODEX_H
#define NYX_CODEX_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <jv.h>

#include "nyx_buf.h"
#include "nyx_err.h"
#include "nyx_http.h"
#include "nyx_outcome.h"

#define NYX_CODEX_PROMPT_MAX 6000
#define NYX_CODEX_MANAGED_GRACE_S 120 /* deadline: timeout_secs + this */
#define NYX_CODEX_SSH_GRACE_S 15

/* What the user asked for, as given (NULL when absent). */
struct nyx_codex_args {
	const char *target; /* managed_sandbox | private_ssh */
	const char *prompt;
	const char *prompt_file; /* "-": standard input */
	const char *timeout_secs;
	const char *service, *principal; /* private_ssh */
	const char *workspace; /* managed_sandbox: empty_git */
	const char *call_id;
};

/* One admitted call: everything checked before any request. */
struct nyx_codex_call {
	bool ssh;
	struct nyx_buf prompt;
	int timeout_secs;
	const char *service, *principal;
	char request_id[160];
	const char *call_id;
};

/*
 * Admit a call: 0, or -1 with err (64 invalid_target, mixed_target,
 * invalid_workspace, invalid_arguments, invalid_timeout,
 * prompt_too_large; 65 a prompt that is not UTF-8 text; 66 an unreadable
 * prompt file).  The request id is left empty (nyx_codex_request_id).
 */
int nyx_codex_admit(const struct nyx_codex_args *a, struct nyx_codex_call *c,
    struct nyx_err *err);
void nyx_codex_call_free(struct nyx_codex_call *c);

/*
 * The call's request id: the given one, else for private_ssh "ssh:" + 32
 * hex of the length-prefixed SHA-256 over service, principal and the
 * SHA-256 of the canonical arguments (so the identical command meets its
 * grant, and any other asks for its own), else a fresh random id.
 */
int nyx_codex_request_id(struct nyx_codex_call *c, const char *given);

/* A codex outcome: the shared outcome plus what Codex adds. */
struct nyx_codex_outcome {
	struct nyx_exec_outcome base; /* output: the text (a jv string) */
	jv stderr_text; /* private_ssh only, or invalid */
	long elapsed_ms;
};

void nyx_codex_outcome_init(struct nyx_codex_outcome *oc);
void nyx_codex_outcome_free(struct nyx_codex_outcome *oc);

/* {"prompt","timeout_secs","workspace":"empty_git"}, sorted and compact. */
char *nyx_codex_managed_body(const struct nyx_codex_call *c);

/*
 * Classify a finished POST /codex/execute exchange.  `key` (the
 * execution credential) is replaced by [REDACTED] wherever it appears in
 * the returned text.
 */
void nyx_codex_classify_managed(const struct nyx_http_resp *r, const char *key,
    struct nyx_codex_outcome *oc);

/*
 * The canonical arguments of a private_ssh call (PRODUCT 8): sorted,
 * compact {"prompt","target":{"kind","private_ssh":{principal,service}},
 * "timeout_secs","workspace":{"kind":"empty_git"}}.
 */
char *nyx_codex_ssh_arguments(const struct nyx_codex_call *c);

/*
 * The fixed wrapper command: the prompt only as base64, never quoted in:
 * PREFIX <base64> SUFFIX.  The host side (nyx-sandboxd's emulated forced
 * command) accepts exactly this shape, through nyx_codex_ssh_task().
 */
#define NYX_CODEX_SSH_PREFIX "p='"
#define NYX_CODEX_SSH_SUFFIX                                                   \
	"'; { printf '%s' \"$p\" | base64 --decode 2>/dev/null || "            \
	"printf '%s' \"$p\" | base64 -D; } | codex exec -"
char *nyx_codex_ssh_command(const struct nyx_codex_call *c);

/*
 * The task a well-formed wrapper command carries (1..6000 bytes, a new
 * heap buffer of *len bytes), or NULL for any other command.
 */
char *nyx_codex_ssh_task(const char *cmd, size_t *len);

/* {"command","principal","timeout_secs"} for POST /ssh/{id}/exec. */
char *nyx_codex_ssh_body(const struct nyx_codex_call *c);

/*
 * Classify GET /api/v1/keys/{service}: 0 with its catalog_service_id in
 * out (n bytes), or -1 with the outcome set.
 */
int nyx_codex_classify_service(const struct nyx_http_resp *r, char *out,
    size_t n, struct nyx_codex_outcome *oc);

/* Classify a finished SSH exec exchange. */
void nyx_codex_classify_ssh(
    const struct nyx_http_resp *r, struct nyx_codex_outcome *oc);

/* NyxID's approval status answer: what a waiting client does next. */
enum nyx_codex_gate {
	NYX_CODEX_GATE_APPROVED,
	NYX_CODEX_GATE_DENIED, /* the outcome now says so */
	NYX_CODEX_GATE_PENDING, /* still undecided, or a retryable failure */
	NYX_CODEX_GATE_UNREADABLE, /* the status cannot be read: stop */
};

enum nyx_codex_gate nyx_codex_classify_gate(
    const struct nyx_http_resp *r, struct nyx_codex_outcome *oc);

/* The codex.result record of an outcome (borrows both). */
jv nyx_codex_result_record(const struct nyx_codex_call *c,
    const struct nyx_codex_outcome *oc, const char *diag);

/*
 * The exchanges, each one request on the caller's handle, classified
 * into oc.  Managed: POST url (the codex_managed route's /codex/execute)
 * with the key in X-API-Key, or as a bearer; never retried.
 */
void nyx_codex_send_managed(struct nyx_http *http, const char *url,
    const char *key, bool bearer, const struct nyx_codex_call *c,
    struct nyx_codex_outcome *oc);

/*
 * Poll NyxID's approval status of oc's approval request until a human
 * decided: 1 approved, 0 denied (oc says so) or still pending when
 * max_wait_ms ran out, -1 when the status cannot be read.  progress
 * (may be NULL) hears, between polls, the time waited and the request id.
 */
int nyx_codex_wait_gate(struct nyx_http *http, const char *base_url,
    const char *token, long max_wait_ms, long poll_ms,
    struct nyx_codex_outcome *oc, void (*progress)(int64_t, const char *));

/* GET /api/v1/keys/{service}: 0 with its catalog id, or -1 (oc set). */
int nyx_codex_resolve_service(struct nyx_http *http, const char *base_url,
    const char *token, long timeout_ms, const struct nyx_codex_call *c,
    char *catalog, size_t n, struct nyx_codex_outcome *oc);

/* POST /api/v1/ssh/{catalog}/exec with the fixed wrapper, once. */
void nyx_codex_send_ssh(struct nyx_http *http, const char *base_url,
    const char *token, const char *catalog, const struct nyx_codex_call *c,
    struct nyx_codex_outcome *oc);

#endif
