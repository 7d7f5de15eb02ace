/*
 * executions: the Chrono Sandbox's durable API behind nyx-sandboxd's
 * proxy (see chronod.h): POST /executions with an Idempotency-Key, GET
 * /executions/{id} with ETag and If-None-Match, .../result and
 * .../cancel, each program on a thread of its own, every change persisted
 * through the store when there is one.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chronod_int.h"
#include "nyx_buf.h"
#include "nyx_cred.h"
#include "nyx_json.h"
#include "nyx_ledger.h"
#include "nyx_log.h"
#include "nyx_sandbox.h"
#include "nyx_time.h"

/* ---- durable executions ---- */

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

void
chronod_exec_free(struct exec *e)
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
	chronod_answer(rs, status, snapshot(e));
	snprintf(
	    rs->etag, sizeof(rs->etag), "\"v%lld\"", (long long)e->version);
	if (!terminal_status(e->status))
		snprintf(rs->retry_after, sizeof(rs->retry_after), "1");
	snprintf(rs->summary, sizeof(rs->summary), "%s v%lld", e->status,
	    (long long)e->version);
}

void
chronod_submit(struct nyx_chronod *cd, const struct nyx_chronod_req *rq,
    struct nyx_chronod_resp *rs)
{
	char owner[128], sha[NYX_SHA256_HEX], hex[33];
	struct nyx_cred cred;
	struct exec *e;
	pthread_t th;
	jv body, lang, script, receipt;
	int timeout = 180;

	if (chronod_check_delegation(
	        rq, "sandbox:execute", owner, sizeof(owner), rs) < 0)
		return;
	if (rq->idempotency_key == NULL || *rq->idempotency_key == '\0') {
		chronod_error(rs, 400, "IDEMPOTENCY_KEY_MISSING",
		    "POST /executions requires an Idempotency-Key.");
		return;
	}
	body = chronod_parse_request(rq, &timeout);
	lang = nyx_json_get(body, "language");
	script = nyx_json_get(body, "script");
	if (!jv_is_valid(body)) {
		chronod_error(rs, 400, "INVALID_REQUEST",
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
			chronod_error(rs, 409, "IDEMPOTENCY_KEY_REUSE",
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
		chronod_error(
		    rs, 503, "EXECUTION_CAPACITY_EXCEEDED", "Out of memory.");
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
	chronod_answer(rs, 202, receipt);
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
void
chronod_operation(struct nyx_chronod *cd, const struct nyx_chronod_req *rq,
    const char *rest, struct nyx_chronod_resp *rs)
{
	char owner[128], id[64];
	const char *slash = strchr(rest, '/');
	const char *verb = slash ? slash + 1 : "";
	struct exec *e;

	if (chronod_check_delegation(
	        rq, "sandbox:execute", owner, sizeof(owner), rs) < 0)
		return;
	snprintf(id, sizeof(id), "%.*s",
	    (int)(slash ? (size_t)(slash - rest) : strlen(rest)), rest);
	pthread_mutex_lock(&cd->mu);
	e = find(cd, id, owner);
	if (e == NULL) {
		chronod_error(
		    rs, 404, "OPERATION_NOT_FOUND", "No such operation.");
	} else if (nyx_now_ms() > e->expires) {
		chronod_error(
		    rs, 410, "OPERATION_EXPIRED", "The operation expired.");
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
			chronod_error(rs, 409, "OPERATION_NOT_TERMINAL",
			    "The operation has not finished.");
			snprintf(rs->retry_after, sizeof(rs->retry_after), "1");
		} else if (!jv_is_valid(e->result)) {
			chronod_error(rs, 409, "OPERATION_NOT_TERMINAL",
			    "No result is retained.");
		} else {
			chronod_answer(rs, 200, jv_copy(e->result));
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
		chronod_error(
		    rs, 405, "METHOD_NOT_ALLOWED", "Unsupported method.");
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
int
chronod_recover(struct nyx_chronod *cd, struct nyx_err *err)
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
