#include "nyx_durable.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_time.h"

static const char *const active_states[] = {
    "queued", "provisioning", "preparing", "running", "collecting", NULL};
static const char *const terminal_states[] = {
    "succeeded", "failed", "cancelled", "outcome_uncertain", NULL};
static const char *const phases[] = {"queued", "sandbox_create",
    "sandbox_ready", "input_write", "dependency_install", "execute", "collect",
    "cleaning_up", "complete", NULL};
static const char *const cleanup_states[] = {
    "not_started", "pending", "running", "retry", "complete", NULL};
/* the phases a failure without output may name (aevatar 4.6) */
static const char *const failure_phases[] = {"sandbox_create", "sandbox_ready",
    "input_write", "dependency_install", "execute", "collect", "cleaning_up",
    NULL};

static bool
one_of(const char *s, const char *const *set)
{
	for (; s != NULL && *set != NULL; set++)
		if (strcmp(s, *set) == 0)
			return true;
	return false;
}

void
nyx_dur_init(struct nyx_dur *d)
{
	memset(d, 0, sizeof(*d));
	d->secret.secret = true;
	d->auth.secret = true;
	d->key_hdr.secret = true;
	nyx_exec_outcome_init(&d->oc);
	d->op.child_exit = -1;
}

void
nyx_dur_free(struct nyx_dur *d)
{
	nyx_dur_drop_request(d);
	nyx_buf_free(&d->secret);
	nyx_exec_outcome_free(&d->oc);
}

int
nyx_dur_key(const char *owner, const char *request_id, const char *call_id,
    char out[NYX_DUR_KEY_LEN + 1])
{
	struct nyx_digest *dg = nyx_digest_new();
	char hex[NYX_SHA256_HEX];

	if (dg == NULL)
		return -1;
	nyx_digest_add(dg, "cli");
	nyx_digest_add(dg, owner);
	nyx_digest_add(dg, request_id);
	nyx_digest_add(dg, call_id);
	if (nyx_digest_finish(dg, hex) < 0)
		return -1;
	snprintf(out, NYX_DUR_KEY_LEN + 1, NYX_DUR_KEY_PREFIX "%s", hex);
	return 0;
}

bool
nyx_dur_key_valid(const char *key)
{
	size_t p = sizeof(NYX_DUR_KEY_PREFIX) - 1;

	return key != NULL && strlen(key) == NYX_DUR_KEY_LEN &&
	    strncmp(key, NYX_DUR_KEY_PREFIX, p) == 0 &&
	    strspn(key + p, "0123456789abcdef") == 64;
}

int
nyx_dur_secret_parts(const struct nyx_dur *d, const char **key,
    const char **source, size_t *source_len)
{
	const char *data = d->secret.data;
	const char *nl;

	if (data == NULL || d->secret.len <= NYX_DUR_KEY_LEN)
		return -1;
	nl = data + NYX_DUR_KEY_LEN;
	if (*nl != '\n')
		return -1;
	*key = data;
	*source = nl + 1;
	*source_len = d->secret.len - NYX_DUR_KEY_LEN - 1;
	return 0;
}

int64_t
nyx_dur_deadline(const struct nyx_op *op)
{
	return op->expires_at_ms > 0
	    ? op->expires_at_ms
	    : op->created_at_ms + NYX_DUR_FALLBACK_EXPIRY_MS;
}

long
nyx_dur_retry_after(const char *v, int64_t now)
{
	long ms = NYX_DUR_RETRY_DEFAULT_MS;
	struct tm tm;
	char *end;

	if (v == NULL || *v == '\0')
		return ms;
	if (isdigit((unsigned char)*v) || *v == '-') {
		long long s = strtoll(v, &end, 10);

		if (*end != '\0')
			return ms;
		if (s <= 0)
			return 0;
		return s >= NYX_DUR_RETRY_MAX_MS / 1000 ? NYX_DUR_RETRY_MAX_MS
		                                        : (long)s * 1000;
	}
	memset(&tm, 0, sizeof(tm));
	end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end == NULL || *end != '\0')
		return ms;
	{
		int64_t at = (int64_t)timegm(&tm) * 1000 - now;

		if (at <= 0)
			return 0;
		return at > NYX_DUR_RETRY_MAX_MS ? NYX_DUR_RETRY_MAX_MS
		                                 : (long)at;
	}
}

/* ---- outcomes ---- */

/* The audit's name for the exchange a step failed in. */
static const char *
stage_name(enum nyx_dur_call c)
{
	switch (c) {
	case NYX_DUR_SUBMIT:
		return "submit";
	case NYX_DUR_RESULT:
		return "result";
	case NYX_DUR_CANCEL:
		return "cancel";
	default:
		return "status";
	}
}

void
nyx_dur_settle(struct nyx_dur *d, const char *code, const char *kind,
    const char *message, int exit_code)
{
	d->oc.stage =
	    stage_name(d->call != NYX_DUR_NONE ? d->call : d->applying);
	d->oc.success = false;
	d->oc.code = code;
	d->oc.kind = kind;
	d->oc.message = message;
	d->oc.exit = exit_code;
	d->op.terminal = true;
	d->op.exit_code = exit_code;
	d->call = NYX_DUR_NONE;
}

static void
settle_expired(struct nyx_dur *d)
{
	nyx_dur_settle(d, "OPERATION_EXPIRED", "outcome_uncertain",
	    "The durable code execution expired before it could be "
	    "observed.",
	    NYX_EXIT_UNCERTAIN);
}

static void
settle_not_found(struct nyx_dur *d)
{
	nyx_dur_settle(d, "durable_code_execution_operation_not_found",
	    "outcome_uncertain",
	    "The durable code execution is no longer known to the provider.",
	    NYX_EXIT_UNCERTAIN);
}

static void
settle_cancel_uncertain(struct nyx_dur *d)
{
	nyx_dur_settle(d, "code_execution_cancel_outcome_uncertain",
	    "outcome_uncertain",
	    "The provider terminal outcome could not be confirmed before the "
	    "stop deadline.",
	    NYX_EXIT_UNCERTAIN);
}

/*
 * Stop cancellation (WIRE.md 7): stay pending, the next attempt never
 * later than the deadline and at least 1 ms away; past the deadline the
 * outcome is uncertain.
 */
static void
pend_stop(
    struct nyx_dur *d, int64_t now, long delay, const char *code, int exit_code)
{
	int64_t dl = d->op.stop_deadline_ms, next;

	if (now > dl) {
		settle_cancel_uncertain(d);
		return;
	}
	if (delay <= 0)
		delay = 1000;
	next = now + delay;
	if (next > dl)
		next = dl;
	if (next <= now)
		next = now + 1;
	d->op.retry_delay_ms = (long)(next - now);
	d->op.next_poll_at_ms = next;
	d->fail_code = code;
	d->fail_exit = exit_code;
	d->call = NYX_DUR_NONE;
}

/* Stay pending until now + delay; the step failed when code is set. */
static void
pend(
    struct nyx_dur *d, int64_t now, long delay, const char *code, int exit_code)
{
	if (d->op.stop_deadline_ms > 0) {
		pend_stop(d, now, delay, code, exit_code);
		return;
	}
	if (delay < NYX_DUR_POLL_FLOOR_MS)
		delay = NYX_DUR_POLL_FLOOR_MS;
	d->op.retry_delay_ms = delay;
	d->op.next_poll_at_ms = now + delay;
	d->fail_code = code;
	d->fail_exit = exit_code;
	d->call = NYX_DUR_NONE;
}

/* A provider code kept only when it is safe: 1-64 of [A-Za-z0-9_.-]. */
static const char *
provider_code(struct nyx_dur *d, jv doc, const char *dflt)
{
	jv e = nyx_json_get(doc, "error");
	const char *c = nyx_json_peek_str(e, "code");
	size_t n;

	if (c == NULL)
		c = nyx_json_peek_str(doc, "code");
	n = c ? strlen(c) : 0;
	if (n >= 1 && n <= 64 &&
	    strspn(c,
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	        "0123456789_.-") == n) {
		snprintf(d->codebuf, sizeof(d->codebuf), "%s", c);
		c = d->codebuf;
	} else {
		c = dflt;
	}
	jv_free(e);
	return c;
}

static const char *
proxy_http_code(struct nyx_dur *d, long status)
{
	snprintf(
	    d->codebuf, sizeof(d->codebuf), "NYXID_PROXY_HTTP_%ld", status);
	return d->codebuf;
}

/*
 * The shared classifier (aevatar 4.8) for a failed status, result or
 * cancel exchange: settles the operation or leaves it pending.
 */
static void
classify_failure(
    struct nyx_dur *d, const struct nyx_http_resp *r, jv doc, int64_t now)
{
	long delay = nyx_dur_retry_after(r->retry_after, now);
	long s = r->status;

	d->oc.http_status = (int)s;
	nyx_outcome_take_diag(&d->oc, doc);
	if (r->fail == NYX_HTTP_TOO_LARGE) {
		nyx_dur_settle(d, "durable_code_execution_response_too_large",
		    "response_too_large",
		    "The durable code execution response exceeded 1 MiB.",
		    NYX_EXIT_PROTOCOL);
	} else if (r->fail == NYX_HTTP_TIMEOUT) {
		pend(d, now, NYX_DUR_RETRY_DEFAULT_MS,
		    "durable_code_execution_request_timed_out",
		    NYX_EXIT_TEMPFAIL);
	} else if (r->fail != NYX_HTTP_OK || s == 0) {
		pend(d, now, NYX_DUR_RETRY_DEFAULT_MS,
		    "durable_code_execution_transport_unavailable",
		    NYX_EXIT_TEMPFAIL);
	} else if (s == 401 || s == 403) {
		/* this invocation's credential, not the operation's fate: it
		 * stays pending for a run with a valid one */
		pend(d, now, delay,
		    s == 401 ? "NYXID_PROXY_UNAUTHORIZED"
		             : "NYXID_PROXY_FORBIDDEN",
		    NYX_EXIT_NOPERM);
	} else if (s == 404) {
		settle_not_found(d);
	} else if (s == 408 || s == 504) {
		pend(d, now, delay, "durable_code_execution_request_timed_out",
		    NYX_EXIT_TEMPFAIL);
	} else if (s == 410) {
		settle_expired(d);
	} else if (s == 429) {
		pend(d, now, delay,
		    provider_code(d, doc, "EXECUTION_CAPACITY_EXCEEDED"),
		    NYX_EXIT_TEMPFAIL);
	} else if (s == 503) {
		pend(d, now, delay,
		    provider_code(d, doc, "ASYNC_EXECUTION_UNAVAILABLE"),
		    NYX_EXIT_TEMPFAIL);
	} else if (s >= 500) {
		pend(d, now, delay,
		    provider_code(d, doc, proxy_http_code(d, s)),
		    NYX_EXIT_TEMPFAIL);
	} else if (s == 413) {
		nyx_dur_settle(d,
		    provider_code(d, doc, "EXECUTION_PAYLOAD_TOO_LARGE"),
		    "response_too_large",
		    "The durable code execution payload was too large.",
		    NYX_EXIT_PROTOCOL);
	} else {
		nyx_dur_settle(d, provider_code(d, doc, proxy_http_code(d, s)),
		    "provider_rejected",
		    "The durable code execution call was rejected.",
		    NYX_EXIT_PROTOCOL);
	}
	if (!d->op.terminal)
		d->oc.http_status = 0;
}

/* ---- submit ---- */

static bool
receipt_valid(jv doc, int64_t *created, int64_t *expires)
{
	const char *id = nyx_json_peek_str(doc, "operation_id");
	const char *st = nyx_json_peek_str(doc, "status");
	const char *c = nyx_json_peek_str(doc, "created_at");
	const char *e = nyx_json_peek_str(doc, "expires_at");

	return jv_get_kind(doc) == JV_KIND_OBJECT && id != NULL &&
	    strlen(id) == 35 && strncmp(id, "op_", 3) == 0 &&
	    strspn(id + 3,
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	        "0123456789_-") == 32 &&
	    (one_of(st, active_states) || one_of(st, terminal_states)) &&
	    c != NULL && e != NULL && nyx_time_parse(c, created) == 0 &&
	    nyx_time_parse(e, expires) == 0 && *expires >= *created;
}

/* Deadlines only shrink. */
static void
shrink_expiry(struct nyx_op *op, int64_t incoming)
{
	if (op->expires_at_ms == 0 || incoming < op->expires_at_ms)
		op->expires_at_ms = incoming;
}

static void
apply_submit(
    struct nyx_dur *d, const struct nyx_http_resp *r, jv doc, int64_t now)
{
	long delay = nyx_dur_retry_after(r->retry_after, now);
	long s = r->status;
	const char *uncertain = NULL;
	int64_t created, expires;

	d->oc.http_status = (int)s;
	if (r->fail == NYX_HTTP_TIMEOUT)
		uncertain = "durable_code_execution_submit_timed_out";
	else if (r->fail == NYX_HTTP_TRANSPORT || s == 0)
		uncertain =
		    "durable_code_execution_submit_transport_unavailable";
	else if (r->fail == NYX_HTTP_TOO_LARGE && s == 202)
		uncertain = "durable_code_execution_submit_accepted_response_"
		            "unobserved";
	else if (r->fail == NYX_HTTP_TOO_LARGE &&
	    (s == 408 || s == 429 || s >= 500))
		uncertain = "durable_code_execution_submit_outcome_uncertain";
	else if (r->fail == NYX_HTTP_TOO_LARGE) {
		nyx_dur_settle(d, "durable_code_execution_response_too_large",
		    "response_too_large",
		    "The durable code execution response exceeded 1 MiB.",
		    NYX_EXIT_PROTOCOL);
		return;
	} else if (s == 202) {
		if (jv_get_kind(doc) != JV_KIND_OBJECT) {
			uncertain = "durable_code_execution_submit_accepted_"
			            "response_unobserved";
		} else if (!receipt_valid(doc, &created, &expires)) {
			uncertain = "durable_code_execution_submit_accepted_"
			            "receipt_unobserved";
		} else {
			/* the receipt: its id is all we take for the URLs */
			snprintf(d->op.operation_id, sizeof(d->op.operation_id),
			    "%s", nyx_json_peek_str(doc, "operation_id"));
			snprintf(d->op.status, sizeof(d->op.status), "%s",
			    nyx_json_peek_str(doc, "status"));
			d->op.etag[0] = '\0';
			/* the provider's expiry replaces the recovery window */
			d->op.expires_at_ms = 0;
			shrink_expiry(&d->op, expires);
			d->op.recovery_until_ms = 0;
			pend(d, now, delay, NULL, 0);
			return;
		}
	} else if (s == 408 || s == 504) {
		uncertain = "durable_code_execution_submit_outcome_uncertain";
	} else if (s == 429) {
		uncertain =
		    provider_code(d, doc, "EXECUTION_CAPACITY_EXCEEDED");
	} else if (s == 503) {
		uncertain =
		    provider_code(d, doc, "ASYNC_EXECUTION_UNAVAILABLE");
	} else if (s >= 500) {
		uncertain = provider_code(
		    d, doc, "durable_code_execution_submit_outcome_uncertain");
	}
	if (uncertain != NULL) {
		/* pending with no provider id: re-submit with the same key */
		pend(d, now, delay, uncertain, NYX_EXIT_TEMPFAIL);
		return;
	}
	nyx_outcome_take_diag(&d->oc, doc);
	if (s == 401 || s == 403)
		nyx_dur_settle(d,
		    s == 401 ? "NYXID_PROXY_UNAUTHORIZED"
		             : "NYXID_PROXY_FORBIDDEN",
		    "admission_denied",
		    "NyxID rejected the durable code execution submit.",
		    NYX_EXIT_NOPERM);
	else if (s == 404)
		nyx_dur_settle(d, "durable_code_execution_target_not_found",
		    "target_not_configured",
		    "The durable code execution route was not found.",
		    NYX_EXIT_PROTOCOL);
	else if (s == 409 &&
	    strcmp(provider_code(d, doc, ""), "IDEMPOTENCY_KEY_REUSE") == 0)
		nyx_dur_settle(d, "IDEMPOTENCY_KEY_REUSE", "admission_denied",
		    "The idempotency key was already used for another request.",
		    NYX_EXIT_BLOCKED);
	else if (s == 410)
		settle_expired(d);
	else if (s == 413)
		nyx_dur_settle(d,
		    provider_code(d, doc, "EXECUTION_PAYLOAD_TOO_LARGE"),
		    "response_too_large",
		    "The durable code execution payload was too large.",
		    NYX_EXIT_PROTOCOL);
	else
		nyx_dur_settle(d, provider_code(d, doc, proxy_http_code(d, s)),
		    "provider_rejected",
		    "The durable code execution submit was rejected.",
		    NYX_EXIT_PROTOCOL);
}

/* ---- snapshots (status and cancel) ---- */

static bool
etag_valid(const char *e)
{
	size_t n = e ? strlen(e) : 0, i;

	if (n < 1 || n > 512)
		return false;
	for (i = 0; i < n; i++)
		if (iscntrl((unsigned char)e[i]))
			return false;
	return true;
}

static bool
snapshot_valid(jv doc, const char *want_id, int64_t *expires)
{
	const char *id = nyx_json_peek_str(doc, "operation_id");
	const char *c = nyx_json_peek_str(doc, "created_at");
	const char *u = nyx_json_peek_str(doc, "updated_at");
	const char *e = nyx_json_peek_str(doc, "expires_at");
	jv ver = nyx_json_get(doc, "version"), f = nyx_json_get(doc, "failure");
	int64_t created, updated;
	bool ok;

	ok = jv_get_kind(doc) == JV_KIND_OBJECT && id != NULL &&
	    strcmp(id, want_id) == 0 &&
	    (one_of(nyx_json_peek_str(doc, "status"), active_states) ||
	        one_of(nyx_json_peek_str(doc, "status"), terminal_states)) &&
	    one_of(nyx_json_peek_str(doc, "phase"), phases) &&
	    one_of(nyx_json_peek_str(doc, "cleanup_status"), cleanup_states) &&
	    nyx_json_integral(ver, 0, 9007199254740991.0) &&
	    nyx_json_bool(doc, "cancel_requested") >= 0 &&
	    nyx_json_bool(doc, "result_available") >= 0 && c != NULL &&
	    u != NULL && e != NULL && nyx_time_parse(c, &created) == 0 &&
	    nyx_time_parse(u, &updated) == 0 &&
	    nyx_time_parse(e, expires) == 0 && *expires >= created &&
	    (jv_get_kind(f) == JV_KIND_INVALID ||
	        jv_get_kind(f) == JV_KIND_NULL ||
	        (jv_get_kind(f) == JV_KIND_OBJECT &&
	            nyx_json_peek_str(f, "code") != NULL));
	jv_free(ver);
	jv_free(f);
	return ok;
}

/*
 * When the operation's (stored) status is terminal, act on it: fetch the
 * result of a succeeded or failed one (with no ETag), settle a cancelled
 * or uncertain one.  False while it is still active.
 */
static bool
act_on_terminal(struct nyx_dur *d)
{
	const char *st = d->op.status;

	if (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0)
		d->call = NYX_DUR_RESULT;
	else if (strcmp(st, "cancelled") == 0)
		nyx_dur_settle(d, "code_execution_cancelled", "cancelled",
		    d->op.stop_deadline_ms > 0
		        ? "Code execution cancellation was confirmed."
		        : "The code execution was cancelled.",
		    NYX_EXIT_NO);
	else if (strcmp(st, "outcome_uncertain") == 0)
		nyx_dur_settle(d, "code_execution_outcome_uncertain",
		    "outcome_uncertain",
		    "The outcome of the code execution is uncertain.",
		    NYX_EXIT_UNCERTAIN);
	else
		return false;
	return true;
}

/*
 * Take a valid snapshot into the operation and act on its status.  Returns
 * false when the document is not a valid snapshot of this operation.
 */
static bool
take_snapshot(
    struct nyx_dur *d, const struct nyx_http_resp *r, jv doc, int64_t now)
{
	int64_t expires;
	const char *st;
	jv ver;

	if (!snapshot_valid(doc, d->op.operation_id, &expires))
		return false;
	st = nyx_json_peek_str(doc, "status");
	snprintf(d->op.status, sizeof(d->op.status), "%s", st);
	snprintf(d->op.phase, sizeof(d->op.phase), "%s",
	    nyx_json_peek_str(doc, "phase"));
	snprintf(d->op.etag, sizeof(d->op.etag), "%s", r->etag);
	ver = nyx_json_get(doc, "version");
	snprintf(
	    d->op.version, sizeof(d->op.version), "%.0f", jv_number_value(ver));
	jv_free(ver);
	d->op.cancel_requested = nyx_json_bool(doc, "cancel_requested") == 1;
	shrink_expiry(&d->op, expires);
	if (act_on_terminal(d))
		return true;
	if (d->expiring)
		settle_expired(d); /* cancelled once; still active */
	else
		pend(d, now, nyx_dur_retry_after(r->retry_after, now), NULL, 0);
	return true;
}

static void
apply_status(
    struct nyx_dur *d, const struct nyx_http_resp *r, jv doc, int64_t now)
{
	if (r->fail == NYX_HTTP_OK && (r->status == 304 || r->status == 200) &&
	    !etag_valid(r->etag)) {
		nyx_dur_settle(d, "durable_code_execution_status_etag_missing",
		    "malformed_output",
		    "The durable code execution status carried no valid ETag.",
		    NYX_EXIT_PROTOCOL);
		return;
	}
	if (r->fail == NYX_HTTP_OK && r->status == 304) {
		/* the stored snapshot holds: a terminal one is acted on
		 * exactly as on a 200, never rescheduled (WIRE 5) */
		snprintf(d->op.etag, sizeof(d->op.etag), "%s", r->etag);
		if (!act_on_terminal(d))
			pend(d, now, nyx_dur_retry_after(r->retry_after, now),
			    NULL, 0);
		return;
	}
	if (r->fail == NYX_HTTP_OK && r->status == 200) {
		if (!take_snapshot(d, r, doc, now))
			nyx_dur_settle(d,
			    "durable_code_execution_status_invalid",
			    "malformed_output",
			    "The durable code execution status was malformed.",
			    NYX_EXIT_PROTOCOL);
		return;
	}
	classify_failure(d, r, doc, now);
}

static void
apply_cancel(
    struct nyx_dur *d, const struct nyx_http_resp *r, jv doc, int64_t now)
{
	/* the one cancel of an expired operation: a terminal snapshot is
	 * the provider's truth; anything else leaves it expired */
	if (r->fail == NYX_HTTP_OK && (r->status == 200 || r->status == 202) &&
	    etag_valid(r->etag) && take_snapshot(d, r, doc, now))
		return;
	if (d->expiring) {
		settle_expired(d);
		return;
	}
	/* a stop: anything but a snapshot keeps trying until the deadline;
	 * a definitive answer (404, 410, ...) settles */
	if (r->fail == NYX_HTTP_OK && (r->status == 200 || r->status == 202))
		pend(d, now, NYX_DUR_RETRY_DEFAULT_MS,
		    "durable_code_execution_cancel_response_invalid",
		    NYX_EXIT_TEMPFAIL);
	else
		classify_failure(d, r, doc, now);
}

static void
apply_result(
    struct nyx_dur *d, const struct nyx_http_resp *r, jv doc, int64_t now)
{
	jv out, err;
	const char *code, *phase;

	if (r->fail == NYX_HTTP_OK && r->status == 409 &&
	    strcmp(provider_code(d, doc, ""), "OPERATION_NOT_TERMINAL") == 0) {
		pend(d, now, nyx_dur_retry_after(r->retry_after, now), NULL, 0);
		return;
	}
	if (r->fail != NYX_HTTP_OK || r->status != 200) {
		classify_failure(d, r, doc, now);
		return;
	}
	d->op.terminal = true;
	d->call = NYX_DUR_NONE;
	out = nyx_json_get(doc, "output");
	if (jv_get_kind(out) != JV_KIND_INVALID) {
		nyx_chrono_classify_output(doc, &d->oc);
		if (d->oc.code != NULL &&
		    strcmp(d->oc.code, "code_execution_response_invalid") == 0)
			d->oc.code = "durable_code_execution_result_invalid";
		d->op.exit_code = d->oc.exit;
		d->op.child_exit = d->oc.child_exit;
		jv_free(out);
		return;
	}
	jv_free(out);
	nyx_outcome_take_diag(&d->oc, doc);
	if (jv_get_kind(doc) != JV_KIND_OBJECT ||
	    nyx_json_bool(doc, "success") != 0 ||
	    (code = provider_code(d, doc, NULL)) == NULL) {
		nyx_dur_settle(d, "durable_code_execution_result_invalid",
		    "malformed_output",
		    "The durable code execution result was malformed.",
		    NYX_EXIT_PROTOCOL);
		return;
	}
	if (strcmp(code, "EXECUTION_CANCELLED") == 0) {
		nyx_dur_settle(d, "code_execution_cancelled", "cancelled",
		    "The code execution was cancelled.", NYX_EXIT_NO);
		return;
	}
	if (strcmp(code, "OUTCOME_UNCERTAIN") == 0) {
		nyx_dur_settle(d, "code_execution_outcome_uncertain",
		    "outcome_uncertain",
		    "The outcome of the code execution is uncertain.",
		    NYX_EXIT_UNCERTAIN);
		return;
	}
	nyx_dur_settle(d, code, "execution_failed",
	    "Durable code execution failed before producing a result.",
	    NYX_EXIT_NO);
	err = nyx_json_get(doc, "error");
	phase = nyx_json_peek_str(err, "phase");
	if (one_of(phase, failure_phases))
		snprintf(d->oc.provider_phase, sizeof(d->oc.provider_phase),
		    "%s", phase);
	jv_free(err);
}

/* ---- the step ---- */

void
nyx_dur_begin(struct nyx_dur *d, int64_t now)
{
	d->started_terminal = d->op.terminal;
	d->started_with_id = d->op.operation_id[0] != '\0';
	d->fail_code = NULL;
	d->fail_exit = 0;
	d->exchanges = 0;
	d->longest_ms = 0;
	d->expiring = false;
	d->applying = NYX_DUR_NONE;
	if (d->op.terminal) {
		d->call = NYX_DUR_NONE;
	} else if (d->op.stop_deadline_ms > 0) {
		/* a stop: never a submit or a poll, only the cancel */
		if (now > d->op.stop_deadline_ms) {
			d->applying = NYX_DUR_CANCEL;
			settle_cancel_uncertain(d);
		} else if (d->op.operation_id[0] == '\0')
			pend_stop(d, now, 1000, NULL, 0); /* no HTTP cancel */
		else
			d->call = NYX_DUR_CANCEL;
	} else if (d->op.operation_id[0] == '\0') {
		if (now > d->op.recovery_until_ms &&
		    (d->applying = NYX_DUR_SUBMIT) == NYX_DUR_SUBMIT)
			nyx_dur_settle(d,
			    "code_execution_submit_recovery_expired",
			    "outcome_uncertain",
			    "The submit could not be confirmed within its "
			    "recovery window.",
			    NYX_EXIT_UNCERTAIN);
		else
			d->call = NYX_DUR_SUBMIT; /* the same key, again */
	} else if (strcmp(d->op.status, "succeeded") == 0 ||
	    strcmp(d->op.status, "failed") == 0) {
		/* a stored terminal snapshot whose result is not stored yet:
		 * the result, on every step until it is (WIRE 5) */
		d->call = NYX_DUR_RESULT;
	} else if (now > nyx_dur_deadline(&d->op)) {
		d->expiring = true;
		d->call = NYX_DUR_CANCEL;
	} else {
		d->call = NYX_DUR_STATUS;
	}
}

void
nyx_dur_apply(struct nyx_dur *d, const struct nyx_http_resp *r, int64_t now)
{
	enum nyx_dur_call c = d->call;
	jv doc = jv_invalid();

	d->applying = c;
	d->exchanges++;
	if (r->elapsed_ms > d->longest_ms)
		d->longest_ms = r->elapsed_ms;
	if (r->fail == NYX_HTTP_OK && r->body.len > 0)
		doc = nyx_json_parse(r->body.data, r->body.len);
	d->call = NYX_DUR_NONE;
	switch (c) {
	case NYX_DUR_SUBMIT:
		apply_submit(d, r, doc, now);
		break;
	case NYX_DUR_STATUS:
		apply_status(d, r, doc, now);
		break;
	case NYX_DUR_RESULT:
		apply_result(d, r, doc, now);
		break;
	case NYX_DUR_CANCEL:
		apply_cancel(d, r, doc, now);
		break;
	default:
		break;
	}
	jv_free(doc);
}

/* ---- records ---- */

static jv
record(const char *type, const struct nyx_op *op, const char *diag)
{
	jv r = jv_object();

	r = jv_object_set(r, jv_string("v"), jv_number(1));
	r = jv_object_set(r, jv_string("type"), jv_string(type));
	r = jv_object_set(r, jv_string("handle"), jv_string(op->handle));
	r = jv_object_set(r, jv_string("operation_id"),
	    nyx_json_str_or_null(
	        op->operation_id[0] ? op->operation_id : NULL));
	return jv_object_set(r, jv_string("diagnostic_id"), jv_string(diag));
}

jv
nyx_dur_receipt_record(const struct nyx_op *op, const char *diag)
{
	jv r = record("exec.receipt", op, diag), rt = jv_object();

	rt = jv_object_set(
	    rt, jv_string("user_service_id"), jv_string(op->user_service_id));
	rt = jv_object_set(rt, jv_string("slug"), jv_string(op->slug));
	r = jv_object_set(r, jv_string("route"), rt);
	r = jv_object_set(r, jv_string("status"), jv_string(op->status));
	r = jv_object_set(r, jv_string("expires_at"),
	    nyx_json_time(op->operation_id[0] ? nyx_dur_deadline(op)
	                                      : op->recovery_until_ms));
	return jv_object_set(
	    r, jv_string("next_poll_at"), nyx_json_time(op->next_poll_at_ms));
}

jv
nyx_dur_status_record(const struct nyx_dur *d, const char *diag)
{
	const struct nyx_op *op = &d->op;
	jv r = record("exec.status", op, diag);

	r = jv_object_set(r, jv_string("status"), jv_string(op->status));
	r = jv_object_set(r, jv_string("phase"),
	    nyx_json_str_or_null(op->phase[0] ? op->phase : NULL));
	r = jv_object_set(r, jv_string("version"),
	    nyx_json_str_or_null(op->version[0] ? op->version : NULL));
	r = jv_object_set(r, jv_string("terminal"), jv_bool(op->terminal));
	r = jv_object_set(
	    r, jv_string("cancel_requested"), jv_bool(op->cancel_requested));
	r = jv_object_set(r, jv_string("expires_at"),
	    nyx_json_time(op->operation_id[0] ? nyx_dur_deadline(op)
	                                      : op->recovery_until_ms));
	r = jv_object_set(r, jv_string("next_poll_at"),
	    op->terminal ? jv_null() : nyx_json_time(op->next_poll_at_ms));
	r = jv_object_set(
	    r, jv_string("stop_deadline"), nyx_json_time(op->stop_deadline_ms));
	if (d->fail_code != NULL) {
		jv e = jv_object();

		e = jv_object_set(
		    e, jv_string("code"), jv_string(d->fail_code));
		e = jv_object_set(e, jv_string("retryable"),
		    jv_bool(d->fail_exit == NYX_EXIT_TEMPFAIL));
		r = jv_object_set(r, jv_string("error"), e);
		r = jv_object_set(
		    r, jv_string("exit"), jv_number(d->fail_exit));
	}
	return r;
}

jv
nyx_dur_result_record(const struct nyx_dur *d, const char *diag)
{
	struct nyx_exec_outcome oc = d->oc; /* shallow: for the times */
	jv r;

	/* from the submit to the settling; an operation that was settled
	 * before this step keeps the time its row was settled at */
	oc.request_id = d->op.request_id[0] ? d->op.request_id : NULL;
	oc.started_ms = d->op.created_at_ms;
	oc.finished_ms = d->settled_ms > 0 ? d->settled_ms
	    : d->started_terminal && d->op.updated_at_ms > 0
	    ? d->op.updated_at_ms
	    : nyx_now_ms();
	r = nyx_exec_result_record(&oc, "nyxid", "durable", diag);

	r = jv_object_set(r, jv_string("handle"), jv_string(d->op.handle));
	return jv_object_set(r, jv_string("operation_id"),
	    nyx_json_str_or_null(
	        d->op.operation_id[0] ? d->op.operation_id : NULL));
}
