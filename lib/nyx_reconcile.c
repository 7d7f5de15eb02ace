#include "nyx_reconcile.h"

#include <stdlib.h>
#include <string.h>

#include "nyx_audit.h"
#include "nyx_log.h"
#include "nyx_time.h"

void
nyx_reconcile_items_init(struct nyx_rec_item *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		memset(&v[i], 0, sizeof(v[i]));
		nyx_dur_init(&v[i].d);
	}
}

/*
 * Take (or renew) the lease and reload: 1 ready for a step, 0 not ours
 * (busy), -1 with err (73 lease_lost when a lease we held was taken).
 */
static int
take(struct nyx_reconcile *r, struct nyx_rec_item *it, int64_t now,
    struct nyx_err *err)
{
	struct nyx_op *op = &it->d.op;

	switch (nyx_ledger_claim(
	    r->l, op->handle, r->lease, now, NYX_DUR_LEASE_MS, err)) {
	case 1:
		break;
	case 0:
		if (it->held)
			return nyx_err_set(err, NYX_EXIT_CANTCREAT,
			    "lease_lost", "the lease on %s was lost",
			    op->handle);
		if (!it->busy)
			nyx_log(NYX_LOG_INFO,
			    "%s is being reconciled by another process%s",
			    op->handle, r->wait ? "; waiting for it" : "");
		/* waiting, it is claimed again each round until the other
		 * process settles it or lets it go: --wait means settled */
		it->busy = true;
		it->done = !r->wait;
		return 0;
	default:
		return -1;
	}
	it->held = true;
	it->busy = false;
	/* reload: another process may have moved it on */
	return nyx_dur_load(r->l, op->handle, &it->d, err) < 0 ? -1 : 1;
}

/*
 * Select the items due this round into due[], after their stop request is
 * persisted; *soonest: the earliest not-due poll time.
 */
static int
select_due(struct nyx_reconcile *r, struct nyx_rec_item *v, size_t n,
    struct nyx_dur **due, size_t *m, int64_t *soonest, struct nyx_err *err)
{
	int64_t now = nyx_now_ms();
	size_t i;

	*m = 0;
	for (i = 0; i < n; i++) {
		struct nyx_rec_item *it = &v[i];
		struct nyx_op *op = &it->d.op;

		if (it->done || op->terminal)
			continue;
		if (r->base_url == NULL ||
		    strcmp(op->base_url, r->base_url) != 0) {
			/* a credential never follows a record to another host */
			nyx_log(NYX_LOG_ERROR,
			    "%s was submitted to another base URL; reconcile "
			    "it "
			    "with that --base-url",
			    op->handle);
			it->d.fail_code = "base_url_mismatch";
			it->d.fail_exit = NYX_EXIT_CONFIG;
			it->done = true;
			continue;
		}
		switch (take(r, it, now, err)) {
		case 1:
			break;
		case 0:
			/* busy: look again in a second */
			if (!it->done && now + 1000 < *soonest)
				*soonest = now + 1000;
			continue;
		default:
			return -1;
		}
		if (op->terminal) {
			/* settled by another process meanwhile: nothing to
			 * step or persist (its terminal audit is that one's) */
			it->done = true;
			continue;
		}
		if (it->stop_seen) {
			/* a stop arrived while we slept: step at once */
			it->stop_seen = false;
			op->next_poll_at_ms = now;
		}
		if (op->next_poll_at_ms > now && !r->now) {
			if (!r->wait && !r->cancel) {
				it->done = true; /* not due: no request */
				continue;
			}
			if (r->wait) {
				if (op->next_poll_at_ms < *soonest)
					*soonest = op->next_poll_at_ms;
				continue;
			}
		}
		nyx_dur_begin(&it->d, now);
		due[(*m)++] = &it->d;
	}
	return 0;
}

/* Persist every step taken; mark what needs no further step. */
static int
persist(struct nyx_reconcile *r, struct nyx_rec_item *v, size_t n,
    int64_t *soonest, struct nyx_err *err)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct nyx_rec_item *it = &v[i];

		if (!it->held || it->done)
			continue;
		if (nyx_dur_persist(r->l, &it->d, r->diag, err) < 0)
			return -1;
		it->exchanges += it->d.exchanges;
		if (it->d.longest_ms > it->longest_ms)
			it->longest_ms = it->d.longest_ms;
		nyx_log(NYX_LOG_DEBUG, "%s: %s after %d exchange(s)",
		    it->d.op.handle, it->d.op.status, it->d.exchanges);
		if (it->d.fail_code != NULL)
			nyx_log(NYX_LOG_WARN, "%s: %s; it stays pending",
			    it->d.op.handle, it->d.fail_code);
		if (!it->d.op.terminal && it->d.op.next_poll_at_ms < *soonest)
			*soonest = it->d.op.next_poll_at_ms;
		/* waiting stops on this invocation's credential */
		if (it->d.op.terminal || !r->wait ||
		    it->d.fail_exit == NYX_EXIT_NOPERM)
			it->done = true;
	}
	return 0;
}

/* A settled operation whose terminal audit is frozen: write it now. */
static void
finalize(struct nyx_reconcile *r, struct nyx_rec_item *v, size_t n)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		char **ids = NULL;
		struct nyx_err aerr = NYX_ERR_ZERO;

		if (!v[i].d.op.terminal ||
		    nyx_ledger_intents(r->l, v[i].d.op.handle, &ids, &aerr) <
		        0) {
			nyx_ledger_free_list(ids);
			continue;
		}
		for (k = 0; ids[k] != NULL; k++)
			if (nyx_audit_replay_intent(r->l, nyx_ledger_dir(r->l),
			        ids[k], NULL, &aerr) != 0)
				v[i].finalizing =
				    true; /* never a provider call */
		nyx_ledger_free_list(ids);
	}
}

int
nyx_reconcile_stop(
    struct nyx_ledger *l, struct nyx_rec_item *v, size_t n, struct nyx_err *err)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int64_t deadline;

		if (v[i].d.op.terminal)
			continue;
		if (nyx_ledger_request_stop(l, v[i].d.op.handle, nyx_now_ms(),
		        NYX_STOP_WINDOW_MS, &deadline, err) < 0)
			return -1;
		if (deadline > 0) {
			v[i].d.op.stop_deadline_ms = deadline;
			v[i].stop_seen = true;
			v[i].done = false;
		}
	}
	return 0;
}

/*
 * Sleep ms in slices of at most a second, looking each time for a stop
 * another process persisted and for an interrupt.  1 when the sleep was
 * cut short (step now), 2 to detach, 0 after the whole sleep, -1 err.
 */
static int
nap(struct nyx_reconcile *r, struct nyx_rec_item *v, size_t n, int64_t ms,
    int *seen, struct nyx_err *err)
{
	int64_t until = nyx_mono_ms() + ms;

	for (;;) {
		int64_t left = until - nyx_mono_ms();
		size_t i;
		bool woke = false;

		if (r->interrupts != NULL && *r->interrupts != *seen) {
			*seen = *r->interrupts;
			if (r->detach_on_interrupt || *seen >= 2)
				return 2;
			nyx_log_line(
			    "stopping: the operation is being cancelled "
			    "(interrupt again to detach)");
			return nyx_reconcile_stop(r->l, v, n, err) < 0 ? -1 : 1;
		}
		for (i = 0; i < n; i++) {
			if (!v[i].held || v[i].d.op.terminal ||
			    v[i].d.op.stop_deadline_ms > 0)
				continue;
			if (nyx_ledger_stop_deadline(r->l, v[i].d.op.handle) >
			    0)
				woke = v[i].stop_seen = true;
		}
		if (woke)
			return 1;
		if (left <= 0)
			return 0;
		nyx_sleep_ms(left < 1000 ? left : 1000);
	}
}

int
nyx_reconcile_run(struct nyx_reconcile *r, struct nyx_rec_item *v, size_t n,
    struct nyx_err *err)
{
	struct nyx_dur **due = calloc(n ? n : 1, sizeof(*due));
	int64_t started = nyx_mono_ms();
	int rc = -1, seen = r->interrupts ? *r->interrupts : 0;

	if (due == NULL ||
	    (r->lease[0] == '\0' && nyx_ledger_owner(r->lease) < 0)) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	for (;;) {
		int64_t soonest = INT64_MAX, ms;
		size_t m, i, left = 0;

		if (select_due(r, v, n, due, &m, &soonest, err) < 0)
			goto out;
		if (m > 0 &&
		    nyx_dur_run(r->http, due, m, r->token, r->exchange_ms,
		        r->max_inflight, nyx_now_ms) < 0) {
			nyx_err_set(
			    err, NYX_EXIT_OSERR, "oom", "out of memory");
			goto out;
		}
		if (persist(r, v, n, &soonest, err) < 0)
			goto out;
		for (i = 0; i < n; i++)
			left += !v[i].done && !v[i].d.op.terminal;
		if (left == 0)
			break;
		if (r->progress != NULL)
			r->progress(v, n, nyx_mono_ms() - started, r->arg);
		ms = soonest == INT64_MAX ? NYX_DUR_POLL_FLOOR_MS
		                          : soonest - nyx_now_ms();
		if (ms > NYX_DUR_RETRY_MAX_MS)
			ms = NYX_DUR_RETRY_MAX_MS;
		if (ms < NYX_DUR_POLL_FLOOR_MS)
			ms = NYX_DUR_POLL_FLOOR_MS;
		switch (nap(r, v, n, ms, &seen, err)) {
		case -1:
			goto out;
		case 2:
			for (i = 0; i < n; i++)
				v[i].detached = !v[i].d.op.terminal;
			goto finish;
		default:
			break;
		}
	}
finish:
	if (r->finalize_audit)
		finalize(r, v, n);
	rc = 0;
out:
	free(due);
	return rc;
}

void
nyx_reconcile_end(struct nyx_reconcile *r, struct nyx_rec_item *v, size_t n)
{
	size_t i;

	for (i = 0; v != NULL && i < n; i++) {
		struct nyx_err e = NYX_ERR_ZERO;

		if (v[i].held)
			nyx_ledger_release(
			    r->l, v[i].d.op.handle, r->lease, &e);
		v[i].held = false;
		nyx_dur_free(&v[i].d);
	}
}

jv
nyx_reconcile_stored(struct nyx_ledger *l, const char *handle, const char *diag)
{
	char *doc = nyx_ledger_result(l, handle);
	jv rec = doc ? jv_parse(doc) : jv_invalid();

	free(doc);
	if (jv_get_kind(rec) != JV_KIND_OBJECT) {
		jv_free(rec);
		nyx_log(NYX_LOG_ERROR, "the stored result of %s is unreadable",
		    handle);
		return jv_invalid();
	}
	return jv_object_set(rec, jv_string("diagnostic_id"), jv_string(diag));
}

bool
nyx_reconcile_settled_now(const struct nyx_rec_item *it)
{
	return it->d.exchanges > 0 || it->d.oc.code != NULL || it->d.oc.success;
}
