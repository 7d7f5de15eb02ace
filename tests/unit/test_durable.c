/*
 * Unit tests of the durable client's pure state machine (WIRE.md 5, 7):
 * nyx_dur_begin decides the exchange, nyx_dur_apply takes its answer.
 * Each row is an operation's state, the answer to its next exchange, and
 * what must follow; no server, no ledger.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dur_fixture.h"
#include "nyx_durable.h"
#include "nyx_test.h"

#define NOW 1800000000000LL /* 2027-01-15T08:00:00Z */
#define OP DUR_FIXTURE_OP

#define SNAP(status)                                                           \
	"{\"operation_id\":\"" OP "\",\"status\":\"" status "\","              \
	"\"phase\":\"execute\",\"cleanup_status\":\"not_started\","            \
	"\"version\":3,\"cancel_requested\":false,\"result_available\":"       \
	"false,\"created_at\":\"2027-01-15T07:59:00Z\",\"updated_at\":"        \
	"\"2027-01-15T07:59:30Z\",\"expires_at\":\"2027-01-16T07:59:00Z\"}"

enum start { FRESH, KNOWN, STOPPING };

struct row {
	const char *name;
	enum start start;
	enum nyx_dur_call expect_call; /* what begin decides */
	long status; /* the answer; 0 with fail: none */
	enum nyx_http_fail fail;
	const char *body, *etag, *retry_after;
	/* what must follow */
	bool terminal;
	int exit; /* the tool's exit when terminal, else fail_exit */
	const char *code; /* outcome code (terminal) or fail_code, or NULL */
	enum nyx_dur_call
	    next; /* the call that follows (NONE: the step ends) */
	long delay_ms; /* when pending: next_poll_at - NOW, or -1 */
};

static const struct row rows[] = {
    {"submit 202: the receipt's id is kept", FRESH, NYX_DUR_SUBMIT, 202,
        NYX_HTTP_OK,
        "{\"operation_id\":\"" OP "\",\"status\":\"queued\",\"created_at\":"
        "\"2027-01-15T07:59:00Z\",\"expires_at\":\"2027-01-16T07:59:00Z\"}",
        NULL, NULL, false, 0, NULL, NYX_DUR_NONE, -1},
    {"submit 502: uncertain, pending for a resubmit with the key", FRESH,
        NYX_DUR_SUBMIT, 502, NYX_HTTP_OK, "{}", NULL, NULL, false, 75,
        "durable_code_execution_submit_outcome_uncertain", NYX_DUR_NONE, 2000},
    {"submit dropped: pending", FRESH, NYX_DUR_SUBMIT, 0, NYX_HTTP_TRANSPORT,
        NULL, NULL, NULL, false, 75, NULL, NYX_DUR_NONE, -1},
    {"submit 401: terminal 77", FRESH, NYX_DUR_SUBMIT, 401, NYX_HTTP_OK, "{}",
        NULL, NULL, true, 77, NULL, NYX_DUR_NONE, -1},
    {"submit 409 IDEMPOTENCY_KEY_REUSE: terminal 3", FRESH, NYX_DUR_SUBMIT, 409,
        NYX_HTTP_OK, "{\"error\":{\"code\":\"IDEMPOTENCY_KEY_REUSE\"}}", NULL,
        NULL, true, 3, "IDEMPOTENCY_KEY_REUSE", NYX_DUR_NONE, -1},
    {"submit 413: terminal 76", FRESH, NYX_DUR_SUBMIT, 413, NYX_HTTP_OK, "{}",
        NULL, NULL, true, 76, NULL, NYX_DUR_NONE, -1},
    {"status 200 running: pending, polled again", KNOWN, NYX_DUR_STATUS, 200,
        NYX_HTTP_OK, SNAP("running"), "\"v3\"", NULL, false, 0, NULL,
        NYX_DUR_NONE, -1},
    {"status 200 succeeded: the result is fetched next", KNOWN, NYX_DUR_STATUS,
        200, NYX_HTTP_OK, SNAP("succeeded"), "\"v3\"", NULL, false, 0, NULL,
        NYX_DUR_RESULT, -1},
    {"status 200 cancelled: terminal 1 without a result fetch", KNOWN,
        NYX_DUR_STATUS, 200, NYX_HTTP_OK, SNAP("cancelled"), "\"v3\"", NULL,
        true, 1, "code_execution_cancelled", NYX_DUR_NONE, -1},
    {"status 200 outcome_uncertain: terminal 4", KNOWN, NYX_DUR_STATUS, 200,
        NYX_HTTP_OK, SNAP("outcome_uncertain"), "\"v3\"", NULL, true, 4,
        "code_execution_outcome_uncertain", NYX_DUR_NONE, -1},
    {"status 200 without an ETag: malformed, terminal 76", KNOWN,
        NYX_DUR_STATUS, 200, NYX_HTTP_OK, SNAP("running"), NULL, NULL, true, 76,
        "durable_code_execution_status_etag_missing", NYX_DUR_NONE, -1},
    {"status 404 once the id is known: terminal 4, never resubmitted", KNOWN,
        NYX_DUR_STATUS, 404, NYX_HTTP_OK, "{}", NULL, NULL, true, 4,
        "durable_code_execution_operation_not_found", NYX_DUR_NONE, -1},
    {"status 410: OPERATION_EXPIRED, 4", KNOWN, NYX_DUR_STATUS, 410,
        NYX_HTTP_OK, "{}", NULL, NULL, true, 4, "OPERATION_EXPIRED",
        NYX_DUR_NONE, -1},
    {"status 503 with Retry-After 7: pending for 7 s", KNOWN, NYX_DUR_STATUS,
        503, NYX_HTTP_OK, "{}", NULL, "7", false, 75, NULL, NYX_DUR_NONE, 7000},
    {"status 429 with Retry-After 99: clamped to 30 s", KNOWN, NYX_DUR_STATUS,
        429, NYX_HTTP_OK, "{}", NULL, "99", false, 75, NULL, NYX_DUR_NONE,
        30000},
    {"status 401: this credential's, the operation stays pending", KNOWN,
        NYX_DUR_STATUS, 401, NYX_HTTP_OK, "{}", NULL, NULL, false, 77, NULL,
        NYX_DUR_NONE, -1},
    {"a stop with a provider id: the cancel, confirmed", STOPPING,
        NYX_DUR_CANCEL, 200, NYX_HTTP_OK, SNAP("cancelled"), "\"v4\"", NULL,
        true, 1, "code_execution_cancelled", NYX_DUR_NONE, -1},
    {"a stop that loses to success: the provider's result wins", STOPPING,
        NYX_DUR_CANCEL, 200, NYX_HTTP_OK, SNAP("succeeded"), "\"v4\"", NULL,
        false, 0, NULL, NYX_DUR_RESULT, -1},
};

static void
start(struct nyx_dur *d, enum start s)
{
	dur_fixture(d, s != FRESH, NOW);
	if (s == STOPPING)
		d->op.stop_deadline_ms = NOW + 60000;
}

static bool
check_row(const struct row *w)
{
	struct nyx_dur d;
	struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;
	bool ok = true;
	const char *code;

	start(&d, w->start);
	nyx_dur_begin(&d, NOW);
	if (d.call != w->expect_call) {
		printf("#   begin chose call %d\n", (int)d.call);
		ok = false;
	}
	r.status = w->status;
	r.fail = w->fail;
	nyx_buf_init(&r.body, 0);
	if (w->body != NULL)
		nyx_buf_addstr(&r.body, w->body);
	r.etag = w->etag ? strdup(w->etag) : NULL;
	r.retry_after = w->retry_after ? strdup(w->retry_after) : NULL;
	nyx_dur_apply(&d, &r, NOW);
	code = d.op.terminal ? d.oc.code : d.fail_code;
	if (d.op.terminal != w->terminal ||
	    (w->terminal ? d.oc.exit : d.fail_exit) != w->exit ||
	    (w->code != NULL && (code == NULL || strcmp(code, w->code) != 0)) ||
	    d.call != w->next ||
	    (w->delay_ms >= 0 && d.op.next_poll_at_ms - NOW != w->delay_ms)) {
		printf(
		    "#   terminal %d exit %d/%d code %s next %d delay %lld\n",
		    d.op.terminal, d.oc.exit, d.fail_exit, code ? code : "-",
		    (int)d.call, (long long)(d.op.next_poll_at_ms - NOW));
		ok = false;
	}
	if (w->start == FRESH && w->status == 202)
		ok = ok && strcmp(d.op.operation_id, OP) == 0;
	if (w->etag != NULL && w->status == 200 && !w->terminal)
		ok = ok && strcmp(d.op.etag, w->etag) == 0;
	nyx_http_resp_free(&r);
	nyx_dur_free(&d);
	return ok;
}

static void
test_begin(void)
{
	struct nyx_dur d;

	start(&d, FRESH);
	d.op.recovery_until_ms = NOW - 1;
	nyx_dur_begin(&d, NOW);
	CHECK(d.op.terminal && d.oc.exit == 4 &&
	        strcmp(d.oc.code, "code_execution_submit_recovery_expired") ==
	            0 &&
	        d.call == NYX_DUR_NONE,
	    "begin: past the recovery window, settled 4 with no request");
	nyx_dur_free(&d);
	start(&d, KNOWN);
	d.op.expires_at_ms = NOW - 1;
	nyx_dur_begin(&d, NOW);
	CHECK(d.call == NYX_DUR_CANCEL && d.expiring,
	    "begin: a known operation past its expiry is cancelled once");
	nyx_dur_free(&d);
	start(&d, STOPPING);
	d.op.operation_id[0] = '\0';
	nyx_dur_begin(&d, NOW);
	CHECK(d.call == NYX_DUR_NONE && !d.op.terminal,
	    "begin: a stop without a provider id makes no HTTP cancel");
	nyx_dur_free(&d);
	start(&d, STOPPING);
	d.op.stop_deadline_ms = NOW - 1;
	nyx_dur_begin(&d, NOW);
	CHECK(d.op.terminal && d.oc.exit == 4 &&
	        strcmp(d.oc.code, "code_execution_cancel_outcome_uncertain") ==
	            0,
	    "begin: past the stop deadline, cancel_outcome_uncertain (4)");
	nyx_dur_free(&d);
}

static void
test_key(void)
{
	char key[NYX_DUR_KEY_LEN + 1];

	CHECK(nyx_dur_key("u-alice", "r-1", "code_execute", key) == 0 &&
	        nyx_dur_key_valid(key) &&
	        strncmp(key, NYX_DUR_KEY_PREFIX, 18) == 0,
	    "key: the prefix and 64 lowercase hex");
	CHECK(!nyx_dur_key_valid(NYX_DUR_KEY_PREFIX "XYZ"),
	    "key: another shape is refused");
	CHECK(nyx_dur_retry_after("5", NOW) == 5000 &&
	        nyx_dur_retry_after("-3", NOW) == 0 &&
	        nyx_dur_retry_after("100", NOW) == 30000 &&
	        nyx_dur_retry_after(NULL, NOW) == NYX_DUR_RETRY_DEFAULT_MS,
	    "Retry-After: seconds, clamped to 0..30 s, default 2 s");
}

int
main(void)
{
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		CHECK(check_row(&rows[i]), rows[i].name);
	test_begin();
	test_key();
	return nyx_test_done();
}
