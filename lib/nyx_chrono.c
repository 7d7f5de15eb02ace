#include "nyx_chrono.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_err.h"
#include "nyx_json.h"

char *
nyx_chrono_url(
    const char *base, const char *slug, const char *id, const char *path)
{
	char *es = nyx_http_escape(slug), *ei = nyx_http_escape(id),
	     *url = NULL;
	size_t n;

	if (es != NULL && ei != NULL) {
		n = strlen(base) + strlen(es) + strlen(ei) + strlen(path) + 64;
		url = malloc(n);
		if (url != NULL)
			snprintf(url, n,
			    "%s/api/v1/proxy/s/%s/%s?_nyxid_via=%s", base, es,
			    path, ei);
	}
	free(es);
	free(ei);
	return url;
}

char *
nyx_chrono_execute_body(const char *language, const char *script,
    size_t script_len, int timeout_secs)
{
	jv o = jv_object();

	/* sorted output keeps the contract's order: language, script,
	 * timeout_secs */
	o = jv_object_set(o, jv_string("language"), jv_string(language));
	o = jv_object_set(
	    o, jv_string("script"), jv_string_sized(script, (int)script_len));
	o = jv_object_set(
	    o, jv_string("timeout_secs"), jv_number(timeout_secs));
	return nyx_json_dump(o);
}

/* WIRE 4.4: /execute is not replayable; what may have run says so. */
#define MAYBE "code_execution_outcome_uncertain"
#define MAYBE_MSG                                                              \
	"The program may have run; rerunning it could run it twice. Use "      \
	"durable mode (code-exec without --sync) to run it exactly once."

static void
fail(struct nyx_exec_outcome *o, const char *code, const char *kind,
    const char *message, int exit_code)
{
	nyx_exec_outcome_fail(o, code, kind, message, exit_code);
}

/* WIRE.md 4.3: a 2xx answer must have exactly this shape. */
void
nyx_chrono_classify_output(jv doc, struct nyx_exec_outcome *o)
{
	jv out = nyx_json_get(doc, "output"), err = nyx_json_get(doc, "error");
	jv so = nyx_json_get(out, "stdout"), se = nyx_json_get(out, "stderr");
	jv ec = nyx_json_get(out, "exit_code");
	jv et = nyx_json_get(out, "execution_time_ms");
	int success = nyx_json_bool(doc, "success");
	bool has_err = jv_get_kind(err) != JV_KIND_INVALID &&
	    jv_get_kind(err) != JV_KIND_NULL;
	bool ok = jv_get_kind(doc) == JV_KIND_OBJECT && success >= 0 &&
	    jv_get_kind(out) == JV_KIND_OBJECT &&
	    jv_get_kind(so) == JV_KIND_STRING &&
	    jv_get_kind(se) == JV_KIND_STRING &&
	    nyx_json_integral(ec, -2147483648.0, 2147483647.0) &&
	    (jv_get_kind(et) == JV_KIND_INVALID ||
	        jv_get_kind(et) == JV_KIND_NULL ||
	        nyx_json_integral(et, 0, 9007199254740991.0));

	if (ok && success == 1)
		ok = jv_number_value(ec) == 0 && !has_err;
	else if (ok)
		ok = jv_number_value(ec) != 0 &&
		    jv_get_kind(err) == JV_KIND_OBJECT;
	if (!ok) {
		fail(o, "code_execution_response_invalid", "malformed_output",
		    "The code execution response was malformed.",
		    NYX_EXIT_PROTOCOL);
	} else {
		jv norm = jv_object();
		const char *code = nyx_json_peek_str(err, "code"), *lim;
		int b;

		norm = jv_object_set(norm, jv_string("stdout"), jv_copy(so));
		norm = jv_object_set(norm, jv_string("stderr"), jv_copy(se));
		norm = jv_object_set(norm, jv_string("exit_code"), jv_copy(ec));
		if (jv_get_kind(et) == JV_KIND_NUMBER)
			norm = jv_object_set(
			    norm, jv_string("execution_time_ms"), jv_copy(et));
		if ((lim = nyx_json_peek_str(out, "limits")) != NULL &&
		    (strcmp(lim, "cgroup") == 0 || strcmp(lim, "rlimit") == 0))
			norm = jv_object_set(
			    norm, jv_string("limits"), jv_string(lim));
		b = nyx_json_bool(out, "stdout_truncated");
		norm = jv_object_set(
		    norm, jv_string("stdout_truncated"), jv_bool(b == 1));
		b = nyx_json_bool(out, "stderr_truncated");
		norm = jv_object_set(
		    norm, jv_string("stderr_truncated"), jv_bool(b == 1));
		nyx_exec_outcome_completed(o, norm, (int)jv_number_value(ec));
		/* a completed failure keeps its output; the message is ours */
		if (success == 0 && code != NULL &&
		    strcmp(code, "DEPENDENCY_INSTALL_FAILED") == 0) {
			o->code = "DEPENDENCY_INSTALL_FAILED";
			o->message =
			    "Code execution dependency preparation failed.";
		} else if (success == 0 &&
		    (code == NULL || strcmp(code, "EXECUTION_FAILED") != 0)) {
			o->code = "code_execution_failed";
			o->message = "Code execution failed.";
		}
	}
	nyx_outcome_take_diag(o, doc);
	jv_free(out);
	jv_free(err);
	jv_free(so);
	jv_free(se);
	jv_free(ec);
	jv_free(et);
}

static void
classify_error(long status, jv doc, struct nyx_exec_outcome *o)
{
	static const struct {
		const char *code, *kind, *message;
		int exit;
	} known[] = {
	    {"UNAUTHENTICATED", "admission_denied",
	        "The code execution credential was rejected upstream.",
	        NYX_EXIT_NOPERM},
	    {"FORBIDDEN", "admission_denied",
	        "Code execution was denied upstream.", NYX_EXIT_NOPERM},
	    {"INVALID_REQUEST", "admission_denied",
	        "The code execution request was rejected upstream.",
	        NYX_EXIT_PROTOCOL},
	    /* it ran and hit its limit: rerunning would run it again */
	    {"SANDBOX_TIMEOUT", "timed_out",
	        "Code execution ran out of time upstream.", NYX_EXIT_NO},
	    /* it did not start: safe to rerun */
	    {"SANDBOX_CREATION_FAILED", "transport_unavailable",
	        "The code execution sandbox is unavailable upstream.",
	        NYX_EXIT_TEMPFAIL},
	    /* it may have run (exit 4 below) */
	    {"SANDBOX_UNREACHABLE", "transport_unavailable",
	        "The code execution sandbox is unavailable upstream.",
	        NYX_EXIT_UNCERTAIN},
	    {"INTERNAL_ERROR", "transport_unavailable",
	        "Code execution failed upstream.", NYX_EXIT_UNCERTAIN},
	};
	char buf[96];
	const char *code = nyx_outcome_upstream_code(doc, buf, sizeof(buf));
	size_t i;

	nyx_outcome_take_diag(o, doc);
	/* NyxID's human approval gate is a typed blocker */
	if (nyx_outcome_approval_required(o, status, doc))
		return;
	for (i = 0; code != NULL && i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(code, known[i].code) == 0) {
			fail(o, known[i].code, known[i].kind, known[i].message,
			    known[i].exit);
			if (known[i].exit == NYX_EXIT_UNCERTAIN)
				nyx_exec_outcome_maybe_ran(o, MAYBE, MAYBE_MSG);
			return;
		}
	if (status == 401)
		fail(o, "NYXID_PROXY_UNAUTHORIZED", "admission_denied",
		    "NyxID rejected the execution credential.",
		    NYX_EXIT_NOPERM);
	else if (status == 403)
		fail(o, "NYXID_PROXY_FORBIDDEN", "admission_denied",
		    "NyxID denied the execution call.", NYX_EXIT_NOPERM);
	else if (status == 404)
		fail(o, "NYXID_PROXY_HTTP_404", "target_not_configured",
		    "The code execution route was not found.",
		    NYX_EXIT_PROTOCOL);
	else if (status == 408 || status == 504) {
		fail(o, "code_execution_timed_out", "timed_out",
		    "Code execution timed out.", NYX_EXIT_TEMPFAIL);
		nyx_exec_outcome_maybe_ran(o, MAYBE, MAYBE_MSG);
	} else {
		nyx_exec_outcome_failf(o, "transport_unavailable",
		    "The code execution call failed.",
		    (status == 429 || status >= 500) ? NYX_EXIT_TEMPFAIL
		                                     : NYX_EXIT_PROTOCOL,
		    "NYXID_PROXY_HTTP_%ld", status);
		/* a 429 refused it; any other 5xx may come after it ran */
		if (status >= 500)
			nyx_exec_outcome_maybe_ran(o, MAYBE, MAYBE_MSG);
	}
}

void
nyx_chrono_classify_sync(
    const struct nyx_http_resp *resp, struct nyx_exec_outcome *o)
{
	jv doc;

	static const struct nyx_no_answer words = {MAYBE, MAYBE_MSG,
	    "code_execution_response_too_large", "response_too_large",
	    "The code execution response exceeded 1 MiB.",
	    "code_execution_timed_out", "Code execution timed out.",
	    "code_execution_transport_unavailable", "transport_unavailable",
	    "The code execution service could not be reached."};

	o->http_status = (int)resp->status;
	if (nyx_outcome_no_answer(o, resp, &words))
		return;
	doc = nyx_json_parse(
	    resp->body.data ? resp->body.data : "", resp->body.len);
	if (resp->status >= 200 && resp->status <= 299)
		nyx_chrono_classify_output(doc, o);
	else
		classify_error(resp->status, doc, o);
	jv_free(doc);
}

jv
nyx_exec_result_record(const struct nyx_exec_outcome *o, const char *backend,
    const char *mode, const char *diag)
{
	jv r = jv_object();

	r = jv_object_set(r, jv_string("v"), jv_number(1));
	r = jv_object_set(r, jv_string("type"), jv_string("exec.result"));
	r = jv_object_set(r, jv_string("backend"), jv_string(backend));
	r = jv_object_set(r, jv_string("mode"), jv_string(mode));
	r = jv_object_set(r, jv_string("success"), jv_bool(o->success));
	if (o->request_id != NULL)
		r = jv_object_set(
		    r, jv_string("request_id"), jv_string(o->request_id));
	if (o->started_ms > 0 && o->finished_ms >= o->started_ms) {
		char ms[24];

		snprintf(ms, sizeof(ms), "%lld",
		    (long long)(o->finished_ms - o->started_ms));
		r = jv_object_set(
		    r, jv_string("started_at"), nyx_json_time(o->started_ms));
		r = jv_object_set(
		    r, jv_string("finished_at"), nyx_json_time(o->finished_ms));
		r = jv_object_set(r, jv_string("elapsed_ms"), jv_string(ms));
	}
	if (jv_get_kind(o->output) == JV_KIND_OBJECT)
		r = jv_object_set(r, jv_string("output"), jv_copy(o->output));
	if (!o->success && o->code != NULL) {
		jv e = jv_object();

		e = jv_object_set(e, jv_string("code"), jv_string(o->code));
		e = jv_object_set(e, jv_string("kind"), jv_string(o->kind));
		e = jv_object_set(
		    e, jv_string("message"), jv_string(o->message));
		if (o->approval_request_id[0])
			e = jv_object_set(e, jv_string("request_id"),
			    jv_string(o->approval_request_id));
		if (o->approve_url[0])
			e = jv_object_set(e, jv_string("approve_url"),
			    jv_string(o->approve_url));
		if (o->provider_phase[0])
			e = jv_object_set(e, jv_string("provider_phase"),
			    jv_string(o->provider_phase));
		if (o->cause != NULL)
			e = jv_object_set(
			    e, jv_string("cause"), jv_string(o->cause));
		r = jv_object_set(r, jv_string("error"), e);
		r = jv_object_set(r, jv_string("exit"), jv_number(o->exit));
	}
	if (o->http_status != 0 && !o->success)
		r = jv_object_set(
		    r, jv_string("http_status"), jv_number(o->http_status));
	r = jv_object_set(r, jv_string("diagnostic_id"), jv_string(diag));
	if (o->upstream_diag[0])
		r = jv_object_set(r, jv_string("upstream_diagnostic_id"),
		    jv_string(o->upstream_diag));
	return r;
}
