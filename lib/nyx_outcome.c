#include "nyx_outcome.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nyx_err.h"
#include "nyx_json.h"
#include "nyx_log.h"

void
nyx_exec_outcome_init(struct nyx_exec_outcome *o)
{
	memset(o, 0, sizeof(*o));
	o->output = jv_invalid();
	o->child_exit = -1;
}

void
nyx_exec_outcome_free(struct nyx_exec_outcome *o)
{
	jv_free(o->output);
	o->output = jv_invalid();
}

void
nyx_exec_outcome_fail(struct nyx_exec_outcome *o, const char *code,
    const char *kind, const char *message, int exit_code)
{
	o->success = false;
	o->code = code;
	o->kind = kind;
	o->message = message;
	o->exit = exit_code;
}

void
nyx_exec_outcome_failf(struct nyx_exec_outcome *o, const char *kind,
    const char *message, int exit_code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(o->code_buf, sizeof(o->code_buf), fmt, ap);
	va_end(ap);
	nyx_exec_outcome_fail(o, o->code_buf, kind, message, exit_code);
}

/* A string field of the output with the loaded tokens redacted. */
static jv
redacted(jv output, const char *key)
{
	jv v = nyx_json_get(output, key);

	if (jv_get_kind(v) == JV_KIND_STRING) {
		jv r = nyx_log_redact_output(jv_string_value(v),
		    (size_t)jv_string_length_bytes(jv_copy(v)), NULL);

		jv_free(v);
		return jv_object_set(output, jv_string(key), r);
	}
	jv_free(v);
	return output;
}

void
nyx_exec_outcome_completed(struct nyx_exec_outcome *o, jv output, int exit_code)
{
	jv_free(o->output);
	/* a program that prints a token never gets it stored or printed */
	if (jv_get_kind(output) == JV_KIND_OBJECT)
		output = redacted(redacted(output, "stdout"), "stderr");
	o->output = output;
	o->child_exit = exit_code;
	if (exit_code == 0) {
		o->success = true;
		o->exit = NYX_EXIT_OK;
		o->code = o->kind = o->message = NULL;
	} else {
		nyx_exec_outcome_fail(o, "EXECUTION_FAILED", "execution_failed",
		    "Code execution exited unsuccessfully.", NYX_EXIT_NO);
	}
}

void
nyx_exec_outcome_maybe_ran(
    struct nyx_exec_outcome *o, const char *uncertain_code, const char *message)
{
	o->cause = o->code;
	nyx_exec_outcome_fail(o, uncertain_code, "outcome_uncertain", message,
	    NYX_EXIT_UNCERTAIN);
}

bool
nyx_outcome_no_answer(struct nyx_exec_outcome *o, const struct nyx_http_resp *r,
    const struct nyx_no_answer *w)
{
	switch (r->fail) {
	case NYX_HTTP_TOO_LARGE:
		nyx_exec_outcome_fail(o, w->too_large_code, w->too_large_kind,
		    w->too_large_message, NYX_EXIT_PROTOCOL);
		return true;
	case NYX_HTTP_TIMEOUT:
		nyx_exec_outcome_fail(o, w->timeout_code, "timed_out",
		    w->timeout_message, NYX_EXIT_TEMPFAIL);
		break;
	case NYX_HTTP_TRANSPORT:
		nyx_exec_outcome_fail(o, w->unreachable_code,
		    w->unreachable_kind, w->unreachable_message,
		    NYX_EXIT_TEMPFAIL);
		break;
	default:
		if (r->status != 0)
			return false;
		nyx_exec_outcome_fail(o, w->unreachable_code,
		    w->unreachable_kind, w->unreachable_message,
		    NYX_EXIT_TEMPFAIL);
		break;
	}
	o->http_status = 0;
	if (r->sent) /* it left: the program may have run */
		nyx_exec_outcome_maybe_ran(
		    o, w->uncertain_code, w->uncertain_message);
	return true;
}

bool
nyx_id_safe(const char *s)
{
	size_t n;

	if (s == NULL)
		return false;
	n = strlen(s);
	if (n < 1 || n > 128)
		return false;
	return strspn(s,
	           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	           "0123456789_.:-") == n;
}

void
nyx_outcome_take_diag(struct nyx_exec_outcome *o, jv doc)
{
	const char *cands[3];
	jv e = nyx_json_get(doc, "error"), b = nyx_json_get(doc, "body");
	size_t i;

	cands[0] = nyx_json_peek_str(doc, "diagnostic_id");
	cands[1] = nyx_json_peek_str(e, "diagnostic_id");
	cands[2] = nyx_json_peek_str(b, "diagnostic_id");
	for (i = 0; i < 3; i++)
		if (nyx_id_safe(cands[i])) {
			snprintf(o->upstream_diag, sizeof(o->upstream_diag),
			    "%s", cands[i]);
			break;
		}
	jv_free(e);
	jv_free(b);
}

const char *
nyx_outcome_upstream_code(jv doc, char *buf, size_t n)
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
	return c != NULL ? buf : NULL;
}

bool
nyx_outcome_approval_required(struct nyx_exec_outcome *o, long status, jv doc)
{
	const char *what = nyx_json_peek_str(doc, "error");
	const char *rid, *url;

	if (status != 403 || what == NULL ||
	    strcmp(what, "approval_required") != 0)
		return false;
	rid = nyx_json_peek_str(doc, "request_id");
	url = nyx_json_peek_str(doc, "approve_url");
	nyx_exec_outcome_fail(o, "NYXID_APPROVAL_REQUIRED", "approval_required",
	    "NyxID requires a human approval for this call.", NYX_EXIT_BLOCKED);
	if (nyx_id_safe(rid))
		snprintf(o->approval_request_id, sizeof(o->approval_request_id),
		    "%s", rid);
	if (url != NULL && strlen(url) < sizeof(o->approve_url) &&
	    (strncmp(url, "https://", 8) == 0 ||
	        strncmp(url, "http://", 7) == 0) &&
	    strpbrk(url, " \"<>\\") == NULL)
		snprintf(o->approve_url, sizeof(o->approve_url), "%s", url);
	return true;
}
