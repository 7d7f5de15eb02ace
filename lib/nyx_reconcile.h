/*
 * nyx_reconcile: bring durable operations of the ledger forward, one
 * bounded step each (PRODUCT 7, WIRE 5), for one operation (code-exec)
 * or many (exec-status).
 *
 * A round takes each operation's lease (one another process holds is left
 * alone: busy), reloads it, persists a stop request first when asked to
 * cancel, begins the steps that are due, makes their exchanges
 * concurrently (nyx_dur_run) and persists every operation before
 * anything is printed.  With `wait` it sleeps until the soonest operation
 * is due (250 ms to 30 s) and goes again, until each one is terminal or
 * stopped by this invocation's rejected credential; one that another
 * process holds is claimed again every second until that process settles
 * it or lets it go (without `wait` it is left alone at once).  A waiting
 * run never sleeps past a stop: it wakes every second to look for one
 * that another process persisted (exec-status --cancel) and steps at
 * once when it finds one.  Printing is the caller's, afterwards.
 *
 * The items are the caller's; nyx_reconcile_end() releases the leases
 * taken and frees them.  Functions return 0, or -1 with err.
 */
#ifndef NYX_RECONCILE_H
#define NYX_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jv.h>

#include "nyx_durable.h"
#include "nyx_err.h"
#include "nyx_http.h"
#include "nyx_ledger.h"

#define NYX_STOP_WINDOW_MS (120 * 1000L) /* WIRE.md 7 */

struct nyx_rec_item {
	struct nyx_dur d;
	bool held; /* our lease */
	bool busy; /* another process holds it: no step here */
	bool done; /* no further step in this invocation */
	bool finalizing; /* settled, its terminal audit still frozen */
	bool stop_seen; /* a stop another process persisted: step now */
	bool detached; /* left pending on an interrupt */
	long exchanges, longest_ms; /* over every round */
};

struct nyx_reconcile {
	struct nyx_ledger *l;
	struct nyx_http *http;
	const char *token; /* the execution credential */
	const char *base_url; /* an operation of another host is refused */
	const char *diag; /* for the records persisted with a result */
	long exchange_ms; /* each exchange's bound */
	size_t max_inflight;
	bool wait; /* until terminal */
	bool now; /* step before next_poll_at */
	bool cancel; /* persist the stop deadline, then stop-cancel */
	bool finalize_audit; /* replay a settled one's frozen audit */
	/* with wait: called after each round that leaves work */
	void (*progress)(const struct nyx_rec_item *v, size_t n,
	    int64_t elapsed_ms, void *arg);
	void *arg;
	/*
	 * Interrupts (SIGINT, SIGTERM, SIGHUP) counted by the caller's
	 * handler, or NULL.  While waiting, the first is a stop (persisted,
	 * then stop-cancellation) unless detach_on_interrupt; a second, or
	 * the first with detach_on_interrupt, leaves the operations pending
	 * (detached) and returns.
	 */
	const volatile int *interrupts;
	bool detach_on_interrupt;
	char lease[128]; /* filled by nyx_reconcile_run */
};

/* Initialise n items for the given handles' operations (loaded later). */
void nyx_reconcile_items_init(struct nyx_rec_item *v, size_t n);

/*
 * Persist a stop for every open operation of the items, whoever holds
 * it (PRODUCT 7): the first sets the absolute deadline (now + 120 s) and
 * makes the operation due, later ones reuse it; a holder sees it within
 * a second.  The items take the deadline and step at once.
 */
int nyx_reconcile_stop(struct nyx_ledger *l, struct nyx_rec_item *v, size_t n,
    struct nyx_err *err);

/* Run rounds over the items' operations (v[i].d.op.handle set). */
int nyx_reconcile_run(struct nyx_reconcile *r, struct nyx_rec_item *v, size_t n,
    struct nyx_err *err);

/* Release the leases taken and free the items' state. */
void nyx_reconcile_end(
    struct nyx_reconcile *r, struct nyx_rec_item *v, size_t n);

/*
 * The stored exec.result of a terminal operation, re-issued under diag,
 * or invalid (logged) when it cannot be read.
 */
jv nyx_reconcile_stored(
    struct nyx_ledger *l, const char *handle, const char *diag);

/* Whether a terminal item's record is this run's (else the stored one). */
bool nyx_reconcile_settled_now(const struct nyx_rec_item *it);

#endif
