#include "nyx_converge.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_cred.h"
#include "nyx_err.h"
#include "nyx_json.h"

/* The next whitespace-separated scope after *p into tok; 0 at the end. */
static int
next_scope(const char **p, char *tok, size_t toksz)
{
	size_t n = 0;

	while (isspace((unsigned char)**p))
		(*p)++;
	while ((*p)[n] != '\0' && !isspace((unsigned char)(*p)[n]))
		n++;
	if (n == 0)
		return 0;
	snprintf(tok, toksz, "%.*s", (int)n, *p);
	*p += n;
	return 1;
}

char *
nyx_scope_merge(const struct nyx_capability *cap, const char *existing)
{
	size_t size = (existing ? strlen(existing) : 0) + 64, o = 0;
	char *out = malloc(size);
	const char *p = existing ? existing : "";
	char tok[256];
	size_t i;

	if (out == NULL)
		return NULL;
	if (cap == NULL)
		cap = NYX_CAP_CODE_EXECUTE;
	out[0] = '\0';
	while (next_scope(&p, tok, sizeof(tok))) {
		if (nyx_scope_has(out, tok))
			continue; /* keep the first occurrence */
		o += (size_t)snprintf(
		    out + o, size - o, "%s%s", o ? " " : "", tok);
	}
	for (i = 0; i < NYX_CAP_MAX_SCOPES && cap->scopes[i] != NULL; i++)
		if (!nyx_scope_has(out, cap->scopes[i]))
			o += (size_t)snprintf(out + o, size - o, "%s%s",
			    o ? " " : "", cap->scopes[i]);
	return out;
}

/* Every whitespace-separated token of a is in b. */
static bool
scope_subset(const char *a, const char *b)
{
	const char *p = a ? a : "";
	char tok[256];

	while (next_scope(&p, tok, sizeof(tok)))
		if (!nyx_scope_has(b, tok))
			return false;
	return true;
}

bool
nyx_scope_set_equal(const char *a, const char *b)
{
	return scope_subset(a, b) && scope_subset(b, a);
}

void
nyx_repair_plan(const struct nyx_resolution *res, const char *exact_id,
    struct nyx_repair_plan *plan)
{
	const struct nyx_candidate *only = NULL, *platform = NULL;
	int nplatform = 0;
	size_t i;

	memset(plan, 0, sizeof(*plan));
	plan->cap = res->cap ? res->cap : NYX_CAP_CODE_EXECUTE;
	if (res->verdict == NYX_ROUTE_ADMITTED) {
		plan->action = NYX_REPAIR_NONE;
		return;
	}
	if (res->verdict != NYX_ROUTE_POLICY_MISMATCH) {
		plan->action = NYX_REPAIR_NOT_APPLICABLE;
		return;
	}
	for (i = 0; i < res->ncands; i++) {
		const struct nyx_candidate *c = &res->cands[i];

		/* canonical (supported slug, catalog, exact id, sandbox key),
		 * active and writable */
		if (c->canonical && c->writable) {
			plan->writable++;
			only = c;
		}
		if (c->ready && c->k->auto_connected == 1) {
			nplatform++;
			platform = c;
		}
	}
	if (plan->writable > 1) {
		plan->action = NYX_REPAIR_AMBIGUOUS;
		return;
	}
	if (plan->writable == 1) {
		plan->action = NYX_REPAIR_UPDATE;
		plan->target = only;
		plan->merged_scope =
		    nyx_scope_merge(plan->cap, only->r->delegation_token_scope);
		return;
	}
	/* auto-connected routes are never PUT: NyxID owns them */
	if (plan->writable == 0 && (exact_id == NULL || *exact_id == '\0') &&
	    nplatform == 1 && strcmp(platform->r->slug, NYX_SLUG_SHARED) == 0 &&
	    !nyx_route_policy_ok(plan->cap, platform->r, NULL)) {
		plan->action = NYX_REPAIR_CREATE_ALIAS;
		plan->target = platform;
		return;
	}
	plan->action = NYX_REPAIR_NOT_WRITABLE;
}

void
nyx_repair_plan_free(struct nyx_repair_plan *plan)
{
	free(plan->merged_scope);
	plan->merged_scope = NULL;
}

/* The capability's own scopes, space-joined: what an empty route gets. */
static char *
contract_scope(const struct nyx_capability *cap)
{
	return nyx_scope_merge(cap, NULL);
}

jv
nyx_repair_patch(const struct nyx_repair_plan *plan)
{
	const struct nyx_capability *cap =
	    plan->cap ? plan->cap : NYX_CAP_CODE_EXECUTE;
	char *scope = plan->merged_scope ? NULL : contract_scope(cap);
	jv p = jv_object();

	/* only the contract's own fields: never forward_access_token for a
	 * capability whose contract does not name it */
	if (cap->forward_access_token)
		p = jv_object_set(
		    p, jv_string("forward_access_token"), jv_true());
	p = jv_object_set(p, jv_string("inject_delegation_token"), jv_true());
	p = jv_object_set(p, jv_string("delegation_token_scope"),
	    jv_string(plan->merged_scope ? plan->merged_scope
	            : scope              ? scope
	                                 : ""));
	free(scope);
	return p;
}

jv
nyx_repair_alias_body(const struct nyx_repair_plan *plan)
{
	const struct nyx_capability *cap =
	    plan->cap ? plan->cap : NYX_CAP_CODE_EXECUTE;
	char *scope = contract_scope(cap);
	jv b = jv_object();

	b = jv_object_set(
	    b, jv_string("service_slug"), jv_string(NYX_SLUG_SHARED));
	b = jv_object_set(b, jv_string("slug"), jv_string(NYX_SLUG_ALIAS));
	b = jv_object_set(b, jv_string("label"), jv_string(NYX_ALIAS_LABEL));
	if (cap->forward_access_token)
		b = jv_object_set(
		    b, jv_string("forward_access_token"), jv_true());
	b = jv_object_set(b, jv_string("inject_delegation_token"), jv_true());
	b = jv_object_set(b, jv_string("delegation_token_scope"),
	    jv_string(scope ? scope : ""));
	/* the platform route's node binding, only when it has one */
	if (plan->target != NULL && plan->target->k->node_id != NULL)
		b = jv_object_set(b, jv_string("node_id"),
		    jv_string(plan->target->k->node_id));
	free(scope);
	return b;
}

static bool
same(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

static bool
same_source(const struct nyx_source *a, const struct nyx_source *b)
{
	return a->type == b->type && same(a->org_id, b->org_id) &&
	    same(a->role, b->role) && a->allowed == b->allowed;
}

/* The route with this id in an inventory, or NULL. */
static const struct nyx_route *
find_route(const struct nyx_inventory *inv, const char *id)
{
	size_t i;

	for (i = 0; i < inv->nroutes; i++)
		if (strcmp(inv->routes[i].id, id) == 0)
			return &inv->routes[i];
	return NULL;
}

static bool
admitted_as(const struct nyx_capability *cap, const struct nyx_inventory *after,
    const char *id)
{
	struct nyx_resolution res;
	bool ok;

	if (nyx_route_classify(after, cap, id, &res) < 0)
		return false;
	ok = res.verdict == NYX_ROUTE_ADMITTED && res.selected != NULL &&
	    strcmp(res.selected->r->id, id) == 0;
	nyx_resolution_free(&res);
	return ok;
}

bool
nyx_repair_verify_update(
    const struct nyx_repair_plan *plan, const struct nyx_inventory *after)
{
	const struct nyx_capability *cap =
	    plan->cap ? plan->cap : NYX_CAP_CODE_EXECUTE;
	const struct nyx_route *before = plan->target->r;
	const struct nyx_route *r = find_route(after, before->id);
	const struct nyx_key *bk = before->key;

	if (r == NULL || r->key == NULL || bk == NULL ||
	    !nyx_route_execution_ready(r, r->key, NULL))
		return false;
	/* identity unchanged, on the route and on the key */
	if (!same(r->slug, before->slug) ||
	    !same(r->catalog_service_id, before->catalog_service_id) ||
	    !same_source(&r->src, &before->src) ||
	    !same(r->key->slug, bk->slug) ||
	    !same(r->key->catalog_service_id, bk->catalog_service_id) ||
	    !same(r->key->catalog_service_slug, bk->catalog_service_slug) ||
	    r->key->auto_connected != bk->auto_connected ||
	    !same_source(&r->key->src, &bk->src))
		return false;
	/* the policy is the patch (an extra scope is drift), and a field the
	 * patch does not name is what it was */
	if ((cap->forward_access_token ? r->forward_access_token != 1
	                               : r->forward_access_token !=
	                before->forward_access_token) ||
	    r->inject_delegation_token != 1 ||
	    !nyx_scope_set_equal(r->delegation_token_scope, plan->merged_scope))
		return false;
	return admitted_as(cap, after, before->id);
}

const char *
nyx_repair_verify_alias(
    const struct nyx_repair_plan *plan, const struct nyx_inventory *after)
{
	const struct nyx_capability *cap =
	    plan->cap ? plan->cap : NYX_CAP_CODE_EXECUTE;
	const char *hit = NULL;
	int n = 0;
	size_t i;

	for (i = 0; i < after->nroutes; i++) {
		const struct nyx_route *r = &after->routes[i];

		if (strcmp(r->slug, NYX_SLUG_ALIAS) != 0 ||
		    r->src.type != NYX_SRC_PERSONAL || r->key == NULL ||
		    r->key->auto_connected != 0 ||
		    !same(r->key->catalog_service_slug, NYX_SLUG_SHARED) ||
		    !nyx_route_execution_ready(r, r->key, NULL) ||
		    !nyx_route_policy_ok(cap, r, NULL))
			continue;
		n++;
		hit = r->id;
	}
	if (n != 1 || !admitted_as(cap, after, hit))
		return NULL;
	return hit;
}

void
nyx_repair_classify(enum nyx_repair_action action, long status,
    bool transport_failed, bool verified, struct nyx_repair_outcome *out)
{
	/* a 409 on the alias means someone created it: not a failure */
	bool write_ok = !transport_failed &&
	    ((status >= 200 && status <= 299) ||
	        (action == NYX_REPAIR_CREATE_ALIAS && status == 409));

	memset(out, 0, sizeof(*out));
	if (verified) {
		/* a failed write followed by a verified readback converged */
		out->outcome = action == NYX_REPAIR_CREATE_ALIAS
		    ? "alias_created"
		    : "converged";
		out->exit = NYX_EXIT_OK;
		return;
	}
	if (transport_failed)
		out->failure_kind = "UpdateException";
	else if (!write_ok)
		out->failure_kind = "MutationRejected";
	else
		out->failure_kind = "PostconditionMismatch";
	if (!transport_failed && !write_ok && status >= 400 && status <= 499 &&
	    status != 408 && status != 429) {
		out->outcome = "rejected";
		out->exit = NYX_EXIT_BLOCKED;
	} else {
		out->outcome = "unverified";
		out->exit = NYX_EXIT_TEMPFAIL;
	}
}
