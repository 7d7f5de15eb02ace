/*
 * nyx-route-converge: plan, and with --apply perform, the bounded repair
 * of the chrono-sandbox route (a minimal PUT, or the personal alias),
 * verify it by re-reading, and print a route.admission record with a
 * convergence object.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool/cli.h"
#include "nyx_config.h"
#include "nyx_converge.h"
#include "nyx_cred.h"
#include "nyx_err.h"
#include "nyx_http.h"
#include "nyx_inventory.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_nyxid.h"
#include "nyx_route.h"
#include "nyx_time.h"

enum {
	OPT_APPLY = 2000,
	OPT_USER_SERVICE_ID,
	OPT_RECHECK,
	OPT_TABLE,
	OPT_CAPABILITY,
};

struct opts {
	const struct nyx_capability *cap; /* NULL: the record's, else default */
	bool apply;
	bool recheck;
	bool table;
	const char *exact_id;
};

static const struct option longopts[] = {
    {"apply", no_argument, NULL, OPT_APPLY},
    {"user-service-id", required_argument, NULL, OPT_USER_SERVICE_ID},
    {"recheck", no_argument, NULL, OPT_RECHECK},
    {"table", no_argument, NULL, OPT_TABLE},
    {"capability", required_argument, NULL, OPT_CAPABILITY},
    {NULL, 0, NULL, 0},
};

static int
on_opt(int c, const char *arg, void *ctx)
{
	struct opts *o = ctx;

	switch (c) {
	case OPT_APPLY:
		o->apply = true;
		break;
	case OPT_USER_SERVICE_ID:
		o->exact_id = arg;
		break;
	case OPT_RECHECK:
		o->recheck = true;
		break;
	case OPT_TABLE:
		o->table = true;
		break;
	case OPT_CAPABILITY:
		o->cap = nyx_cli_capability(arg);
		break;
	default:
		return -1;
	}
	return 0;
}

static const struct nyx_cli_spec spec = {
    "[--apply] [--capability code_execute|codex_managed] "
    "[--user-service-id ID]\n"
    "       [--recheck] [--table] [common options]",
    "      --apply             perform the planned repair and verify it\n"
    "      --capability C      the route contract to ensure: code_execute\n"
    "                          (default, or the record's) or codex_managed\n"
    "      --user-service-id ID  repair only this exact UserService id\n"
    "      --recheck           re-examine an admitted record on stdin\n"
    "      --table             candidate tables on stderr (before and "
    "after)\n",
    NYX_CLI_NET,
    "",
    longopts,
    on_opt,
};

static const char *const action_names[] = {
    [NYX_REPAIR_NONE] = "none",
    [NYX_REPAIR_UPDATE] = "update",
    [NYX_REPAIR_CREATE_ALIAS] = "create_alias",
    [NYX_REPAIR_NOT_WRITABLE] = "none",
    [NYX_REPAIR_AMBIGUOUS] = "none",
    [NYX_REPAIR_NOT_APPLICABLE] = "none",
};

struct conv {
	bool attempted;
	bool verified;
	const char *action;
	jv patch; /* object or null */
	const char *outcome;
	const char *failure_kind;
	long http_status;
};

static jv
conv_obj(const struct conv *c)
{
	jv o = jv_object();

	o = jv_object_set(o, jv_string("attempted"), jv_bool(c->attempted));
	o = jv_object_set(o, jv_string("verified"), jv_bool(c->verified));
	o = jv_object_set(o, jv_string("action"), jv_string(c->action));
	o = jv_object_set(o, jv_string("patch"), jv_copy(c->patch));
	o = jv_object_set(o, jv_string("outcome"), jv_string(c->outcome));
	o = jv_object_set(o, jv_string("failure_kind"),
	    nyx_json_str_or_null(c->failure_kind));
	o = jv_object_set(
	    o, jv_string("http_status"), jv_number((double)c->http_status));
	return o;
}

/* Emit rec with its convergence object; report a blocker on stderr. */
static int
emit(jv rec, const struct conv *c, int code)
{
	rec = jv_object_set(rec, jv_string("convergence"), conv_obj(c));
	if (code != NYX_EXIT_OK && nyx_json_has(rec, "exit"))
		rec = jv_object_set(rec, jv_string("exit"), jv_number(code));
	return nyx_cli_emit_blocked(rec, code);
}

static void
conv_init(struct conv *c, const char *outcome)
{
	memset(c, 0, sizeof(*c));
	c->action = "none";
	c->patch = jv_null();
	c->outcome = outcome;
}

static void
table(const struct nyx_resolution *res, const char *when)
{
	size_t i;

	nyx_log_text("%s:\n", when);
	for (i = 0; i < res->ncands; i++) {
		const struct nyx_candidate *c = &res->cands[i];

		if (!c->relevant)
			continue;
		nyx_log_text(
		    "  %s  %s  ready=%s writable=%s "
		    "forward_access_token=%s inject_delegation_token=%s "
		    "delegation_token_scope=%s%s%s\n",
		    c->r->id, c->r->slug, c->ready ? "yes" : "no",
		    c->writable ? "yes" : "no",
		    nyx_tri_str(c->r->forward_access_token),
		    nyx_tri_str(c->r->inject_delegation_token),
		    c->r->delegation_token_scope ? "\"" : "",
		    c->r->delegation_token_scope ? c->r->delegation_token_scope
		                                 : "absent",
		    c->r->delegation_token_scope ? "\"" : "");
	}
}

struct ctx {
	const struct opts *o;
	const struct nyx_capability *cap;
	struct nyx_settings *s;
	struct nyx_nyxid client;
	const char *exact; /* --user-service-id, or from --recheck */
};

static int
blocked(struct ctx *x, enum nyx_verdict v, const char *msg, int status,
    int code, const struct conv *c, const struct nyx_resolution *counts)
{
	jv rec = nyx_route_blocked(
	    x->cap, v, msg, status, code, x->s->base_url, nyx_cli_diag());

	if (counts != NULL)
		rec = jv_object_set(
		    rec, jv_string("counts"), nyx_route_counts(counts));
	return emit(rec, c, code);
}

/* The write, the readback and the verdict (apply mode). */
static int
apply(struct ctx *x, struct nyx_repair_plan *plan,
    const struct nyx_resolution *before)
{
	struct nyx_inventory after = NYX_INVENTORY_ZERO;
	struct nyx_resolution res;
	struct nyx_read_fail fail;
	struct nyx_repair_outcome out;
	struct conv c;
	const char *verified_id = NULL;
	char path[512], msg[700], scopes[128];
	long status = 0;
	int code;

	memset(&res, 0, sizeof(res));
	conv_init(&c, "not_writable");
	c.action = action_names[plan->action];
	c.patch = plan->action == NYX_REPAIR_UPDATE
	    ? nyx_repair_patch(plan)
	    : nyx_repair_alias_body(plan);
	/* write authority: NyxID must confirm a human user first */
	if (nyx_nyxid_users_me(&x->client, &fail) < 0) {
		code = blocked(x, NYX_ROUTE_WRITE_AUTHORITY_REQUIRED,
		    fail.message, fail.http_status,
		    fail.exit == NYX_EXIT_NOPERM ? NYX_EXIT_BLOCKED : fail.exit,
		    &c, before);
		jv_free(c.patch);
		return code;
	}
	c.attempted = true;
	if (plan->action == NYX_REPAIR_UPDATE) {
		char *id = nyx_http_escape(plan->target->r->id);

		snprintf(path, sizeof(path), "/api/v1/user-services/%s",
		    id ? id : "");
		free(id);
		nyx_nyxid_write(
		    &x->client, "PUT", path, jv_copy(c.patch), &status);
	} else {
		nyx_nyxid_write(&x->client, "POST", "/api/v1/keys",
		    jv_copy(c.patch), &status);
	}
	c.http_status = status;
	/* the readback always happens, whatever the write answered */
	if (nyx_nyxid_read_inventory(&x->client, &after, &fail) == 0) {
		if (plan->action == NYX_REPAIR_UPDATE) {
			if (nyx_repair_verify_update(plan, &after))
				verified_id = plan->target->r->id;
		} else {
			verified_id = nyx_repair_verify_alias(plan, &after);
		}
		if (nyx_route_classify(&after, x->cap,
		        verified_id ? verified_id : x->exact, &res) == 0 &&
		    x->o->table)
			table(&res, "after");
	} else {
		nyx_log(NYX_LOG_WARN, "the readback failed: %s", fail.message);
	}
	nyx_repair_classify(
	    plan->action, status, status == 0, verified_id != NULL, &out);
	c.verified = verified_id != NULL;
	c.outcome = out.outcome;
	c.failure_kind = out.failure_kind;
	if (c.verified) {
		code = emit(nyx_route_admission(&after, &res, x->s->base_url,
		                nyx_cli_diag(), nyx_now_ms()),
		    &c, NYX_EXIT_OK);
	} else if (strcmp(out.outcome, "rejected") == 0) {
		/* the reference's exact words for code_execute; the same
		 * sentence over its own fields for another capability */
		nyx_route_missing_str(x->cap, ~0u, scopes, sizeof(scopes));
		if (x->cap == NYX_CAP_CODE_EXECUTE)
			snprintf(scopes, sizeof(scopes), "%s",
			    "proxy:* and sandbox:execute");
		snprintf(msg, sizeof(msg),
		    "NyxID rejected the platform code route repair. "
		    "failureKind=%s httpStatus=%ld The shared route contract "
		    "is owner-granted: it requires %sinject_delegation_token="
		    "true, and a delegation_token_scope containing %s.",
		    out.failure_kind, status,
		    x->cap->forward_access_token ? "forward_access_token=true, "
		                                 : "",
		    scopes);
		code = blocked(x, NYX_ROUTE_REPAIR_REJECTED, msg, (int)status,
		    out.exit, &c, res.cands ? &res : NULL);
	} else {
		int n = snprintf(msg, sizeof(msg),
		    "The platform code execution route repair could not be "
		    "verified. failureKind=%s",
		    out.failure_kind);

		if (status > 0 && n > 0 && (size_t)n < sizeof(msg))
			snprintf(msg + n, sizeof(msg) - (size_t)n,
			    " httpStatus=%ld", status);
		code = blocked(x, NYX_ROUTE_REPAIR_UNVERIFIED, msg, (int)status,
		    out.exit, &c, res.cands ? &res : NULL);
	}
	jv_free(c.patch);
	nyx_resolution_free(&res);
	nyx_inventory_free(&after);
	return code;
}

static int
converge(struct ctx *x)
{
	struct nyx_inventory inv = NYX_INVENTORY_ZERO;
	struct nyx_resolution res;
	struct nyx_repair_plan plan;
	struct nyx_read_fail fail;
	struct conv c;
	int code;

	memset(&res, 0, sizeof(res));
	memset(&plan, 0, sizeof(plan));
	conv_init(&c, "not_applicable");
	if (nyx_nyxid_read_inventory(&x->client, &inv, &fail) < 0) {
		code = blocked(x, fail.verdict, fail.message, fail.http_status,
		    fail.exit, &c, NULL);
		goto out;
	}
	if (nyx_route_classify(&inv, x->cap, x->exact, &res) < 0) {
		code = NYX_EXIT_OSERR;
		goto out;
	}
	if (x->o->table)
		table(&res, "before");
	nyx_repair_plan(&res, x->exact, &plan);
	switch (plan.action) {
	case NYX_REPAIR_NONE:
		conv_init(&c, "unchanged");
		c.verified = true;
		code = emit(nyx_route_admission(&inv, &res, x->s->base_url,
		                nyx_cli_diag(), nyx_now_ms()),
		    &c, NYX_EXIT_OK);
		break;
	case NYX_REPAIR_NOT_APPLICABLE:
		code = emit(nyx_route_admission(&inv, &res, x->s->base_url,
		                nyx_cli_diag(), nyx_now_ms()),
		    &c, nyx_route_exit(res.verdict));
		break;
	case NYX_REPAIR_AMBIGUOUS:
		/* WIRE 3: more than one candidate, nothing is written */
		code = blocked(x, NYX_ROUTE_AMBIGUOUS,
		    "More than one writable canonical route differs from the "
		    "policy; nothing was written. Pass --user-service-id to "
		    "repair one, or keep exactly one platform code service.",
		    0, NYX_EXIT_BLOCKED, &c, &res);
		break;
	case NYX_REPAIR_NOT_WRITABLE:
		conv_init(&c, "not_writable");
		code = blocked(x, NYX_ROUTE_WRITE_AUTHORITY_REQUIRED,
		    "No canonical platform code execution route that "
		    "differs from the policy is writable by this "
		    "caller: only a personal route, or an organization "
		    "route on which the caller is admin, with "
		    "auto_connected explicitly false, is repaired; "
		    "members and viewers never write.",
		    0, NYX_EXIT_BLOCKED, &c, &res);
		break;
	default:
		if (!x->o->apply) {
			char *body;

			conv_init(&c, "planned");
			c.action = action_names[plan.action];
			c.patch = plan.action == NYX_REPAIR_UPDATE
			    ? nyx_repair_patch(&plan)
			    : nyx_repair_alias_body(&plan);
			body = nyx_json_dump(jv_copy(c.patch));
			if (plan.action == NYX_REPAIR_UPDATE)
				nyx_log_text(
				    "%s: plan: PUT /api/v1/user-services/%s "
				    "%s\n",
				    nyx_cli_prog(), plan.target->r->id, body);
			else
				nyx_log_text(
				    "%s: plan: POST /api/v1/keys %s (the "
				    "platform route %s is auto-connected and "
				    "never written)\n",
				    nyx_cli_prog(), body, plan.target->r->id);
			free(body);
			nyx_cli_emit(jv_object_set(
			    nyx_route_admission(&inv, &res, x->s->base_url,
			        nyx_cli_diag(), nyx_now_ms()),
			    jv_string("convergence"), conv_obj(&c)));
			jv_free(c.patch);
			code = NYX_EXIT_NO;
		} else {
			code = apply(x, &plan, &res);
		}
	}
out:
	nyx_repair_plan_free(&plan);
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);
	return code;
}

static int
run(const struct opts *o, const struct nyx_common *cm, struct nyx_err *err)
{
	struct nyx_settings s;
	struct nyx_cred cred;
	struct ctx x;
	struct conv c;
	jv rec = jv_invalid();
	char *exact = NULL, why[400];
	int code = -1, got, rc;

	memset(&x, 0, sizeof(x));
	nyx_settings_init(&s);
	x.o = o;
	x.s = &s;
	x.exact = o->exact_id;
	x.cap = o->cap ? o->cap : NYX_CAP_CODE_EXECUTE;
	conv_init(&c, "not_applicable");
	if (nyx_settings_resolve(cm, &s, err) < 0)
		goto out;
	got = nyx_cli_read_upstream(&rec, err);
	if (got < 0)
		goto out;
	if (got != NYX_UPSTREAM_NONE) {
		const char *base = nyx_json_peek_str(rec, "base_url");
		const char *rcap = nyx_json_peek_str(rec, "capability");
		jv b = nyx_json_get(rec, "blocker");
		const char *bcode = nyx_json_peek_str(b, "code");
		bool mismatch = bcode != NULL &&
		    strcmp(bcode, "CODE_EXECUTION_ROUTE_POLICY_MISMATCH") == 0;

		jv_free(b);
		if (got == NYX_UPSTREAM_ERROR) {
			code = nyx_cli_pass_through(rec, NYX_EXIT_SOFTWARE);
			goto out;
		}
		/* the record's capability is the one to ensure; another
		 * one named on the command line is a mistake, not a choice */
		if (rcap != NULL &&
		    (nyx_capability_find(rcap) == NULL ||
		        (o->cap != NULL && strcmp(o->cap->name, rcap) != 0))) {
			nyx_err_set(err, NYX_EXIT_DATAERR, "admission_invalid",
			    "the route.admission on stdin is for capability "
			    "'%s', not %s",
			    rcap, x.cap->name);
			jv_free(rec);
			goto out;
		}
		if (rcap != NULL)
			x.cap = nyx_capability_find(rcap);
		if (got == NYX_UPSTREAM_ADMITTED && !o->recheck) {
			code = nyx_cli_pass_through(rec, NYX_EXIT_OK);
			goto out;
		}
		if (got == NYX_UPSTREAM_BLOCKED && !mismatch) {
			/* nothing a route write can fix: flows through */
			code = nyx_cli_pass_through(rec, NYX_EXIT_BLOCKED);
			goto out;
		}
		if (base != NULL &&
		    (s.base_url == NULL || strcmp(base, s.base_url) != 0)) {
			jv_free(rec);
			nyx_err_set(err, NYX_EXIT_DATAERR,
			    "admission_base_url_mismatch",
			    "the route.admission on stdin was made for another "
			    "base URL");
			goto out;
		}
		if (got == NYX_UPSTREAM_ADMITTED && x.exact == NULL) {
			jv route = nyx_json_get(rec, "route");
			const char *id =
			    nyx_json_peek_str(route, "user_service_id");

			exact = id ? strdup(id) : NULL;
			x.exact = exact;
			jv_free(route);
		}
		jv_free(rec);
	}
	rc = nyx_nyxid_open(
	    &x.client, cm, &s, x.cap, &cred, why, sizeof(why), err);
	if (rc < 0)
		goto out;
	if (o->apply && s.token != NULL && !nyx_cred_can_write(&cred)) {
		/* decided locally: not one request is made */
		snprintf(why, sizeof(why),
		    "Route repair needs a direct human NyxID user access "
		    "token; the configured credential (from %s) is a %s.",
		    s.token_origin, nyx_cred_kind_name(cred.kind));
		conv_init(&c, "not_writable");
		code = blocked(&x, NYX_ROUTE_WRITE_AUTHORITY_REQUIRED, why, 0,
		    NYX_EXIT_BLOCKED, &c, NULL);
		goto out;
	}
	if (rc == 1) {
		code = blocked(&x, NYX_ROUTE_CREDENTIAL_REQUIRED, why, 0,
		    NYX_EXIT_NOPERM, &c, NULL);
		goto out;
	}
	code = converge(&x);
out:
	free(exact);
	nyx_http_free(x.client.http);
	nyx_settings_free(&s);
	nyx_log_forget_secrets();
	return code;
}

int
main(int argc, char **argv)
{
	struct nyx_err err = NYX_ERR_ZERO;
	struct nyx_common cm;
	struct opts o;
	int idx, code;

	memset(&o, 0, sizeof(o));
	nyx_cli_init("nyx-route-converge");
	idx = nyx_cli_parse(argc, argv, &spec, &o, &cm);
	if (idx < argc)
		nyx_cli_usage("unexpected argument '%s'", argv[idx]);
	if (nyx_time_init(&err) < 0 || nyx_http_global_init(&err) < 0)
		return nyx_cli_fail(&err);
	code = run(&o, &cm, &err);
	nyx_http_global_cleanup();
	if (code < 0)
		return nyx_cli_fail(&err);
	return nyx_cli_finish(code);
}
