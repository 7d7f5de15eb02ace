/*
 * nyx_route: classify the chrono-sandbox route (WIRE.md section 2).
 *
 * Pure functions over a parsed, joined inventory: which routes are
 * canonical, accessible, active, execution-ready, policy-eligible and
 * writable, the verdict in the fixed order (missing, access denied,
 * inactive, not ready, policy mismatch, selection), the counts, the exact
 * policy-mismatch message, the blocker table, the contract and inventory
 * digests, and the route.admission record.  No I/O.
 *
 * A struct nyx_resolution borrows from the inventory it was computed over;
 * free it with nyx_resolution_free() before the inventory.
 */
#ifndef NYX_ROUTE_H
#define NYX_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include <jv.h>

#include "nyx_hash.h"
#include "nyx_inventory.h"

#define NYX_SLUG_SHARED "chrono-sandbox"
#define NYX_SLUG_ALIAS "chrono-sandbox-aevatar"

enum nyx_verdict {
	NYX_ROUTE_ADMITTED = 0,
	NYX_ROUTE_MISSING,
	NYX_ROUTE_ACCESS_DENIED,
	NYX_ROUTE_INACTIVE,
	NYX_ROUTE_NOT_READY,
	NYX_ROUTE_POLICY_MISMATCH,
	NYX_ROUTE_AMBIGUOUS,
	NYX_ROUTE_SOURCE_UNAVAILABLE,
	NYX_ROUTE_CREDENTIAL_REQUIRED,
	/* nyx-route-converge */
	NYX_ROUTE_WRITE_AUTHORITY_REQUIRED,
	NYX_ROUTE_REPAIR_REJECTED,
	NYX_ROUTE_REPAIR_UNVERIFIED,
};

/* Every gate's verdict for one route. */
struct nyx_candidate {
	const struct nyx_route *r;
	const struct nyx_key *k; /* NULL: no /keys entry with that id */
	bool relevant; /* shown in --table: supported slug or sandbox key */
	bool canonical, accessible, active, ready, eligible, writable;
	const char *why_not; /* first failed gate, fixed text */
	bool miss_proxy, miss_sandbox; /* policy scope gaps */
};

struct nyx_resolution {
	enum nyx_verdict verdict;
	int canonical, accessible, active, eligible; /* the counts */
	struct nyx_candidate *cands; /* one per route, inventory order */
	size_t ncands;
	const struct nyx_candidate *selected; /* when admitted */
	char message[1024];
};

struct nyx_blocker {
	const char *code;
	const char *runtime_code;
	const char *remediation_kind;
	const char *remediation_text;
};

/* Classify; exact_id may be NULL.  Returns 0, or -1 when out of memory. */
int nyx_route_classify(const struct nyx_inventory *inv, const char *exact_id,
    struct nyx_resolution *out);
void nyx_resolution_free(struct nyx_resolution *res);

/* WIRE.md 2.2 */
bool nyx_route_execution_ready(
    const struct nyx_route *r, const struct nyx_key *k, const char **why_not);
bool nyx_route_writable(const struct nyx_route *r, const struct nyx_key *k);

/* WIRE.md 2.4: the policy conjunction; missing scopes reported. */
bool nyx_route_policy_ok(
    const struct nyx_route *r, bool *miss_proxy, bool *miss_sandbox);

/* The fixed blocker row for a verdict (NULL for admitted). */
const struct nyx_blocker *nyx_route_blocker(enum nyx_verdict v);

/* Exit code for a verdict (0 admitted, 3 other blockers). */
int nyx_route_exit(enum nyx_verdict v);

int nyx_route_contract_digest(const char *id, const char *slug,
    const char *catalog, char out[NYX_SHA256_HEX]);
int nyx_inventory_digest(
    const struct nyx_inventory *inv, char out[NYX_SHA256_HEX]);

/* The counts object of a classification. */
jv nyx_route_counts(const struct nyx_resolution *res);

/* "true", "false" or "absent" for a tri-state flag. */
const char *nyx_tri_str(int v);

/*
 * The route.admission record for a completed classification.  base_url may
 * be NULL (offline).  observed_ms is the clock at the read.
 */
jv nyx_route_admission(const struct nyx_inventory *inv,
    const struct nyx_resolution *res, const char *base_url, const char *diag,
    int64_t observed_ms);

/*
 * A blocked route.admission for a failure before classification (no
 * credential, or an inventory read that failed).  http_status 0 when none.
 */
jv nyx_route_blocked(enum nyx_verdict v, const char *message, int http_status,
    int exit_code, const char *base_url, const char *diag);

#endif
