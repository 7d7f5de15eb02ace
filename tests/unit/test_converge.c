/* Unit tests of route repair: scope merging, set comparison, outcomes. */
#include <stdlib.h>
#include <string.h>

#include "nyx_converge.h"
#include "nyx_json.h"
#include "nyx_test.h"

static void
merge_for(const struct nyx_capability *cap, const char *in, const char *want)
{
	char *got = nyx_scope_merge(cap, in), name[200];

	snprintf(name, sizeof(name), "merge %s \"%s\"", cap ? cap->name : "",
	    in ? in : "(null)");
	CHECK_STR(got, want, name);
	free(got);
}

static void
merge(const char *in, const char *want)
{
	merge_for(NYX_CAP_CODE_EXECUTE, in, want);
}

/* codex_managed's patch never names forward_access_token */
static void
codex_managed_plan(void)
{
	struct nyx_repair_plan plan;
	char *body;
	jv p;

	memset(&plan, 0, sizeof(plan));
	plan.cap = NYX_CAP_CODEX_MANAGED;
	plan.action = NYX_REPAIR_UPDATE;
	plan.merged_scope = nyx_scope_merge(plan.cap, "llm:proxy");
	p = nyx_repair_patch(&plan);
	body = nyx_json_dump(p);
	CHECK_STR(body,
	    "{\"delegation_token_scope\":\"llm:proxy proxy:*\","
	    "\"inject_delegation_token\":true}",
	    "codex_managed patch: inject and proxy:* only");
	free(body);
	p = nyx_repair_alias_body(&plan);
	CHECK(!nyx_json_has(p, "forward_access_token"),
	    "codex_managed alias body: no forward_access_token");
	jv_free(p);
	nyx_repair_plan_free(&plan);
}

static void
outcome(enum nyx_repair_action a, long status, bool transport, bool verified,
    const char *want, const char *kind, int exit_code)
{
	struct nyx_repair_outcome o;
	char name[200];

	nyx_repair_classify(a, status, transport, verified, &o);
	snprintf(name, sizeof(name), "status %ld%s%s -> %s", status,
	    transport ? " (transport)" : "", verified ? " verified" : "", want);
	CHECK(strcmp(o.outcome, want) == 0 && o.exit == exit_code &&
	        ((kind == NULL && o.failure_kind == NULL) ||
	            (kind != NULL && o.failure_kind != NULL &&
	                strcmp(o.failure_kind, kind) == 0)),
	    name);
}

int
main(void)
{
	merge(" proxy:*  proxy:* account:read ",
	    "proxy:* account:read sandbox:execute");
	merge(NULL, "proxy:* sandbox:execute");
	merge("", "proxy:* sandbox:execute");
	merge("llm:proxy", "llm:proxy proxy:* sandbox:execute");
	merge("sandbox:execute llm:proxy", "sandbox:execute llm:proxy proxy:*");
	merge("\tproxy:*\n", "proxy:* sandbox:execute");
	merge_for(NYX_CAP_CODEX_MANAGED, "llm:proxy", "llm:proxy proxy:*");
	merge_for(NYX_CAP_CODEX_MANAGED, " proxy:* proxy:* ", "proxy:*");
	merge_for(NYX_CAP_CODEX_MANAGED, NULL, "proxy:*");
	codex_managed_plan();

	CHECK(nyx_scope_set_equal("a b c", "c  a b"), "sets ignore order");
	CHECK(nyx_scope_set_equal("a a b", "b a"), "sets ignore repeats");
	CHECK(!nyx_scope_set_equal("a b", "a b c"), "an extra scope differs");
	CHECK(!nyx_scope_set_equal("a b c", "a b"), "a missing scope differs");

	outcome(NYX_REPAIR_UPDATE, 200, false, true, "converged", NULL, 0);
	outcome(NYX_REPAIR_UPDATE, 500, false, true, "converged", NULL, 0);
	outcome(NYX_REPAIR_CREATE_ALIAS, 409, false, true, "alias_created",
	    NULL, 0);
	outcome(NYX_REPAIR_UPDATE, 403, false, false, "rejected",
	    "MutationRejected", 3);
	outcome(NYX_REPAIR_UPDATE, 422, false, false, "rejected",
	    "MutationRejected", 3);
	outcome(NYX_REPAIR_UPDATE, 409, false, false, "rejected",
	    "MutationRejected", 3);
	outcome(NYX_REPAIR_UPDATE, 408, false, false, "unverified",
	    "MutationRejected", 75);
	outcome(NYX_REPAIR_UPDATE, 429, false, false, "unverified",
	    "MutationRejected", 75);
	outcome(NYX_REPAIR_UPDATE, 503, false, false, "unverified",
	    "MutationRejected", 75);
	outcome(NYX_REPAIR_UPDATE, 0, true, false, "unverified",
	    "UpdateException", 75);
	outcome(NYX_REPAIR_UPDATE, 200, false, false, "unverified",
	    "PostconditionMismatch", 75);
	outcome(NYX_REPAIR_CREATE_ALIAS, 409, false, false, "unverified",
	    "PostconditionMismatch", 75);
	return nyx_test_done();
}
