/*
 * Durable snapshots and results (WIRE 5, 7): any answer, of any status,
 * to each exchange of the state machine.  The first byte picks the
 * operation's state and call, the second the status, the third which of
 * ETag and Retry-After come with it; the rest is the body.  A succeeded
 * or failed snapshot leads to the result fetch, which gets the same body.
 */
#include <stdio.h>
#include <string.h>

#include "../unit/dur_fixture.h"
#include "fuzz.h"
#include "nyx_durable.h"

#define NOW 1800000000000LL

static const long statuses[] = {200, 201, 202, 204, 304, 400, 401, 403, 404,
    408, 409, 410, 412, 413, 422, 429, 500, 502, 503, 504, 0};

static void
start(struct nyx_dur *d, int state)
{
	dur_fixture(d, state > 0, NOW);
	if (state > 0)
		snprintf(d->op.etag, sizeof(d->op.etag), "\"v2\"");
	if (state == 2)
		d->op.stop_deadline_ms = NOW + 60000;
	if (state == 3)
		d->op.expires_at_ms = NOW - 1; /* the one expiry cancel */
}

static void
answer(struct nyx_dur *d, long status, int hdrs, const uint8_t *body, size_t n)
{
	struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;

	r.status = status;
	r.fail = status == 0
	    ? (hdrs & 4 ? NYX_HTTP_TIMEOUT : NYX_HTTP_TRANSPORT)
	    : (hdrs & 8 ? NYX_HTTP_TOO_LARGE : NYX_HTTP_OK);
	r.sent = (hdrs & 16) != 0;
	nyx_buf_init(&r.body, 0);
	nyx_buf_add(&r.body, (const char *)body, n);
	if (hdrs & 1)
		r.etag = strdup("\"v3\"");
	if (hdrs & 2)
		r.retry_after =
		    strdup(hdrs & 32 ? "Wed, 21 Oct 2026 07:28:00 GMT" : "7");
	nyx_dur_apply(d, &r, NOW);
	nyx_http_resp_free(&r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nyx_dur d;
	long status;
	int hdrs, i;

	if (size < 3)
		return 0;
	start(&d, data[0] % 4);
	status = statuses[data[1] % (sizeof(statuses) / sizeof(statuses[0]))];
	hdrs = data[2];
	nyx_dur_begin(&d, NOW);
	/* the answer, then the result fetch or the next poll it leads to */
	for (i = 0; i < 3 && d.call != NYX_DUR_NONE; i++) {
		answer(&d, status, hdrs, data + 3, size - 3);
		if (d.call == NYX_DUR_RESULT)
			status = 200;
	}
	if (d.op.terminal) {
		jv rec = nyx_dur_result_record(&d, "nyx-fuzz");
		/* a terminal operation has an exit and a record */
		FUZZ_ASSERT(d.oc.exit >= 0 && d.oc.exit < 128);
		FUZZ_ASSERT(jv_get_kind(rec) == JV_KIND_OBJECT);
		jv_free(rec);
	} else {
		/* never polled sooner than the floor, never later than 30 s */
		FUZZ_ASSERT(d.op.next_poll_at_ms == 0 ||
		    d.op.next_poll_at_ms - NOW <= NYX_DUR_RETRY_MAX_MS + 1000);
	}
	nyx_dur_free(&d);
	return 0;
}
