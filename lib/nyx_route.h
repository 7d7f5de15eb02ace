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
#include <stddef.h>
#include <stdint.h>

#include <jv.h>

#include "nyx_hash.h"
#include "nyx_inventory.h"

#define NYX_SLUG_SHARED "chrono-sandbox"
#define NYX_SLUG_ALIAS "chrono-sandbox-aevatar"

/*
 * A capability's typed route contract (WIRE.md 2.4): data, not code.
 * Selection (2.3 steps 1-5, 7) is the same for every capability; the
 * policy conjunction, the contract digest label and the inventory-read
 * credential rule are the capability's own.
 */
#define NYX_CAP_MAX_SCOPES 4

struct nyx_capability {
	const char *name; /* "code_execute" */
	const char *digest_label; /* "code-execution-capability.v1" */
	const char *method, *path; /* the call the contract covers */
	bool forward_access_token; /* must be true (else not part of it) */
	const char *scopes[NYX_CAP_MAX_SCOPES]; /* required, NULL-ended */
	const char *policy_name; /* in messages: "code execution" */
	bool delegation_reads; /* an account:read delegation reads for it */
};

/* The table: code_execute (the default) first, then codex_managed. */
extern const struct nyx_capability nyx_capabilities[];
#define NYX_CAP_CODE_EXECUTE (&nyx_capabilities[0])
#define NYX_CAP_CODEX_MANAGED (&nyx_capabilities[1])

/* The capability of that name, or NULL. */
const struct nyx_capability *nyx_capability_find(const char *name);

/* "code_execute|codex_managed", for usage messages. */
const char *nyx_capability_names(void);

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
	unsigned missing; /* bit i: the contract's scopes[i] is absent */
};

struct nyx_resolution {
	const struct nyx_capability *cap; /* the contract classified for */
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

/*
 * Classify for a capability (NULL: code_execute); exact_id may be NULL.
 * Returns 0, or -1 when out of memory.
 */
int nyx_route_classify(const struct nyx_inventory *inv,
    const struct nyx_capability *cap, const char *exact_id,
    struct nyx_resolution *out);
void nyx_resolution_free(struct nyx_resolution *res);

/* WIRE.md 2.2 */
bool nyx_route_execution_ready(
    const struct nyx_route *r, const struct nyx_key *k, const char **why_not);
bool nyx_route_writable(const struct nyx_route *r, const struct nyx_key *k);

/* WIRE.md 2.4: the capability's policy conjunction; *missing (may be
 * NULL) gets a bit per required scope that is absent. */
bool nyx_route_policy_ok(const struct nyx_capability *cap,
    const struct nyx_route *r, unsigned *missing);

/* The missing scopes of a mask as "a, b" into out. */
void nyx_route_missing_str(
    const struct nyx_capability *cap, unsigned missing, char *out, size_t n);

/* The fixed blocker row for a verdict (NULL for admitted). */
const struct nyx_blocker *nyx_route_blocker(enum nyx_verdict v);

/* Exit code for a verdict (0 admitted, 3 other blockers). */
int nyx_route_exit(enum nyx_verdict v);

int nyx_route_contract_digest(const struct nyx_capability *cap, const char *id,
    const char *slug, const char *catalog, char out[NYX_SHA256_HEX]);
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
jv nyx_route_blocked(const struct nyx_capability *cap, enum nyx_verdict v,
    const char *message, int http_status, int exit_code, const char *base_url,
    const char *diag);

#endif
