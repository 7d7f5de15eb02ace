/*
 * nyx_approval: durable human approval of one exact call (PRODUCT 8,
 * WIRE 8), the rules over the ledger's approvals table.
 *
 * An approval id is "tool-approval:v1:" + hex SHA-256 over the
 * length-prefixed "cli", owner, request id, tool, call id and the SHA-256
 * of the exact canonical arguments, so a grant covers that call and no
 * other.  The gate consumes an approved grant exactly once (one
 * conditional UPDATE); without one it records, or keeps, a pending
 * request.  A human moves a pending request to approved or denied (and
 * may still deny an approved, unconsumed one).
 *
 * Functions return a value to switch on, or -1 with err filled.
 */
#ifndef NYX_APPROVAL_H
#define NYX_APPROVAL_H

#include <stdbool.h>

#include <jv.h>

#include "nyx_err.h"
#include "nyx_ledger.h"

#define NYX_APPROVAL_ID_PREFIX "tool-approval:v1:"

/* The approval id into out (96 bytes).  0, or -1 out of memory. */
int nyx_approval_id(const char *owner, const char *request_id, const char *tool,
    const char *call_id, const char *args_sha256, char out[96]);

/* One exact call: who asks, under which ids, with which arguments. */
struct nyx_approval_call {
	const char *owner, *request_id, *tool, *call_id;
	const char *args; /* the canonical argument JSON (holds the prompt) */
};

enum nyx_approval_gate {
	NYX_APPROVAL_CONSUMED, /* the grant was used now: run it, once */
	NYX_APPROVAL_PENDING, /* a request already waits for a human */
	NYX_APPROVAL_REQUESTED, /* a new request was recorded */
};

/*
 * Pass the gate for one call: NYX_APPROVAL_CONSUMED, or a pending state
 * with the request in *a (what to show the user), or -1 with err (exit 3
 * approval_grant_mismatch when an approved, unconsumed grant for the same
 * owner, request and call covers other arguments; ledger errors).
 */
int nyx_approval_gate(struct nyx_ledger *l, const struct nyx_approval_call *c,
    struct nyx_approval *a, struct nyx_err *err);

/*
 * Load an approval a human may decide, with its verified arguments (a
 * secret buffer): 0, or -1 with err (65 approval_unknown,
 * approval_not_pending).
 */
int nyx_approval_load(struct nyx_ledger *l, const char *id, bool approve,
    struct nyx_approval *a, struct nyx_buf *args, struct nyx_err *err);

/*
 * Record the decision of `who` on a loaded approval, refreshing *a:
 * 0, or -1 with err (65 approval_not_pending when it changed meanwhile).
 */
int nyx_approval_decide(struct nyx_ledger *l, struct nyx_approval *a,
    bool approve, const char *who, struct nyx_err *err);

/* The approval.request record of an approval (borrows it). */
jv nyx_approval_record(const struct nyx_approval *a, const char *diag);

#endif
