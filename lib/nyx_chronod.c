#include "nyx_chronod.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_buf.h"
#include "nyx_cred.h"
#include "nyx_err.h"
#include "nyx_hash.h"
#include "nyx_json.h"
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

static void
answer(struct nyx_chronod_resp *rs, int status, jv body)
{
	rs->status = status;
	rs->body = nyx_json_dump(body);
}

static jv
diag(void)
{
	char hex[33], id[48];

	if (nyx_random_hex(hex, 16) < 0)
		snprintf(hex, sizeof(hex), "0");
	snprintf(id, sizeof(id), "chrono-%s", hex);
	return jv_string(id);
}

static void
error(struct nyx_chronod_resp *rs, int status, const char *code,
    const char *message)
{
	jv e = jv_object(), o = jv_object();

	e = jv_object_set(e, jv_string("code"), jv_string(code));
	e = jv_object_set(e, jv_string("message"), jv_string(message));
	o = jv_object_set(o, jv_string("error"), e);
	o = jv_object_set(o, jv_string("diagnostic_id"), diag());
	answer(rs, status, o);
	snprintf(rs->summary, sizeof(rs->summary), "%s", code);
}

/* The delegation claims, or invalid when the token is not one. */
static jv
delegation_claims(const char *token)
{
	const char *d1 = token ? strchr(token, '.') : NULL, *d2;
	char *raw;
	size_t n;
	jv c;

	if (d1 == NULL || (d2 = strchr(d1 + 1, '.')) == NULL)
		return jv_invalid();
	raw = nyx_b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), &n);
	if (raw == NULL)
		return jv_invalid();
	c = nyx_json_parse(raw, n);
	free(raw);
	if (jv_get_kind(c) != JV_KIND_OBJECT) {
		jv_free(c);
		return jv_invalid();
	}
	return c;
}

/* 0 when the delegation token grants `scope`, else the answer is set. */
static int
check_delegation(const struct nyx_chronod_req *rq, const char *scope,
    struct nyx_chronod_resp *rs)
{
	jv c = delegation_claims(rq->delegation), exp, act;
	int rc = -1;

	exp = nyx_json_get(c, "exp");
	act = nyx_json_get(c, "act");
	if (!jv_is_valid(c) || nyx_json_bool(c, "delegated") != 1 ||
	    nyx_json_peek_str(act, "sub") == NULL ||
	    jv_get_kind(exp) != JV_KIND_NUMBER ||
	    jv_number_value(exp) * 1000 < (double)nyx_now_ms())
		error(rs, 401, "UNAUTHENTICATED",
		    "A valid NyxID delegation token is required.");
	else if (!nyx_scope_has(nyx_json_peek_str(c, "scope"), scope))
		error(rs, 403, "FORBIDDEN",
		    "The delegation token does not grant this operation.");
	else
		rc = 0;
	jv_free(exp);
	jv_free(act);
	jv_free(c);
	return rc;
}

/* env: an object of string values, as NAME=VALUE (heap, NULL-ended). */
static char **
env_list(jv env)
{
	int i, n;
	char **out;
	jv keys;

	if (jv_get_kind(env) != JV_KIND_OBJECT)
		return NULL;
	keys = jv_keys(jv_copy(env));
	n = jv_array_length(jv_copy(keys));
	out = calloc((size_t)n + 1, sizeof(*out));
	for (i = 0; out != NULL && i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i);
		const char *v = nyx_json_peek_str(env, jv_string_value(k));
		size_t len =
		    strlen(jv_string_value(k)) + (v ? strlen(v) : 0) + 2;

		out[i] = malloc(len);
		if (out[i] != NULL)
			snprintf(out[i], len, "%s=%s", jv_string_value(k),
			    v ? v : "");
		jv_free(k);
	}
	jv_free(keys);
	return out;
}

static void
free_list(char **l)
{
	size_t i;

	for (i = 0; l != NULL && l[i] != NULL; i++)
		free(l[i]);
	free(l);
}

static bool
env_valid(jv env)
{
	jv keys;
	int i, n;
	bool ok = true;

	if (jv_get_kind(env) == JV_KIND_INVALID ||
	    jv_get_kind(env) == JV_KIND_NULL)
		return true;
	if (jv_get_kind(env) != JV_KIND_OBJECT)
		return false;
	keys = jv_keys(jv_copy(env));
	n = jv_array_length(jv_copy(keys));
	for (i = 0; i < n && ok; i++) {
		jv k = jv_array_get(jv_copy(keys), i);

		ok = nyx_json_kind(env, jv_string_value(k)) == JV_KIND_STRING;
		jv_free(k);
	}
	jv_free(keys);
	return ok;
}

static void
execute(const struct nyx_chronod_req *rq, struct nyx_chronod_resp *rs)
{
	struct nyx_sandbox_req sr;
	struct nyx_sandbox_result res;
	struct nyx_err err = NYX_ERR_ZERO;
	struct nyx_cred cred;
	jv body, lang, script, tmo, env, out, o;
	char **extra = NULL;
	double t;

	if (check_delegation(rq, "sandbox:execute", rs) < 0)
		return;
	body = nyx_json_parse(rq->body ? rq->body : "", rq->body_len);
	lang = nyx_json_get(body, "language");
	script = nyx_json_get(body, "script");
	tmo = nyx_json_get(body, "timeout_secs");
	env = nyx_json_get(body, "env");
	t = jv_get_kind(tmo) == JV_KIND_NUMBER ? jv_number_value(tmo) : 180;
	if (jv_get_kind(body) != JV_KIND_OBJECT ||
	    jv_get_kind(lang) != JV_KIND_STRING ||
	    !nyx_sandbox_language_known(jv_string_value(lang)) ||
	    jv_get_kind(script) != JV_KIND_STRING ||
	    (jv_get_kind(tmo) != JV_KIND_INVALID &&
	        jv_get_kind(tmo) != JV_KIND_NUMBER) ||
	    t != floor(t) || t < 1 || t > 600 || !env_valid(env) ||
	    nyx_json_has(body, "files")) {
		error(rs, 400, "INVALID_REQUEST",
		    "The execution request is invalid.");
		goto out;
	}
	extra = env_list(env);
	memset(&sr, 0, sizeof(sr));
	sr.language = jv_string_value(lang);
	sr.source = jv_string_value(script);
	sr.source_len = (size_t)jv_string_length_bytes(jv_copy(script));
	sr.timeout_secs = (int)t;
	sr.extra_env = (const char *const *)extra;
	/* only a forwarded Agent Key is the program's NyxID credential */
	nyx_cred_classify(rq->authorization, &cred);
	if (rq->authorization != NULL && cred.kind == NYX_CRED_AGENT_KEY) {
		sr.nyxid_api_key = rq->authorization;
		sr.nyxid_base_url = rq->base_url;
	}
	if (nyx_sandbox_run(&sr, &res, &err) < 0) {
		if (strcmp(err.code, "LANGUAGE_UNAVAILABLE") == 0)
			error(rs, 400, "INVALID_REQUEST",
			    "The language is not available in this sandbox.");
		else
			error(rs, 503, "SANDBOX_CREATION_FAILED",
			    "The sandbox could not be created.");
		goto out;
	}
	if (res.timed_out) {
		error(rs, 504, "SANDBOX_TIMEOUT", "The execution timed out.");
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
	o = jv_object_set(o, jv_string("diagnostic_id"), diag());
	snprintf(rs->summary, sizeof(rs->summary), "exit %d", res.exit_code);
	nyx_sandbox_result_free(&res);
	answer(rs, 200, o);
out:
	free_list(extra);
	jv_free(body);
	jv_free(lang);
	jv_free(script);
	jv_free(tmo);
	jv_free(env);
}

void
nyx_chronod_handle(
    const struct nyx_chronod_req *rq, struct nyx_chronod_resp *rs)
{
	memset(rs, 0, sizeof(*rs));
	if (strcmp(rq->path, "/execute") == 0) {
		if (strcmp(rq->method, "POST") != 0)
			error(rs, 405, "METHOD_NOT_ALLOWED",
			    "Use POST for /execute.");
		else
			execute(rq, rs);
		return;
	}
	error(rs, 404, "NOT_FOUND", "No such Chrono Sandbox endpoint.");
}
