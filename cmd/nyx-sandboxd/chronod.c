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

/*
 * 0 when the delegation token grants `scope` (its user into owner, when
 * given), else the answer is set.
 */
static int
check_delegation(const struct nyx_chronod_req *rq, const char *scope,
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
		error(rs, 401, "UNAUTHENTICATED",
		    "A valid NyxID delegation token is required.");
	else if (!nyx_scope_has(nyx_json_peek_str(c, "scope"), scope))
		error(rs, 403, "FORBIDDEN",
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
static jv
parse_request(const struct nyx_chronod_req *rq, int *timeout)
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

	if (check_delegation(rq, "sandbox:execute", NULL, 0, rs) < 0)
		return;
	body = parse_request(rq, &timeout);
	if (!jv_is_valid(body)) {
		error(rs, 400, "INVALID_REQUEST",
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
	jv_free(body);
	jv_free(lang);
	jv_free(script);
}

/* ---- durable executions ---- */

#define STORE_ID_LEN 35

struct exec {
	char id[40];
	char owner[128];
	char key[160];
	char body_sha[NYX_SHA256_HEX];
	char *language;
	char *script;
	int timeout_secs;
	char status[24];
	char phase[24];
	int64_t version;
	bool cancel_requested;
	volatile int cancel;
	int runs; /* how many times its program was started */
	int64_t created, updated, expires, terminal_at;
	jv result; /* the retained result, or invalid */
	char *base_url;
	char *api_key; /* a forwarded Agent Key for the program, or NULL */
	struct nyx_chronod *cd; /* the owner of the table */
	struct exec *next;
};

struct nyx_chronod {
	pthread_mutex_t mu;
	pthread_cond_t idle;
	struct exec *execs;
	int running;
	long retention_s;
	struct nyx_store *store;
	char *codex_runner; /* a shell command line; NULL: the built-in */
};

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

static bool
terminal_status(const char *s)
{
	return strcmp(s, "succeeded") == 0 || strcmp(s, "failed") == 0 ||
	    strcmp(s, "cancelled") == 0 || strcmp(s, "outcome_uncertain") == 0;
}

/* The whole record, as persisted. */
static jv
exec_doc(const struct exec *e)
{
	jv d = jv_object();

	d = jv_object_set(d, jv_string("operation_id"), jv_string(e->id));
	d = jv_object_set(d, jv_string("owner"), jv_string(e->owner));
	d = jv_object_set(d, jv_string("key"), jv_string(e->key));
	d = jv_object_set(d, jv_string("body_sha256"), jv_string(e->body_sha));
	d = jv_object_set(d, jv_string("language"), jv_string(e->language));
	d = jv_object_set(d, jv_string("script"), jv_string(e->script));
	d = jv_object_set(
	    d, jv_string("timeout_secs"), jv_number(e->timeout_secs));
	d = jv_object_set(d, jv_string("status"), jv_string(e->status));
	d = jv_object_set(d, jv_string("phase"), jv_string(e->phase));
	d = jv_object_set(
	    d, jv_string("version"), jv_number((double)e->version));
	d = jv_object_set(
	    d, jv_string("cancel_requested"), jv_bool(e->cancel_requested));
	d = jv_object_set(
	    d, jv_string("created_ms"), jv_number((double)e->created));
	d = jv_object_set(
	    d, jv_string("updated_ms"), jv_number((double)e->updated));
	d = jv_object_set(
	    d, jv_string("expires_ms"), jv_number((double)e->expires));
	d = jv_object_set(
	    d, jv_string("terminal_ms"), jv_number((double)e->terminal_at));
	d = jv_object_set(d, jv_string("runs"), jv_number(e->runs));
	return jv_object_set(d, jv_string("result"),
	    jv_is_valid(e->result) ? jv_copy(e->result) : jv_null());
}

/* Persist a record (caller holds the lock). */
static void
save(struct nyx_chronod *cd, const struct exec *e)
{
	struct nyx_err err = NYX_ERR_ZERO;
	char *doc;

	if (cd->store == NULL)
		return;
	doc = nyx_json_dump(exec_doc(e));
	if (doc == NULL || nyx_store_put(cd->store, e->id, doc, &err) < 0)
		nyx_log(
		    NYX_LOG_WARN, "cannot persist %s: %s", e->id, err.message);
	free(doc);
}

/* A change of state: a new version, persisted. Caller holds the lock. */
static void
advance(struct nyx_chronod *cd, struct exec *e, const char *status,
    const char *phase)
{
	/* (status and phase may be e's own: snprintf must not overlap) */
	if (status != e->status)
		snprintf(e->status, sizeof(e->status), "%s", status);
	if (phase != e->phase)
		snprintf(e->phase, sizeof(e->phase), "%s", phase);
	e->version++;
	e->updated = nyx_now_ms();
	if (terminal_status(status) && e->terminal_at == 0)
		e->terminal_at = e->updated;
	save(cd, e);
}

static jv
snapshot(const struct exec *e)
{
	jv d = jv_object();
	bool term = terminal_status(e->status);

	d = jv_object_set(d, jv_string("operation_id"), jv_string(e->id));
	d = jv_object_set(d, jv_string("status"), jv_string(e->status));
	d = jv_object_set(d, jv_string("phase"), jv_string(e->phase));
	d = jv_object_set(d, jv_string("cleanup_status"),
	    jv_string(term ? "complete" : "not_started"));
	d = jv_object_set(
	    d, jv_string("version"), jv_number((double)e->version));
	d = jv_object_set(
	    d, jv_string("cancel_requested"), jv_bool(e->cancel_requested));
	d = jv_object_set(d, jv_string("result_available"),
	    jv_bool(term && jv_is_valid(e->result)));
	d = jv_object_set(
	    d, jv_string("created_at"), nyx_json_time(e->created));
	d = jv_object_set(
	    d, jv_string("updated_at"), nyx_json_time(e->updated));
	d = jv_object_set(
	    d, jv_string("expires_at"), nyx_json_time(e->expires));
	return jv_object_set(
	    d, jv_string("terminal_at"), nyx_json_time(e->terminal_at));
}

static void
exec_free(struct exec *e)
{
	free(e->language);
	free(e->script);
	free(e->base_url);
	if (e->api_key != NULL) {
		nyx_secure_zero(e->api_key, strlen(e->api_key));
		free(e->api_key);
	}
	jv_free(e->result);
	free(e);
}

static jv
failure(const char *code, const char *phase)
{
	jv e = jv_object(), r = jv_object();

	e = jv_object_set(e, jv_string("code"), jv_string(code));
	if (phase != NULL)
		e = jv_object_set(e, jv_string("phase"), jv_string(phase));
	r = jv_object_set(r, jv_string("success"), jv_false());
	return jv_object_set(r, jv_string("error"), e);
}

/* One operation's run, on its own thread. */
static void *
run_exec(void *arg)
{
	struct exec *e = arg;
	struct nyx_chronod *cd;
	struct nyx_sandbox_req sr;
	struct nyx_sandbox_result res;
	struct nyx_err err = NYX_ERR_ZERO;
	jv result;
	int rc;

	cd = e->cd;
	pthread_mutex_lock(&cd->mu);
	if (e->cancel_requested) {
		e->result = failure("EXECUTION_CANCELLED", "queued");
		advance(cd, e, "cancelled", "complete");
		goto done;
	}
	e->runs++;
	advance(cd, e, "provisioning", "sandbox_create");
	advance(cd, e, "running", "execute");
	pthread_mutex_unlock(&cd->mu);

	memset(&sr, 0, sizeof(sr));
	sr.language = e->language;
	sr.source = e->script;
	sr.source_len = strlen(e->script);
	sr.timeout_secs = e->timeout_secs;
	sr.nyxid_api_key = e->api_key;
	sr.nyxid_base_url = e->api_key ? e->base_url : NULL;
	sr.cancel = &e->cancel;
	rc = nyx_sandbox_run(&sr, &res, &err);

	pthread_mutex_lock(&cd->mu);
	if (rc < 0) {
		e->result =
		    failure("SANDBOX_CREATION_FAILED", "sandbox_create");
		advance(cd, e, "failed", "complete");
	} else if (res.cancelled) {
		e->result = failure("EXECUTION_CANCELLED", "execute");
		advance(cd, e, "cancelled", "complete");
	} else if (res.timed_out) {
		e->result = failure("SANDBOX_TIMEOUT", "execute");
		advance(cd, e, "failed", "complete");
	} else {
		result = jv_object_set(jv_object(), jv_string("success"),
		    jv_bool(res.exit_code == 0));
		result = jv_object_set(
		    result, jv_string("output"), nyx_sandbox_output(&res));
		if (res.exit_code != 0)
			result = jv_object_set(result, jv_string("error"),
			    jv_object_set(jv_object(), jv_string("code"),
			        jv_string("EXECUTION_FAILED")));
		e->result = result;
		advance(cd, e, res.exit_code == 0 ? "succeeded" : "failed",
		    "complete");
	}
	if (rc == 0)
		nyx_sandbox_result_free(&res);
done:
	cd->running--;
	pthread_cond_broadcast(&cd->idle);
	pthread_mutex_unlock(&cd->mu);
	return NULL;
}

static struct exec *
find(struct nyx_chronod *cd, const char *id, const char *owner)
{
	struct exec *e;

	for (e = cd->execs; e != NULL; e = e->next)
		if (strcmp(e->id, id) == 0 && strcmp(e->owner, owner) == 0)
			return e;
	return NULL;
}

static void
answer_snapshot(struct nyx_chronod_resp *rs, int status, const struct exec *e)
{
	answer(rs, status, snapshot(e));
	snprintf(
	    rs->etag, sizeof(rs->etag), "\"v%lld\"", (long long)e->version);
	if (!terminal_status(e->status))
		snprintf(rs->retry_after, sizeof(rs->retry_after), "1");
	snprintf(rs->summary, sizeof(rs->summary), "%s v%lld", e->status,
	    (long long)e->version);
}

static void
submit(struct nyx_chronod *cd, const struct nyx_chronod_req *rq,
    struct nyx_chronod_resp *rs)
{
	char owner[128], sha[NYX_SHA256_HEX], hex[33];
	struct nyx_cred cred;
	struct exec *e;
	pthread_t th;
	jv body, lang, script, receipt;
	int timeout = 180;

	if (check_delegation(rq, "sandbox:execute", owner, sizeof(owner), rs) <
	    0)
		return;
	if (rq->idempotency_key == NULL || *rq->idempotency_key == '\0') {
		error(rs, 400, "IDEMPOTENCY_KEY_MISSING",
		    "POST /executions requires an Idempotency-Key.");
		return;
	}
	body = parse_request(rq, &timeout);
	lang = nyx_json_get(body, "language");
	script = nyx_json_get(body, "script");
	if (!jv_is_valid(body)) {
		error(rs, 400, "INVALID_REQUEST",
		    "The execution request is invalid.");
		goto out;
	}
	nyx_sha256_hex(rq->body, rq->body_len, sha);
	pthread_mutex_lock(&cd->mu);
	for (e = cd->execs; e != NULL; e = e->next)
		if (strcmp(e->owner, owner) == 0 &&
		    strcmp(e->key, rq->idempotency_key) == 0)
			break;
	if (e != NULL) {
		/* the same owner and key: converge, or refuse another body */
		if (strcmp(e->body_sha, sha) != 0)
			error(rs, 409, "IDEMPOTENCY_KEY_REUSE",
			    "The Idempotency-Key was used with another "
			    "request.");
		else
			goto receipt;
		pthread_mutex_unlock(&cd->mu);
		goto out;
	}
	e = calloc(1, sizeof(*e));
	if (e == NULL || nyx_random_hex(hex, 16) < 0) {
		pthread_mutex_unlock(&cd->mu);
		free(e);
		error(rs, 503, "EXECUTION_CAPACITY_EXCEEDED", "Out of memory.");
		goto out;
	}
	snprintf(e->id, sizeof(e->id), "op_%s", hex);
	snprintf(e->owner, sizeof(e->owner), "%s", owner);
	snprintf(e->key, sizeof(e->key), "%s", rq->idempotency_key);
	snprintf(e->body_sha, sizeof(e->body_sha), "%s", sha);
	e->language = strdup(jv_string_value(lang));
	e->script = strdup(jv_string_value(script));
	e->timeout_secs = timeout;
	e->created = e->updated = nyx_now_ms();
	e->expires = e->created + cd->retention_s * 1000;
	e->result = jv_invalid();
	e->base_url = strdup(rq->base_url ? rq->base_url : "");
	nyx_cred_classify(rq->authorization, &cred);
	if (rq->authorization != NULL && cred.kind == NYX_CRED_AGENT_KEY)
		e->api_key = strdup(rq->authorization);
	snprintf(e->status, sizeof(e->status), "queued");
	snprintf(e->phase, sizeof(e->phase), "queued");
	e->version = 1;
	e->next = cd->execs;
	cd->execs = e;
	save(cd, e);
	e->cd = cd;
	cd->running++;
	if (pthread_create(&th, NULL, run_exec, e) != 0) {
		cd->running--;
		e->result = failure("SANDBOX_CREATION_FAILED", "queued");
		advance(cd, e, "failed", "complete");
	} else {
		pthread_detach(th);
	}
receipt:
	receipt = snapshot(e);
	{
		char u[512];

		snprintf(u, sizeof(u), "%s/executions/%s",
		    rq->proxy_prefix ? rq->proxy_prefix : "", e->id);
		receipt = jv_object_set(
		    receipt, jv_string("status_url"), jv_string(u));
		snprintf(rs->location, sizeof(rs->location), "%s", u);
		snprintf(u, sizeof(u), "%s/executions/%s/result",
		    rq->proxy_prefix ? rq->proxy_prefix : "", e->id);
		receipt = jv_object_set(
		    receipt, jv_string("result_url"), jv_string(u));
		snprintf(u, sizeof(u), "%s/executions/%s/cancel",
		    rq->proxy_prefix ? rq->proxy_prefix : "", e->id);
		receipt = jv_object_set(
		    receipt, jv_string("cancel_url"), jv_string(u));
	}
	answer(rs, 202, receipt);
	snprintf(
	    rs->etag, sizeof(rs->etag), "\"v%lld\"", (long long)e->version);
	snprintf(rs->retry_after, sizeof(rs->retry_after), "1");
	snprintf(rs->summary, sizeof(rs->summary), "accepted %s", e->status);
	pthread_mutex_unlock(&cd->mu);
out:
	jv_free(body);
	jv_free(lang);
	jv_free(script);
}

/* GET .../{id}, GET .../{id}/result, POST .../{id}/cancel */
static void
operation(struct nyx_chronod *cd, const struct nyx_chronod_req *rq,
    const char *rest, struct nyx_chronod_resp *rs)
{
	char owner[128], id[64];
	const char *slash = strchr(rest, '/');
	const char *verb = slash ? slash + 1 : "";
	struct exec *e;

	if (check_delegation(rq, "sandbox:execute", owner, sizeof(owner), rs) <
	    0)
		return;
	snprintf(id, sizeof(id), "%.*s",
	    (int)(slash ? (size_t)(slash - rest) : strlen(rest)), rest);
	pthread_mutex_lock(&cd->mu);
	e = find(cd, id, owner);
	if (e == NULL) {
		error(rs, 404, "OPERATION_NOT_FOUND", "No such operation.");
	} else if (nyx_now_ms() > e->expires) {
		error(rs, 410, "OPERATION_EXPIRED", "The operation expired.");
	} else if (*verb == '\0' && strcmp(rq->method, "GET") == 0) {
		char etag[64];

		snprintf(
		    etag, sizeof(etag), "\"v%lld\"", (long long)e->version);
		if (rq->if_none_match != NULL &&
		    strcmp(rq->if_none_match, etag) == 0) {
			rs->status = 304;
			snprintf(rs->etag, sizeof(rs->etag), "%s", etag);
			if (!terminal_status(e->status))
				snprintf(rs->retry_after,
				    sizeof(rs->retry_after), "1");
			snprintf(
			    rs->summary, sizeof(rs->summary), "not modified");
		} else {
			answer_snapshot(rs, 200, e);
		}
	} else if (strcmp(verb, "result") == 0 &&
	    strcmp(rq->method, "GET") == 0) {
		if (!terminal_status(e->status)) {
			error(rs, 409, "OPERATION_NOT_TERMINAL",
			    "The operation has not finished.");
			snprintf(rs->retry_after, sizeof(rs->retry_after), "1");
		} else if (!jv_is_valid(e->result)) {
			error(rs, 409, "OPERATION_NOT_TERMINAL",
			    "No result is retained.");
		} else {
			answer(rs, 200, jv_copy(e->result));
			snprintf(rs->summary, sizeof(rs->summary), "result %s",
			    e->status);
		}
	} else if (strcmp(verb, "cancel") == 0 &&
	    strcmp(rq->method, "POST") == 0) {
		if (terminal_status(e->status)) {
			answer_snapshot(rs, 200, e);
		} else {
			if (!e->cancel_requested) {
				e->cancel_requested = true;
				e->cancel = 1;
				advance(cd, e, e->status, e->phase);
			}
			answer_snapshot(rs, 202, e);
		}
	} else {
		error(rs, 405, "METHOD_NOT_ALLOWED", "Unsupported method.");
	}
	pthread_mutex_unlock(&cd->mu);
}

/* A number field of a stored record (0 when absent). */
static double
num(jv d, const char *k)
{
	jv n = nyx_json_get(d, k);
	double v = jv_get_kind(n) == JV_KIND_NUMBER ? jv_number_value(n) : 0;

	jv_free(n);
	return v;
}

/* Load the store; a run that was in flight is outcome_uncertain now. */
static int
recover(struct nyx_chronod *cd, struct nyx_err *err)
{
	char **docs = NULL;
	size_t i;

	if (nyx_store_load(cd->store, &docs, err) < 0)
		return -1;
	for (i = 0; docs[i] != NULL; i++) {
		jv d = nyx_json_parse(docs[i], strlen(docs[i])), r;
		struct exec *e = calloc(1, sizeof(*e));
		const char *s;

		if (e == NULL || jv_get_kind(d) != JV_KIND_OBJECT) {
			jv_free(d);
			free(e);
			continue;
		}
#define STR(f, k)                                                              \
	snprintf(                                                              \
	    e->f, sizeof(e->f), "%s", (s = nyx_json_peek_str(d, k)) ? s : "")
		STR(id, "operation_id");
		STR(owner, "owner");
		STR(key, "key");
		STR(body_sha, "body_sha256");
		STR(status, "status");
		STR(phase, "phase");
		e->language =
		    strdup((s = nyx_json_peek_str(d, "language")) ? s : "");
		e->script =
		    strdup((s = nyx_json_peek_str(d, "script")) ? s : "");
		e->base_url = strdup("");
		e->timeout_secs = (int)num(d, "timeout_secs");
		e->version = (int64_t)num(d, "version");
		e->created = (int64_t)num(d, "created_ms");
		e->updated = (int64_t)num(d, "updated_ms");
		e->expires = (int64_t)num(d, "expires_ms");
		e->terminal_at = (int64_t)num(d, "terminal_ms");
		e->runs = (int)num(d, "runs");
		e->cancel_requested = nyx_json_bool(d, "cancel_requested") == 1;
#undef STR
		r = nyx_json_get(d, "result");
		e->result = jv_get_kind(r) == JV_KIND_OBJECT ? r : jv_invalid();
		if (jv_get_kind(r) != JV_KIND_OBJECT)
			jv_free(r);
		jv_free(d);
		e->cd = cd;
		e->next = cd->execs;
		cd->execs = e;
		if (!terminal_status(e->status)) {
			/* it may or may not have run to the end: never rerun */
			jv_free(e->result);
			e->result = failure("OUTCOME_UNCERTAIN", e->phase);
			advance(cd, e, "outcome_uncertain", "complete");
		}
	}
	nyx_ledger_free_list(docs);
	return 0;
}

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
	        recover(cd, err) < 0)) {
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
		exec_free(e);
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

	if (check_delegation(rq, "proxy:*", NULL, 0, rs) < 0)
		return;
	if (rq->authorization != NULL) {
		/* the caller's own credential must end at the proxy */
		error(rs, 403, "CODEX_CALLER_CREDENTIAL_FORWARDED",
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
		error(rs, 400, "CODEX_REQUEST_INVALID",
		    "The request must be exactly prompt, timeout_secs and "
		    "workspace.");
	else if (jv_get_kind(prompt) != JV_KIND_STRING || plen == 0)
		error(
		    rs, 400, "CODEX_PROMPT_INVALID", "The prompt is invalid.");
	else if (plen > 6000)
		error(rs, 400, "CODEX_PROMPT_TOO_LARGE",
		    "The prompt exceeds 6000 bytes.");
	else if (!nyx_json_integral(t, 1, 180))
		error(rs, 400, "CODEX_TIMEOUT_INVALID",
		    "timeout_secs must be 1..180.");
	else if (jv_get_kind(ws) != JV_KIND_STRING ||
	    strcmp(jv_string_value(ws), "empty_git") != 0)
		error(rs, 400, "CODEX_WORKSPACE_INVALID",
		    "The workspace must be empty_git.");
	else if (nyx_chronod_codex_run(cd, jv_string_value(prompt), plen,
	             (int)jv_number_value(t), &res, &err) < 0)
		error(rs, 502, "CODEX_SANDBOX_CREATION_FAILED",
		    "The Codex sandbox could not be created.");
	else {
		if (res.timed_out) {
			error(rs, 504, "CODEX_EXECUTION_TIMEOUT",
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
			answer(rs, 200, o);
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
			error(rs, 405, "METHOD_NOT_ALLOWED",
			    "Use POST for /codex/execute.");
		else
			codex(cd, rq, rs);
		return;
	}
	if (strcmp(rq->path, "/execute") == 0) {
		if (strcmp(rq->method, "POST") != 0)
			error(rs, 405, "METHOD_NOT_ALLOWED",
			    "Use POST for /execute.");
		else
			execute(rq, rs);
		return;
	}
	if (strcmp(rq->path, "/executions") == 0 &&
	    strcmp(rq->method, "POST") == 0) {
		submit(cd, rq, rs);
		return;
	}
	if (strncmp(rq->path, "/executions/", 12) == 0 &&
	    rq->path[12] != '\0') {
		operation(cd, rq, rq->path + 12, rs);
		return;
	}
	error(rs, 404, "NOT_FOUND", "No such Chrono Sandbox endpoint.");
}

char *
nyx_chronod_list(struct nyx_chronod *cd)
{
	jv a = jv_array();
	struct exec *e;
	char sha[NYX_SHA256_HEX];

	pthread_mutex_lock(&cd->mu);
	for (e = cd->execs; e != NULL; e = e->next) {
		jv o = jv_object();

		nyx_sha256_hex(e->key, strlen(e->key), sha);
		o = jv_object_set(
		    o, jv_string("operation_id"), jv_string(e->id));
		o = jv_object_set(o, jv_string("key_sha256"), jv_string(sha));
		o = jv_object_set(o, jv_string("status"), jv_string(e->status));
		o = jv_object_set(o, jv_string("runs"), jv_number(e->runs));
		a = jv_array_append(a, o);
	}
	pthread_mutex_unlock(&cd->mu);
	return nyx_json_dump(a);
}
