/*
 * nyx_converge: bounded route repair (WIRE.md section 3), the pure part.
 *
 * From a classification it plans at most one write: a minimal PUT of the
 * exactly one writable candidate, or, when the only canonical route is a
 * non-compliant auto-connected one, the personal alias.  It merges scopes,
 * verifies a readback, and classifies the outcome.  No I/O.
 */
#ifndef NYX_CONVERGE_H
#define NYX_CONVERGE_H

#include <stdbool.h>

#include <jv.h>

#include "nyx_inventory.h"
#include "nyx_route.h"

#define NYX_ALIAS_LABEL "Aevatar Code Execution"

enum nyx_repair_action {
	NYX_REPAIR_NONE = 0, /* already admitted */
	NYX_REPAIR_UPDATE, /* PUT the one writable candidate */
	NYX_REPAIR_CREATE_ALIAS, /* POST the personal alias */
	NYX_REPAIR_NOT_WRITABLE, /* drift, but no route this caller writes */
	NYX_REPAIR_AMBIGUOUS, /* several writable candidates: write none */
	NYX_REPAIR_NOT_APPLICABLE, /* another blocker: nothing to repair */
};

struct nyx_repair_plan {
	const struct nyx_capability *cap; /* the contract it ensures */
	enum nyx_repair_action action;
	const struct nyx_candidate *target; /* UPDATE: the route; ALIAS: the
					     * auto-connected platform route */
	int writable; /* writable candidates seen (several: ambiguous) */
	char *merged_scope; /* UPDATE: heap */
};

/*
 * Merge scopes: split on whitespace, drop empties, de-duplicate keeping
 * first-seen order, append the capability's scopes (proxy:* then
 * sandbox:execute for code_execute) when missing, join with single
 * spaces.  A new heap string.
 */
char *nyx_scope_merge(const struct nyx_capability *cap, const char *existing);

/* Whether two scope strings hold the same set. */
bool nyx_scope_set_equal(const char *a, const char *b);

/*
 * Plan from a classification (exact_id may be NULL), for the capability it
 * was classified for.  The patch holds only that contract's fields:
 * codex_managed never names forward_access_token.
 */
void nyx_repair_plan(const struct nyx_resolution *res, const char *exact_id,
    struct nyx_repair_plan *plan);
void nyx_repair_plan_free(struct nyx_repair_plan *plan);

/* The PUT body or the alias POST body (consumes nothing). */
jv nyx_repair_patch(const struct nyx_repair_plan *plan);
jv nyx_repair_alias_body(const struct nyx_repair_plan *plan);

/*
 * Verify an update: the same id joins and is execution-ready; id, slug,
 * catalog, source and auto_connected unchanged from `before`; the policy
 * equals the patch (scopes as sets), and a field outside the patch is
 * unchanged; and the exact-id classification of `after` admits it.
 */
bool nyx_repair_verify_update(
    const struct nyx_repair_plan *plan, const struct nyx_inventory *after);

/* Verify the alias: the id of exactly one personal alias compliant with
 * the plan's capability, or NULL (borrowed from `after`). */
const char *nyx_repair_verify_alias(
    const struct nyx_repair_plan *plan, const struct nyx_inventory *after);

struct nyx_repair_outcome {
	const char
	    *outcome; /* converged, alias_created, rejected, unverified */
	const char *failure_kind; /* NULL when verified */
	int exit;
};

/*
 * Classify a write: status 0 means no HTTP answer; write_failed for any
 * non-2xx (409 on the alias counts as done).
 */
void nyx_repair_classify(enum nyx_repair_action action, long status,
    bool transport_failed, bool verified, struct nyx_repair_outcome *out);

#endif
