/*
 * codex-exec: delegate a natural-language task to Codex, in the managed
 * sandbox on the admitted chrono-sandbox route, or on the user's own host
 * over NyxID SSH behind a durable human approval of the exact call.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nyx_approval.h"
#include "nyx_audit.h"
#include "nyx_buf.h"
#include "nyx_chrono.h"
#include "nyx_codex.h"
#include "nyx_config.h"
#include "nyx_cred.h"
#include "nyx_err.h"
#include "nyx_hash.h"
#include "nyx_http.h"
#include "nyx_json.h"
#include "nyx_ledger.h"
#include "nyx_log.h"
#include "nyx_outcome.h"
#include "nyx_time.h"
#include "tool/admit.h"
#include "tool/cli.h"

enum {
	OPT_TARGET = 2000,
	OPT_PROMPT_FILE,
	OPT_TIMEOUT_SECS,
	OPT_SERVICE,
	OPT_PRINCIPAL,
	OPT_WORKSPACE,
	OPT_REQUEST_ID,
	OPT_CALL_ID,
	OPT_AUTH_HEADER,
	OPT_YES,
	OPT_WAIT_APPROVAL,
};

#define APPROVAL_WAIT_MS (10 * 60 * 1000L) /* --wait-approval, at most */
#define APPROVAL_POLL_MS 2000L

struct opts {
	struct nyx_codex_args a;
	const char *request_id;
	bool bearer;
	bool yes;
	bool wait_approval;
};

static const struct option longopts[] = {
    {"target", required_argument, NULL, OPT_TARGET},
    {"prompt", required_argument, NULL, 'P'},
    {"prompt-file", required_argument, NULL, OPT_PROMPT_FILE},
    {"timeout-secs", required_argument, NULL, OPT_TIMEOUT_SECS},
    {"service", required_argument, NULL, OPT_SERVICE},
    {"principal", required_argument, NULL, OPT_PRINCIPAL},
    {"workspace", required_argument, NULL, OPT_WORKSPACE},
    {"request-id", required_argument, NULL, OPT_REQUEST_ID},
    {"call-id", required_argument, NULL, OPT_CALL_ID},
    {"auth-header", required_argument, NULL, OPT_AUTH_HEADER},
    {"yes", no_argument, NULL, OPT_YES},
    {"wait-approval", no_argument, NULL, OPT_WAIT_APPROVAL},
    {NULL, 0, NULL, 0},
};

static int
on_opt(int c, const char *arg, void *ctx)
{
	struct opts *o = ctx;

	switch (c) {
	case OPT_TARGET:
		o->a.target = arg;
		break;
	case 'P':
		o->a.prompt = arg;
		break;
	case OPT_PROMPT_FILE:
		o->a.prompt_file = arg;
		break;
	case OPT_TIMEOUT_SECS:
		o->a.timeout_secs = arg;
		break;
	case OPT_SERVICE:
		o->a.service = arg;
		break;
	case OPT_PRINCIPAL:
		o->a.principal = arg;
		break;
	case OPT_WORKSPACE:
		o->a.workspace = arg;
		break;
	case OPT_REQUEST_ID:
	case OPT_CALL_ID:
		if (!nyx_id_safe(arg))
			nyx_cli_usage("%s takes 1-128 of [A-Za-z0-9_.:-]",
			    c == OPT_REQUEST_ID ? "--request-id" : "--call-id");
		if (c == OPT_REQUEST_ID)
			o->request_id = arg;
		else
			o->a.call_id = arg;
		break;
	case OPT_AUTH_HEADER:
		if (strcmp(arg, "x-api-key") != 0 && strcmp(arg, "bearer") != 0)
			nyx_cli_usage(
			    "--auth-header takes x-api-key or bearer");
		o->bearer = strcmp(arg, "bearer") == 0;
		break;
	case OPT_YES:
		o->yes = true;
		break;
	case OPT_WAIT_APPROVAL:
		o->wait_approval = true;
		break;
	default:
		return -1;
	}
	return 0;
}

static const struct nyx_cli_spec spec = {
    "--target managed_sandbox|private_ssh (-P PROMPT | --prompt-file FILE) "
    "[--service SVC --principal USER] [--timeout-secs N] "
    "[--workspace empty_git] [--request-id ID] [--call-id ID] "
    "[--auth-header x-api-key|bearer] [--wait-approval] [common options]\n"
    "       codex-exec approvals | approve ID [--yes] | deny ID",
    "      --target T          managed_sandbox or private_ssh\n"
    "  -P, --prompt PROMPT     the task (at most 6000 UTF-8 bytes)\n"
    "      --prompt-file FILE  the task, from FILE (- for stdin)\n"
    "      --timeout-secs N    managed 1..180 (default 180), private_ssh\n"
    "                          1..300 (default 30)\n"
    "      --service SVC       private_ssh: the NyxID SSH service\n"
    "      --principal USER    private_ssh: the Unix user on the host\n"
    "      --workspace W       managed: empty_git (the only workspace)\n"
    "      --request-id ID     the request's id (private_ssh default:\n"
    "                          derived from the exact call)\n"
    "      --call-id ID        the call's id (default codex_exec)\n"
    "      --auth-header H     managed: send the credential as x-api-key\n"
    "                          (default) or bearer\n"
    "      --wait-approval     managed: when NyxID asks for a human\n"
    "                          approval, wait for it (10 minutes at most)\n"
    "      --yes               approve without asking\n",
    NYX_CLI_NET | NYX_CLI_STATE,
    "P:",
    longopts,
    on_opt,
};

/* ---- records and audit ---- */

static void
audit(struct nyx_ledger *l, const struct nyx_codex_call *c, const char *owner,
    const char *phase, const char *approval_id,
    const struct nyx_codex_outcome *oc)
{
	struct nyx_audit_subject sub = {
	    "codex_exec", "cli", owner, c->request_id, c->call_id, false};

	nyx_audit_note(
	    l, &sub, phase, approval_id, NULL, oc ? &oc->base : NULL);
}

/* Admission and running together, in one append: the call starts now. */
static void
audit_started(
    struct nyx_ledger *l, const struct nyx_codex_call *c, const char *owner)
{
	struct nyx_audit_subject sub = {
	    "codex_exec", "cli", owner, c->request_id, c->call_id, false};

	nyx_audit_note_started(l, &sub, NULL);
}

/* The terminal audit, the error line, the record: the tool's exit code. */
static int
report(struct nyx_ledger *l, const struct nyx_codex_call *c, const char *owner,
    const struct nyx_codex_outcome *oc)
{
	audit(l, c, owner, "terminal", NULL, oc);
	if (!oc->base.success)
		nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", oc->base.code,
		    oc->base.message, nyx_cli_diag());
	nyx_cli_emit(nyx_codex_result_record(c, oc, nyx_cli_diag()));
	return oc->base.exit;
}

/* ---- managed_sandbox (WIRE.md 8) ---- */

/* --wait-approval on a terminal: one line, rewritten in place */
static void
gate_progress(int64_t elapsed_ms, const char *request_id)
{
	nyx_cli_progress("waiting %llds for a human approval of %s",
	    (long long)elapsed_ms / 1000, request_id);
}

static int
run_managed(const struct opts *o, const struct nyx_common *cm,
    struct nyx_settings *s, struct nyx_ledger *l, struct nyx_codex_call *c,
    struct nyx_err *err)
{
	struct nyx_pin rt = {NULL, NULL};
	struct nyx_http *http = nyx_http_new();
	struct nyx_codex_outcome oc;
	char *url = NULL, owner[160];
	int code = -1;

	nyx_codex_outcome_init(&oc);
	if (http == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	code = nyx_admit_route(cm, s, http, NYX_CAP_CODEX_MANAGED,
	    "codex_execution_credential_unavailable", &rt, err);
	if (code != 0)
		goto out;
	code = -1;
	nyx_cred_owner(s->exec_token, owner, sizeof(owner));
	url = nyx_chrono_url(s->base_url, rt.slug, rt.id, "codex/execute");
	if (url == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	audit_started(l, c, owner);
	nyx_codex_send_managed(http, url, s->exec_token, o->bearer, c, &oc);
	if (o->wait_approval && oc.base.approval_request_id[0] &&
	    nyx_codex_wait_gate(http, s->base_url, s->exec_token,
	        APPROVAL_WAIT_MS, APPROVAL_POLL_MS, &oc,
	        isatty(STDERR_FILENO) && !nyx_cli_quiet() ? gate_progress
	                                                  : NULL) == 1) {
		/* approved: the refused call never ran; send it again, once */
		char rid[129];

		snprintf(rid, sizeof(rid), "%s", oc.base.approval_request_id);
		nyx_codex_outcome_free(&oc);
		nyx_codex_outcome_init(&oc);
		nyx_codex_send_managed(
		    http, url, s->exec_token, o->bearer, c, &oc);
		nyx_log(
		    NYX_LOG_INFO, "approval %s granted; sent once more", rid);
	}
	code = report(l, c, owner, &oc);
out:
	nyx_codex_outcome_free(&oc);
	free(url);
	nyx_pin_free(&rt);
	nyx_http_free(http);
	return code;
}

/* ---- private_ssh (WIRE.md 8) ---- */

static int
run_ssh(const struct nyx_common *cm, struct nyx_settings *s,
    struct nyx_ledger *l, struct nyx_codex_call *c, struct nyx_err *err)
{
	struct nyx_http *http = NULL;
	struct nyx_approval a;
	struct nyx_codex_outcome oc;
	struct nyx_approval_call ac;
	char owner[160], catalog[160], *args = NULL;
	int code = -1;

	nyx_codex_outcome_init(&oc);
	if (nyx_settings_require_base_url(s, err) < 0)
		goto out;
	switch (nyx_cred_load(cm, s, NYX_TOKEN_SOURCE, err)) {
	case 0:
		break;
	case 1:
		nyx_err_set(err, NYX_EXIT_NOPERM,
		    "codex_execution_credential_unavailable",
		    "No NyxID token is configured (--token-file, "
		    "NYX_TOKEN_FILE or NYX_TOKEN).");
		/* fall through */
	default:
		goto out;
	}
	nyx_cred_owner(s->token, owner, sizeof(owner));
	args = nyx_codex_ssh_arguments(c);
	if (args == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	ac = (struct nyx_approval_call){
	    owner, c->request_id, "codex_exec", c->call_id, args};
	switch (nyx_approval_gate(l, &ac, &a, err)) {
	case NYX_APPROVAL_CONSUMED:
		break; /* run it, once */
	case NYX_APPROVAL_REQUESTED:
		audit(l, c, owner, "waiting_approval", a.id, NULL);
		/* fall through */
	case NYX_APPROVAL_PENDING:
		nyx_log(NYX_LOG_ERROR,
		    "approval_required: this private_ssh call needs a human "
		    "approval: codex-exec approve %s (%s)",
		    a.id, nyx_cli_diag());
		nyx_cli_emit(nyx_approval_record(&a, nyx_cli_diag()));
		code = NYX_EXIT_BLOCKED;
		goto out;
	default:
		goto out;
	}
	http = nyx_http_new();
	if (http == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	audit(l, c, owner, "admission", NULL, NULL);
	if (nyx_codex_resolve_service(http, s->base_url, s->token,
	        nyx_settings_exchange_ms(s), c, catalog, sizeof(catalog),
	        &oc) == 0) {
		audit(l, c, owner, "running", NULL, NULL);
		nyx_codex_send_ssh(
		    http, s->base_url, s->token, catalog, c, &oc);
	}
	code = report(l, c, owner, &oc);
out:
	nyx_codex_outcome_free(&oc);
	nyx_secure_free(&args);
	nyx_http_free(http);
	return code;
}

/* ---- approvals, approve, deny ---- */

static int
list_approvals(struct nyx_ledger *l, struct nyx_err *err)
{
	char **ids = NULL;
	size_t i;
	int code = 0;

	if (nyx_ledger_approvals(l, &ids, err) < 0)
		return -1;
	for (i = 0; ids[i] != NULL && code == 0; i++) {
		struct nyx_approval a;

		if (nyx_ledger_approval_get(l, ids[i], &a, err) == 1 &&
		    strcmp(a.state, "pending") == 0)
			code = nyx_cli_emit(
			    nyx_approval_record(&a, nyx_cli_diag()));
	}
	nyx_ledger_free_list(ids);
	return code;
}

static void
who_am_i(char *out, size_t n)
{
	struct passwd *pw = getpwuid(geteuid());

	snprintf(out, n, "%s (uid %ld)", pw && pw->pw_name ? pw->pw_name : "?",
	    (long)geteuid());
}

/*
 * Show the exact call where a human reads it (never a log) and ask on a
 * terminal: 0 approved, NYX_EXIT_NO declined, -1 with err.
 */
static int
confirm(const struct opts *o, const struct nyx_buf *args, struct nyx_err *err)
{
	jv doc = nyx_json_parse(args->data, args->len);
	jv t = nyx_json_get(doc, "target"), p = nyx_json_get(t, "private_ssh");
	jv tm = nyx_json_get(doc, "timeout_secs");
	char line[16] = "";
	int rc = 0;

	if (o->yes) {
		/* --yes asks nothing, so it shows nothing (PRODUCT 8) */
		jv_free(tm);
		jv_free(p);
		jv_free(t);
		jv_free(doc);
		return 0;
	}
	nyx_log_text("approve this exact call?\n"
	             "  target     private_ssh\n  service    %s\n"
	             "  principal  %s\n  timeout    %.0f s\n  prompt:\n%s",
	    nyx_json_peek_str(p, "service"), nyx_json_peek_str(p, "principal"),
	    jv_get_kind(tm) == JV_KIND_NUMBER ? jv_number_value(tm) : 0.0,
	    nyx_json_peek_str(doc, "prompt"));
	if (!isatty(STDIN_FILENO)) {
		rc = nyx_err_set(err, NYX_EXIT_USAGE, "confirmation_required",
		    "standard input is not a terminal: pass --yes to approve "
		    "from a script");
	} else {
		fputs("Approve? [y/N] ", stderr);
		if (fgets(line, sizeof(line), stdin) == NULL ||
		    (line[0] != 'y' && line[0] != 'Y')) {
			nyx_log_line("not approved");
			rc = NYX_EXIT_NO;
		}
	}
	jv_free(tm);
	jv_free(p);
	jv_free(t);
	jv_free(doc);
	return rc;
}

static int
decide(const struct opts *o, struct nyx_ledger *l, const char *id, bool approve,
    struct nyx_err *err)
{
	struct nyx_approval a;
	struct nyx_buf args = NYX_BUF_ZERO;
	char who[160];
	int rc;

	if (nyx_approval_load(l, id, approve, &a, &args, err) < 0) {
		nyx_buf_free(&args);
		return -1;
	}
	rc = approve ? confirm(o, &args, err) : 0;
	nyx_buf_free(&args);
	if (rc != 0)
		return rc;
	who_am_i(who, sizeof(who));
	if (nyx_approval_decide(l, &a, approve, who, err) < 0)
		return -1;
	return nyx_cli_emit(nyx_approval_record(&a, nyx_cli_diag()));
}

static int
run(const struct opts *o, const struct nyx_common *cm, int nargs, char **argv,
    struct nyx_err *err)
{
	struct nyx_settings s;
	struct nyx_ledger *l = NULL;
	struct nyx_codex_call c;
	int code = -1;

	memset(&c, 0, sizeof(c));
	nyx_settings_init(&s);
	if (nargs == 0 && nyx_codex_admit(&o->a, &c, err) < 0)
		goto out;
	if (nyx_settings_resolve(cm, &s, err) < 0 ||
	    nyx_ledger_open(s.state_dir, &l, err) < 0)
		goto out;
	if (nargs > 0) {
		if (strcmp(argv[0], "approvals") == 0)
			code = list_approvals(l, err);
		else
			code = decide(o, l, argv[1],
			    strcmp(argv[0], "approve") == 0, err);
		goto out;
	}
	if (nyx_codex_request_id(&c, o->request_id) < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	code = c.ssh ? run_ssh(cm, &s, l, &c, err)
	             : run_managed(o, cm, &s, l, &c, err);
out:
	nyx_codex_call_free(&c);
	nyx_ledger_close(l);
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
	int idx, code, nargs;

	memset(&o, 0, sizeof(o));
	nyx_cli_init("codex-exec");
	/* "approve ID --yes": options come anywhere (PRODUCT 2) */
	idx = nyx_cli_parse(argc, argv, &spec, &o, &cm);
	nargs = argc - idx;
	if (nargs > 0) {
		const char *verb = argv[idx];

		if (strcmp(verb, "approvals") == 0 ? nargs != 1
		        : strcmp(verb, "approve") == 0 ||
		            strcmp(verb, "deny") == 0
		        ? nargs != 2
		        : true)
			nyx_cli_usage(
			    "expected: approvals | approve ID | deny ID");
		if (o.a.target != NULL || o.a.prompt != NULL ||
		    o.a.prompt_file != NULL)
			nyx_cli_usage("%s takes no --target or prompt", verb);
		if (nargs == 2 &&
		    strncmp(argv[idx + 1], NYX_APPROVAL_ID_PREFIX,
		        strlen(NYX_APPROVAL_ID_PREFIX)) != 0)
			nyx_cli_usage(
			    "'%s' is not an approval id", argv[idx + 1]);
	}
	if (nyx_time_init(&err) < 0 || nyx_http_global_init(&err) < 0)
		return nyx_cli_fail(&err);
	code = run(&o, &cm, nargs, argv + idx, &err);
	nyx_http_global_cleanup();
	if (code < 0)
		return nyx_cli_fail(&err);
	return nyx_cli_finish(code);
}
