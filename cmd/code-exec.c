/*
 * code-exec: run exact source (python, javascript, typescript, bash) on the
 * admitted chrono-sandbox route, or on the local sandbox, and print one
 * exec.result record.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nyx_buf.h"
#include "nyx_chrono.h"
#include "nyx_cli.h"
#include "nyx_config.h"
#include "nyx_cred.h"
#include "nyx_err.h"
#include "nyx_http.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_nyxid.h"
#include "nyx_route.h"
#include "nyx_sandbox.h"
#include "nyx_time.h"

enum {
	OPT_TIMEOUT_SECS = 2000,
	OPT_SYNC,
	OPT_BACKEND,
	OPT_CHILD_CODE,
};

struct opts {
	const char *language;
	const char *file;
	const char *source;
	const char *timeout_secs;
	const char *backend;
	bool sync;
	bool child_code;
};

static const struct option longopts[] = {
    {"language", required_argument, NULL, 'l'},
    {"file", required_argument, NULL, 'f'},
    {"eval", required_argument, NULL, 'e'},
    {"timeout-secs", required_argument, NULL, OPT_TIMEOUT_SECS},
    {"sync", no_argument, NULL, OPT_SYNC},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"child-code", no_argument, NULL, OPT_CHILD_CODE},
    {NULL, 0, NULL, 0},
};

static int
on_opt(int c, const char *arg, void *ctx)
{
	struct opts *o = ctx;

	switch (c) {
	case 'l':
		o->language = arg;
		break;
	case 'f':
		o->file = arg;
		break;
	case 'e':
		o->source = arg;
		break;
	case OPT_TIMEOUT_SECS:
		o->timeout_secs = arg;
		break;
	case OPT_SYNC:
		o->sync = true;
		break;
	case OPT_BACKEND:
		if (strcmp(arg, "nyxid") != 0 && strcmp(arg, "local") != 0)
			nyx_cli_usage("--backend takes nyxid or local");
		o->backend = arg;
		break;
	case OPT_CHILD_CODE:
		o->child_code = true;
		break;
	default:
		return -1;
	}
	return 0;
}

static const struct nyx_cli_spec spec = {
    "[-l LANG] (-f FILE | -e SOURCE | FILE) [--timeout-secs N] [--sync] "
    "[--backend nyxid|local] [--child-code] [common options]",
    "  -l, --language LANG     python, javascript, typescript or bash\n"
    "                          (inferred from .py .js .mjs .ts .sh)\n"
    "  -f, --file FILE         the program's source file\n"
    "  -e, --eval SOURCE       the program's source text\n"
    "      --timeout-secs N    wall-clock limit, 1..600 (default 180)\n"
    "      --sync              legacy POST /execute on the admitted route\n"
    "      --backend nyxid|local  where to run (default: nyxid when a base\n"
    "                          URL is configured, else local)\n"
    "      --child-code        exit with the program's own status\n",
    NYX_CLI_NET,
    "l:f:e:",
    longopts,
    on_opt,
};

struct job {
	const char *language;
	struct nyx_buf source;
	int timeout_secs;
};

static const char *
infer_language(const char *path)
{
	static const struct {
		const char *ext, *lang;
	} map[] = {{".py", "python"}, {".js", "javascript"},
	    {".mjs", "javascript"}, {".ts", "typescript"}, {".sh", "bash"}};
	const char *dot = path ? strrchr(path, '.') : NULL;
	size_t i;

	for (i = 0; dot != NULL && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(dot, map[i].ext) == 0)
			return map[i].lang;
	return NULL;
}

/* Source, language and timeout, all checked before anything else. */
static int
prepare(const struct opts *o, const char *operand, struct job *j,
    struct nyx_err *err)
{
	const char *path = o->file ? o->file : operand;
	char *end;
	long t = 180;
	jv check;

	if (o->timeout_secs != NULL) {
		errno = 0;
		t = strtol(o->timeout_secs, &end, 10);
		if (errno != 0 || end == o->timeout_secs || *end != '\0' ||
		    t < 1 || t > 600)
			return nyx_err_set(err, NYX_EXIT_USAGE,
			    "code_execution_request_invalid",
			    "'timeout_secs' must be an integer between 1 and "
			    "600.");
	}
	j->timeout_secs = (int)t;
	j->language = o->language ? o->language : infer_language(path);
	if (j->language == NULL)
		return nyx_err_set(err, NYX_EXIT_USAGE,
		    "code_execution_request_invalid",
		    "The language cannot be inferred; pass -l python, "
		    "javascript, typescript or bash.");
	if (!nyx_sandbox_language_known(j->language))
		return nyx_err_set(err, NYX_EXIT_USAGE,
		    "code_execution_request_invalid",
		    "'language' must be python, javascript, typescript or "
		    "bash.");
	nyx_buf_init(&j->source, NYX_SANDBOX_SOURCE_MAX);
	j->source.secret = true;
	if (o->source != NULL) {
		if (nyx_buf_addstr(&j->source, o->source) < 0)
			return nyx_err_set(err, NYX_EXIT_USAGE,
			    "code_execution_request_invalid",
			    "The source exceeds 1 MiB.");
	} else if (nyx_buf_read_file(&j->source, path) < 0) {
		if (errno == EFBIG)
			return nyx_err_set(err, NYX_EXIT_USAGE,
			    "code_execution_request_invalid",
			    "The source exceeds 1 MiB.");
		return nyx_err_set(err, NYX_EXIT_NOINPUT, "input_unreadable",
		    "cannot read %s: %s", path, strerror(errno));
	}
	/* jv would silently replace invalid UTF-8: refuse it instead */
	check = jv_string_sized(
	    j->source.data ? j->source.data : "", (int)j->source.len);
	if ((size_t)jv_string_length_bytes(jv_copy(check)) != j->source.len ||
	    memchr(j->source.data ? j->source.data : "", '\0', j->source.len)) {
		jv_free(check);
		return nyx_err_set(err, NYX_EXIT_DATAERR,
		    "code_execution_request_invalid",
		    "The source is not valid UTF-8 text.");
	}
	jv_free(check);
	return 0;
}

static int
finish_outcome(
    const struct opts *o, struct nyx_exec_outcome *oc, const char *backend)
{
	int code = oc->exit;

	if (!oc->success)
		nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", oc->code, oc->message,
		    nyx_cli_diag());
	nyx_cli_emit(
	    nyx_exec_result_record(oc, backend, "sync", nyx_cli_diag()));
	if (o->child_code && oc->child_exit >= 0)
		code = oc->child_exit;
	return code;
}

static int
run_local(const struct opts *o, struct job *j, struct nyx_err *err)
{
	struct nyx_sandbox_req rq;
	struct nyx_sandbox_result res;
	struct nyx_exec_outcome oc;
	jv out;
	int code;

	memset(&rq, 0, sizeof(rq));
	rq.language = j->language;
	rq.source = j->source.data ? j->source.data : "";
	rq.source_len = j->source.len;
	rq.timeout_secs = j->timeout_secs;
	if (nyx_sandbox_run(&rq, &res, err) < 0)
		return -1;
	nyx_exec_outcome_init(&oc);
	out = nyx_sandbox_output(&res);
	nyx_exec_outcome_completed(&oc, out, res.exit_code);
	if (res.timed_out) {
		oc.success = false;
		oc.code = "SANDBOX_TIMEOUT";
		oc.kind = "timed_out";
		oc.message = "Code execution timed out.";
		oc.exit = NYX_EXIT_TEMPFAIL;
	}
	nyx_sandbox_result_free(&res);
	code = finish_outcome(o, &oc, "local");
	nyx_exec_outcome_free(&oc);
	return code;
}

/* The route to run on: from an admission record, or resolved here. */
struct route {
	char *id;
	char *slug;
};

static void
route_free(struct route *r)
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
take_admission(
    jv rec, const struct nyx_settings *s, struct route *rt, struct nyx_err *err)
{
	jv route = nyx_json_get(rec, "route"),
	   proof = nyx_json_get(rec, "proof");
	const char *id = nyx_json_peek_str(route, "user_service_id");
	const char *slug = nyx_json_peek_str(route, "slug");
	const char *cat = nyx_json_peek_str(route, "catalog_service_id");
	const char *digest = nyx_json_peek_str(route, "contract_digest");
	const char *base = nyx_json_peek_str(rec, "base_url");
	const char *fresh = nyx_json_peek_str(proof, "fresh_until");
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
	if (nyx_route_contract_digest(id, slug, cat, want) < 0 ||
	    strcmp(want, digest) != 0) {
		nyx_err_set(err, NYX_EXIT_DATAERR, "admission_invalid",
		    "the route.admission on stdin has a contract_digest that "
		    "does not match its route");
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
    struct nyx_http *http, const char *exact, struct route *rt,
    struct nyx_err *err)
{
	struct nyx_inventory inv = NYX_INVENTORY_ZERO;
	struct nyx_resolution res;
	struct nyx_read_fail fail;
	struct nyx_nyxid client;
	struct nyx_cred cred;
	char why[400];
	int code = -1, rc;

	memset(&res, 0, sizeof(res));
	memset(&client, 0, sizeof(client));
	client.http = http;
	rc = nyx_nyxid_open(&client, cm, s, &cred, why, sizeof(why), err);
	if (rc < 0)
		return -1;
	if (rc == 1)
		return nyx_cli_emit_blocked(
		    nyx_route_blocked(NYX_ROUTE_CREDENTIAL_REQUIRED, why, 0,
		        NYX_EXIT_NOPERM, s->base_url, nyx_cli_diag()),
		    NYX_EXIT_NOPERM);
	if (nyx_nyxid_read_inventory(&client, &inv, &fail) < 0) {
		code = nyx_cli_emit_blocked(
		    nyx_route_blocked(fail.verdict, fail.message,
		        fail.http_status, fail.exit, s->base_url,
		        nyx_cli_diag()),
		    fail.exit);
		goto out;
	}
	if (nyx_route_classify(&inv, exact, &res) < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	if (res.verdict != NYX_ROUTE_ADMITTED) {
		code = nyx_cli_emit_blocked(
		    nyx_route_admission(
		        &inv, &res, s->base_url, nyx_cli_diag(), nyx_now_ms()),
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

/* POST /execute once, on a fresh connection; never retried. */
static int
execute_sync(const struct opts *o, struct nyx_settings *s,
    struct nyx_http *http, const struct route *rt, const struct job *j,
    struct nyx_err *err)
{
	struct nyx_buf auth = NYX_BUF_ZERO, tp = NYX_BUF_ZERO;
	struct nyx_http_resp resp = NYX_HTTP_RESP_ZERO;
	struct nyx_exec_outcome oc;
	struct nyx_http_req req;
	const char *hdrs[5];
	const char *trace = getenv("TRACEPARENT");
	char *url = NULL, *body = NULL;
	size_t nh = 0;
	int code = -1;

	url = nyx_chrono_url(s->base_url, rt->slug, rt->id, "execute");
	body = nyx_chrono_execute_body(j->language,
	    j->source.data ? j->source.data : "", j->source.len,
	    j->timeout_secs);
	auth.secret = true;
	if (url == NULL || body == NULL ||
	    nyx_buf_printf(&auth, "Authorization: Bearer %s", s->exec_token) <
	        0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	hdrs[nh++] = auth.data;
	hdrs[nh++] = "Content-Type: application/json";
	/* W3C trace context: 00-<32 hex>-<16 hex>-<2 hex> */
	if (trace != NULL && strlen(trace) == 55 &&
	    strspn(trace, "0123456789abcdef-") == 55 &&
	    nyx_buf_printf(&tp, "traceparent: %s", trace) == 0)
		hdrs[nh++] = tp.data;
	hdrs[nh] = NULL;
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = url;
	req.headers = hdrs;
	req.body = body;
	req.body_len = strlen(body);
	req.timeout_ms = (j->timeout_secs + 30) * 1000L;
	req.fresh_connect = true;
	nyx_http_do(http, &req, &resp);
	nyx_exec_outcome_init(&oc);
	nyx_chrono_classify_sync(&resp, &oc);
	nyx_log(NYX_LOG_DEBUG, "POST /execute: status %ld, %zu bytes, %s",
	    resp.status, resp.body.len, oc.success ? "success" : oc.code);
	code = finish_outcome(o, &oc, "nyxid");
	nyx_exec_outcome_free(&oc);
out:
	nyx_http_resp_free(&resp);
	nyx_buf_free(&auth);
	nyx_buf_free(&tp);
	if (body != NULL) {
		nyx_secure_zero(body, strlen(body));
		free(body);
	}
	free(url);
	return code;
}

static int
run_nyxid(const struct opts *o, const struct nyx_common *cm,
    struct nyx_settings *s, struct job *j, struct nyx_err *err)
{
	struct route rt = {NULL, NULL};
	struct nyx_http *http = NULL;
	jv rec = jv_invalid();
	int code = -1, got, fresh = 1;

	if (!o->sync)
		return nyx_err_set(err, NYX_EXIT_USAGE, "durable_unavailable",
		    "durable execution (the default for the nyxid backend) is "
		    "not available in this build yet; pass --sync for POST "
		    "/execute");
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
		fresh = take_admission(rec, s, &rt, err);
		jv_free(rec);
		if (fresh < 0)
			goto out;
	}
	http = nyx_http_new();
	if (http == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	if (got == NYX_UPSTREAM_NONE || fresh == 0) {
		/* no admission, or a stale one: resolve (its exact id) now */
		char *exact = rt.id ? strdup(rt.id) : NULL;

		route_free(&rt);
		code = resolve(cm, s, http, exact, &rt, err);
		free(exact);
		if (code != 0)
			goto out;
	}
	if (nyx_settings_load_token(cm, s, 1, err) < 0) {
		code = -1;
		goto out;
	}
	if (s->exec_token == NULL) {
		nyx_err_set(err, NYX_EXIT_NOPERM,
		    "code_execution_credential_unavailable",
		    "No execution credential is configured (--exec-token-file, "
		    "NYX_EXEC_TOKEN_FILE, NYX_EXEC_TOKEN or the source "
		    "token).");
		code = -1;
		goto out;
	}
	nyx_log_add_secret(s->exec_token);
	if (nyx_cred_check(s->exec_token, err) < 0) {
		code = -1;
		goto out;
	}
	code = execute_sync(o, s, http, &rt, j, err);
out:
	route_free(&rt);
	nyx_http_free(http);
	return code;
}

static int
run(const struct opts *o, const struct nyx_common *cm, const char *operand,
    struct nyx_err *err)
{
	struct nyx_settings s;
	struct job j;
	const char *backend;
	int code = -1;

	memset(&j, 0, sizeof(j));
	nyx_settings_init(&s);
	if (prepare(o, operand, &j, err) < 0)
		goto out;
	if (nyx_settings_resolve(cm, &s, err) < 0)
		goto out;
	backend = o->backend ? o->backend : s.backend;
	if (backend == NULL) {
		backend = s.base_url ? "nyxid" : "local";
		if (s.base_url == NULL)
			nyx_log_line("notice: no NyxID base URL is configured; "
			             "running on the local sandbox "
			             "(--backend local)");
	}
	if (strcmp(backend, "local") == 0)
		code = run_local(o, &j, err);
	else
		code = run_nyxid(o, cm, &s, &j, err);
out:
	nyx_buf_free(&j.source);
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
	const char *operand = NULL;
	int idx, code, given;

	memset(&o, 0, sizeof(o));
	nyx_cli_init("code-exec");
	idx = nyx_cli_parse(argc, argv, &spec, &o, &cm);
	if (idx < argc)
		operand = argv[idx++];
	if (idx < argc)
		nyx_cli_usage("unexpected argument '%s'", argv[idx]);
	given = (o.file != NULL) + (o.source != NULL) + (operand != NULL);
	if (given != 1)
		nyx_cli_usage(
		    "give the source once: -f FILE, -e SOURCE or FILE");
	if (nyx_time_init(&err) < 0 || nyx_http_global_init(&err) < 0)
		return nyx_cli_fail(&err);
	code = run(&o, &cm, operand, &err);
	nyx_http_global_cleanup();
	if (code < 0)
		return nyx_cli_fail(&err);
	return nyx_cli_finish(code);
}
