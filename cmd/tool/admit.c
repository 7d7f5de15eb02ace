#include "admit.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "nyx_cred.h"
#include "nyx_hash.h"
#include "nyx_inventory.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_nyxid.h"
#include "nyx_route.h"
#include "nyx_time.h"

void
nyx_pin_free(struct nyx_pin *r)
{
	free(r->id);
	free(r->slug);
	r->id = r->slug = NULL;
}

/*
 * Validate an admitted record from stdin.  Returns 1 when it is fresh and
 * usable, 0 when it is stale (re-resolve with its id), -1 with err.
 */
static int
take_admission(jv rec, const struct nyx_settings *s,
    const struct nyx_capability *cap, struct nyx_pin *rt, struct nyx_err *err)
{
	jv route = nyx_json_get(rec, "route"),
	   proof = nyx_json_get(rec, "proof");
	const char *id = nyx_json_peek_str(route, "user_service_id");
	const char *slug = nyx_json_peek_str(route, "slug");
	const char *cat = nyx_json_peek_str(route, "catalog_service_id");
	const char *digest = nyx_json_peek_str(route, "contract_digest");
	const char *base = nyx_json_peek_str(rec, "base_url");
	const char *fresh = nyx_json_peek_str(proof, "fresh_until");
	const char *schema = nyx_json_peek_str(proof, "schema");
	const char *pdigest = nyx_json_peek_str(proof, "contract_digest");
	const char *rcap = nyx_json_peek_str(rec, "capability");
	char want[NYX_SHA256_HEX];
	int64_t until;
	int rc = -1;

	if (id == NULL || slug == NULL || cat == NULL || digest == NULL ||
	    (strcmp(slug, NYX_SLUG_SHARED) != 0 &&
	        strcmp(slug, NYX_SLUG_ALIAS) != 0)) {
		nyx_err_set(err, NYX_EXIT_DATAERR, "admission_invalid",
		    "the route.admission on stdin is incomplete or names an "
		    "unsupported route");
		goto out;
	}
	/* a proof is trusted only as this version makes it: its schema,
	 * its capability (a record from before capabilities is a
	 * code_execute one), and a digest that recomputes from its own
	 * route under that capability's label */
	if (schema == NULL ||
	    strcmp(schema, "external-capability-admission.v6") != 0) {
		nyx_err_set(err, NYX_EXIT_DATAERR, "admission_invalid",
		    "the route.admission on stdin has another proof schema; "
		    "rerun nyx-route-inspect");
		goto out;
	}
	if (nyx_json_has(rec, "capability")
	        ? rcap == NULL || strcmp(rcap, cap->name) != 0
	        : cap != NYX_CAP_CODE_EXECUTE) {
		nyx_err_set(err, NYX_EXIT_DATAERR, "admission_invalid",
		    "the route.admission on stdin was made for capability "
		    "'%s', not %s; rerun nyx-route-inspect --capability %s",
		    rcap ? rcap : "code_execute", cap->name, cap->name);
		goto out;
	}
	if (nyx_route_contract_digest(cap, id, slug, cat, want) < 0 ||
	    strcmp(want, digest) != 0 || pdigest == NULL ||
	    strcmp(want, pdigest) != 0) {
		nyx_err_set(err, NYX_EXIT_DATAERR, "admission_invalid",
		    "the route.admission on stdin has a contract_digest that "
		    "does not match its route; rerun nyx-route-inspect");
		goto out;
	}
	/* a record never redirects a credential to another host */
	if (base == NULL || s->base_url == NULL ||
	    strcmp(base, s->base_url) != 0) {
		nyx_err_set(err, NYX_EXIT_DATAERR,
		    "admission_base_url_mismatch",
		    "the route.admission on stdin was made for another base "
		    "URL");
		goto out;
	}
	rt->id = strdup(id);
	rt->slug = strdup(slug);
	rc = (fresh != NULL && nyx_time_parse(fresh, &until) == 0 &&
	         nyx_now_ms() <= until)
	    ? 1
	    : 0;
out:
	jv_free(route);
	jv_free(proof);
	return rc;
}

/* Resolve the route read-only, as nyx-route-inspect does. */
static int
resolve(const struct nyx_common *cm, struct nyx_settings *s,
    struct nyx_http *http, const struct nyx_capability *cap, const char *exact,
    struct nyx_pin *rt, struct nyx_err *err)
{
	struct nyx_inventory inv = NYX_INVENTORY_ZERO;
	struct nyx_resolution res;
	struct nyx_read_fail fail;
	struct nyx_nyxid client;
	int64_t observed = 0;
	int code = -1, rc;

	memset(&res, 0, sizeof(res));
	memset(&client, 0, sizeof(client));
	client.http = http;
	rc = nyx_nyxid_fetch(&client, cm, s, cap, &inv, &observed, &fail, err);
	if (rc < 0)
		goto out;
	if (rc == 1) {
		code = nyx_cli_emit_blocked(
		    nyx_route_blocked(cap, fail.verdict, fail.message,
		        fail.http_status, fail.exit, s->base_url,
		        nyx_cli_diag()),
		    fail.exit);
		goto out;
	}
	if (nyx_route_classify(&inv, cap, exact, &res) < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	if (res.verdict != NYX_ROUTE_ADMITTED) {
		code = nyx_cli_emit_blocked(
		    nyx_route_admission(
		        &inv, &res, s->base_url, nyx_cli_diag(), observed),
		    NYX_EXIT_BLOCKED);
		goto out;
	}
	rt->id = strdup(res.selected->r->id);
	rt->slug = strdup(res.selected->r->slug);
	code = 0;
out:
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);
	return code;
}

int
nyx_admit_route(const struct nyx_common *cm, struct nyx_settings *s,
    struct nyx_http *http, const struct nyx_capability *cap,
    const char *cred_code, struct nyx_pin *rt, struct nyx_err *err)
{
	jv rec = jv_invalid();
	int code, got, fresh = 1;

	/* the admission on stdin is checked against it */
	if (nyx_settings_require_base_url(s, err) < 0)
		return -1;
	got = nyx_cli_read_upstream(&rec, err);
	if (got < 0)
		return -1;
	if (got == NYX_UPSTREAM_ERROR)
		return nyx_cli_pass_through(rec, NYX_EXIT_SOFTWARE);
	if (got == NYX_UPSTREAM_BLOCKED)
		return nyx_cli_pass_through(rec, NYX_EXIT_BLOCKED);
	if (got == NYX_UPSTREAM_ADMITTED) {
		fresh = take_admission(rec, s, cap, rt, err);
		jv_free(rec);
		if (fresh < 0)
			return -1;
	}
	if (got == NYX_UPSTREAM_NONE || fresh == 0) {
		/* no admission, or a stale one: resolve (its exact id) now */
		char *exact = rt->id ? strdup(rt->id) : NULL;

		nyx_pin_free(rt);
		code = resolve(cm, s, http, cap, exact, rt, err);
		free(exact);
		if (code != 0)
			return code;
	}
	switch (nyx_cred_load(cm, s, NYX_TOKEN_EXEC, err)) {
	case 0:
		return 0;
	case 1:
		return nyx_err_set(err, NYX_EXIT_NOPERM, cred_code,
		    "No execution credential is configured (--exec-token-file, "
		    "NYX_EXEC_TOKEN_FILE, NYX_EXEC_TOKEN or the source "
		    "token).");
	default:
		return -1;
	}
}
