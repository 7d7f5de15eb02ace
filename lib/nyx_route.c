#include "nyx_route.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_cred.h"
#include "nyx_err.h"
#include "nyx_json.h"
#include "nyx_time.h"

#define FRESH_MS (5 * 60 * 1000)

/* The scopes of each row are listed sorted: messages print them so. */
const struct nyx_capability nyx_capabilities[] = {
    {"code_execute", "code-execution-capability.v1", "POST", "/execute", true,
        {"proxy:*", "sandbox:execute", NULL}, "code execution", true},
    {"codex_managed", "codex-managed-capability.v1", "POST", "/codex/execute",
        false, {"proxy:*", NULL}, "managed Codex", false},
    {NULL, NULL, NULL, NULL, false, {NULL}, NULL, false},
};

const struct nyx_capability *
nyx_capability_find(const char *name)
{
	const struct nyx_capability *c;

	for (c = nyx_capabilities; name != NULL && c->name != NULL; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

const char *
nyx_capability_names(void)
{
	return "code_execute|codex_managed";
}

static const struct nyx_blocker blockers[] = {
    [NYX_ROUTE_MISSING] = {"CODE_EXECUTION_ROUTE_MISSING",
        "code_execution_route_missing", "register_service",
        "Connect the platform code service"},
    [NYX_ROUTE_ACCESS_DENIED] = {"CODE_EXECUTION_ROUTE_ACCESS_DENIED",
        "code_execution_route_access_denied", "request_access",
        "Request access to the platform code service"},
    [NYX_ROUTE_INACTIVE] = {"CODE_EXECUTION_ROUTE_INACTIVE",
        "code_execution_route_inactive", "connect_credential",
        "Reactivate the platform code service"},
    [NYX_ROUTE_NOT_READY] = {"CODE_EXECUTION_ROUTE_NOT_READY",
        "code_execution_route_not_ready", "connect_credential",
        "Restore the platform code service credential or node"},
    [NYX_ROUTE_POLICY_MISMATCH] = {"CODE_EXECUTION_ROUTE_POLICY_MISMATCH",
        "code_execution_route_policy_mismatch", "connect_credential",
        "Update the platform code service identity settings"},
    [NYX_ROUTE_AMBIGUOUS] = {"CODE_EXECUTION_ROUTE_AMBIGUOUS",
        "code_execution_route_ambiguous", "configure_connector",
        "Keep exactly one platform code service"},
    [NYX_ROUTE_SOURCE_UNAVAILABLE] = {"CODE_EXECUTION_ROUTE_SOURCE_UNAVAILABLE",
        "code_execution_route_resolution_failed", "refresh_source",
        "Restore platform code route"},
    [NYX_ROUTE_CREDENTIAL_REQUIRED] =
        {"CODE_EXECUTION_SOURCE_CREDENTIAL_REQUIRED",
            "code_execution_source_credential_required", "connect_credential",
            "Provide a source-readable NyxID credential"},
    [NYX_ROUTE_WRITE_AUTHORITY_REQUIRED] =
        {"CODE_EXECUTION_ROUTE_WRITE_AUTHORITY_REQUIRED",
            "code_execution_route_write_authority_required", "request_access",
            "Ask the route owner or an organization admin to repair the route"},
    [NYX_ROUTE_REPAIR_REJECTED] = {"CODE_EXECUTION_ROUTE_REPAIR_REJECTED",
        "code_execution_route_repair_rejected", "request_access",
        "Ask the platform operator to grant the code execution route "
        "contract"},
    [NYX_ROUTE_REPAIR_UNVERIFIED] = {"CODE_EXECUTION_ROUTE_REPAIR_UNVERIFIED",
        "code_execution_route_repair_unverified", "refresh_source",
        "Retry platform code route repair"},
};

const struct nyx_blocker *
nyx_route_blocker(enum nyx_verdict v)
{
	if (v == NYX_ROUTE_ADMITTED || v > NYX_ROUTE_REPAIR_UNVERIFIED)
		return NULL;
	return &blockers[v];
}

int
nyx_route_exit(enum nyx_verdict v)
{
	return v == NYX_ROUTE_ADMITTED ? NYX_EXIT_OK : NYX_EXIT_BLOCKED;
}

const char *
nyx_tri_str(int v)
{
	return v == NYX_ABSENT ? "absent" : v ? "true" : "false";
}

static bool
streq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

bool
nyx_route_execution_ready(
    const struct nyx_route *r, const struct nyx_key *k, const char **why)
{
	const char *dummy;

	if (why == NULL)
		why = &dummy;
	*why = NULL;
	if (k == NULL)
		*why = "no /keys entry";
	else if (!r->is_active)
		*why = "route inactive";
	else if (!r->src.allowed)
		*why = "route access not allowed";
	else if (!k->is_active)
		*why = "key inactive";
	else if (!k->connected)
		*why = "key not connected";
	else if (!k->src.allowed)
		*why = "key access not allowed";
	else if (r->src.type != k->src.type ||
	    !streq(r->src.org_id, k->src.org_id))
		*why = "route and key owners differ";
	else if (!streq(r->slug, k->slug))
		*why = "route and key slugs differ";
	else if (!streq(r->catalog_service_id, k->catalog_service_id))
		*why = "route and key catalog ids differ";
	else if (k->node_id == NULL && strcmp(k->status, "active") != 0)
		*why = "key credential not active";
	else if (k->node_id != NULL && strcmp(k->node_status, "online") != 0)
		*why = "node not online";
	return *why == NULL;
}

bool
nyx_route_writable(const struct nyx_route *r, const struct nyx_key *k)
{
	if (k == NULL || k->auto_connected != 0 ||
	    !nyx_route_execution_ready(r, k, NULL))
		return false;
	if (r->src.type == NYX_SRC_PERSONAL)
		return true;
	return streq(r->src.role, "admin") && streq(k->src.role, "admin");
}

bool
nyx_route_policy_ok(const struct nyx_capability *cap, const struct nyx_route *r,
    unsigned *missing)
{
	unsigned miss = 0, i;

	if (cap == NULL)
		cap = NYX_CAP_CODE_EXECUTE;
	for (i = 0; i < NYX_CAP_MAX_SCOPES && cap->scopes[i] != NULL; i++)
		if (!nyx_scope_has(r->delegation_token_scope, cap->scopes[i]))
			miss |= 1u << i;
	if (missing)
		*missing = miss;
	return (!cap->forward_access_token || r->forward_access_token == 1) &&
	    r->inject_delegation_token == 1 && miss == 0;
}

/* The capability's scopes of a mask (all of them for ~0u), ", "-joined. */
void
nyx_route_missing_str(
    const struct nyx_capability *cap, unsigned missing, char *out, size_t n)
{
	size_t o = 0, i;

	if (n == 0)
		return;
	out[0] = '\0';
	for (i = 0; i < NYX_CAP_MAX_SCOPES && cap->scopes[i] != NULL; i++) {
		int w;

		if (!(missing & (1u << i)) || o >= n)
			continue;
		w = snprintf(
		    out + o, n - o, "%s%s", o ? ", " : "", cap->scopes[i]);
		if (w > 0)
			o += (size_t)w;
	}
}

static bool
supported_slug(const char *slug)
{
	return strcmp(slug, NYX_SLUG_SHARED) == 0 ||
	    strcmp(slug, NYX_SLUG_ALIAS) == 0;
}

/* "<v>" or "[absent, false]" for the values of failing candidates. */
static void
field_values(const struct nyx_resolution *res, bool fwd, char *out, size_t n)
{
	bool absent = false, no = false;
	size_t i;

	for (i = 0; i < res->ncands; i++) {
		const struct nyx_candidate *c = &res->cands[i];
		int v;

		if (!c->ready)
			continue;
		v = fwd ? c->r->forward_access_token
		        : c->r->inject_delegation_token;
		if (v == NYX_ABSENT)
			absent = true;
		else if (v == 0)
			no = true;
	}
	if (absent && no)
		snprintf(out, n, "[absent, false]");
	else
		snprintf(out, n, "%s", absent ? "absent" : no ? "false" : "");
}

/* Only the capability's own fields, in the fixed order of WIRE.md 2.4. */
static void
mismatch_message(struct nyx_resolution *res)
{
	const struct nyx_capability *cap = res->cap;
	char fwd[32], inj[32], miss[128], all[128], buf[1024];
	unsigned missing = 0;
	size_t i, o;

	for (i = 0; i < res->ncands; i++)
		if (res->cands[i].ready)
			missing |= res->cands[i].missing;
	field_values(res, true, fwd, sizeof(fwd));
	field_values(res, false, inj, sizeof(inj));
	nyx_route_missing_str(cap, missing, miss, sizeof(miss));
	nyx_route_missing_str(cap, ~0u, all, sizeof(all));
	o = (size_t)snprintf(buf, sizeof(buf),
	    "The canonical platform %s route policy differs: ",
	    cap->policy_name);
	if (cap->forward_access_token && fwd[0] != '\0')
		o += (size_t)snprintf(buf + o, sizeof(buf) - o,
		    "forward_access_token: %s -> true; ", fwd);
	if (inj[0] != '\0')
		o += (size_t)snprintf(buf + o, sizeof(buf) - o,
		    "inject_delegation_token: %s -> true; ", inj);
	if (missing != 0)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o,
		    "delegation_token_scope: missing [%s] -> contains [%s]; ",
		    miss, all);
	if (o >= 2 && o < sizeof(buf) && strcmp(buf + o - 2, "; ") == 0) {
		buf[o - 2] = '.';
		buf[o - 1] = '\0';
	} else {
		snprintf(buf, sizeof(buf),
		    "The canonical platform %s route policy differs: %s"
		    "inject_delegation_token must be true; "
		    "delegation_token_scope must contain [%s].",
		    cap->policy_name,
		    cap->forward_access_token
		        ? "forward_access_token must be true; "
		        : "",
		    all);
	}
	snprintf(res->message, sizeof(res->message), "%s", buf);
}

/* Each message around the capability's policy name ("code execution"). */
static const char *const fixed_messages[][2] = {
    [NYX_ROUTE_ADMITTED] = {"The platform ", " route is admitted."},
    [NYX_ROUTE_MISSING] = {"No canonical platform ",
        " route (chrono-sandbox) is visible to this caller."},
    [NYX_ROUTE_ACCESS_DENIED] = {"The canonical platform ",
        " route is not accessible to this caller."},
    [NYX_ROUTE_INACTIVE] = {"The canonical platform ", " route is inactive."},
    [NYX_ROUTE_NOT_READY] = {"The canonical platform ",
        " route has no ready credential or node."},
    [NYX_ROUTE_AMBIGUOUS] = {"More than one platform ",
        " route is eligible; keep exactly one."},
};

int
nyx_route_classify(const struct nyx_inventory *inv,
    const struct nyx_capability *cap, const char *exact_id,
    struct nyx_resolution *res)
{
	const struct nyx_candidate *shared = NULL, *only = NULL;
	size_t i, exact_len = 0;
	int nshared = 0;

	memset(res, 0, sizeof(*res));
	res->cap = cap ? cap : NYX_CAP_CODE_EXECUTE;
	/* the exact id is trimmed; blank means none */
	if (exact_id != NULL) {
		while (isspace((unsigned char)*exact_id))
			exact_id++;
		exact_len = strlen(exact_id);
		while (exact_len > 0 &&
		    isspace((unsigned char)exact_id[exact_len - 1]))
			exact_len--;
		if (exact_len == 0)
			exact_id = NULL;
	}
	res->cands =
	    calloc(inv->nroutes ? inv->nroutes : 1, sizeof(*res->cands));
	if (res->cands == NULL)
		return -1;
	res->ncands = inv->nroutes;
	for (i = 0; i < inv->nroutes; i++) {
		struct nyx_candidate *c = &res->cands[i];
		const struct nyx_route *r = &inv->routes[i];
		const struct nyx_key *k = r->key;
		const char *why = NULL;

		c->r = r;
		c->k = k;
		c->relevant = supported_slug(r->slug) ||
		    (k && streq(k->catalog_service_slug, NYX_SLUG_SHARED));
		if (r->catalog_service_id == NULL)
			why = "no catalog_service_id (custom route)";
		else if (exact_id != NULL &&
		    (strlen(r->id) != exact_len ||
		        strncmp(r->id, exact_id, exact_len) != 0))
			why = "not the requested id";
		else if (!supported_slug(r->slug))
			why = "unsupported slug";
		else if (k == NULL)
			why = "no /keys entry";
		else if (!streq(k->catalog_service_slug, NYX_SLUG_SHARED))
			why = "key catalog slug is not chrono-sandbox";
		c->canonical = why == NULL;
		if (c->canonical && !r->src.allowed)
			why = "organization access not allowed";
		c->accessible = why == NULL;
		if (c->accessible && !r->is_active)
			why = "route inactive";
		c->active = why == NULL;
		if (c->active)
			nyx_route_execution_ready(r, k, &why);
		c->ready = why == NULL;
		c->writable = c->ready && nyx_route_writable(r, k);
		if (!nyx_route_policy_ok(res->cap, r, &c->missing) &&
		    why == NULL)
			why = "policy differs";
		c->eligible = why == NULL;
		c->why_not = why;
		res->canonical += c->canonical;
		res->accessible += c->accessible;
		res->active += c->active;
		res->eligible += c->eligible;
		if (c->eligible) {
			only = c;
			if (strcmp(r->slug, NYX_SLUG_SHARED) == 0) {
				shared = c;
				nshared++;
			}
		}
	}
	if (res->canonical == 0)
		res->verdict = NYX_ROUTE_MISSING;
	else if (res->accessible == 0)
		res->verdict = NYX_ROUTE_ACCESS_DENIED;
	else if (res->active == 0)
		res->verdict = NYX_ROUTE_INACTIVE;
	else {
		size_t nready = 0;

		for (i = 0; i < res->ncands; i++)
			nready += res->cands[i].ready;
		if (nready == 0)
			res->verdict = NYX_ROUTE_NOT_READY;
		else if (res->eligible == 0)
			res->verdict = NYX_ROUTE_POLICY_MISMATCH;
		else if (res->eligible == 1) {
			res->verdict = NYX_ROUTE_ADMITTED;
			res->selected = only;
		} else if (exact_id == NULL && nshared == 1) {
			res->verdict = NYX_ROUTE_ADMITTED;
			res->selected = shared;
		} else
			res->verdict = NYX_ROUTE_AMBIGUOUS;
	}
	/* counts follow the verdict's row of WIRE.md 2.3 */
	switch (res->verdict) {
	case NYX_ROUTE_MISSING:
		res->accessible = res->active = res->eligible = 0;
		break;
	case NYX_ROUTE_ACCESS_DENIED:
		res->active = res->eligible = 0;
		break;
	case NYX_ROUTE_INACTIVE:
	case NYX_ROUTE_NOT_READY:
	case NYX_ROUTE_POLICY_MISMATCH:
		res->eligible = 0;
		break;
	default:
		break;
	}
	if (res->verdict == NYX_ROUTE_POLICY_MISMATCH)
		mismatch_message(res);
	else
		snprintf(res->message, sizeof(res->message), "%s%s%s",
		    fixed_messages[res->verdict][0], res->cap->policy_name,
		    fixed_messages[res->verdict][1]);
	return 0;
}

void
nyx_resolution_free(struct nyx_resolution *res)
{
	free(res->cands);
	res->cands = NULL;
	res->ncands = 0;
	res->selected = NULL;
}

int
nyx_route_contract_digest(const struct nyx_capability *cap, const char *id,
    const char *slug, const char *catalog, char out[NYX_SHA256_HEX])
{
	struct nyx_digest *d = nyx_digest_new();

	if (d == NULL)
		return -1;
	if (cap == NULL)
		cap = NYX_CAP_CODE_EXECUTE;
	nyx_digest_add(d, cap->digest_label);
	nyx_digest_add(d, id);
	nyx_digest_add(d, slug);
	nyx_digest_add(d, catalog);
	nyx_digest_add(d, cap->method);
	nyx_digest_add(d, cap->path);
	return nyx_digest_finish(d, out);
}

static void
add_tri(struct nyx_digest *d, int v)
{
	if (v == NYX_ABSENT)
		nyx_digest_add(d, NULL);
	else
		nyx_digest_add_bool(d, v);
}

int
nyx_inventory_digest(const struct nyx_inventory *inv, char out[NYX_SHA256_HEX])
{
	struct nyx_digest *d = nyx_digest_new();
	size_t i;

	if (d == NULL)
		return -1;
	/* routes are kept sorted by id */
	for (i = 0; i < inv->nroutes; i++) {
		const struct nyx_route *r = &inv->routes[i];
		const struct nyx_key *k = r->key;

		if (k == NULL)
			continue;
		nyx_digest_add(d, "route");
		nyx_digest_add(d, r->id);
		nyx_digest_add(d, r->slug);
		nyx_digest_add(d, r->catalog_service_id);
		nyx_digest_add_bool(d, r->is_active);
		nyx_digest_add(
		    d, r->src.type == NYX_SRC_ORG ? "org" : "personal");
		nyx_digest_add(d, r->src.org_id);
		if (r->src.type == NYX_SRC_ORG)
			nyx_digest_add_bool(d, r->src.allowed);
		else
			nyx_digest_add(d, NULL);
		add_tri(d, r->forward_access_token);
		add_tri(d, r->inject_delegation_token);
		nyx_digest_add(d, r->delegation_token_scope);
		add_tri(d, k->auto_connected);
		nyx_digest_add(d, k->status);
		nyx_digest_add(d, k->node_id);
		nyx_digest_add(d, k->node_status);
	}
	return nyx_digest_finish(d, out);
}

static jv
set(jv o, const char *k, jv v)
{
	return jv_object_set(o, jv_string(k), v);
}

jv
nyx_route_counts(const struct nyx_resolution *res)
{
	jv c = jv_object();

	c = set(c, "canonical", jv_number(res->canonical));
	c = set(c, "accessible", jv_number(res->accessible));
	c = set(c, "active", jv_number(res->active));
	c = set(c, "eligible", jv_number(res->eligible));
	return c;
}

static jv
blocker_obj(enum nyx_verdict v, const char *message, int http_status)
{
	const struct nyx_blocker *b = nyx_route_blocker(v);
	jv o = jv_object(), rem = jv_object();

	rem = set(rem, "kind", jv_string(b->remediation_kind));
	rem = set(rem, "text", jv_string(b->remediation_text));
	o = set(o, "code", jv_string(b->code));
	o = set(o, "runtime_code", jv_string(b->runtime_code));
	o = set(o, "message", jv_string(message));
	o = set(o, "remediation", rem);
	o = set(o, "http_status", jv_number(http_status));
	return o;
}

static jv
observation(const struct nyx_capability *cap, const struct nyx_candidate *c)
{
	jv o = jv_object(), miss = jv_array();
	size_t i;

	for (i = 0; i < NYX_CAP_MAX_SCOPES && cap->scopes[i] != NULL; i++)
		if (c->missing & (1u << i))
			miss = jv_array_append(miss, jv_string(cap->scopes[i]));
	o = set(o, "user_service_id", jv_string(c->r->id));
	o = set(o, "slug", jv_string(c->r->slug));
	o = set(o, "forward_access_token",
	    jv_string(nyx_tri_str(c->r->forward_access_token)));
	o = set(o, "inject_delegation_token",
	    jv_string(nyx_tri_str(c->r->inject_delegation_token)));
	o = set(o, "missing_scopes", miss);
	o = set(
	    o, "auto_connected", jv_bool(c->k && c->k->auto_connected == 1));
	o = set(o, "writable", jv_bool(c->writable));
	return o;
}

static jv
header(const struct nyx_capability *cap, const char *status,
    const char *base_url, const char *diag)
{
	jv rec = jv_object();

	rec = set(rec, "v", jv_number(1));
	rec = set(rec, "type", jv_string("route.admission"));
	rec = set(rec, "status", jv_string(status));
	rec = set(rec, "capability",
	    jv_string((cap ? cap : NYX_CAP_CODE_EXECUTE)->name));
	rec = set(rec, "diagnostic_id", jv_string(diag));
	if (base_url != NULL)
		rec = set(rec, "base_url", jv_string(base_url));
	return rec;
}

jv
nyx_route_admission(const struct nyx_inventory *inv,
    const struct nyx_resolution *res, const char *base_url, const char *diag,
    int64_t observed_ms)
{
	char cd[NYX_SHA256_HEX], id[NYX_SHA256_HEX];
	char obs[NYX_TIME_STRLEN], fresh[NYX_TIME_STRLEN];
	const struct nyx_candidate *s = res->selected;
	jv rec, route, proof, modes, obsv;
	size_t i;

	if (res->verdict != NYX_ROUTE_ADMITTED || s == NULL) {
		rec = header(res->cap, "blocked", base_url, diag);
		rec = set(rec, "counts", nyx_route_counts(res));
		rec = set(
		    rec, "blocker", blocker_obj(res->verdict, res->message, 0));
		obsv = jv_array();
		if (res->verdict == NYX_ROUTE_POLICY_MISMATCH)
			for (i = 0; i < res->ncands; i++)
				if (res->cands[i].ready)
					obsv = jv_array_append(obsv,
					    observation(
					        res->cap, &res->cands[i]));
		rec = set(rec, "observations", obsv);
		return set(
		    rec, "exit", jv_number(nyx_route_exit(res->verdict)));
	}
	nyx_route_contract_digest(
	    res->cap, s->r->id, s->r->slug, s->r->catalog_service_id, cd);
	nyx_inventory_digest(inv, id);
	nyx_time_format(observed_ms, obs);
	nyx_time_format(observed_ms + FRESH_MS, fresh);
	rec = header(res->cap, "admitted", base_url, diag);
	rec = set(rec, "counts", nyx_route_counts(res));
	route = jv_object();
	route = set(route, "user_service_id", jv_string(s->r->id));
	route = set(route, "slug", jv_string(s->r->slug));
	route = set(
	    route, "catalog_service_id", jv_string(s->r->catalog_service_id));
	route = set(route, "contract_digest", jv_string(cd));
	route =
	    set(route, "auto_connected", jv_bool(s->k->auto_connected == 1));
	rec = set(rec, "route", route);
	modes = jv_array_append(
	    jv_array_append(jv_array(), jv_string("interactive")),
	    jv_string("durable"));
	proof = jv_object();
	proof =
	    set(proof, "schema", jv_string("external-capability-admission.v6"));
	proof = set(proof, "user_service_id", jv_string(s->r->id));
	proof = set(proof, "service_slug_snapshot", jv_string(s->r->slug));
	proof = set(
	    proof, "catalog_service_id", jv_string(s->r->catalog_service_id));
	proof = set(proof, "contract_digest", jv_string(cd));
	proof = set(proof, "allowed_execution_modes", modes);
	proof = set(proof, "inventory_digest", jv_string(id));
	proof = set(proof, "observed_at", jv_string(obs));
	proof = set(proof, "fresh_until", jv_string(fresh));
	return set(rec, "proof", proof);
}

jv
nyx_route_blocked(const struct nyx_capability *cap, enum nyx_verdict v,
    const char *message, int http_status, int exit_code, const char *base_url,
    const char *diag)
{
	struct nyx_resolution zero;
	jv rec = header(cap, "blocked", base_url, diag);

	memset(&zero, 0, sizeof(zero));
	rec = set(rec, "counts", nyx_route_counts(&zero));
	rec = set(rec, "blocker", blocker_obj(v, message, http_status));
	rec = set(rec, "observations", jv_array());
	return set(rec, "exit", jv_number(exit_code));
}
