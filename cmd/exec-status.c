/*
 * exec-status: one bounded reconcile step per durable operation of the
 * ledger (WIRE.md 5), or, with --wait, as many as it takes to settle
 * them; the cron reconciler with --all; the ledger's listing with --list.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nyx_audit.h"
#include "tool/cli.h"
#include "tool/metrics.h"
#include "nyx_config.h"
#include "nyx_cred.h"
#include "nyx_durable.h"
#include "nyx_err.h"
#include "nyx_http.h"
#include "nyx_json.h"
#include "nyx_ledger.h"
#include "nyx_log.h"
#include "nyx_reconcile.h"
#include "nyx_time.h"

#define MAX_INFLIGHT 8 /* requests and connections at once */

enum {
	OPT_ALL = 2000,
	OPT_WAIT,
	OPT_LIST,
	OPT_NOW,
	OPT_CHILD_CODE,
	OPT_CANCEL,
	OPT_METRICS_FILE,
};

struct opts {
	bool cancel;
	bool all;
	bool wait;
	bool list;
	bool now;
	bool child_code;
	const char *metrics_file;
};

static const struct option longopts[] = {
    {"all", no_argument, NULL, OPT_ALL},
    {"wait", no_argument, NULL, OPT_WAIT},
    {"list", no_argument, NULL, OPT_LIST},
    {"now", no_argument, NULL, OPT_NOW},
    {"child-code", no_argument, NULL, OPT_CHILD_CODE},
    {"cancel", no_argument, NULL, OPT_CANCEL},
    {"metrics-file", required_argument, NULL, OPT_METRICS_FILE},
    {NULL, 0, NULL, 0},
};

static int
on_opt(int c, const char *arg, void *ctx)
{
	struct opts *o = ctx;

	(void)arg;
	switch (c) {
	case OPT_ALL:
		o->all = true;
		break;
	case OPT_WAIT:
		o->wait = true;
		break;
	case OPT_LIST:
		o->list = true;
		break;
	case OPT_NOW:
		o->now = true;
		break;
	case OPT_CHILD_CODE:
		o->child_code = true;
		break;
	case OPT_METRICS_FILE:
		o->metrics_file = arg;
		break;
	case OPT_CANCEL:
		o->cancel = true;
		break;
	default:
		return -1;
	}
	return 0;
}

static const struct nyx_cli_spec spec = {
    "[HANDLE...] [--all] [--wait] [--cancel] [--now] [--list] "
    "[--child-code]\n       [--metrics-file FILE] [common options]",
    "  HANDLE                  an operation of the ledger (h-...); also\n"
    "                          exec.receipt/exec.status records on stdin\n"
    "      --all               every operation that is not terminal\n"
    "      --wait              repeat the step until every operation is\n"
    "                          terminal\n"
    "      --cancel            stop the operations: cancel them, within a\n"
    "                          deadline of 120 s from the first --cancel\n"
    "      --now               poll even before an operation's\n"
    "                          next_poll_at\n"
    "      --list              print the ledger (no network)\n"
    "      --child-code        exit with the program's own status\n"
    "      --metrics-file FILE  with --all: write node_exporter textfile "
    "metrics\n",
    NYX_CLI_NET | NYX_CLI_STATE,
    "",
    longopts,
    on_opt,
};

struct set {
	char **v;
	size_t n, cap;
};

static int
set_add(struct set *s, const char *h, struct nyx_err *err)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->v[i], h) == 0)
			return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		char **nv = realloc(s->v, cap * sizeof(*nv));

		if (nv == NULL)
			return nyx_err_set(
			    err, NYX_EXIT_OSERR, "oom", "out of memory");
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n] = strdup(h);
	if (s->v[s->n] == NULL)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	s->n++;
	return 0;
}

static void
set_free(struct set *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

static bool
handle_valid(const char *h)
{
	return h != NULL && strlen(h) == 26 && strncmp(h, "h-", 2) == 0 &&
	    strspn(h + 2, "0123456789abcdef") == 24;
}

/*
 * Handles from stdin: exec.receipt or exec.status records (what code-exec
 * --no-wait and exec-status print).  An error record is passed through:
 * returns 1 with *passed set to its exit code.
 */
static int
read_stdin(struct set *hs, int *passed, struct nyx_err *err)
{
	struct nyx_json_reader *r;
	jv rec;
	int rc;

	if (isatty(STDIN_FILENO))
		return 0;
	r = nyx_json_reader_new(STDIN_FILENO, "stdin");
	if (r == NULL)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	while ((rc = nyx_json_reader_next(r, &rec, err)) == 1) {
		const char *type = nyx_json_peek_str(rec, "type");
		const char *h = nyx_json_peek_str(rec, "handle");

		if (type != NULL && strcmp(type, "error") == 0) {
			*passed = nyx_cli_pass_through(rec, NYX_EXIT_SOFTWARE);
			nyx_json_reader_free(r);
			return 1;
		}
		if (type == NULL ||
		    (strcmp(type, "exec.receipt") != 0 &&
		        strcmp(type, "exec.status") != 0 &&
		        strcmp(type, "exec.result") != 0) ||
		    !handle_valid(h)) {
			jv_free(rec);
			nyx_json_reader_free(r);
			return nyx_err_set(err, NYX_EXIT_DATAERR,
			    "input_invalid",
			    "stdin must carry exec.receipt, exec.status or "
			    "exec.result records with a handle");
		}
		rc = set_add(hs, h, err);
		jv_free(rec);
		if (rc < 0)
			break;
	}
	nyx_json_reader_free(r);
	return rc < 0 ? -1 : 0;
}

/* --list: every operation named (or all), from the ledger alone. */
static int
list(struct nyx_ledger *l, const struct set *hs, struct nyx_err *err)
{
	char **all = NULL;
	char *const *v = hs->v;
	size_t n = hs->n, i;
	int code = 0;

	if (n == 0) {
		if (nyx_ledger_list(l, false, &all, err) < 0)
			return -1;
		v = all;
		for (n = 0; all[n] != NULL; n++)
			;
	}
	for (i = 0; i < n && code == 0; i++) {
		struct nyx_dur d;

		nyx_dur_init(&d);
		if (nyx_ledger_get(l, v[i], &d.op, err) == 1) {
			jv r = nyx_dur_status_record(&d, nyx_cli_diag());

			/* what tells a canary from other runs (PRODUCT 7) */
			r = jv_object_set(r, jv_string("request_id"),
			    jv_string(d.op.request_id));
			r = jv_object_set(
			    r, jv_string("language"), jv_string(d.op.language));
			r = jv_object_set(r, jv_string("created_at"),
			    nyx_json_time(d.op.created_at_ms));
			r = jv_object_set(r, jv_string("updated_at"),
			    nyx_json_time(d.op.updated_at_ms));
			code = nyx_cli_emit(r);
		} else
			code = -1;
		nyx_dur_free(&d);
	}
	nyx_ledger_free_list(all);
	return code;
}

static int
item_code(const struct opts *o, const struct nyx_rec_item *it)
{
	if (it->finalizing)
		return NYX_EXIT_PENDING;
	if (it->d.op.terminal)
		return o->child_code && it->d.op.child_exit >= 0
		    ? it->d.op.child_exit
		    : it->d.op.exit_code;
	/* a recorded operation is never "retry the command" (75): a step
	 * that failed transiently leaves it pending (PRODUCT 3) */
	if (it->d.fail_code == NULL || it->d.fail_exit == NYX_EXIT_TEMPFAIL)
		return NYX_EXIT_PENDING;
	return it->d.fail_exit;
}

/* The record an item ends this run with: 0, or the write error's code. */
static int
emit_item(struct nyx_ledger *l, const struct nyx_rec_item *it)
{
	const char *diag = nyx_cli_diag();
	jv r;

	if (it->finalizing) {
		nyx_log(NYX_LOG_WARN,
		    "%s: settled, but its audit record is frozen "
		    "(finalizing_audit); audit-replay writes it",
		    it->d.op.handle);
		r = nyx_dur_status_record(&it->d, diag);
		r = jv_object_set(
		    r, jv_string("status"), jv_string("finalizing_audit"));
		return nyx_cli_emit(
		    jv_object_set(r, jv_string("terminal"), jv_false()));
	}
	if (!it->d.op.terminal)
		return nyx_cli_emit(nyx_dur_status_record(&it->d, diag));
	if (!it->d.oc.success && it->d.oc.code != NULL)
		nyx_log(NYX_LOG_ERROR, "%s: %s: %s", it->d.op.handle,
		    it->d.oc.code, it->d.oc.message);
	if (nyx_reconcile_settled_now(it))
		return nyx_cli_emit(nyx_dur_result_record(&it->d, diag));
	r = nyx_reconcile_stored(l, it->d.op.handle, diag);
	return jv_is_valid(r) ? nyx_cli_emit(r) : -1;
}

/* HTTP exchanges this invocation made, for the metrics file. */
static long run_exchanges;

/* exec-status --all --metrics-file (PRODUCT 7): the ledger as a fleet's
 * Prometheus reads it, written atomically. */
static void
write_metrics(const struct opts *o, struct nyx_ledger *l, int64_t started_mono)
{
	static const char *const outcomes[] = {
	    "success", "failure", "uncertain"};
	struct nyx_metrics m;
	struct nyx_err err = NYX_ERR_ZERO;
	int64_t last[3], total = 0;
	jv by = jv_invalid();
	size_t i;

	nyx_metrics_init(&m);
	if (nyx_ledger_stats(l, &by, last, &err) < 0 ||
	    nyx_ledger_counter_add(
	        l, "exchanges_total", run_exchanges, &total, &err) < 0)
		goto fail;
	nyx_metrics_family(&m, "nyx_exec_operations", "gauge",
	    "durable operations in the ledger, by status");
	jv_object_foreach(by, k, v)
	{
		nyx_metrics_sample(&m, "nyx_exec_operations", "status",
		    jv_string_value(k), jv_number_value(v));
		jv_free(k);
		jv_free(v);
	}
	nyx_metrics_family(&m, "nyx_exec_last_terminal_timestamp_seconds",
	    "gauge",
	    "when the last operation settled, by outcome (unix "
	    "seconds)");
	for (i = 0; i < 3; i++)
		if (last[i] > 0)
			nyx_metrics_sample(&m,
			    "nyx_exec_last_terminal_timestamp_seconds",
			    "outcome", outcomes[i], (double)(last[i] / 1000));
	nyx_metrics_family(&m, "nyx_exec_reconcile_duration_seconds", "gauge",
	    "how long the last exec-status --all took");
	nyx_metrics_sample(&m, "nyx_exec_reconcile_duration_seconds", NULL,
	    NULL, (double)(nyx_mono_ms() - started_mono) / 1000.0);
	nyx_metrics_family(&m, "nyx_exec_reconcile_timestamp_seconds", "gauge",
	    "when exec-status --all last ran (unix seconds)");
	nyx_metrics_sample(&m, "nyx_exec_reconcile_timestamp_seconds", NULL,
	    NULL, (double)(nyx_now_ms() / 1000));
	nyx_metrics_family(&m, "nyx_exec_exchanges_total", "counter",
	    "HTTP exchanges made by exec-status --all");
	nyx_metrics_sample(
	    &m, "nyx_exec_exchanges_total", NULL, NULL, (double)total);
	if (nyx_metrics_write(&m, o->metrics_file, &err) == 0)
		goto out;
fail:
	nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", nyx_err_code(&err), err.message,
	    nyx_cli_diag());
out:
	jv_free(by);
	nyx_metrics_free(&m);
}

static int
reconcile(const struct opts *o, const struct nyx_common *cm,
    struct nyx_settings *s, struct nyx_ledger *l, const struct set *hs,
    struct nyx_err *err)
{
	struct nyx_rec_item *items = calloc(hs->n ? hs->n : 1, sizeof(*items));
	struct nyx_reconcile r;
	size_t i, n = hs->n, left;
	int code = NYX_EXIT_OK, rc = -1, got;

	memset(&r, 0, sizeof(r));
	r.l = l;
	if (items == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	nyx_reconcile_items_init(items, n);
	for (i = 0; i < n; i++) {
		got = nyx_ledger_get(l, hs->v[i], &items[i].d.op, err);
		if (got < 0)
			goto out;
		if (got == 0) {
			nyx_err_set(err, NYX_EXIT_DATAERR, "operation_unknown",
			    "no operation %s in the ledger in %s", hs->v[i],
			    s->state_dir);
			goto out;
		}
	}
	/* the stop is persisted at once, before anything that can fail or
	 * wait, whoever holds the lease (PRODUCT 7) */
	if (o->cancel && nyx_reconcile_stop(l, items, n, err) < 0)
		goto out;
	for (left = 0, i = 0; i < n; i++)
		left += !items[i].d.op.terminal;
	if (left > 0) {
		/* a credential for the ledger's operations, on their host */
		if (nyx_settings_require_base_url(s, err) < 0 ||
		    (got = nyx_cred_load(cm, s, NYX_TOKEN_EXEC, err)) < 0)
			goto out;
		if (got == 1) {
			nyx_err_set(err, NYX_EXIT_NOPERM,
			    "code_execution_credential_unavailable",
			    "No execution credential is configured.");
			goto out;
		}
		r.http = nyx_http_new();
		if (r.http == NULL) {
			nyx_err_set(
			    err, NYX_EXIT_OSERR, "oom", "out of memory");
			goto out;
		}
	}
	r.token = s->exec_token;
	r.base_url = s->base_url;
	r.diag = nyx_cli_diag();
	r.exchange_ms = nyx_settings_exchange_ms(s);
	r.max_inflight = MAX_INFLIGHT;
	r.wait = o->wait;
	r.now = o->now;
	r.cancel = o->cancel;
	r.finalize_audit = true;
	if (o->wait && isatty(STDERR_FILENO) && cm->quiet == 0)
		r.progress = nyx_cli_wait_progress;
	if (nyx_reconcile_run(&r, items, n, err) < 0)
		goto out;
	/* every state is persisted; now print, in the order given */
	for (i = 0; i < n; i++) {
		int e = emit_item(l, &items[i]);

		if (e != 0) {
			code = e;
			break;
		}
		code = nyx_exit_worst(code, item_code(o, &items[i]));
	}
	rc = code;
	for (i = 0; i < n; i++)
		run_exchanges += items[i].exchanges;
	if (r.http != NULL) {
		long ex = 0, longest = 0;

		for (i = 0; i < n; i++) {
			ex += items[i].d.exchanges;
			if (items[i].d.longest_ms > longest)
				longest = items[i].d.longest_ms;
		}
		nyx_log(NYX_LOG_INFO,
		    "%zu operation(s), %ld exchange(s) in the last round over "
		    "%ld connection(s); longest %ld ms",
		    n, ex, nyx_http_connects(r.http), longest);
	}
out:
	nyx_reconcile_end(&r, items, items ? n : 0);
	free(items);
	nyx_http_free(r.http);
	return rc;
}

static int
run(const struct opts *o, const struct nyx_common *cm, struct set *hs,
    struct nyx_err *err)
{
	struct nyx_settings s;
	struct nyx_ledger *l = NULL;
	char **pending = NULL;
	int code = -1, passed = 0;
	int64_t started = nyx_mono_ms();
	size_t i;

	nyx_settings_init(&s);
	if (nyx_settings_resolve(cm, &s, err) < 0)
		goto out;
	switch (read_stdin(hs, &passed, err)) {
	case 0:
		break;
	case 1:
		code = passed; /* an error record, passed through */
		goto out;
	default:
		goto out;
	}
	if (nyx_ledger_open(s.state_dir, &l, err) < 0 ||
	    nyx_ledger_sweep_secrets(l, err) < 0)
		goto out;
	if (o->list) {
		code = list(l, hs, err);
		goto out;
	}
	if (o->all) {
		if (nyx_ledger_list(l, true, &pending, err) < 0)
			goto out;
		for (i = 0; pending[i] != NULL; i++)
			if (set_add(hs, pending[i], err) < 0)
				goto out;
	}
	if (hs->n == 0) {
		if (!o->all)
			nyx_cli_usage("name an operation (HANDLE, or receipts "
			              "on stdin), or pass --all or --list");
		code = NYX_EXIT_OK; /* nothing pending */
		goto out;
	}
	code = reconcile(o, cm, &s, l, hs, err);
out:
	if (o->metrics_file != NULL && l != NULL && code >= 0)
		write_metrics(o, l, started);
	nyx_ledger_free_list(pending);
	nyx_ledger_close(l);
	nyx_settings_free(&s);
	nyx_log_forget_secrets();
	return code;
}

int
main(int argc, char **argv)
{
	struct nyx_err err = NYX_ERR_ZERO;
	struct nyx_common cm;
	struct set hs = {NULL, 0, 0};
	struct opts o;
	int idx, code;

	memset(&o, 0, sizeof(o));
	nyx_cli_init("exec-status");
	idx = nyx_cli_parse(argc, argv, &spec, &o, &cm);
	if (o.metrics_file != NULL && !o.all)
		nyx_cli_usage("--metrics-file goes with --all");
	if (o.list && (o.wait || o.all || o.now || o.cancel))
		nyx_cli_usage("--list reads the ledger only; it takes no "
		              "--all, --wait, --cancel or --now");
	for (; idx < argc; idx++) {
		if (!handle_valid(argv[idx]))
			nyx_cli_usage(
			    "'%s' is not a handle (h- and 24 hex)", argv[idx]);
		if (set_add(&hs, argv[idx], &err) < 0)
			return nyx_cli_fail(&err);
	}
	if (nyx_time_init(&err) < 0 || nyx_http_global_init(&err) < 0)
		return nyx_cli_fail(&err);
	code = run(&o, &cm, &hs, &err);
	set_free(&hs);
	nyx_http_global_cleanup();
	if (code < 0)
		return nyx_cli_fail(&err);
	return nyx_cli_finish(code);
}
