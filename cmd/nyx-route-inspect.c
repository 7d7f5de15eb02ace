/*
 * nyx-route-inspect: read NyxID inventory, classify the chrono-sandbox
 * route, print one route.admission record.  Never writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_buf.h"
#include "tool/cli.h"
#include "tool/metrics.h"
#include "nyx_config.h"
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
	OPT_USER_SERVICE_ID = 2000,
	OPT_INVENTORY,
	OPT_USER_SERVICES,
	OPT_KEYS,
	OPT_TABLE,
	OPT_CHECK,
	OPT_CAPABILITY,
	OPT_METRICS_FILE,
};

struct opts {
	const struct nyx_capability *cap;
	const char *exact_id;
	const char *inventory;
	const char *user_services;
	const char *keys;
	bool table;
	bool check;
	const char *metrics_file;
};

static const struct option longopts[] = {
    {"user-service-id", required_argument, NULL, OPT_USER_SERVICE_ID},
    {"inventory", required_argument, NULL, OPT_INVENTORY},
    {"user-services", required_argument, NULL, OPT_USER_SERVICES},
    {"keys", required_argument, NULL, OPT_KEYS},
    {"table", no_argument, NULL, OPT_TABLE},
    {"check", no_argument, NULL, OPT_CHECK},
    {"capability", required_argument, NULL, OPT_CAPABILITY},
    {"metrics-file", required_argument, NULL, OPT_METRICS_FILE},
    {NULL, 0, NULL, 0},
};

static int
on_opt(int c, const char *arg, void *ctx)
{
	struct opts *o = ctx;

	switch (c) {
	case OPT_USER_SERVICE_ID:
		o->exact_id = arg;
		break;
	case OPT_INVENTORY:
		o->inventory = arg;
		break;
	case OPT_USER_SERVICES:
		o->user_services = arg;
		break;
	case OPT_KEYS:
		o->keys = arg;
		break;
	case OPT_TABLE:
		o->table = true;
		break;
	case OPT_CHECK:
		o->check = true;
		break;
	case OPT_CAPABILITY:
		o->cap = nyx_cli_capability(arg);
		break;
	case OPT_METRICS_FILE:
		o->metrics_file = arg;
		break;
	default:
		return -1;
	}
	return 0;
}

static const struct nyx_cli_spec spec = {
    "[--capability code_execute|codex_managed] [--user-service-id ID]\n"
    "       [--inventory FILE | --user-services FILE --keys FILE] [--table] "
    "[--check]\n       [--metrics-file FILE] [common options]",
    "      --capability C      the route contract to admit for: "
    "code_execute\n"
    "                          (default) or codex_managed\n"
    "      --user-service-id ID  classify only this exact UserService id\n"
    "      --inventory FILE    offline: {\"user_services\":…,\"keys\":…}\n"
    "      --user-services FILE  offline: a /user-services body (with "
    "--keys)\n"
    "      --keys FILE         offline: a /keys body (with "
    "--user-services)\n"
    "      --table             print a per-candidate verdict table on "
    "stderr\n"
    "      --check             drift check: exit 0 admitted, 1 policy "
    "mismatch,\n"
    "                          3 other blocker; one PASS, DRIFT, BLOCKED "
    "or\n"
    "                          ERROR line on stderr\n"
    "      --metrics-file FILE  also write node_exporter textfile "
    "metrics\n",
    NYX_CLI_NET,
    "",
    longopts,
    on_opt,
};

/* Read and parse one JSON file: 66 when unreadable, 65 when malformed. */
static int
load_json(const char *path, jv *out, struct nyx_err *err)
{
	struct nyx_buf b = NYX_BUF_ZERO;

	nyx_buf_init(&b, 256u * 1024 * 1024);
	if (nyx_buf_read_file(&b, path) < 0) {
		nyx_buf_free(&b);
		return nyx_err_set(err, NYX_EXIT_NOINPUT, "input_unreadable",
		    "cannot read %s", path);
	}
	*out = nyx_json_parse(b.data ? b.data : "", b.len);
	nyx_buf_free(&b);
	if (!jv_is_valid(*out)) {
		jv_free(*out);
		return nyx_err_set(err, NYX_EXIT_DATAERR, "inventory_invalid",
		    "%s is not valid JSON", path);
	}
	return 0;
}

static int
load_offline(
    const struct opts *o, struct nyx_inventory *inv, struct nyx_err *err)
{
	jv services, keys, doc;
	char why[400];

	if (o->inventory != NULL) {
		if (load_json(o->inventory, &doc, err) < 0)
			return -1;
		if (jv_get_kind(doc) != JV_KIND_OBJECT) {
			jv_free(doc);
			return nyx_err_set(err, NYX_EXIT_DATAERR,
			    "inventory_invalid",
			    "%s: the top level must be an "
			    "object with user_services and keys",
			    o->inventory);
		}
		services = nyx_json_get(doc, "user_services");
		keys = nyx_json_get(doc, "keys");
		jv_free(doc);
	} else {
		if (load_json(o->user_services, &services, err) < 0)
			return -1;
		if (load_json(o->keys, &keys, err) < 0) {
			jv_free(services);
			return -1;
		}
	}
	if (nyx_inventory_load(inv, services, keys, why, sizeof(why)) < 0)
		return nyx_err_set(err, NYX_EXIT_DATAERR, "inventory_invalid",
		    "the inventory is malformed: %s", why);
	return 0;
}

static const char *
yn(bool b)
{
	return b ? "yes" : "no";
}

static void
print_table(const struct nyx_resolution *res)
{
	size_t i, w = 5, sw = 4, shown = 0;

	for (i = 0; i < res->ncands; i++) {
		const struct nyx_candidate *c = &res->cands[i];

		if (!c->relevant)
			continue;
		if (strlen(c->r->id) > w)
			w = strlen(c->r->id);
		if (strlen(c->r->slug) > sw)
			sw = strlen(c->r->slug);
	}
	nyx_log_text("%-*s  %-*s  CANON  ACCESS  ACTIVE  READY  POLICY  "
	             "WRITE  VERDICT\n",
	    (int)w, "ROUTE", (int)sw, "SLUG");
	for (i = 0; i < res->ncands; i++) {
		const struct nyx_candidate *c = &res->cands[i];
		const char *verdict;

		if (!c->relevant)
			continue;
		shown++;
		if (res->selected == c)
			verdict = "selected";
		else if (c->eligible)
			verdict = "eligible";
		else
			verdict = c->why_not;
		nyx_log_text("%-*s  %-*s  %-5s  %-6s  %-6s  %-5s  %-6s  "
		             "%-5s  %s\n",
		    (int)w, c->r->id, (int)sw, c->r->slug, yn(c->canonical),
		    c->canonical ? yn(c->accessible) : "-",
		    c->accessible ? yn(c->active) : "-",
		    c->active ? yn(c->ready) : "-",
		    yn(nyx_route_policy_ok(res->cap, c->r, NULL)),
		    yn(c->writable), verdict);
		if (res->cap->forward_access_token &&
		    c->r->forward_access_token != 1)
			nyx_log_text("  forward_access_token: %s -> true\n",
			    nyx_tri_str(c->r->forward_access_token));
		if (c->r->inject_delegation_token != 1)
			nyx_log_text("  inject_delegation_token: %s -> true\n",
			    nyx_tri_str(c->r->inject_delegation_token));
		if (c->missing != 0) {
			char miss[128];

			nyx_route_missing_str(
			    res->cap, c->missing, miss, sizeof(miss));
			nyx_log_text(
			    "  delegation_token_scope: missing [%s]\n", miss);
		}
		if (c->ready && c->k && c->k->auto_connected == NYX_ABSENT)
			nyx_log_text("  auto_connected: absent (not "
			             "writable)\n");
	}
	if (shown == 0)
		nyx_log_text("(no route with slug chrono-sandbox or "
		             "chrono-sandbox-aevatar)\n");
	nyx_log_text("counts: canonical=%d accessible=%d active=%d "
	             "eligible=%d\n",
	    res->canonical, res->accessible, res->active, res->eligible);
}

/* What the metrics file says of this check (PRODUCT 4). */
static struct {
	bool admitted;
	int counts[4]; /* canonical accessible active eligible */
	const char *code; /* the blocker or error code, NULL when admitted */
} seen;

static void
write_metrics(const struct opts *o)
{
	static const char *const gates[] = {
	    "canonical", "accessible", "active", "eligible"};
	struct nyx_metrics m;
	struct nyx_err err = NYX_ERR_ZERO;
	size_t i;

	nyx_metrics_init(&m);
	nyx_metrics_family(&m, "nyx_route_admitted", "gauge",
	    "1 when the canonical route satisfies the capability's contract");
	nyx_metrics_sample(&m, "nyx_route_admitted", "capability", o->cap->name,
	    seen.admitted);
	nyx_metrics_family(&m, "nyx_route_check_timestamp_seconds", "gauge",
	    "when the route was last checked (unix seconds)");
	nyx_metrics_sample(&m, "nyx_route_check_timestamp_seconds", NULL, NULL,
	    (double)(nyx_now_ms() / 1000));
	nyx_metrics_family(&m, "nyx_route_candidates", "gauge",
	    "candidate routes passing each gate, in order");
	for (i = 0; i < 4; i++)
		nyx_metrics_sample(&m, "nyx_route_candidates", "gate", gates[i],
		    seen.counts[i]);
	nyx_metrics_family(&m, "nyx_route_blocked", "gauge",
	    "1 for the code that blocks admission (none when admitted)");
	if (!seen.admitted)
		nyx_metrics_sample(&m, "nyx_route_blocked", "code",
		    seen.code ? seen.code : "unknown", 1);
	if (nyx_metrics_write(&m, o->metrics_file, &err) < 0)
		nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", nyx_err_code(&err),
		    err.message, nyx_cli_diag());
	nyx_metrics_free(&m);
}

/*
 * Report a blocked admission on stderr.  The --check line says which kind
 * (PRODUCT 4): DRIFT a policy mismatch, BLOCKED another blocker, ERROR
 * when the inventory could not be read or checked (exit 75/76/77/78), so
 * an outage or a refused token is never taken for drift.
 */
static void
report_blocked(
    const struct opts *o, const char *code, const char *message, int exit)
{
	const char *label =
	    strcmp(code, "CODE_EXECUTION_ROUTE_POLICY_MISMATCH") == 0 ? "DRIFT:"
	    : exit == NYX_EXIT_BLOCKED || exit == NYX_EXIT_NO ? "BLOCKED"
	                                                      : "ERROR";

	if (o->check)
		nyx_log_text("%s: %s %s: %s (%s)\n", nyx_cli_prog(), label,
		    code, message, nyx_cli_diag());
	else
		nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", code, message,
		    nyx_cli_diag());
}

static int
blocked_early(const struct opts *o, enum nyx_verdict v, const char *msg,
    int status, int code, const char *base_url)
{
	report_blocked(o, nyx_route_blocker(v)->code, msg, code);
	seen.code = nyx_route_blocker(v)->code;
	nyx_cli_emit(nyx_route_blocked(
	    o->cap, v, msg, status, code, base_url, nyx_cli_diag()));
	return code;
}

static int
run(const struct opts *o, const struct nyx_common *cm, struct nyx_err *err)
{
	struct nyx_settings s;
	struct nyx_inventory inv = NYX_INVENTORY_ZERO;
	struct nyx_resolution res;
	struct nyx_http *http = NULL;
	int code = -1;
	int64_t observed;

	nyx_settings_init(&s);
	memset(&res, 0, sizeof(res));
	if (nyx_settings_resolve(cm, &s, err) < 0)
		goto out;
	if (o->inventory != NULL || o->user_services != NULL) {
		if (load_offline(o, &inv, err) < 0)
			goto out;
		observed = nyx_now_ms();
	} else {
		struct nyx_nyxid client;
		struct nyx_read_fail fail;
		int rc;

		memset(&client, 0, sizeof(client));
		rc = nyx_nyxid_fetch(
		    &client, cm, &s, o->cap, &inv, &observed, &fail, err);
		http = client.http;
		if (rc < 0)
			goto out;
		if (rc == 1) {
			code = blocked_early(o, fail.verdict, fail.message,
			    fail.http_status, fail.exit, s.base_url);
			goto out;
		}
	}
	if (nyx_route_classify(&inv, o->cap, o->exact_id, &res) < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	if (o->table)
		print_table(&res);
	seen.admitted = res.verdict == NYX_ROUTE_ADMITTED;
	seen.counts[0] = res.canonical;
	seen.counts[1] = res.accessible;
	seen.counts[2] = res.active;
	seen.counts[3] = res.eligible;
	seen.code = seen.admitted ? NULL : nyx_route_blocker(res.verdict)->code;
	nyx_log(NYX_LOG_INFO,
	    "classified %zu routes: canonical=%d "
	    "accessible=%d active=%d eligible=%d",
	    inv.nroutes, res.canonical, res.accessible, res.active,
	    res.eligible);
	if (res.verdict == NYX_ROUTE_ADMITTED) {
		/* nyx_log_line: under -q a passing cron check stays silent */
		if (o->check)
			nyx_log_line("PASS: the %s route satisfies the %s "
			             "contract",
			    res.selected->r->slug, res.cap->name);
		code = NYX_EXIT_OK;
	} else {
		report_blocked(o, nyx_route_blocker(res.verdict)->code,
		    res.message, NYX_EXIT_BLOCKED);
		code = NYX_EXIT_BLOCKED;
		if (o->check && res.verdict == NYX_ROUTE_POLICY_MISMATCH)
			code = NYX_EXIT_NO;
	}
	nyx_cli_emit(nyx_route_admission(
	    &inv, &res, s.base_url, nyx_cli_diag(), observed));
out:
	nyx_resolution_free(&res);
	nyx_inventory_free(&inv);
	nyx_http_free(http);
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
	nyx_cli_init("nyx-route-inspect");
	idx = nyx_cli_parse(argc, argv, &spec, &o, &cm);
	if (idx < argc)
		nyx_cli_usage("unexpected argument '%s'", argv[idx]);
	if (o.inventory != NULL && (o.user_services || o.keys))
		nyx_cli_usage(
		    "--inventory excludes --user-services and --keys");
	if ((o.user_services == NULL) != (o.keys == NULL))
		nyx_cli_usage("--user-services and --keys go together");
	if (nyx_time_init(&err) < 0 || nyx_http_global_init(&err) < 0)
		return nyx_cli_fail(&err);
	if (o.cap == NULL)
		o.cap = nyx_capability_find("code_execute");
	code = run(&o, &cm, &err);
	nyx_http_global_cleanup();
	if (code < 0 && seen.code == NULL)
		seen.code = nyx_err_code(&err);
	if (o.metrics_file != NULL)
		write_metrics(&o);
	if (code < 0)
		return nyx_cli_fail(&err);
	return nyx_cli_finish(code);
}
