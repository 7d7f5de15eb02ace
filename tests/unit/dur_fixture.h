/*
 * One durable operation for the state machine's tests and its fuzz
 * target: fresh (never submitted) or known (the provider's id recorded,
 * running, an hour before its expiry).
 */
#ifndef NYX_DUR_FIXTURE_H
#define NYX_DUR_FIXTURE_H

#include <stdbool.h>
#include <stdio.h>

#include "nyx_durable.h"

#define DUR_FIXTURE_OP "op_0123456789abcdef0123456789abcdef"
#define DUR_FIXTURE_KEY                                                        \
	"tool:v1:operation:"                                                   \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static inline void
dur_fixture(struct nyx_dur *d, bool known, int64_t now)
{
	nyx_dur_init(d);
	snprintf(d->op.handle, sizeof(d->op.handle), "h-test");
	snprintf(d->op.base_url, sizeof(d->op.base_url), "http://127.0.0.1:1");
	snprintf(d->op.user_service_id, sizeof(d->op.user_service_id), "us-1");
	snprintf(d->op.slug, sizeof(d->op.slug), "chrono-sandbox");
	snprintf(d->op.language, sizeof(d->op.language), "python");
	snprintf(d->op.status, sizeof(d->op.status), "submitting");
	d->op.timeout_secs = 30;
	d->op.created_at_ms = d->op.next_poll_at_ms = now - 1000;
	d->op.recovery_until_ms = now + NYX_DUR_RECOVERY_MS;
	d->op.child_exit = -1;
	nyx_buf_addstr(&d->secret, DUR_FIXTURE_KEY "\nprint(1)");
	if (known) {
		snprintf(d->op.operation_id, sizeof(d->op.operation_id),
		    DUR_FIXTURE_OP);
		snprintf(d->op.status, sizeof(d->op.status), "running");
		d->op.expires_at_ms = now + 3600000;
	}
}

#endif
