#include "chronod.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_buf.h"
#include "nyx_cred.h"
#include "nyx_err.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_ledger.h"
#include "chronod_int.h"
#include "store.h"
#include "nyx_log.h"
#include "nyx_sandbox.h"
#include "nyx_time.h"

#define DELEGATION_TTL_S 300

static char *
b64url(const char *s)
{
	char *b = nyx_b64_encode(s, strlen(s)), *p;

	if (b == NULL)
		return NULL;
	for (p = b; *p; p++)
		if (*p == '+')
			*p = '-';
		else if (*p == '/')
			*p = '_';
	if ((p = strchr(b, '=')) != NULL)
		*p = '\0';
	return b;
}

char *
nyx_chronod_mint(
    const char *user, const char *slug, const char *scope, int64_t now_ms)
{
	jv claims = jv_object(), act = jv_object();
	char *payload, *h = b64url("{\"alg\":\"none\",\"typ\":\"JWT\"}"), *p,
	               *out = NULL;
	size_t n;

	act = jv_object_set(act, jv_string("sub"), jv_string(slug));
	claims = jv_object_set(claims, jv_string("sub"), jv_string(user));
	claims = jv_object_set(claims, jv_string("delegated"), jv_true());
	claims = jv_object_set(claims, jv_string("act"), act);
	claims = jv_object_set(claims, jv_string("scope"), jv_string(scope));
	claims = jv_object_set(
	    claims, jv_string("iat"), jv_number((double)(now_ms / 1000)));
	claims = jv_object_set(claims, jv_string("exp"),
	    jv_number((double)(now_ms / 1000 + DELEGATION_TTL_S)));
	payload = nyx_json_dump(claims);
	p = payload ? b64url(payload) : NULL;
	if (h != NULL && p != NULL) {
		n = strlen(h) + strlen(p) + 16;
		out = malloc(n);
		if (out != NULL)
			snprintf(out, n, "%s.%s.unsigned", h, p);
	}
	free(payload);
	free(h);
	free(p);
	return out;
}

void
chronod_answer(struct nyx_chronod_resp *rs, int status, jv body)
{
	rs->status = status;
	rs->body = nyx_json_dump(body);
}

jv
chronod_diag(void)
{
	char hex[33], id[48];

	if (nyx_random_hex(hex, 16) < 0)
		snprintf(hex, sizeof(hex), "0");
	snprintf(id, sizeof(id), "chrono-%s", hex);
	return jv_string(id);
}

void
chronod_error(struct nyx_chronod_resp *rs, int status, const char *code,
    const char *message)
{
	jv e = jv_object(), o = jv_object();

	e = jv_object_set(e, jv_string("code"), jv_string(code));
	e = jv_object_set(e, jv_string("message"), jv_string(message));
	o = jv_object_set(o, jv_string("error"), e);
	o = jv_object_set(o, jv_string("diagnostic_id"), chronod_diag());
	chronod_answer(rs, status, o);
	snprintf(rs->summary, sizeof(rs->summary), "%s", code);
}

/*
 * 0 when the delegation token grants `scope` (its user into owner, when
 * given), else the answer is set.
 */
int
chronod_check_delegation(const struct nyx_chronod_req *rq, const char *scope,
    char *owner, size_t ownersz, struct nyx_chronod_resp *rs)
{
	jv c = nyx_jwt_payload(rq->delegation), exp, act;
	int rc = -1;

	exp = nyx_json_get(c, "exp");
	act = nyx_json_get(c, "act");
	if (!jv_is_valid(c) || nyx_json_bool(c, "delegated") != 1 ||
	    nyx_json_peek_str(act, "sub") == NULL ||
	    jv_get_kind(exp) != JV_KIND_NUMBER ||
	    jv_number_value(exp) * 1000 < (double)nyx_now_ms())
		chronod_error(rs, 401, "UNAUTHENTICATED",
		    "A valid NyxID delegation token is required.");
	else if (!nyx_scope_has(nyx_json_peek_str(c, "scope"), scope))
		chronod_error(rs, 403, "FORBIDDEN",
		    "The delegation token does not grant this operation.");
	else
		rc = 0;
	if (rc == 0 && owner != NULL)
		snprintf(owner, ownersz, "%s",
		    nyx_json_peek_str(c, "sub") ? nyx_json_peek_str(c, "sub")
		                                : "");
	jv_free(exp);
	jv_free(act);
	jv_free(c);
	return rc;
}

/*
 * Chrono's request body {"language","script","timeout_secs"?} and nothing
 * else: the parsed object with *timeout set, or invalid (answer
 * INVALID_REQUEST).  "env", "files" or any other field is refused, so
 * nothing a caller names can reach the sandbox's host side (WIRE 4.2, 6).
 */
jv
chronod_parse_request(const struct nyx_chronod_req *rq, int *timeout)
{
	static const char *const fields[] = {
	    "language", "script", "timeout_secs", NULL};
	jv body = nyx_json_parse(rq->body ? rq->body : "", rq->body_len);
	jv tmo = nyx_json_get(body, "timeout_secs");
	const char *lang = nyx_json_peek_str(body, "language");
	bool absent = jv_get_kind(tmo) == JV_KIND_INVALID;
	bool ok = nyx_json_keys_within(body, fields) && lang != NULL &&
	    nyx_sandbox_language_known(lang) &&
	    nyx_json_kind(body, "script") == JV_KIND_STRING &&
	    (absent || nyx_json_integral(tmo, 1, 600));

	if (ok)
		*timeout = absent ? 180 : (int)jv_number_value(tmo);
	jv_free(tmo);
	if (!ok) {
		jv_free(body);
		return jv_invalid();
	}
	return body;
}

static void
execute(const struct nyx_chronod_req *rq, struct nyx_chronod_resp *rs)
{
	struct nyx_sandbox_req sr;
	struct nyx_sandbox_result res;
	struct nyx_err err = NYX_ERR_ZERO;
	struct nyx_cred cred;
	jv body, lang, script, out, o;
	int timeout = 180;

	if (chronod_check_delegation(rq, "sandbox:execute", NULL, 0, rs) < 0)
		return;
	body = chronod_parse_request(rq, &timeout);
	if (!jv_is_valid(body)) {
		chronod_error(rs, 400, "INVALID_REQUEST",
		    "The execution request is invalid.");
		jv_free(body);
		return;
	}
	lang = nyx_json_get(body, "language");
	script = nyx_json_get(body, "script");
	memset(&sr, 0, sizeof(sr));
	sr.language = jv_string_value(lang);
	sr.source = jv_string_value(script);
	sr.source_len = (size_t)jv_string_length_bytes(jv_copy(script));
	sr.timeout_secs = timeout;
	/* only a forwarded Agent Key is the program's NyxID credential */
	nyx_cred_classify(rq->authorization, &cred);
	if (rq->authorization != NULL && cred.kind == NYX_CRED_AGENT_KEY) {
		sr.nyxid_api_key = rq->authorization;
		sr.nyxid_base_url = rq->base_url;
	}
	if (nyx_sandbox_run(&sr, &res, &err) < 0) {
		if (strcmp(err.code, "LANGUAGE_UNAVAILABLE") == 0)
			chronod_error(rs, 400, "INVALID_REQUEST",
			    "The language is not available in this sandbox.");
		else
			chronod_error(rs, 503, "SANDBOX_CREATION_FAILED",
			    "The sandbox could not be created.");
		goto out;
	}
	if (res.timed_out) {
		chronod_error(
		    rs, 504, "SANDBOX_TIMEOUT", "The execution timed out.");
		nyx_sandbox_result_free(&res);
		goto out;
	}
	out = nyx_sandbox_output(&res);
	o = jv_object();
	o = jv_object_set(o, jv_string("success"), jv_bool(res.exit_code == 0));
	o = jv_object_set(o, jv_string("output"), out);
	if (res.exit_code != 0) {
		jv e = jv_object();
		char m[64];

		snprintf(
		    m, sizeof(m), "Process exited with code %d", res.exit_code);
		e = jv_object_set(
		    e, jv_string("code"), jv_string("EXECUTION_FAILED"));
		e = jv_object_set(e, jv_string("message"), jv_string(m));
		o = jv_object_set(o, jv_string("error"), e);
	}
	o = jv_object_set(o, jv_string("diagnostic_id"), chronod_diag());
	snprintf(rs->summary, sizeof(rs->summary), "exit %d", res.exit_code);
	nyx_sandbox_result_free(&res);
	chronod_answer(rs, 200, o);
out:
	jv_free(body);
	jv_free(lang);
	jv_free(script);
}

/*
 * The built-in Codex runner: deterministic, for tests.  It reads the task
 * on stdin and reports on it; a task starting with "fail" fails (exit 1)
 * and one starting with "sleep N" sleeps first.
 */
static const char builtin_runner[] =
    "{ p=$(cat); n=$(printf %s \"$p\" | wc -c);"
    " case $p in \"sleep \"*) s=${p#sleep }; sleep \"${s%%[!0-9]*}\";; esac;"
    " case $p in fail*) echo 'codex: the task failed' >&2; exit 1;; esac;"
    " printf 'codex: done (%s bytes): %s\\n' \"$n\""
    " \"$(printf '%s\\n' \"$p\" | head -n 1)\"; }";

struct nyx_chronod *
nyx_chronod_new(const char *store_path, long retention_s, struct nyx_err *err)
{
	struct nyx_chronod *cd = calloc(1, sizeof(*cd));

	if (cd == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		return NULL;
	}
	pthread_mutex_init(&cd->mu, NULL);
	pthread_cond_init(&cd->idle, NULL);
	cd->retention_s = retention_s > 0 ? retention_s : 86400;
	if (store_path != NULL &&
	    (nyx_store_open(store_path, &cd->store, err) < 0 ||
	        chronod_recover(cd, err) < 0)) {
		nyx_chronod_free(cd);
		return NULL;
	}
	return cd;
}

void
nyx_chronod_free(struct nyx_chronod *cd)
{
	struct exec *e, *next;
	struct timespec until;

	if (cd == NULL)
		return;
	pthread_mutex_lock(&cd->mu);
	for (e = cd->execs; e != NULL; e = e->next)
		e->cancel = 1;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	while (cd->running > 0 &&
	    pthread_cond_timedwait(&cd->idle, &cd->mu, &until) == 0)
		;
	if (cd->running > 0) {
		/* a run did not stop in time: leave it its memory */
		pthread_mutex_unlock(&cd->mu);
		return;
	}
	for (e = cd->execs; e != NULL; e = next) {
		next = e->next;
		chronod_exec_free(e);
	}
	pthread_mutex_unlock(&cd->mu);
	nyx_store_close(cd->store);
	free(cd->codex_runner);
	pthread_cond_destroy(&cd->idle);
	pthread_mutex_destroy(&cd->mu);
	free(cd);
}

int
nyx_chronod_set_runner(
    struct nyx_chronod *cd, const char *cmd, struct nyx_err *err)
{
	free(cd->codex_runner);
	cd->codex_runner = cmd ? strdup(cmd) : NULL;
	if (cmd != NULL && cd->codex_runner == NULL)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	return 0;
}

int
nyx_chronod_codex_run(struct nyx_chronod *cd, const char *prompt, size_t len,
    int timeout_secs, struct nyx_sandbox_result *res, struct nyx_err *err)
{
	struct nyx_sandbox_req sr;
	struct nyx_buf src = NYX_BUF_ZERO;
	char *b64 = nyx_b64_encode(prompt, len);
	int rc;

	src.secret = true;
	/* the task reaches the runner only on stdin, never as words */
	if (b64 == NULL ||
	    nyx_buf_printf(&src, "printf %%s '%s' | base64 -d | %s\n", b64,
	        cd->codex_runner ? cd->codex_runner : builtin_runner) < 0) {
		free(b64);
		nyx_buf_free(&src);
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	}
	free(b64);
	memset(&sr, 0, sizeof(sr));
	sr.language = "bash";
	sr.source = src.data;
	sr.source_len = src.len;
	sr.timeout_secs = timeout_secs;
	rc = nyx_sandbox_run(&sr, res, err);
	nyx_buf_free(&src);
	return rc;
}

/* POST /codex/execute: {"prompt","timeout_secs","workspace":"empty_git"} */
static void
codex(struct nyx_chronod *cd, const struct nyx_chronod_req *rq,
    struct nyx_chronod_resp *rs)
{
	struct nyx_sandbox_result res;
	struct nyx_err err = NYX_ERR_ZERO;
	jv body, keys, prompt, t, ws, out, o;
	char diag[40], hex[17];
	size_t plen;

	if (chronod_check_delegation(rq, "proxy:*", NULL, 0, rs) < 0)
		return;
	if (rq->authorization != NULL) {
		/* the caller's own credential must end at the proxy */
		chronod_error(rs, 403, "CODEX_CALLER_CREDENTIAL_FORWARDED",
		    "The caller's credential was forwarded to the sandbox.");
		return;
	}
	body = nyx_json_parse(rq->body ? rq->body : "", rq->body_len);
	keys = jv_get_kind(body) == JV_KIND_OBJECT ? jv_keys(jv_copy(body))
	                                           : jv_invalid();
	prompt = nyx_json_get(body, "prompt");
	t = nyx_json_get(body, "timeout_secs");
	ws = nyx_json_get(body, "workspace");
	plen = jv_get_kind(prompt) == JV_KIND_STRING
	    ? (size_t)jv_string_length_bytes(jv_copy(prompt))
	    : 0;
	if (jv_get_kind(keys) != JV_KIND_ARRAY ||
	    jv_array_length(jv_copy(keys)) != 3)
		chronod_error(rs, 400, "CODEX_REQUEST_INVALID",
		    "The request must be exactly prompt, timeout_secs and "
		    "workspace.");
	else if (jv_get_kind(prompt) != JV_KIND_STRING || plen == 0)
		chronod_error(
		    rs, 400, "CODEX_PROMPT_INVALID", "The prompt is invalid.");
	else if (plen > 6000)
		chronod_error(rs, 400, "CODEX_PROMPT_TOO_LARGE",
		    "The prompt exceeds 6000 bytes.");
	else if (!nyx_json_integral(t, 1, 180))
		chronod_error(rs, 400, "CODEX_TIMEOUT_INVALID",
		    "timeout_secs must be 1..180.");
	else if (jv_get_kind(ws) != JV_KIND_STRING ||
	    strcmp(jv_string_value(ws), "empty_git") != 0)
		chronod_error(rs, 400, "CODEX_WORKSPACE_INVALID",
		    "The workspace must be empty_git.");
	else if (nyx_chronod_codex_run(cd, jv_string_value(prompt), plen,
	             (int)jv_number_value(t), &res, &err) < 0)
		chronod_error(rs, 502, "CODEX_SANDBOX_CREATION_FAILED",
		    "The Codex sandbox could not be created.");
	else {
		if (res.timed_out) {
			chronod_error(rs, 504, "CODEX_EXECUTION_TIMEOUT",
			    "Codex did not finish in time.");
		} else {
			out = jv_object();
			out = jv_object_set(out, jv_string("text"),
			    jv_string_sized(res.out.data ? res.out.data : "",
			        (int)res.out.len));
			out = jv_object_set(out, jv_string("exit_code"),
			    jv_number(res.exit_code));
			out = jv_object_set(out, jv_string("execution_time_ms"),
			    jv_number((double)res.elapsed_ms));
			o = jv_object();
			o = jv_object_set(o, jv_string("success"), jv_true());
			o = jv_object_set(o, jv_string("output"), out);
			nyx_random_hex(hex, 8);
			snprintf(diag, sizeof(diag), "chrono-%s", hex);
			o = jv_object_set(
			    o, jv_string("diagnostic_id"), jv_string(diag));
			chronod_answer(rs, 200, o);
			snprintf(rs->summary, sizeof(rs->summary),
			    "codex exit %d", res.exit_code);
		}
		nyx_sandbox_result_free(&res);
	}
	jv_free(body);
	jv_free(keys);
	jv_free(prompt);
	jv_free(t);
	jv_free(ws);
}

void
nyx_chronod_handle(struct nyx_chronod *cd, const struct nyx_chronod_req *rq,
    struct nyx_chronod_resp *rs)
{
	memset(rs, 0, sizeof(*rs));
	if (strcmp(rq->path, "/codex/execute") == 0) {
		if (strcmp(rq->method, "POST") != 0)
			chronod_error(rs, 405, "METHOD_NOT_ALLOWED",
			    "Use POST for /codex/execute.");
		else
			codex(cd, rq, rs);
		return;
	}
	if (strcmp(rq->path, "/execute") == 0) {
		if (strcmp(rq->method, "POST") != 0)
			chronod_error(rs, 405, "METHOD_NOT_ALLOWED",
			    "Use POST for /execute.");
		else
			execute(rq, rs);
		return;
	}
	if (strcmp(rq->path, "/executions") == 0 &&
	    strcmp(rq->method, "POST") == 0) {
		chronod_submit(cd, rq, rs);
		return;
	}
	if (strncmp(rq->path, "/executions/", 12) == 0 &&
	    rq->path[12] != '\0') {
		chronod_operation(cd, rq, rq->path + 12, rs);
		return;
	}
	chronod_error(rs, 404, "NOT_FOUND", "No such Chrono Sandbox endpoint.");
}
