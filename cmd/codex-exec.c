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

#include "tool/admit.h"
#include "nyx_audit.h"
#include "nyx_buf.h"
#include "nyx_chrono.h"
#include "tool/cli.h"
#include "nyx_config.h"
#include "nyx_cred.h"
#include "nyx_err.h"
#include "nyx_hash.h"
#include "nyx_http.h"
#include "nyx_json.h"
#include "nyx_ledger.h"
#include "nyx_log.h"
#include "nyx_time.h"

#define PROMPT_MAX 6000
#define MANAGED_GRACE_S 120
#define SSH_GRACE_S 15

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
	const char *target;
	const char *prompt;
	const char *prompt_file;
	const char *timeout_secs;
	const char *service;
	const char *principal;
	const char *workspace;
	const char *request_id;
	const char *call_id;
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
		o->target = arg;
		break;
	case 'P':
		o->prompt = arg;
		break;
	case OPT_PROMPT_FILE:
		o->prompt_file = arg;
		break;
	case OPT_TIMEOUT_SECS:
		o->timeout_secs = arg;
		break;
	case OPT_SERVICE:
		o->service = arg;
		break;
	case OPT_PRINCIPAL:
		o->principal = arg;
		break;
	case OPT_WORKSPACE:
		o->workspace = arg;
		break;
	case OPT_REQUEST_ID:
	case OPT_CALL_ID:
		if (!nyx_cli_id_ok(arg))
			nyx_cli_usage("%s takes 1-128 of [A-Za-z0-9_.:-]",
			    c == OPT_REQUEST_ID ? "--request-id" : "--call-id");
		if (c == OPT_REQUEST_ID)
			o->request_id = arg;
		else
			o->call_id = arg;
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
    "                          derived from service and principal)\n"
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

/* One admitted call: everything checked before any request. */
struct call {
	bool ssh;
	struct nyx_buf prompt;
	int timeout_secs;
	const char *service, *principal;
	char request_id[160];
	const char *call_id;
};

static int
admission_error(struct nyx_err *err, const char *code, const char *msg)
{
	return nyx_err_set(err, NYX_EXIT_USAGE, code, "%s", msg);
}

static int
admit(const struct opts *o, struct call *c, struct nyx_err *err)
{
	char *end;
	long t;
	jv check;

	memset(c, 0, sizeof(*c));
	if (o->target == NULL ||
	    (strcmp(o->target, "managed_sandbox") != 0 &&
	        strcmp(o->target, "private_ssh") != 0))
		return admission_error(err, "invalid_target",
		    "--target must be 'private_ssh' or 'managed_sandbox'.");
	c->ssh = strcmp(o->target, "private_ssh") == 0;
	if (c->ssh && o->workspace != NULL)
		return admission_error(
		    err, "mixed_target", "private_ssh takes no --workspace.");
	if (!c->ssh && (o->service != NULL || o->principal != NULL))
		return admission_error(err, "mixed_target",
		    "managed_sandbox takes no --service or --principal.");
	if (c->ssh &&
	    (o->service == NULL || *o->service == '\0' ||
	        o->principal == NULL || *o->principal == '\0'))
		return admission_error(err, "invalid_target",
		    "private_ssh needs --service and --principal.");
	if (!c->ssh && o->workspace != NULL &&
	    strcmp(o->workspace, "empty_git") != 0)
		return admission_error(err, "invalid_workspace",
		    "The managed sandbox accepts only an empty_git workspace.");
	if ((o->prompt != NULL) == (o->prompt_file != NULL))
		return admission_error(err, "invalid_arguments",
		    "Give the prompt once: -P PROMPT or --prompt-file FILE.");
	t = c->ssh ? 30 : 180;
	if (o->timeout_secs != NULL) {
		errno = 0;
		t = strtol(o->timeout_secs, &end, 10);
		if (errno != 0 || end == o->timeout_secs || *end != '\0' ||
		    t < 1 || t > (c->ssh ? 300 : 180))
			return admission_error(err, "invalid_timeout",
			    c->ssh ? "'timeout_secs' must be an integer "
			             "between 1 and 300 for private_ssh."
			           : "'timeout_secs' must be an integer "
			             "between 1 and 180 for managed_sandbox.");
	}
	c->timeout_secs = (int)t;
	nyx_buf_init(&c->prompt, PROMPT_MAX + 1);
	c->prompt.secret = true;
	if (o->prompt != NULL) {
		if (nyx_buf_addstr(&c->prompt, o->prompt) < 0)
			goto too_large;
	} else if ((strcmp(o->prompt_file, "-") == 0
	                   ? nyx_buf_read_fd(&c->prompt, 0)
	                   : nyx_buf_read_file(&c->prompt, o->prompt_file)) <
	    0) {
		if (errno == EFBIG)
			goto too_large;
		return nyx_err_set(err, NYX_EXIT_NOINPUT, "input_unreadable",
		    "cannot read %s: %s", o->prompt_file, strerror(errno));
	}
	if (c->prompt.len > PROMPT_MAX)
		goto too_large;
	if (c->prompt.len == 0 ||
	    strspn(c->prompt.data, " \t\r\n") == c->prompt.len)
		return admission_error(
		    err, "invalid_arguments", "'prompt' is required.");
	check = jv_string_sized(c->prompt.data, (int)c->prompt.len);
	if ((size_t)jv_string_length_bytes(jv_copy(check)) != c->prompt.len ||
	    memchr(c->prompt.data, '\0', c->prompt.len) != NULL) {
		jv_free(check);
		return nyx_err_set(err, NYX_EXIT_DATAERR, "invalid_arguments",
		    "The prompt is not valid UTF-8 text.");
	}
	jv_free(check);
	c->service = o->service;
	c->principal = o->principal;
	c->call_id = o->call_id ? o->call_id : "codex_exec";
	return 0;
too_large:
	return admission_error(
	    err, "prompt_too_large", "The prompt exceeds 6000 UTF-8 bytes.");
}

/* ---- records and audit ---- */

struct outcome {
	bool success;
	const char *status; /* succeeded, failed */
	const char *code, *kind, *message;
	int exit;
	int http_status;
	jv output; /* text, or invalid */
	jv stderr_text; /* private_ssh only */
	int exit_code; /* the task's, -1 none */
	long elapsed_ms;
	char upstream_diag[129];
	char approval_id[129]; /* NyxID's approval_required gate */
	char approve_url[512];
	char codebuf[128];
};

static void
outcome_init(struct outcome *oc)
{
	memset(oc, 0, sizeof(*oc));
	oc->output = jv_invalid();
	oc->stderr_text = jv_invalid();
	oc->exit_code = -1;
	oc->status = "failed";
}

static void
fail(struct outcome *oc, const char *code, const char *kind,
    const char *message, int exit_code)
{
	oc->success = false;
	oc->status = "failed";
	oc->code = code;
	oc->kind = kind;
	oc->message = message;
	oc->exit = exit_code;
}

static jv
result_record(const struct call *c, struct outcome *oc)
{
	jv r = jv_object();
	char ms[24];

	r = jv_object_set(r, jv_string("v"), jv_number(1));
	r = jv_object_set(r, jv_string("type"), jv_string("codex.result"));
	r = jv_object_set(r, jv_string("target"),
	    jv_string(c->ssh ? "private_ssh" : "managed_sandbox"));
	r = jv_object_set(r, jv_string("status"), jv_string(oc->status));
	if (jv_is_valid(oc->output))
		r = jv_object_set(r, jv_string("output"), jv_copy(oc->output));
	if (jv_is_valid(oc->stderr_text))
		r = jv_object_set(
		    r, jv_string("stderr"), jv_copy(oc->stderr_text));
	if (oc->exit_code >= 0)
		r = jv_object_set(
		    r, jv_string("exit_code"), jv_number(oc->exit_code));
	snprintf(ms, sizeof(ms), "%ld", oc->elapsed_ms);
	r = jv_object_set(r, jv_string("elapsed_ms"), jv_string(ms));
	if (!oc->success) {
		jv e = jv_object();

		e = jv_object_set(e, jv_string("code"), jv_string(oc->code));
		e = jv_object_set(e, jv_string("kind"), jv_string(oc->kind));
		e = jv_object_set(
		    e, jv_string("message"), jv_string(oc->message));
		if (oc->approval_id[0])
			e = jv_object_set(e, jv_string("request_id"),
			    jv_string(oc->approval_id));
		if (oc->approve_url[0])
			e = jv_object_set(e, jv_string("approve_url"),
			    jv_string(oc->approve_url));
		r = jv_object_set(r, jv_string("error"), e);
		r = jv_object_set(r, jv_string("exit"), jv_number(oc->exit));
		if (oc->http_status != 0)
			r = jv_object_set(r, jv_string("http_status"),
			    jv_number(oc->http_status));
	}
	r = jv_object_set(
	    r, jv_string("diagnostic_id"), jv_string(nyx_cli_diag()));
	if (oc->upstream_diag[0])
		r = jv_object_set(r, jv_string("upstream_diagnostic_id"),
		    jv_string(oc->upstream_diag));
	return r;
}

static void
audit(struct nyx_ledger *l, const struct call *c, const char *owner,
    const char *phase, const char *approval_id, const struct outcome *oc)
{
	struct nyx_audit_subject sub = {
	    "codex_exec", "cli", owner, c->request_id, c->call_id};
	struct nyx_audit_outcome ao = {false, NULL, NULL, 0};

	if (oc != NULL) {
		ao.success = oc->success;
		ao.code = oc->code;
		ao.kind = oc->kind;
		ao.exit_code = oc->exit;
	}
	nyx_audit_note(l, &sub, phase, approval_id, NULL, oc ? &ao : NULL);
}

static void
take_diag(jv doc, struct outcome *oc)
{
	jv e = nyx_json_get(doc, "error");
	const char *a = nyx_json_peek_str(doc, "diagnostic_id");
	const char *b = nyx_json_peek_str(e, "diagnostic_id");
	size_t n;
	const char *d = a ? a : b;

	n = d ? strlen(d) : 0;
	if (n >= 1 && n <= 128 &&
	    strspn(d,
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	        "0123456789_.:-") == n)
		snprintf(oc->upstream_diag, sizeof(oc->upstream_diag), "%s", d);
	jv_free(e);
}

/* ---- managed_sandbox (WIRE.md 8; codex-and-sandbox.md A.4) ---- */

/* The upstream code: error.code at the top level or inside body. */
static const char *
upstream_code(jv doc, char *buf, size_t n)
{
	jv e = nyx_json_get(doc, "error"), b;
	const char *c = nyx_json_peek_str(e, "code");

	if (c == NULL) {
		b = nyx_json_get(doc, "body");
		if (jv_get_kind(b) == JV_KIND_STRING) {
			jv inner = jv_parse(jv_string_value(b));

			jv_free(b);
			b = inner;
		}
		jv_free(e);
		e = nyx_json_get(b, "error");
		jv_free(b);
		c = nyx_json_peek_str(e, "code");
	}
	if (c != NULL)
		snprintf(buf, n, "%s", c);
	jv_free(e);
	return c ? buf : NULL;
}

static const struct {
	const char *code, *kind;
	int exit;
} codex_codes[] = {
    {"CODEX_CALLER_CREDENTIAL_FORWARDED", "admission_denied", 77},
    {"CODEX_DELEGATION_ACTOR_INVALID", "admission_denied", 77},
    {"CODEX_DELEGATION_AUDIENCE_INVALID", "admission_denied", 77},
    {"CODEX_DELEGATION_ISSUER_INVALID", "admission_denied", 77},
    {"CODEX_DELEGATION_MARKER_INVALID", "admission_denied", 77},
    {"CODEX_DELEGATION_SCOPE_INVALID", "admission_denied", 77},
    {"CODEX_DELEGATION_SUBJECT_INVALID", "admission_denied", 77},
    {"CODEX_DELEGATION_TYPE_INVALID", "admission_denied", 77},
    {"CODEX_DELEGATION_DUPLICATED", "admission_denied", 77},
    {"CODEX_DELEGATION_EXPIRED", "admission_denied", 77},
    {"CODEX_DELEGATION_INVALID", "admission_denied", 77},
    {"CODEX_DELEGATION_MISSING", "admission_denied", 77},
    {"CODEX_DELEGATION_NOT_YET_VALID", "admission_denied", 77},
    {"CODEX_PROMPT_INVALID", "admission_denied", 76},
    {"CODEX_PROMPT_TOO_LARGE", "admission_denied", 76},
    {"CODEX_REQUEST_INVALID", "admission_denied", 76},
    {"CODEX_TIMEOUT_INVALID", "admission_denied", 76},
    {"CODEX_WORKSPACE_INVALID", "admission_denied", 76},
    {"CODEX_CONFIG_INVALID", "readiness_failed", 75},
    {"CODEX_DELEGATION_VERIFIER_UNAVAILABLE", "readiness_failed", 75},
    {"CODEX_FEATURE_DISABLED", "target_not_configured", 3},
    {"CODEX_SANDBOX_CREATION_FAILED", "provisioning_failed", 75},
    {"CODEX_WORKSPACE_PREPARATION_FAILED", "provisioning_failed", 75},
    {"CODEX_OPENSANDBOX_UNAVAILABLE", "provisioning_failed", 75},
    {"CODEX_OPENSANDBOX_TIMEOUT", "timed_out", 75},
    {"CODEX_SANDBOX_READY_TIMEOUT", "timed_out", 75},
    {"CODEX_EXECUTION_TIMEOUT", "timed_out", 75},
    {"CODEX_COMMAND_TIMEOUT", "timed_out", 75},
    {"CODEX_CAPACITY_UNAVAILABLE", "capacity_unavailable", 75},
    {"CODEX_AGENT_MESSAGE_MISSING", "malformed_output", 76},
    {"CODEX_EXECD_TERMINAL_MISSING", "malformed_output", 76},
    {"CODEX_OUTPUT_INVALID", "malformed_output", 76},
    {"CODEX_OUTPUT_TOO_LARGE", "malformed_output", 76},
    {"CODEX_TURN_TERMINAL_MISSING", "malformed_output", 76},
    {"CODEX_CLEANUP_UNCONFIRMED", "cleanup_failed", 75},
    {"CODEX_COMMAND_FAILED", "terminal_failure", 1},
    {"CODEX_TURN_FAILED", "terminal_failure", 1},
};

static void
classify_managed_error(long status, jv doc, struct outcome *oc)
{
	char up[96];
	const char *code = upstream_code(doc, up, sizeof(up));
	size_t i;

	take_diag(doc, oc);
	oc->http_status = (int)status;
	if (status == 403 && nyx_json_peek_str(doc, "error") != NULL &&
	    strcmp(nyx_json_peek_str(doc, "error"), "approval_required") == 0) {
		/* NyxID's own human gate: a blocker with its approve URL */
		const char *rid = nyx_json_peek_str(doc, "request_id");
		const char *url = nyx_json_peek_str(doc, "approve_url");

		fail(oc, "NYXID_APPROVAL_REQUIRED", "approval_required",
		    "NyxID requires a human approval for this call.",
		    NYX_EXIT_BLOCKED);
		if (rid != NULL && strlen(rid) <= 128 &&
		    strspn(rid,
		        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuv"
		        "wxyz0123456789_.:-") == strlen(rid))
			snprintf(oc->approval_id, sizeof(oc->approval_id), "%s",
			    rid);
		if (url != NULL && strlen(url) < sizeof(oc->approve_url) &&
		    (strncmp(url, "https://", 8) == 0 ||
		        strncmp(url, "http://", 7) == 0) &&
		    strpbrk(url, " \"<>\\") == NULL)
			snprintf(oc->approve_url, sizeof(oc->approve_url), "%s",
			    url);
		return;
	}
	for (i = 0;
	     code != NULL && i < sizeof(codex_codes) / sizeof(codex_codes[0]);
	     i++) {
		size_t k;

		if (strcmp(code, codex_codes[i].code) != 0)
			continue;
		if (strcmp(code, "CODEX_CAPACITY_UNAVAILABLE") == 0 &&
		    status != 429)
			break; /* capacity counts only with 429 */
		snprintf(oc->codebuf, sizeof(oc->codebuf),
		    "managed_upstream_%s", code);
		for (k = 17; oc->codebuf[k] != '\0'; k++)
			if (oc->codebuf[k] >= 'A' && oc->codebuf[k] <= 'Z')
				oc->codebuf[k] =
				    (char)(oc->codebuf[k] - 'A' + 'a');
		fail(oc, oc->codebuf, codex_codes[i].kind,
		    "The managed Codex sandbox refused or failed the task.",
		    codex_codes[i].exit);
		return;
	}
	if (code != NULL && strcmp(code, "CODEX_CAPACITY_UNAVAILABLE") == 0)
		fail(oc, "managed_response_invalid", "malformed_output",
		    "The managed Codex response was malformed.",
		    NYX_EXIT_PROTOCOL);
	else if (status == 401)
		fail(oc, "managed_proxy_authentication_failed",
		    "admission_denied", "NyxID rejected the credential.",
		    NYX_EXIT_NOPERM);
	else if (status == 403)
		fail(oc, "managed_proxy_authorization_denied",
		    "admission_denied", "NyxID denied the call.",
		    NYX_EXIT_NOPERM);
	else if (status == 404)
		fail(oc, "managed_proxy_target_unavailable",
		    "target_not_configured",
		    "The managed Codex route was not found.",
		    NYX_EXIT_PROTOCOL);
	else if (status == 408 || status == 504)
		fail(oc, "managed_proxy_timeout", "timed_out",
		    "The managed Codex call timed out.", NYX_EXIT_TEMPFAIL);
	else if (status == 429)
		fail(oc, "managed_proxy_unavailable", "capacity_unavailable",
		    "The managed Codex sandbox has no capacity now.",
		    NYX_EXIT_TEMPFAIL);
	else if (status == 502 || status == 503)
		fail(oc, "managed_proxy_unavailable", "terminal_failure",
		    "The managed Codex sandbox is unavailable.",
		    NYX_EXIT_TEMPFAIL);
	else
		fail(oc, "managed_proxy_failed", "terminal_failure",
		    "The managed Codex call failed.", NYX_EXIT_PROTOCOL);
}

/* The key replaced by [REDACTED] wherever it appears in text. */
static jv
redact(const char *text, size_t n, const char *key)
{
	struct nyx_buf b = NYX_BUF_ZERO;
	size_t kl = key ? strlen(key) : 0, i = 0;
	jv out;

	while (i < n) {
		if (kl > 0 && i + kl <= n && memcmp(text + i, key, kl) == 0) {
			nyx_buf_addstr(&b, "[REDACTED]");
			i += kl;
		} else {
			nyx_buf_add(&b, text + i, 1);
			i++;
		}
	}
	out = jv_string_sized(b.data ? b.data : "", (int)b.len);
	nyx_buf_free(&b);
	return out;
}

static void
classify_managed(
    const struct nyx_http_resp *r, const char *key, struct outcome *oc)
{
	jv doc, out, text, ec, et;

	if (r->fail == NYX_HTTP_TOO_LARGE) {
		fail(oc, "managed_response_too_large", "malformed_output",
		    "The managed Codex response exceeded 1 MiB.",
		    NYX_EXIT_PROTOCOL);
		return;
	}
	if (r->fail == NYX_HTTP_TIMEOUT) {
		fail(oc, "managed_proxy_timeout", "timed_out",
		    "The managed Codex call timed out.", NYX_EXIT_TEMPFAIL);
		return;
	}
	if (r->fail != NYX_HTTP_OK || r->status == 0) {
		fail(oc, "managed_proxy_unavailable", "terminal_failure",
		    "The managed Codex sandbox could not be reached.",
		    NYX_EXIT_TEMPFAIL);
		return;
	}
	doc = nyx_json_parse(r->body.data ? r->body.data : "", r->body.len);
	if (r->status < 200 || r->status > 299 ||
	    nyx_json_peek_str(doc, "error") != NULL ||
	    nyx_json_bool(doc, "error") == 1) {
		classify_managed_error(r->status, doc, oc);
		jv_free(doc);
		return;
	}
	out = nyx_json_get(doc, "output");
	text = nyx_json_get(out, "text");
	ec = nyx_json_get(out, "exit_code");
	et = nyx_json_get(out, "execution_time_ms");
	take_diag(doc, oc);
	if (nyx_json_bool(doc, "success") != 1 ||
	    jv_get_kind(text) != JV_KIND_STRING ||
	    !nyx_json_integral(ec, -2147483648.0, 2147483647.0)) {
		fail(oc, "managed_response_invalid", "malformed_output",
		    "The managed Codex response was malformed.",
		    NYX_EXIT_PROTOCOL);
	} else {
		oc->output = redact(jv_string_value(text),
		    (size_t)jv_string_length_bytes(jv_copy(text)), key);
		oc->exit_code = (int)jv_number_value(ec);
		if (oc->exit_code == 0) {
			oc->success = true;
			oc->status = "succeeded";
			oc->exit = 0;
		} else {
			fail(oc, "managed_execution_nonzero_exit",
			    "terminal_failure",
			    "Managed Codex execution exited unsuccessfully.",
			    NYX_EXIT_NO);
		}
	}
	jv_free(out);
	jv_free(text);
	jv_free(ec);
	jv_free(et);
	jv_free(doc);
}

/*
 * Poll NyxID's approval status (each exchange within the usual bound)
 * until a human decided: 1 approved, 0 denied or still pending when the
 * wait ran out (oc says which), -1 on a failed poll (oc kept).
 */
static int
wait_approval(
    struct nyx_http *http, const struct nyx_settings *s, struct outcome *oc)
{
	struct nyx_buf auth = NYX_BUF_ZERO, url = NYX_BUF_ZERO;
	const char *hdrs[2];
	char *esc = nyx_http_escape(oc->approval_id);
	int64_t until = nyx_mono_ms() + APPROVAL_WAIT_MS;
	int rc = -1;

	auth.secret = true;
	if (esc == NULL ||
	    nyx_buf_printf(&auth, "Authorization: Bearer %s", s->exec_token) <
	        0 ||
	    nyx_buf_printf(&url, "%s/api/v1/approvals/requests/%s/status",
	        s->base_url, esc) < 0)
		goto out;
	hdrs[0] = auth.data;
	hdrs[1] = NULL;
	nyx_log_line("waiting for a human approval of %s%s%s", oc->approval_id,
	    oc->approve_url[0] ? " at " : "", oc->approve_url);
	while (nyx_mono_ms() < until) {
		struct nyx_http_req req;
		struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;
		jv doc;
		const char *st;

		memset(&req, 0, sizeof(req));
		req.url = url.data;
		req.headers = hdrs;
		req.timeout_ms = NYX_HTTP_EXCHANGE_MS;
		nyx_http_do(http, &req, &r);
		doc =
		    nyx_json_parse(r.body.data ? r.body.data : "", r.body.len);
		st = r.status == 200 ? nyx_json_peek_str(doc, "status") : NULL;
		if (st != NULL && strcmp(st, "approved") == 0)
			rc = 1;
		else if (st != NULL && strcmp(st, "denied") == 0) {
			fail(oc, "NYXID_APPROVAL_DENIED", "approval_required",
			    "A human denied this call in NyxID.",
			    NYX_EXIT_BLOCKED);
			rc = 0;
		} else if (r.status != 200 && r.status != 0 &&
		    r.status != 429 && r.status < 500) {
			rc =
			    -1; /* the status cannot be read: keep the blocker */
			jv_free(doc);
			nyx_http_resp_free(&r);
			break;
		}
		jv_free(doc);
		nyx_http_resp_free(&r);
		if (rc >= 0)
			break;
		nyx_sleep_ms(APPROVAL_POLL_MS);
	}
	if (rc < 0 && nyx_mono_ms() >= until)
		rc = 0; /* still pending: the blocker stands */
out:
	free(esc);
	nyx_buf_free(&auth);
	nyx_buf_free(&url);
	return rc;
}

static int
run_managed(const struct opts *o, const struct nyx_common *cm,
    struct nyx_settings *s, struct nyx_ledger *l, struct call *c,
    struct nyx_err *err)
{
	struct nyx_pin rt = {NULL, NULL};
	struct nyx_http *http = nyx_http_new();
	struct nyx_http_resp resp = NYX_HTTP_RESP_ZERO;
	struct nyx_http_req req;
	struct nyx_buf auth = NYX_BUF_ZERO;
	struct outcome oc;
	const char *hdrs[4];
	char *url = NULL, *body = NULL, owner[160];
	struct nyx_cred cred;
	jv b;
	int code = -1;

	outcome_init(&oc);
	auth.secret = true;
	if (http == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	code = nyx_admit_route(
	    cm, s, http, "codex_execution_credential_unavailable", &rt, err);
	if (code != 0)
		goto out;
	code = -1;
	nyx_cred_classify(s->exec_token, &cred);
	snprintf(owner, sizeof(owner), "%s",
	    cred.subject[0] ? cred.subject : "unknown");
	/* exactly three keys; sorted output keeps prompt, timeout_secs,
	 * workspace */
	b = jv_object();
	b = jv_object_set(b, jv_string("prompt"),
	    jv_string_sized(c->prompt.data, (int)c->prompt.len));
	b = jv_object_set(
	    b, jv_string("timeout_secs"), jv_number(c->timeout_secs));
	b = jv_object_set(b, jv_string("workspace"), jv_string("empty_git"));
	body = nyx_json_dump(b);
	url = nyx_chrono_url(s->base_url, rt.slug, rt.id, "codex/execute");
	if (body == NULL || url == NULL ||
	    nyx_buf_printf(&auth,
	        o->bearer ? "Authorization: Bearer %s" : "X-API-Key: %s",
	        s->exec_token) < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	hdrs[0] = auth.data;
	hdrs[1] = "Content-Type: application/json";
	hdrs[2] = NULL;
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = url;
	req.headers = hdrs;
	req.body = body;
	req.body_len = strlen(body);
	req.timeout_ms = (c->timeout_secs + MANAGED_GRACE_S) * 1000L;
	req.fresh_connect = true; /* never silently resent */
	audit(l, c, owner, "admission", NULL, NULL);
	audit(l, c, owner, "running", NULL, NULL);
	nyx_http_do(http, &req, &resp);
	oc.elapsed_ms = resp.elapsed_ms;
	classify_managed(&resp, s->exec_token, &oc);
	if (o->wait_approval && oc.approval_id[0] &&
	    wait_approval(http, s, &oc) == 1) {
		/* approved: the refused call never ran; send it again, once */
		char rid[129];

		snprintf(rid, sizeof(rid), "%s", oc.approval_id);
		nyx_http_resp_free(&resp);
		jv_free(oc.output);
		outcome_init(&oc);
		nyx_http_do(http, &req, &resp);
		oc.elapsed_ms = resp.elapsed_ms;
		classify_managed(&resp, s->exec_token, &oc);
		nyx_log(
		    NYX_LOG_INFO, "approval %s granted; sent once more", rid);
	}
	audit(l, c, owner, "terminal", NULL, &oc);
	nyx_log(NYX_LOG_DEBUG, "POST /codex/execute: status %ld, %zu bytes",
	    resp.status, resp.body.len);
	if (!oc.success)
		nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", oc.code, oc.message,
		    nyx_cli_diag());
	nyx_cli_emit(result_record(c, &oc));
	code = oc.exit;
out:
	jv_free(oc.output);
	nyx_http_resp_free(&resp);
	nyx_buf_free(&auth);
	if (body != NULL) {
		nyx_secure_zero(body, strlen(body));
		free(body);
	}
	free(url);
	nyx_pin_free(&rt);
	nyx_http_free(http);
	return code;
}

/* ---- private_ssh (WIRE.md 8; codex-and-sandbox.md A.6, A.7) ---- */

/* The canonical arguments of a private_ssh call (sorted, compact). */
static char *
ssh_arguments(const struct call *c)
{
	jv inner = jv_object(), target = jv_object(), ws = jv_object(),
	   a = jv_object();

	inner = jv_object_set(
	    inner, jv_string("principal"), jv_string(c->principal));
	inner =
	    jv_object_set(inner, jv_string("service"), jv_string(c->service));
	target =
	    jv_object_set(target, jv_string("kind"), jv_string("private_ssh"));
	target = jv_object_set(target, jv_string("private_ssh"), inner);
	ws = jv_object_set(ws, jv_string("kind"), jv_string("empty_git"));
	a = jv_object_set(a, jv_string("prompt"),
	    jv_string_sized(c->prompt.data, (int)c->prompt.len));
	a = jv_object_set(a, jv_string("target"), target);
	a = jv_object_set(
	    a, jv_string("timeout_secs"), jv_number(c->timeout_secs));
	a = jv_object_set(a, jv_string("workspace"), ws);
	return nyx_json_dump(a);
}

/* tool-approval:v1: over "cli", owner, request, tool, call, args sha. */
static int
approval_id(
    const char *owner, const struct call *c, const char *args_sha, char out[96])
{
	struct nyx_digest *d = nyx_digest_new();
	char hex[NYX_SHA256_HEX];

	if (d == NULL)
		return -1;
	nyx_digest_add(d, "cli");
	nyx_digest_add(d, owner);
	nyx_digest_add(d, c->request_id);
	nyx_digest_add(d, "codex_exec");
	nyx_digest_add(d, c->call_id);
	nyx_digest_add(d, args_sha);
	if (nyx_digest_finish(d, hex) < 0)
		return -1;
	snprintf(out, 96, "tool-approval:v1:%s", hex);
	return 0;
}

static jv
approval_record(const struct nyx_approval *a)
{
	jv r = jv_object();
	char t[NYX_TIME_STRLEN];

	r = jv_object_set(r, jv_string("v"), jv_number(1));
	r = jv_object_set(r, jv_string("type"), jv_string("approval.request"));
	r = jv_object_set(r, jv_string("request_id"), jv_string(a->id));
	r = jv_object_set(r, jv_string("tool"), jv_string("codex_exec"));
	r = jv_object_set(r, jv_string("target"), jv_string("private_ssh"));
	r = jv_object_set(
	    r, jv_string("arguments_sha256"), jv_string(a->arguments_sha256));
	r = jv_object_set(r, jv_string("state"), jv_string(a->state));
	nyx_time_format(a->created_at_ms, t);
	r = jv_object_set(r, jv_string("created_at"), jv_string(t));
	if (a->decided_at_ms > 0) {
		nyx_time_format(a->decided_at_ms, t);
		r = jv_object_set(r, jv_string("decided_at"), jv_string(t));
		r = jv_object_set(
		    r, jv_string("decided_by"), jv_string(a->decided_by));
	}
	return jv_object_set(
	    r, jv_string("diagnostic_id"), jv_string(nyx_cli_diag()));
}

/* The fixed wrapper: the prompt only as base64, never interpolated. */
static char *
ssh_command(const struct call *c)
{
	char *b64 = nyx_b64_encode(c->prompt.data, c->prompt.len);
	struct nyx_buf b = NYX_BUF_ZERO;

	if (b64 == NULL ||
	    nyx_buf_printf(&b,
	        "p='%s'; { printf '%%s' \"$p\" | base64 --decode 2>/dev/null "
	        "|| printf '%%s' \"$p\" | base64 -D; } | codex exec -",
	        b64) < 0) {
		free(b64);
		nyx_buf_free(&b);
		return NULL;
	}
	free(b64);
	return nyx_buf_take(&b);
}

/* GET /api/v1/keys/{service}: its catalog_service_id. */
static int
resolve_service(struct nyx_http *http, const struct nyx_settings *s,
    const char *service, char *out, size_t n, struct outcome *oc)
{
	struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;
	struct nyx_http_req req;
	struct nyx_buf auth = NYX_BUF_ZERO, url = NYX_BUF_ZERO;
	const char *hdrs[2];
	char *esc = nyx_http_escape(service);
	jv doc;
	int rc = -1;

	auth.secret = true;
	if (esc == NULL ||
	    nyx_buf_printf(&auth, "Authorization: Bearer %s", s->token) < 0 ||
	    nyx_buf_printf(&url, "%s/api/v1/keys/%s", s->base_url, esc) < 0) {
		fail(oc, "oom", "transport_unavailable", "Out of memory.",
		    NYX_EXIT_OSERR);
		goto out;
	}
	hdrs[0] = auth.data;
	hdrs[1] = NULL;
	memset(&req, 0, sizeof(req));
	req.url = url.data;
	req.headers = hdrs;
	req.timeout_ms =
	    s->timeout_ms > 0 ? s->timeout_ms : NYX_HTTP_EXCHANGE_MS;
	nyx_http_do(http, &req, &r);
	doc = nyx_json_parse(r.body.data ? r.body.data : "", r.body.len);
	oc->http_status = (int)r.status;
	if (r.fail != NYX_HTTP_OK || r.status == 0)
		fail(oc, "ssh_service_unavailable", "transport_unavailable",
		    "NyxID could not be reached to resolve the SSH service.",
		    NYX_EXIT_TEMPFAIL);
	else if (r.status == 401 || r.status == 403)
		fail(oc, "ssh_service_denied", "admission_denied",
		    "NyxID refused to resolve the SSH service.",
		    NYX_EXIT_NOPERM);
	else if (r.status == 404)
		fail(oc, "target_not_configured", "target_not_configured",
		    "No SSH service of yours has that id or slug.",
		    NYX_EXIT_BLOCKED);
	else if (r.status != 200 ||
	    nyx_json_peek_str(doc, "catalog_service_id") == NULL)
		fail(oc, "ssh_service_invalid", "malformed_output",
		    "NyxID's answer for the SSH service was unusable.",
		    NYX_EXIT_PROTOCOL);
	else {
		snprintf(
		    out, n, "%s", nyx_json_peek_str(doc, "catalog_service_id"));
		rc = 0;
	}
	jv_free(doc);
out:
	free(esc);
	nyx_http_resp_free(&r);
	nyx_buf_free(&auth);
	nyx_buf_free(&url);
	return rc;
}

static void
classify_ssh(const struct nyx_http_resp *r, struct outcome *oc)
{
	jv doc, ec, so, se, to;

	oc->http_status = (int)r->status;
	if (r->fail == NYX_HTTP_TIMEOUT) {
		fail(oc, "ssh_timeout", "timed_out",
		    "NyxID did not return an SSH exec response in time.",
		    NYX_EXIT_TEMPFAIL);
		return;
	}
	if (r->fail == NYX_HTTP_TOO_LARGE) {
		fail(oc, "ssh_response_too_large", "malformed_output",
		    "The SSH exec response exceeded 1 MiB.", NYX_EXIT_PROTOCOL);
		return;
	}
	if (r->fail != NYX_HTTP_OK || r->status == 0) {
		fail(oc, "ssh_unavailable", "transport_unavailable",
		    "NyxID could not be reached for the SSH exec.",
		    NYX_EXIT_TEMPFAIL);
		return;
	}
	if (r->status == 401 || r->status == 403) {
		fail(oc, "ssh_denied", "admission_denied",
		    "NyxID refused the SSH exec.", NYX_EXIT_NOPERM);
		return;
	}
	if (r->status == 404) {
		fail(oc, "target_not_configured", "target_not_configured",
		    "The SSH service is not available to you.",
		    NYX_EXIT_BLOCKED);
		return;
	}
	if (r->status != 200) {
		fail(oc, "codex_exec_failed", "terminal_failure",
		    "The SSH exec failed.",
		    r->status == 429 || r->status >= 500 ? NYX_EXIT_TEMPFAIL
		                                         : NYX_EXIT_PROTOCOL);
		return;
	}
	doc = nyx_json_parse(r->body.data ? r->body.data : "", r->body.len);
	ec = nyx_json_get(doc, "exit_code");
	so = nyx_json_get(doc, "stdout");
	se = nyx_json_get(doc, "stderr");
	to = nyx_json_get(doc, "timed_out");
	if (!nyx_json_integral(ec, -2147483648.0, 2147483647.0) ||
	    jv_get_kind(so) != JV_KIND_STRING ||
	    jv_get_kind(se) != JV_KIND_STRING) {
		fail(oc, "ssh_response_invalid", "malformed_output",
		    "The SSH exec response was malformed.", NYX_EXIT_PROTOCOL);
	} else {
		oc->output = jv_copy(so);
		oc->stderr_text = jv_copy(se);
		oc->exit_code = (int)jv_number_value(ec);
		if (jv_get_kind(to) == JV_KIND_TRUE)
			fail(oc, "codex_exec_timed_out", "timed_out",
			    "Codex on the host did not finish in time.",
			    NYX_EXIT_TEMPFAIL);
		else if (oc->exit_code != 0)
			fail(oc, "codex_exec_nonzero_exit", "terminal_failure",
			    "Codex on the host exited unsuccessfully.",
			    NYX_EXIT_NO);
		else {
			oc->success = true;
			oc->status = "succeeded";
			oc->exit = 0;
		}
	}
	jv_free(doc);
	jv_free(ec);
	jv_free(so);
	jv_free(se);
	jv_free(to);
}

static int
run_ssh(const struct nyx_common *cm, struct nyx_settings *s,
    struct nyx_ledger *l, struct call *c, struct nyx_err *err)
{
	struct nyx_http *http = NULL;
	struct nyx_http_resp resp = NYX_HTTP_RESP_ZERO;
	struct nyx_http_req req;
	struct nyx_buf auth = NYX_BUF_ZERO, url = NYX_BUF_ZERO;
	struct nyx_approval a, g;
	struct nyx_cred cred;
	struct outcome oc;
	const char *hdrs[3];
	char owner[160], args_sha[NYX_SHA256_HEX], id[96], catalog[160];
	char *args = NULL, *cmd = NULL, *body = NULL, *esc = NULL;
	jv b;
	int code = -1, got;

	outcome_init(&oc);
	auth.secret = true;
	if (nyx_settings_require_base_url(s, err) < 0 ||
	    nyx_settings_load_token(cm, s, 0, err) < 0)
		goto out;
	if (s->token == NULL) {
		nyx_err_set(err, NYX_EXIT_NOPERM,
		    "codex_execution_credential_unavailable",
		    "No NyxID token is configured (--token-file, "
		    "NYX_TOKEN_FILE "
		    "or NYX_TOKEN).");
		goto out;
	}
	nyx_log_add_secret(s->token);
	if (nyx_cred_check(s->token, err) < 0)
		goto out;
	nyx_cred_classify(s->token, &cred);
	snprintf(owner, sizeof(owner), "%s",
	    cred.subject[0] ? cred.subject : "unknown");
	args = ssh_arguments(c);
	if (args == NULL || nyx_sha256_hex(args, strlen(args), args_sha) < 0 ||
	    approval_id(owner, c, args_sha, id) < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	/* the grant: exactly this call, consumed once */
	got = nyx_ledger_approval_grant(
	    l, owner, c->request_id, c->call_id, &g, err);
	if (got < 0)
		goto out;
	if (got == 1 && strcmp(g.id, id) != 0) {
		nyx_err_set(err, NYX_EXIT_BLOCKED, "approval_grant_mismatch",
		    "The durable approval grant %s does not match this exact "
		    "call; 'codex-exec deny %s' it, or pass another "
		    "--request-id.",
		    g.id, g.id);
		goto out;
	}
	if (got == 0 ||
	    nyx_ledger_approval_move(
	        l, id, "approved", "consumed", NULL, nyx_now_ms(), err) != 1) {
		/* no usable grant: a pending request, and stop here */
		if (err->code[0] != '\0')
			goto out;
		got = nyx_ledger_approval_get(l, id, &a, err);
		if (got < 0)
			goto out;
		if (got == 0 || strcmp(a.state, "consumed") == 0) {
			memset(&a, 0, sizeof(a));
			snprintf(a.id, sizeof(a.id), "%s", id);
			snprintf(a.owner, sizeof(a.owner), "%s", owner);
			snprintf(a.request_id, sizeof(a.request_id), "%s",
			    c->request_id);
			snprintf(
			    a.call_id, sizeof(a.call_id), "%s", c->call_id);
			snprintf(a.arguments_sha256, sizeof(a.arguments_sha256),
			    "%s", args_sha);
			snprintf(a.state, sizeof(a.state), "pending");
			a.created_at_ms = nyx_now_ms();
			if (nyx_ledger_approval_put(
			        l, &a, args, strlen(args), err) < 0)
				goto out;
			audit(l, c, owner, "waiting_approval", id, NULL);
		}
		nyx_log(NYX_LOG_ERROR,
		    "approval_required: this private_ssh call needs a human "
		    "approval: codex-exec approve %s (%s)",
		    id, nyx_cli_diag());
		nyx_cli_emit(approval_record(&a));
		code = NYX_EXIT_BLOCKED;
		goto out;
	}
	/* consumed: run it, once */
	http = nyx_http_new();
	if (http == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	audit(l, c, owner, "admission", NULL, NULL);
	if (resolve_service(
	        http, s, c->service, catalog, sizeof(catalog), &oc) < 0)
		goto report;
	cmd = ssh_command(c);
	esc = nyx_http_escape(catalog);
	b = jv_object();
	b = jv_object_set(b, jv_string("command"), jv_string(cmd ? cmd : ""));
	b = jv_object_set(b, jv_string("principal"), jv_string(c->principal));
	b = jv_object_set(
	    b, jv_string("timeout_secs"), jv_number(c->timeout_secs));
	body = nyx_json_dump(b);
	if (cmd == NULL || esc == NULL || body == NULL ||
	    nyx_buf_printf(&auth, "Authorization: Bearer %s", s->token) < 0 ||
	    nyx_buf_printf(&url, "%s/api/v1/ssh/%s/exec", s->base_url, esc) <
	        0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	hdrs[0] = auth.data;
	hdrs[1] = "Content-Type: application/json";
	hdrs[2] = NULL;
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = url.data;
	req.headers = hdrs;
	req.body = body;
	req.body_len = strlen(body);
	req.timeout_ms = (c->timeout_secs + SSH_GRACE_S) * 1000L;
	req.fresh_connect = true;
	audit(l, c, owner, "running", NULL, NULL);
	nyx_http_do(http, &req, &resp);
	oc.elapsed_ms = resp.elapsed_ms;
	classify_ssh(&resp, &oc);
report:
	audit(l, c, owner, "terminal", NULL, &oc);
	if (!oc.success)
		nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", oc.code, oc.message,
		    nyx_cli_diag());
	nyx_cli_emit(result_record(c, &oc));
	code = oc.exit;
out:
	jv_free(oc.output);
	jv_free(oc.stderr_text);
	nyx_http_resp_free(&resp);
	nyx_buf_free(&auth);
	nyx_buf_free(&url);
	if (args != NULL) {
		nyx_secure_zero(args, strlen(args));
		free(args);
	}
	if (cmd != NULL) {
		nyx_secure_zero(cmd, strlen(cmd));
		free(cmd);
	}
	if (body != NULL) {
		nyx_secure_zero(body, strlen(body));
		free(body);
	}
	free(esc);
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
			code = nyx_cli_emit(approval_record(&a));
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

static int
decide(const struct opts *o, struct nyx_ledger *l, const char *id, bool approve,
    struct nyx_err *err)
{
	struct nyx_approval a;
	struct nyx_buf args = NYX_BUF_ZERO;
	char who[160];
	jv doc, t, p;
	int got;

	got = nyx_ledger_approval_get(l, id, &a, err);
	if (got < 0)
		return -1;
	if (got == 0)
		return nyx_err_set(err, NYX_EXIT_DATAERR, "approval_unknown",
		    "no approval %s in the ledger", id);
	if (strcmp(a.state, "pending") != 0 &&
	    !(strcmp(a.state, "approved") == 0 && !approve))
		return nyx_err_set(err, NYX_EXIT_DATAERR,
		    "approval_not_pending", "approval %s is %s, not pending",
		    id, a.state);
	if (nyx_ledger_approval_args(l, &a, &args, err) < 0)
		return -1;
	doc = nyx_json_parse(args.data, args.len);
	nyx_buf_free(&args);
	t = nyx_json_get(doc, "target");
	p = nyx_json_get(t, "private_ssh");
	if (approve) {
		/* the exact call, where a human reads it (never a log) */
		FILE *tty = isatty(STDIN_FILENO) ? stderr : NULL;
		jv tm = nyx_json_get(doc, "timeout_secs");

		nyx_log_text(
		    "approve this exact call?\n"
		    "  target     private_ssh\n  service    %s\n"
		    "  principal  %s\n  timeout    %.0f s\n  prompt:\n%s",
		    nyx_json_peek_str(p, "service"),
		    nyx_json_peek_str(p, "principal"), jv_number_value(tm),
		    nyx_json_peek_str(doc, "prompt"));
		jv_free(tm);
		if (!o->yes) {
			char line[16] = "";

			if (tty == NULL) {
				jv_free(p);
				jv_free(t);
				jv_free(doc);
				return nyx_err_set(err, NYX_EXIT_USAGE,
				    "confirmation_required",
				    "standard input is not a terminal: pass "
				    "--yes to approve from a script");
			}
			fputs("Approve? [y/N] ", stderr);
			if (fgets(line, sizeof(line), stdin) == NULL ||
			    (line[0] != 'y' && line[0] != 'Y')) {
				jv_free(p);
				jv_free(t);
				jv_free(doc);
				nyx_log_line("not approved");
				return NYX_EXIT_NO;
			}
		}
	}
	jv_free(p);
	jv_free(t);
	jv_free(doc);
	who_am_i(who, sizeof(who));
	if (nyx_ledger_approval_move(l, id, a.state,
	        approve ? "approved" : "denied", who, nyx_now_ms(), err) != 1)
		return err->code[0]
		    ? -1
		    : nyx_err_set(err, NYX_EXIT_DATAERR, "approval_not_pending",
		          "approval %s changed meanwhile", id);
	if (nyx_ledger_approval_get(l, id, &a, err) != 1)
		return -1;
	return nyx_cli_emit(approval_record(&a));
}

static int
run(const struct opts *o, const struct nyx_common *cm, int nargs, char **argv,
    struct nyx_err *err)
{
	struct nyx_settings s;
	struct nyx_ledger *l = NULL;
	struct call c;
	int code = -1;

	memset(&c, 0, sizeof(c));
	nyx_settings_init(&s);
	if (nargs == 0 && admit(o, &c, err) < 0)
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
	if (o->request_id != NULL) {
		snprintf(
		    c.request_id, sizeof(c.request_id), "%s", o->request_id);
	} else if (c.ssh) {
		/* deterministic, so the identical command meets its grant */
		struct nyx_digest *d = nyx_digest_new();
		char hex[NYX_SHA256_HEX];

		if (d == NULL)
			goto oom;
		nyx_digest_add(d, c.service);
		nyx_digest_add(d, c.principal);
		if (nyx_digest_finish(d, hex) < 0)
			goto oom;
		snprintf(c.request_id, sizeof(c.request_id), "ssh:%.32s", hex);
	} else if (nyx_random_hex(c.request_id, 16) < 0) {
		goto oom;
	}
	code = c.ssh ? run_ssh(cm, &s, l, &c, err)
	             : run_managed(o, cm, &s, l, &c, err);
	goto out;
oom:
	nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
out:
	nyx_buf_free(&c.prompt);
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
	int idx, code, nargs, i;

	memset(&o, 0, sizeof(o));
	nyx_cli_init("codex-exec");
	idx = nyx_cli_parse(argc, argv, &spec, &o, &cm);
	/* "approve ID --yes": options stop at the verb, take --yes after it */
	for (nargs = 0, i = idx; i < argc; i++) {
		if (strcmp(argv[i], "--yes") == 0)
			o.yes = true;
		else
			argv[idx + nargs++] = argv[i];
	}
	if (nargs > 0) {
		const char *verb = argv[idx];

		if (strcmp(verb, "approvals") == 0 ? nargs != 1
		        : strcmp(verb, "approve") == 0 ||
		            strcmp(verb, "deny") == 0
		        ? nargs != 2
		        : true)
			nyx_cli_usage(
			    "expected: approvals | approve ID | deny ID");
		if (o.target != NULL || o.prompt != NULL ||
		    o.prompt_file != NULL)
			nyx_cli_usage("%s takes no --target or prompt", verb);
		if (nargs == 2 &&
		    strncmp(argv[idx + 1], "tool-approval:v1:", 17) != 0)
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
