#include "nyx_codex.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_exec.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_time.h"

static int
admission_error(struct nyx_err *err, const char *code, const char *msg)
{
	return nyx_err_set(err, NYX_EXIT_USAGE, code, "%s", msg);
}

/* The target fields: exactly one target, and only its own fields. */
static int
admit_target(const struct nyx_codex_args *a, struct nyx_codex_call *c,
    struct nyx_err *err)
{
	if (a->target == NULL ||
	    (strcmp(a->target, "managed_sandbox") != 0 &&
	        strcmp(a->target, "private_ssh") != 0))
		return admission_error(err, "invalid_target",
		    "--target must be 'private_ssh' or 'managed_sandbox'.");
	c->ssh = strcmp(a->target, "private_ssh") == 0;
	if (c->ssh && a->workspace != NULL)
		return admission_error(
		    err, "mixed_target", "private_ssh takes no --workspace.");
	if (!c->ssh && (a->service != NULL || a->principal != NULL))
		return admission_error(err, "mixed_target",
		    "managed_sandbox takes no --service or --principal.");
	if (c->ssh &&
	    (a->service == NULL || *a->service == '\0' ||
	        a->principal == NULL || *a->principal == '\0'))
		return admission_error(err, "invalid_target",
		    "private_ssh needs --service and --principal.");
	if (!c->ssh && a->workspace != NULL &&
	    strcmp(a->workspace, "empty_git") != 0)
		return admission_error(err, "invalid_workspace",
		    "The managed sandbox accepts only an empty_git workspace.");
	return 0;
}

/* 1..180 (managed, default 180) or 1..300 (private_ssh, default 30). */
static int
admit_timeout(const char *given, struct nyx_codex_call *c, struct nyx_err *err)
{
	char *end;
	long t = c->ssh ? 30 : 180;

	if (given != NULL) {
		errno = 0;
		t = strtol(given, &end, 10);
		if (errno != 0 || end == given || *end != '\0' || t < 1 ||
		    t > (c->ssh ? 300 : 180))
			return admission_error(err, "invalid_timeout",
			    c->ssh ? "'timeout_secs' must be an integer "
			             "between 1 and 300 for private_ssh."
			           : "'timeout_secs' must be an integer "
			             "between 1 and 180 for managed_sandbox.");
	}
	c->timeout_secs = (int)t;
	return 0;
}

/* The prompt: at most 6000 bytes of UTF-8 text, not blank. */
static int
admit_prompt(const struct nyx_codex_args *a, struct nyx_codex_call *c,
    struct nyx_err *err)
{
	switch (nyx_exec_load_text(
	    &c->prompt, NYX_CODEX_PROMPT_MAX, a->prompt, a->prompt_file)) {
	case NYX_TEXT_OK:
		break;
	case NYX_TEXT_TOO_LARGE:
		return admission_error(err, "prompt_too_large",
		    "The prompt exceeds 6000 UTF-8 bytes.");
	case NYX_TEXT_NOT_UTF8:
		return nyx_err_set(err, NYX_EXIT_DATAERR, "invalid_arguments",
		    "The prompt is not valid UTF-8 text.");
	default:
		return nyx_err_set(err, NYX_EXIT_NOINPUT, "input_unreadable",
		    "cannot read %s: %s", a->prompt_file, strerror(errno));
	}
	if (c->prompt.len == 0 ||
	    strspn(c->prompt.data, " \t\r\n") == c->prompt.len)
		return admission_error(
		    err, "invalid_arguments", "'prompt' is required.");
	return 0;
}

int
nyx_codex_admit(const struct nyx_codex_args *a, struct nyx_codex_call *c,
    struct nyx_err *err)
{
	memset(c, 0, sizeof(*c));
	if (admit_target(a, c, err) < 0)
		return -1;
	if ((a->prompt != NULL) == (a->prompt_file != NULL))
		return admission_error(err, "invalid_arguments",
		    "Give the prompt once: -P PROMPT or --prompt-file FILE.");
	if (admit_timeout(a->timeout_secs, c, err) < 0 ||
	    admit_prompt(a, c, err) < 0)
		return -1;
	c->service = a->service;
	c->principal = a->principal;
	c->call_id = a->call_id ? a->call_id : "codex_exec";
	return 0;
}

void
nyx_codex_call_free(struct nyx_codex_call *c)
{
	nyx_buf_free(&c->prompt);
}

int
nyx_codex_request_id(struct nyx_codex_call *c, const char *given)
{
	struct nyx_digest *d;
	char hex[NYX_SHA256_HEX], sha[NYX_SHA256_HEX], *args;

	if (given != NULL) {
		snprintf(c->request_id, sizeof(c->request_id), "%s", given);
		return 0;
	}
	if (!c->ssh)
		return nyx_random_hex(c->request_id, 16);
	/* the exact call: another prompt or timeout is another request,
	 * which asks for its own approval (PRODUCT 8, revision 2) */
	args = nyx_codex_ssh_arguments(c);
	d = nyx_digest_new();
	if (args == NULL || d == NULL ||
	    nyx_sha256_hex(args, strlen(args), sha) < 0) {
		if (d != NULL)
			nyx_digest_finish(d, hex); /* frees it */
		nyx_secure_free(&args);
		return -1;
	}
	nyx_secure_free(&args);
	nyx_digest_add(d, c->service);
	nyx_digest_add(d, c->principal);
	nyx_digest_add(d, sha);
	if (nyx_digest_finish(d, hex) < 0)
		return -1;
	snprintf(c->request_id, sizeof(c->request_id), "ssh:%.32s", hex);
	return 0;
}

void
nyx_codex_outcome_init(struct nyx_codex_outcome *oc)
{
	nyx_exec_outcome_init(&oc->base);
	oc->stderr_text = jv_invalid();
	oc->elapsed_ms = 0;
}

void
nyx_codex_outcome_free(struct nyx_codex_outcome *oc)
{
	nyx_exec_outcome_free(&oc->base);
	jv_free(oc->stderr_text);
	oc->stderr_text = jv_invalid();
}

static void
fail(struct nyx_codex_outcome *oc, const char *code, const char *kind,
    const char *message, int exit_code)
{
	nyx_exec_outcome_fail(&oc->base, code, kind, message, exit_code);
}

/* WIRE 4.4, 8: Codex calls are not replayable; what may have run says so. */
#define MAYBE "codex_outcome_uncertain"
#define MAYBE_MSG                                                              \
	"The Codex task may have run; rerunning it could run it twice."

static void
maybe_ran(struct nyx_codex_outcome *oc)
{
	nyx_exec_outcome_maybe_ran(&oc->base, MAYBE, MAYBE_MSG);
}

static void
succeed(struct nyx_codex_outcome *oc)
{
	oc->base.success = true;
	oc->base.exit = NYX_EXIT_OK;
	oc->base.code = oc->base.kind = oc->base.message = NULL;
}

/* ---- managed_sandbox ---- */

char *
nyx_codex_managed_body(const struct nyx_codex_call *c)
{
	jv b = jv_object();

	/* sorted output keeps prompt, timeout_secs, workspace */
	b = jv_object_set(b, jv_string("prompt"),
	    jv_string_sized(c->prompt.data, (int)c->prompt.len));
	b = jv_object_set(
	    b, jv_string("timeout_secs"), jv_number(c->timeout_secs));
	b = jv_object_set(b, jv_string("workspace"), jv_string("empty_git"));
	return nyx_json_dump(b);
}

/* codex-and-sandbox.md A.4: the upstream codes and what they mean. */
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
    /* before the task starts: nothing ran (75) */
    {"CODEX_OPENSANDBOX_TIMEOUT", "timed_out", 75},
    {"CODEX_SANDBOX_READY_TIMEOUT", "timed_out", 75},
    /* the task ran and hit its limit: rerunning runs it again (1) */
    {"CODEX_EXECUTION_TIMEOUT", "timed_out", 1},
    {"CODEX_COMMAND_TIMEOUT", "timed_out", 1},
    {"CODEX_CAPACITY_UNAVAILABLE", "capacity_unavailable", 75},
    {"CODEX_AGENT_MESSAGE_MISSING", "malformed_output", 76},
    {"CODEX_EXECD_TERMINAL_MISSING", "malformed_output", 76},
    {"CODEX_OUTPUT_INVALID", "malformed_output", 76},
    {"CODEX_OUTPUT_TOO_LARGE", "malformed_output", 76},
    {"CODEX_TURN_TERMINAL_MISSING", "malformed_output", 76},
    /* it ran; whether it finished is unknown (4, WIRE 4.4) */
    {"CODEX_CLEANUP_UNCONFIRMED", "cleanup_failed", 4},
    {"CODEX_COMMAND_FAILED", "terminal_failure", 1},
    {"CODEX_TURN_FAILED", "terminal_failure", 1},
};

/* managed_upstream_<code in lower case>, kept in the outcome. */
static void
fail_upstream(struct nyx_codex_outcome *oc, const char *code, const char *kind,
    int exit_code)
{
	char *p;

	nyx_exec_outcome_failf(&oc->base, kind,
	    "The managed Codex sandbox refused or failed the task.", exit_code,
	    "managed_upstream_%s", code);
	for (p = oc->base.code_buf + 17; *p != '\0'; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
}

static void
classify_managed_error(long status, jv doc, struct nyx_codex_outcome *oc)
{
	char up[96];
	const char *code = nyx_outcome_upstream_code(doc, up, sizeof(up));
	size_t i;

	nyx_outcome_take_diag(&oc->base, doc);
	oc->base.http_status = (int)status;
	if (nyx_outcome_approval_required(&oc->base, status, doc))
		return;
	for (i = 0;
	     code != NULL && i < sizeof(codex_codes) / sizeof(codex_codes[0]);
	     i++) {
		if (strcmp(code, codex_codes[i].code) != 0)
			continue;
		if (strcmp(code, "CODEX_CAPACITY_UNAVAILABLE") == 0 &&
		    status != 429)
			break; /* capacity counts only with 429 */
		fail_upstream(
		    oc, code, codex_codes[i].kind, codex_codes[i].exit);
		if (codex_codes[i].exit == NYX_EXIT_UNCERTAIN)
			maybe_ran(oc);
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
	else if (status == 408 || status == 504) {
		fail(oc, "managed_proxy_timeout", "timed_out",
		    "The managed Codex call timed out.", NYX_EXIT_TEMPFAIL);
		maybe_ran(oc);
	} else if (status == 429)
		fail(oc, "managed_proxy_unavailable", "capacity_unavailable",
		    "The managed Codex sandbox has no capacity now.",
		    NYX_EXIT_TEMPFAIL);
	else if (status == 502 || status == 503) {
		fail(oc, "managed_proxy_unavailable", "terminal_failure",
		    "The managed Codex sandbox is unavailable.",
		    NYX_EXIT_TEMPFAIL);
		maybe_ran(oc);
	} else if (status >= 500) {
		fail(oc, "managed_proxy_failed", "terminal_failure",
		    "The managed Codex call failed.", NYX_EXIT_TEMPFAIL);
		maybe_ran(oc);
	} else
		fail(oc, "managed_proxy_failed", "terminal_failure",
		    "The managed Codex call failed.", NYX_EXIT_PROTOCOL);
}

void
nyx_codex_classify_managed(const struct nyx_http_resp *r, const char *key,
    struct nyx_codex_outcome *oc)
{
	static const struct nyx_no_answer words = {MAYBE, MAYBE_MSG,
	    "managed_response_too_large", "malformed_output",
	    "The managed Codex response exceeded 1 MiB.",
	    "managed_proxy_timeout", "The managed Codex call timed out.",
	    "managed_proxy_unavailable", "terminal_failure",
	    "The managed Codex sandbox could not be reached."};
	jv doc, out, text, ec;

	if (nyx_outcome_no_answer(&oc->base, r, &words))
		return;
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
	nyx_outcome_take_diag(&oc->base, doc);
	if (nyx_json_bool(doc, "success") != 1 ||
	    jv_get_kind(text) != JV_KIND_STRING ||
	    !nyx_json_integral(ec, -2147483648.0, 2147483647.0)) {
		fail(oc, "managed_response_invalid", "malformed_output",
		    "The managed Codex response was malformed.",
		    NYX_EXIT_PROTOCOL);
	} else {
		jv_free(oc->base.output);
		/* the key, and every other token this process loaded */
		oc->base.output = nyx_log_redact_output(jv_string_value(text),
		    (size_t)jv_string_length_bytes(jv_copy(text)), key);
		oc->base.child_exit = (int)jv_number_value(ec);
		if (oc->base.child_exit == 0)
			succeed(oc);
		else
			fail(oc, "managed_execution_nonzero_exit",
			    "terminal_failure",
			    "Managed Codex execution exited unsuccessfully.",
			    NYX_EXIT_NO);
	}
	jv_free(out);
	jv_free(text);
	jv_free(ec);
	jv_free(doc);
}

enum nyx_codex_gate
nyx_codex_classify_gate(
    const struct nyx_http_resp *r, struct nyx_codex_outcome *oc)
{
	jv doc = nyx_json_parse(r->body.data ? r->body.data : "", r->body.len);
	const char *st =
	    r->status == 200 ? nyx_json_peek_str(doc, "status") : NULL;
	enum nyx_codex_gate g = NYX_CODEX_GATE_PENDING;

	if (st != NULL && strcmp(st, "approved") == 0) {
		g = NYX_CODEX_GATE_APPROVED;
	} else if (st != NULL && strcmp(st, "denied") == 0) {
		fail(oc, "NYXID_APPROVAL_DENIED", "approval_required",
		    "A human denied this call in NyxID.", NYX_EXIT_BLOCKED);
		g = NYX_CODEX_GATE_DENIED;
	} else if (r->status != 200 && r->status != 0 && r->status != 429 &&
	    r->status < 500) {
		g = NYX_CODEX_GATE_UNREADABLE; /* keep the blocker */
	}
	jv_free(doc);
	return g;
}

/* ---- private_ssh ---- */

char *
nyx_codex_ssh_arguments(const struct nyx_codex_call *c)
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

char *
nyx_codex_ssh_command(const struct nyx_codex_call *c)
{
	char *b64 = nyx_b64_encode(c->prompt.data, c->prompt.len);
	struct nyx_buf b = NYX_BUF_ZERO;

	b.secret = true;
	if (b64 == NULL || nyx_buf_addstr(&b, NYX_CODEX_SSH_PREFIX) < 0 ||
	    nyx_buf_addstr(&b, b64) < 0 ||
	    nyx_buf_addstr(&b, NYX_CODEX_SSH_SUFFIX) < 0) {
		free(b64);
		nyx_buf_free(&b);
		return NULL;
	}
	free(b64);
	return nyx_buf_take(&b);
}

char *
nyx_codex_ssh_task(const char *cmd, size_t *len)
{
	size_t n = strlen(cmd), pl = sizeof(NYX_CODEX_SSH_PREFIX) - 1,
	       sl = sizeof(NYX_CODEX_SSH_SUFFIX) - 1, bl;
	const char *b;
	char *url, *out;

	if (n < pl + sl || strncmp(cmd, NYX_CODEX_SSH_PREFIX, pl) != 0 ||
	    strcmp(cmd + n - sl, NYX_CODEX_SSH_SUFFIX) != 0)
		return NULL;
	b = cmd + pl;
	bl = n - pl - sl;
	if (bl == 0 || bl > 8000 || bl % 4 != 0 ||
	    strspn(b,
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	        "0123456789+/=") < bl)
		return NULL;
	/* base64 to base64url, unpadded, for the decoder we have */
	url = strndup(b, bl);
	if (url == NULL)
		return NULL;
	for (n = 0; n < bl; n++)
		url[n] = url[n] == '+' ? '-' : url[n] == '/' ? '_' : url[n];
	while (bl > 0 && url[bl - 1] == '=')
		url[--bl] = '\0';
	out = nyx_b64url_decode(url, bl, len);
	free(url);
	if (out != NULL && (*len < 1 || *len > NYX_CODEX_PROMPT_MAX)) {
		free(out);
		out = NULL;
	}
	return out;
}

char *
nyx_codex_ssh_body(const struct nyx_codex_call *c)
{
	char *cmd = nyx_codex_ssh_command(c);
	jv b = jv_object();
	char *body;

	if (cmd == NULL) {
		jv_free(b);
		return NULL;
	}
	b = jv_object_set(b, jv_string("command"), jv_string(cmd));
	b = jv_object_set(b, jv_string("principal"), jv_string(c->principal));
	b = jv_object_set(
	    b, jv_string("timeout_secs"), jv_number(c->timeout_secs));
	body = nyx_json_dump(b);
	nyx_secure_free(&cmd);
	return body;
}

int
nyx_codex_classify_service(const struct nyx_http_resp *r, char *out, size_t n,
    struct nyx_codex_outcome *oc)
{
	jv doc = nyx_json_parse(r->body.data ? r->body.data : "", r->body.len);
	const char *id = nyx_json_peek_str(doc, "catalog_service_id");
	int rc = -1;

	oc->base.http_status = (int)r->status;
	if (r->fail != NYX_HTTP_OK || r->status == 0)
		fail(oc, "ssh_service_unavailable", "transport_unavailable",
		    "NyxID could not be reached to resolve the SSH service.",
		    NYX_EXIT_TEMPFAIL);
	else if (r->status == 401 || r->status == 403)
		fail(oc, "ssh_service_denied", "admission_denied",
		    "NyxID refused to resolve the SSH service.",
		    NYX_EXIT_NOPERM);
	else if (r->status == 404)
		fail(oc, "target_not_configured", "target_not_configured",
		    "No SSH service of yours has that id or slug.",
		    NYX_EXIT_BLOCKED);
	else if (r->status != 200 || id == NULL)
		fail(oc, "ssh_service_invalid", "malformed_output",
		    "NyxID's answer for the SSH service was unusable.",
		    NYX_EXIT_PROTOCOL);
	else {
		snprintf(out, n, "%s", id);
		rc = 0;
	}
	jv_free(doc);
	return rc;
}

void
nyx_codex_classify_ssh(
    const struct nyx_http_resp *r, struct nyx_codex_outcome *oc)
{
	static const struct nyx_no_answer words = {MAYBE, MAYBE_MSG,
	    "ssh_response_too_large", "malformed_output",
	    "The SSH exec response exceeded 1 MiB.", "ssh_timeout",
	    "NyxID did not return an SSH exec response in time.",
	    "ssh_unavailable", "transport_unavailable",
	    "NyxID could not be reached for the SSH exec."};
	jv doc, ec, so, se, to;

	oc->base.http_status = (int)r->status;
	if (nyx_outcome_no_answer(&oc->base, r, &words))
		return;
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
		if (r->status == 408 || r->status >= 500)
			maybe_ran(oc);
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
		jv_free(oc->base.output);
		jv_free(oc->stderr_text);
		oc->base.output = nyx_log_redact_output(jv_string_value(so),
		    (size_t)jv_string_length_bytes(jv_copy(so)), NULL);
		oc->stderr_text = nyx_log_redact_output(jv_string_value(se),
		    (size_t)jv_string_length_bytes(jv_copy(se)), NULL);
		oc->base.child_exit = (int)jv_number_value(ec);
		if (jv_get_kind(to) == JV_KIND_TRUE)
			/* it ran and hit its limit: a definitive failure */
			fail(oc, "codex_exec_timed_out", "timed_out",
			    "Codex on the host did not finish in time.",
			    NYX_EXIT_NO);
		else if (oc->base.child_exit != 0)
			fail(oc, "codex_exec_nonzero_exit", "terminal_failure",
			    "Codex on the host exited unsuccessfully.",
			    NYX_EXIT_NO);
		else
			succeed(oc);
	}
	jv_free(doc);
	jv_free(ec);
	jv_free(so);
	jv_free(se);
	jv_free(to);
}

/* ---- records and exchanges ---- */

jv
nyx_codex_result_record(const struct nyx_codex_call *c,
    const struct nyx_codex_outcome *oc, const char *diag)
{
	const struct nyx_exec_outcome *b = &oc->base;
	jv r = jv_object();
	char ms[24];

	r = jv_object_set(r, jv_string("v"), jv_number(1));
	r = jv_object_set(r, jv_string("type"), jv_string("codex.result"));
	r = jv_object_set(r, jv_string("target"),
	    jv_string(c->ssh ? "private_ssh" : "managed_sandbox"));
	r = jv_object_set(r, jv_string("status"),
	    jv_string(b->success ? "succeeded" : "failed"));
	if (jv_is_valid(b->output))
		r = jv_object_set(r, jv_string("output"), jv_copy(b->output));
	if (jv_is_valid(oc->stderr_text))
		r = jv_object_set(
		    r, jv_string("stderr"), jv_copy(oc->stderr_text));
	if (b->child_exit >= 0)
		r = jv_object_set(
		    r, jv_string("exit_code"), jv_number(b->child_exit));
	snprintf(ms, sizeof(ms), "%ld", oc->elapsed_ms);
	r = jv_object_set(r, jv_string("elapsed_ms"), jv_string(ms));
	if (!b->success) {
		jv e = jv_object();

		e = jv_object_set(e, jv_string("code"), jv_string(b->code));
		e = jv_object_set(e, jv_string("kind"), jv_string(b->kind));
		e = jv_object_set(
		    e, jv_string("message"), jv_string(b->message));
		if (b->approval_request_id[0])
			e = jv_object_set(e, jv_string("request_id"),
			    jv_string(b->approval_request_id));
		if (b->approve_url[0])
			e = jv_object_set(e, jv_string("approve_url"),
			    jv_string(b->approve_url));
		if (b->cause != NULL)
			e = jv_object_set(
			    e, jv_string("cause"), jv_string(b->cause));
		r = jv_object_set(r, jv_string("error"), e);
		r = jv_object_set(r, jv_string("exit"), jv_number(b->exit));
		if (b->http_status != 0)
			r = jv_object_set(r, jv_string("http_status"),
			    jv_number(b->http_status));
	}
	r = jv_object_set(r, jv_string("diagnostic_id"), jv_string(diag));
	if (b->upstream_diag[0])
		r = jv_object_set(r, jv_string("upstream_diagnostic_id"),
		    jv_string(b->upstream_diag));
	return r;
}

/*
 * Poll NyxID's approval status (each exchange within the usual bound)
 * until a human decided: 1 approved, 0 denied or still pending when the
 * wait ran out (oc says which), -1 on a failed poll (oc kept).
 */
int
nyx_codex_wait_gate(struct nyx_http *http, const char *base_url,
    const char *token, long max_wait_ms, long poll_ms,
    struct nyx_codex_outcome *oc, void (*progress)(int64_t, const char *))
{
	struct nyx_buf auth = NYX_BUF_ZERO, url = NYX_BUF_ZERO;
	const char *hdrs[2];
	const char *rid = oc->base.approval_request_id;
	char *esc = nyx_http_escape(rid);
	int64_t t0 = nyx_mono_ms(), until = t0 + max_wait_ms;
	int rc = -1;

	auth.secret = true;
	if (esc == NULL ||
	    nyx_buf_printf(&auth, "Authorization: Bearer %s", token) < 0 ||
	    nyx_buf_printf(&url, "%s/api/v1/approvals/requests/%s/status",
	        base_url, esc) < 0)
		goto out;
	hdrs[0] = auth.data;
	hdrs[1] = NULL;
	nyx_log_line("waiting for a human approval of %s%s%s", rid,
	    oc->base.approve_url[0] ? " at " : "", oc->base.approve_url);
	while (nyx_mono_ms() < until && rc < 0) {
		struct nyx_http_req req;
		struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;
		enum nyx_codex_gate g;

		memset(&req, 0, sizeof(req));
		req.url = url.data;
		req.headers = hdrs;
		req.timeout_ms = NYX_HTTP_EXCHANGE_MS;
		nyx_http_do(http, &req, &r);
		g = nyx_codex_classify_gate(&r, oc);
		nyx_http_resp_free(&r);
		if (g == NYX_CODEX_GATE_UNREADABLE)
			goto out; /* the blocker stands */
		if (g == NYX_CODEX_GATE_APPROVED)
			rc = 1;
		else if (g == NYX_CODEX_GATE_DENIED)
			rc = 0;
		else {
			if (progress != NULL)
				progress(nyx_mono_ms() - t0, rid);
			nyx_sleep_ms(poll_ms);
		}
	}
	if (rc < 0)
		rc = 0; /* still pending: the blocker stands */
out:
	free(esc);
	nyx_buf_free(&auth);
	nyx_buf_free(&url);
	return rc;
}

/* An authenticated JSON exchange: a POST goes on a fresh connection. */
static void
exchange(struct nyx_http *http, const char *method, const char *auth_hdr,
    const char *url, const char *body, long timeout_ms,
    struct nyx_http_resp *resp)
{
	struct nyx_http_req req;
	const char *hdrs[3] = {auth_hdr, NULL, NULL};

	if (body != NULL)
		hdrs[1] = "Content-Type: application/json";
	memset(&req, 0, sizeof(req));
	req.method = method;
	req.url = url;
	req.headers = hdrs;
	req.body = body;
	req.body_len = body ? strlen(body) : 0;
	req.timeout_ms = timeout_ms;
	req.fresh_connect = body != NULL; /* never silently resent */
	nyx_http_do(http, &req, resp);
}

static void
fail_oom(struct nyx_codex_outcome *oc)
{
	fail(oc, "oom", "transport_unavailable", "Out of memory.",
	    NYX_EXIT_OSERR);
}

void
nyx_codex_send_managed(struct nyx_http *http, const char *url, const char *key,
    bool bearer, const struct nyx_codex_call *c, struct nyx_codex_outcome *oc)
{
	struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;
	struct nyx_buf auth = NYX_BUF_ZERO;
	char *body = nyx_codex_managed_body(c);

	auth.secret = true;
	if (body == NULL ||
	    nyx_buf_printf(&auth,
	        bearer ? "Authorization: Bearer %s" : "X-API-Key: %s",
	        key) < 0) {
		fail_oom(oc);
	} else {
		exchange(http, "POST", auth.data, url, body,
		    (c->timeout_secs + NYX_CODEX_MANAGED_GRACE_S) * 1000L, &r);
		oc->elapsed_ms = r.elapsed_ms;
		nyx_codex_classify_managed(&r, key, oc);
		nyx_log(NYX_LOG_DEBUG,
		    "POST /codex/execute: status %ld, %zu bytes", r.status,
		    r.body.len);
	}
	nyx_http_resp_free(&r);
	nyx_buf_free(&auth);
	nyx_secure_free(&body);
}

int
nyx_codex_resolve_service(struct nyx_http *http, const char *base_url,
    const char *token, long timeout_ms, const struct nyx_codex_call *c,
    char *catalog, size_t n, struct nyx_codex_outcome *oc)
{
	struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;
	struct nyx_buf auth = NYX_BUF_ZERO, url = NYX_BUF_ZERO;
	char *esc = nyx_http_escape(c->service);
	int rc = -1;

	auth.secret = true;
	if (esc == NULL ||
	    nyx_buf_printf(&auth, "Authorization: Bearer %s", token) < 0 ||
	    nyx_buf_printf(&url, "%s/api/v1/keys/%s", base_url, esc) < 0) {
		fail_oom(oc);
	} else {
		exchange(http, NULL, auth.data, url.data, NULL, timeout_ms, &r);
		rc = nyx_codex_classify_service(&r, catalog, n, oc);
	}
	nyx_http_resp_free(&r);
	nyx_buf_free(&auth);
	nyx_buf_free(&url);
	free(esc);
	return rc;
}

void
nyx_codex_send_ssh(struct nyx_http *http, const char *base_url,
    const char *token, const char *catalog, const struct nyx_codex_call *c,
    struct nyx_codex_outcome *oc)
{
	struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;
	struct nyx_buf auth = NYX_BUF_ZERO, url = NYX_BUF_ZERO;
	char *esc = nyx_http_escape(catalog), *body = nyx_codex_ssh_body(c);

	auth.secret = true;
	if (esc == NULL || body == NULL ||
	    nyx_buf_printf(&auth, "Authorization: Bearer %s", token) < 0 ||
	    nyx_buf_printf(&url, "%s/api/v1/ssh/%s/exec", base_url, esc) < 0) {
		fail_oom(oc);
	} else {
		exchange(http, "POST", auth.data, url.data, body,
		    (c->timeout_secs + NYX_CODEX_SSH_GRACE_S) * 1000L, &r);
		oc->elapsed_ms = r.elapsed_ms;
		nyx_codex_classify_ssh(&r, oc);
	}
	nyx_http_resp_free(&r);
	nyx_buf_free(&auth);
	nyx_buf_free(&url);
	free(esc);
	nyx_secure_free(&body);
}
