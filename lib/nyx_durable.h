/*
 * nyx_durable: the durable /executions client (WIRE.md 5), shared by
 * code-exec and exec-status.
 *
 * One struct nyx_dur carries one ledger operation through one reconcile
 * step: nyx_dur_begin() decides the exchange it needs (a submit with the
 * operation's own key, a status poll, or the one cancel of an expired
 * operation) or settles it without the network (the submit recovery
 * window has passed); nyx_dur_run() makes the exchanges of many steps
 * concurrently over one connection pool and applies every answer through
 * the tables of WIRE.md 5, including the result fetch a succeeded or
 * failed snapshot calls for.  Nothing here touches the ledger: the caller
 * persists d->op (and, once d->op.terminal, the result record) after the
 * step and before printing anything.
 *
 * Never: a submit without the operation's key, an Idempotency-Key on any
 * other call, a URL taken from a receipt or Location, an extended
 * deadline, a result fetch before succeeded/failed, a resubmit once the
 * provider id is known.
 */
#ifndef NYX_DURABLE_H
#define NYX_DURABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jv.h>

#include "nyx_audit.h"
#include "nyx_buf.h"
#include "nyx_chrono.h"
#include "nyx_err.h"
#include "nyx_http.h"
#include "nyx_ledger.h"

#define NYX_DUR_RECOVERY_MS (10 * 60 * 1000L) /* uncertain-submit window */
#define NYX_DUR_FALLBACK_EXPIRY_MS (720 * 1000L)
#define NYX_DUR_RETRY_DEFAULT_MS 2000L
#define NYX_DUR_RETRY_MAX_MS 30000L
#define NYX_DUR_POLL_FLOOR_MS 250L
#define NYX_DUR_LEASE_MS (120 * 1000L) /* renewed on every step */

/* The key prefix and its full length ("tool:v1:operation:" + 64 hex). */
#define NYX_DUR_KEY_PREFIX "tool:v1:operation:"
#define NYX_DUR_KEY_LEN 82

enum nyx_dur_call {
	NYX_DUR_NONE = 0,
	NYX_DUR_SUBMIT,
	NYX_DUR_STATUS,
	NYX_DUR_RESULT,
	NYX_DUR_CANCEL,
};

struct nyx_dur {
	struct nyx_op op; /* the ledger row, updated in place */
	struct nyx_buf secret; /* key '\n' source; needed to submit */
	enum nyx_dur_call call; /* the next exchange; NONE when done */
	enum nyx_dur_call applying; /* the exchange whose answer is applied */
	bool expiring; /* this step is the one cancel of an expired op */
	/* once op.terminal: the outcome (exit in oc.exit) */
	struct nyx_exec_outcome oc;
	/* a step that left the operation pending because an exchange
	 * failed (transient, or this invocation's credential): */
	const char *fail_code; /* NULL when the step went through */
	int fail_exit;
	bool audit_pending; /* its terminal audit is frozen, not written */
	bool started_terminal, started_with_id; /* as the step began */
	int64_t settled_ms; /* when this step settled it; 0 otherwise */
	int exchanges; /* HTTP exchanges this step */
	long longest_ms; /* the longest of them */
	/* private: the request under construction */
	char *url, *body;
	struct nyx_buf auth, key_hdr, inm, trace;
	const char *hdrs[7];
	char codebuf[72];
};

void nyx_dur_init(struct nyx_dur *d);
void nyx_dur_free(struct nyx_dur *d);

/*
 * The idempotency key of PRODUCT.md 6: NYX_DUR_KEY_PREFIX + hex SHA-256
 * over length-prefixed "cli", owner, request_id, call_id.  out holds
 * NYX_DUR_KEY_LEN + 1 bytes.
 */
int nyx_dur_key(const char *owner, const char *request_id, const char *call_id,
    char out[NYX_DUR_KEY_LEN + 1]);

/* A key as WIRE.md 5 requires it: the prefix and 64 lowercase hex. */
bool nyx_dur_key_valid(const char *key);

/*
 * Split verified secret material ("KEY\nSOURCE") into its parts; the
 * pointers alias d->secret.  -1 when it is not of that shape.
 */
int nyx_dur_secret_parts(const struct nyx_dur *d, const char **key,
    const char **source, size_t *source_len);

/* The effective deadline of an operation (its expiry, or the fallback). */
int64_t nyx_dur_deadline(const struct nyx_op *op);

/*
 * Decide the step's exchange at time now (the caller decides whether it
 * is due).  Settles the operation without the network when its submit
 * recovery window has passed.
 */
void nyx_dur_begin(struct nyx_dur *d, int64_t now);

/*
 * Apply the answer (or the failure) of the step's exchange at time now:
 * the pure state machine of WIRE.md 5, 7.  It may set the next call (the
 * result fetch after a succeeded or failed snapshot).
 */
void nyx_dur_apply(
    struct nyx_dur *d, const struct nyx_http_resp *r, int64_t now);

/* Settle the operation as a failure without the network. */
void nyx_dur_settle(struct nyx_dur *d, const char *code, const char *kind,
    const char *message, int exit_code);

/* Free the request under construction (the exchanges' private part). */
void nyx_dur_drop_request(struct nyx_dur *d);

/*
 * Make the exchanges of n begun steps, at most max_inflight at once over
 * h's connections, each bounded by exchange_ms, sending token as the
 * bearer; apply every answer (now() is read after each round).  With
 * max_inflight 1 the steps run one by one on h's single handle, else
 * over h's multi pool only, so at most max_inflight connections.  Returns
 * 0, or -1 when memory ran out (the operations stay as they were).
 */
int nyx_dur_run(struct nyx_http *h, struct nyx_dur **v, size_t n,
    const char *token, long exchange_ms, size_t max_inflight,
    int64_t (*now)(void));

/*
 * Load an operation from the ledger, with its verified secret material
 * while it has no provider id (a submit may be needed): 1, 0 when the
 * handle is unknown, -1 with err.
 */
int nyx_dur_load(struct nyx_ledger *l, const char *handle, struct nyx_dur *d,
    struct nyx_err *err);

/*
 * Persist d->op after a step; once it is terminal, with its exec.result
 * record (built with diag) and its terminal audit intent in the same
 * transaction, then append that audit record (and the running one when
 * the step learned the provider id).  An audit that cannot be written
 * leaves the intent frozen and sets d->audit_pending.
 */
int nyx_dur_persist(struct nyx_ledger *l, struct nyx_dur *d, const char *diag,
    struct nyx_err *err);

/* The audit subject of an operation (pointers into op). */
void nyx_dur_subject(const struct nyx_op *op, struct nyx_audit_subject *s);

/* Parse Retry-After (delta-seconds or an HTTP date) into a clamped delay. */
long nyx_dur_retry_after(const char *value, int64_t now);

/* Records (PRODUCT.md 6, 7).  diag is this invocation's diagnostic id. */
jv nyx_dur_receipt_record(const struct nyx_op *op, const char *diag);
jv nyx_dur_status_record(const struct nyx_dur *d, const char *diag);
jv nyx_dur_result_record(const struct nyx_dur *d, const char *diag);

#endif
