/* Unit tests of the pure route classification (WIRE.md section 2). */
#include <stdlib.h>
#include <string.h>

#include "nyx_inventory.h"
#include "nyx_json.h"
#include "nyx_nyxid.h"
#include "nyx_route.h"
#include "nyx_test.h"

/* A personal route + key, compliant unless the caller edits them. */
static const char *route_tpl =
    "{\"id\":\"%s\",\"slug\":\"%s\",\"is_active\":true,"
    "\"catalog_service_id\":\"cat\",\"credential_source\":%s%s}";
static const char *key_tpl =
    "{\"id\":\"%s\",\"slug\":\"%s\",\"is_active\":true,\"connected\":true,"
    "\"status\":\"active\",\"catalog_service_id\":\"cat\","
    "\"catalog_service_slug\":\"chrono-sandbox\",\"auto_connected\":false,"
    "\"credential_source\":%s%s}";
static const char *personal = "{\"type\":\"personal\"}";
static const char *good =
    ",\"forward_access_token\":true,"
    "\"inject_delegation_token\":true,"
    "\"delegation_token_scope\":\"proxy:* sandbox:execute\"";

static struct nyx_inventory
inv_of(const char *services, const char *keys)
{
	struct nyx_inventory inv = NYX_INVENTORY_ZERO;
	char why[300];
	jv s = nyx_json_parse(services, strlen(services));
	jv k = nyx_json_parse(keys, strlen(keys));

	if (nyx_inventory_load(&inv, s, k, why, sizeof(why)) < 0)
		printf("# load failed: %s\n", why);
	return inv;
}

/* the templates above are fixed strings of this file */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static char *
fmt(const char *tpl, const char *a, const char *b, const char *c, const char *d)
{
	char *out = malloc(4096);

	snprintf(out, 4096, tpl, a, b, c, d);
	return out;
}

static enum nyx_verdict
verdict(const char *services, const char *keys, const char *exact,
    struct nyx_resolution *res, struct nyx_inventory *inv)
{
	*inv = inv_of(services, keys);
	nyx_route_classify(inv, NULL, exact, res);
	return res->verdict;
}

static void
test_policy(void)
{
	const struct nyx_capability *ce = NYX_CAP_CODE_EXECUTE;
	const struct nyx_capability *cm = NYX_CAP_CODEX_MANAGED;
	struct nyx_route r;
	unsigned miss;
	char s[128];

	memset(&r, 0, sizeof(r));
	r.forward_access_token = 1;
	r.inject_delegation_token = 1;
	r.delegation_token_scope = (char *)"sandbox:execute   proxy:*";
	CHECK(nyx_route_policy_ok(ce, &r, &miss), "scope order is free");
	r.delegation_token_scope =
	    (char *)"llm:proxy proxy:* sandbox:execute account:read";
	CHECK(nyx_route_policy_ok(ce, &r, &miss), "extra scopes are fine");
	r.delegation_token_scope = (char *)"proxy:*sandbox:execute";
	CHECK(!nyx_route_policy_ok(ce, &r, &miss) && miss == 3u,
	    "scopes are whitespace-split, not substrings");
	nyx_route_missing_str(ce, miss, s, sizeof(s));
	CHECK_STR(s, "proxy:*, sandbox:execute", "missing scopes, sorted");
	r.delegation_token_scope = (char *)"proxy:* sandbox:execute";
	r.forward_access_token = NYX_ABSENT;
	CHECK(!nyx_route_policy_ok(ce, &r, NULL), "absent counts as false");
	r.forward_access_token = 1;
	r.inject_delegation_token = 0;
	CHECK(!nyx_route_policy_ok(ce, &r, NULL), "inject must be true");
	r.inject_delegation_token = 1;
	r.delegation_token_scope = NULL;
	CHECK(!nyx_route_policy_ok(ce, &r, &miss) && miss == 3u,
	    "absent scope misses both");

	/* codex_managed: its own contract, not a copy of code_execute's */
	r.forward_access_token = 0;
	r.inject_delegation_token = 1;
	r.delegation_token_scope = (char *)"llm:proxy proxy:*";
	CHECK(nyx_route_policy_ok(cm, &r, &miss) && miss == 0,
	    "codex_managed needs neither forward_access_token nor "
	    "sandbox:execute");
	CHECK(!nyx_route_policy_ok(ce, &r, &miss) && miss == 2u,
	    "the same route misses code_execute's sandbox:execute");
	r.forward_access_token = NYX_ABSENT;
	CHECK(nyx_route_policy_ok(cm, &r, NULL),
	    "codex_managed: forward_access_token absent is fine");
	r.inject_delegation_token = NYX_ABSENT;
	CHECK(!nyx_route_policy_ok(cm, &r, NULL),
	    "codex_managed: inject_delegation_token is required");
	r.inject_delegation_token = 1;
	r.delegation_token_scope = (char *)"sandbox:execute";
	CHECK(!nyx_route_policy_ok(cm, &r, &miss) && miss == 1u,
	    "codex_managed: proxy:* is required");
	CHECK(nyx_capability_find("codex_managed") == cm &&
	        nyx_capability_find("code_execute") == ce &&
	        nyx_capability_find("codex") == NULL &&
	        nyx_capability_find(NULL) == NULL,
	    "the capability table by name");
}

static void
test_codex_managed_classify(void)
{
	struct nyx_resolution res;
	struct nyx_inventory inv;
	const char *codex_policy =
	    ",\"forward_access_token\":false,\"inject_delegation_token\":true,"
	    "\"delegation_token_scope\":\"llm:proxy proxy:*\"";
	char *s1 =
	    fmt(route_tpl, "us-1", "chrono-sandbox", personal, codex_policy);
	char *k1 = fmt(key_tpl, "us-1", "chrono-sandbox", personal, "");
	char services[9000], keys[9000];

	snprintf(services, sizeof(services), "{\"services\":[%s]}", s1);
	snprintf(keys, sizeof(keys), "{\"keys\":[%s]}", k1);
	inv = inv_of(services, keys);
	nyx_route_classify(&inv, NYX_CAP_CODEX_MANAGED, NULL, &res);
	CHECK(res.verdict == NYX_ROUTE_ADMITTED && res.eligible == 1 &&
	        res.cap == NYX_CAP_CODEX_MANAGED,
	    "a managed-Codex route is admitted for codex_managed");
	nyx_resolution_free(&res);
	nyx_route_classify(&inv, NYX_CAP_CODE_EXECUTE, NULL, &res);
	CHECK(res.verdict == NYX_ROUTE_POLICY_MISMATCH,
	    "the same route is a mismatch for code_execute");
	CHECK_STR(res.message,
	    "The canonical platform code execution route policy differs: "
	    "forward_access_token: false -> true; delegation_token_scope: "
	    "missing [sandbox:execute] -> contains [proxy:*, "
	    "sandbox:execute].",
	    "code_execute mismatch message");
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);
	free(s1);

	s1 = fmt(route_tpl, "us-1", "chrono-sandbox", personal,
	    ",\"inject_delegation_token\":false,"
	    "\"delegation_token_scope\":\"llm:proxy\"");
	snprintf(services, sizeof(services), "{\"services\":[%s]}", s1);
	inv = inv_of(services, keys);
	nyx_route_classify(&inv, NYX_CAP_CODEX_MANAGED, NULL, &res);
	CHECK_STR(res.message,
	    "The canonical platform managed Codex route policy differs: "
	    "inject_delegation_token: false -> true; delegation_token_scope: "
	    "missing [proxy:*] -> contains [proxy:*].",
	    "codex_managed mismatch names only its own fields");
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);
	free(s1);
	free(k1);
}

static void
test_classify(void)
{
	struct nyx_resolution res;
	struct nyx_inventory inv;
	char *s1 = fmt(route_tpl, "us-1", "chrono-sandbox", personal, good);
	char *k1 = fmt(key_tpl, "us-1", "chrono-sandbox", personal, "");
	char *s2 =
	    fmt(route_tpl, "us-2", "chrono-sandbox-aevatar", personal, good);
	char *k2 = fmt(key_tpl, "us-2", "chrono-sandbox-aevatar", personal, "");
	char services[9000], keys[9000];

	snprintf(services, sizeof(services), "{\"services\":[%s]}", s1);
	snprintf(keys, sizeof(keys), "{\"keys\":[%s]}", k1);
	CHECK(verdict(services, keys, NULL, &res, &inv) == NYX_ROUTE_ADMITTED,
	    "one compliant route is admitted");
	CHECK(res.selected && strcmp(res.selected->r->id, "us-1") == 0 &&
	        res.canonical == 1 && res.eligible == 1,
	    "admitted counts and selection");
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);

	snprintf(keys, sizeof(keys), "{\"keys\":[]}");
	CHECK(verdict(services, keys, NULL, &res, &inv) == NYX_ROUTE_MISSING,
	    "a route without a /keys join is not canonical");
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);

	snprintf(services, sizeof(services), "{\"services\":[%s,%s]}", s1, s2);
	snprintf(keys, sizeof(keys), "{\"keys\":[%s,%s]}", k2, k1);
	CHECK(verdict(services, keys, NULL, &res, &inv) == NYX_ROUTE_ADMITTED &&
	        strcmp(res.selected->r->slug, "chrono-sandbox") == 0 &&
	        res.eligible == 2,
	    "shared route beats the alias");
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);
	CHECK(
	    verdict(services, keys, "us-2", &res, &inv) == NYX_ROUTE_ADMITTED &&
	        strcmp(res.selected->r->id, "us-2") == 0 && res.canonical == 1,
	    "exact id selects the alias");
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);
	CHECK(verdict(services, keys, "  ", &res, &inv) == NYX_ROUTE_ADMITTED &&
	        res.canonical == 2,
	    "a blank exact id means none");
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);
	CHECK(verdict(services, keys, " us-2 ", &res, &inv) ==
	            NYX_ROUTE_ADMITTED &&
	        strcmp(res.selected->r->id, "us-2") == 0,
	    "the exact id is trimmed");
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);

	free(s1);
	free(k1);
	free(s2);
	free(k2);
}

static void
test_ready_writable(void)
{
	struct nyx_route r;
	struct nyx_key k;
	const char *why;

	memset(&r, 0, sizeof(r));
	memset(&k, 0, sizeof(k));
	r.slug = k.slug = (char *)"chrono-sandbox";
	r.catalog_service_id = k.catalog_service_id = (char *)"cat";
	r.is_active = k.is_active = k.connected = true;
	r.src.allowed = k.src.allowed = true;
	k.status = (char *)"active";
	k.auto_connected = 0;
	CHECK(nyx_route_execution_ready(&r, &k, &why), "ready personal route");
	CHECK(nyx_route_writable(&r, &k), "personal ready route is writable");
	k.auto_connected = NYX_ABSENT;
	CHECK(!nyx_route_writable(&r, &k),
	    "an absent auto_connected is never guessed writable");
	k.auto_connected = 1;
	CHECK(!nyx_route_writable(&r, &k), "auto-connected is not writable");
	k.auto_connected = 0;
	r.src.type = k.src.type = NYX_SRC_ORG;
	r.src.org_id = k.src.org_id = (char *)"org";
	r.src.role = (char *)"admin";
	k.src.role = (char *)"member";
	CHECK(nyx_route_execution_ready(&r, &k, &why) &&
	        !nyx_route_writable(&r, &k),
	    "org route needs admin on both sides to write");
	k.src.role = (char *)"admin";
	CHECK(nyx_route_writable(&r, &k), "org admin on both sides writes");
	k.src.org_id = (char *)"other";
	CHECK(!nyx_route_execution_ready(&r, &k, &why) &&
	        strcmp(why, "route and key owners differ") == 0,
	    "different org ids are not ready");
	k.src.org_id = (char *)"org";
	k.status = (char *)"refresh_failed";
	CHECK(!nyx_route_execution_ready(&r, &k, &why),
	    "a failed credential is not ready");
	k.node_id = (char *)"n1";
	k.node_status = (char *)"online";
	CHECK(nyx_route_execution_ready(&r, &k, &why),
	    "a node route ignores the credential status");
	k.node_status = (char *)"draining";
	CHECK(!nyx_route_execution_ready(&r, &k, &why) &&
	        strcmp(why, "node not online") == 0,
	    "a draining node is not ready");
}

static void
test_digest(void)
{
	char out[NYX_SHA256_HEX];

	/* computed independently (tests/helpers/lpdigest.py) */
	nyx_route_contract_digest(NULL, "us-1", "chrono-sandbox", "cat-1", out);
	CHECK_STR(out,
	    "863e3c36ed1ec390bbd2915394390e344658b39b7b53be2b1aaebccdfb7b1348",
	    "contract digest known vector");
	nyx_route_contract_digest(
	    NYX_CAP_CODEX_MANAGED, "us-1", "chrono-sandbox", "cat-1", out);
	CHECK_STR(out,
	    "c4f6d0d45e2787c364311ddcfd437d9d18d0293ced554a0ffb8db0993c1eb152",
	    "codex-managed-capability.v1 /codex/execute known vector");
	nyx_route_contract_digest(NULL, "us-1", "chrono-sandbox", NULL, out);
	CHECK(strcmp(out,
	          "863e3c36ed1ec390bbd2915394390e344658b39b7b53be2b1"
	          "aaebccdfb7b1348") != 0,
	    "null differs from a value");
}

static void
test_blockers(void)
{
	CHECK(nyx_route_blocker(NYX_ROUTE_ADMITTED) == NULL,
	    "admitted has no blocker");
	CHECK_STR(nyx_route_blocker(NYX_ROUTE_SOURCE_UNAVAILABLE)->runtime_code,
	    "code_execution_route_resolution_failed",
	    "source unavailable runtime code");
	CHECK_STR(nyx_route_blocker(NYX_ROUTE_AMBIGUOUS)->remediation_text,
	    "Keep exactly one platform code service", "ambiguous remediation");
	CHECK(
	    nyx_route_exit(NYX_ROUTE_POLICY_MISMATCH) == 3, "blockers exit 3");
	{
		int v, complete = 1;

		/* every verdict past admitted has a full row */
		for (v = NYX_ROUTE_MISSING; v <= NYX_ROUTE_REPAIR_UNVERIFIED;
		     v++) {
			const struct nyx_blocker *b = nyx_route_blocker(v);

			if (b == NULL || b->code == NULL ||
			    b->runtime_code == NULL ||
			    b->remediation_kind == NULL ||
			    b->remediation_text == NULL)
				complete = 0;
		}
		CHECK(complete,
		    "every blocker has code, runtime code and remediation");
	}
}

int
main(void)
{
	test_policy();
	test_classify();
	test_codex_managed_classify();
	test_ready_writable();
	test_digest();
	test_blockers();
	return nyx_test_done();
}
