/*
 * code-exec: run exact source (python, javascript, typescript, bash) on the
 * admitted chrono-sandbox route, or on the local sandbox, and print one
 * exec.result record.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool/admit.h"
#include "nyx_audit.h"
#include "nyx_buf.h"
#include "nyx_chrono.h"
#include "tool/cli.h"
#include "nyx_config.h"
#include "nyx_cred.h"
#include "nyx_durable.h"
#include "nyx_err.h"
#include "nyx_exec.h"
#include "nyx_hash.h"
#include "nyx_http.h"
#include "nyx_json.h"
#include "nyx_ledger.h"
#include "nyx_log.h"
#include "nyx_reconcile.h"
#include "nyx_outcome.h"
#include "nyx_nyxid.h"
#include "nyx_route.h"
#include "nyx_sandbox.h"
#include "nyx_time.h"

enum {
	OPT_TIMEOUT_SECS = 2000,
	OPT_SYNC,
	OPT_DURABLE,
	OPT_WAIT,
	OPT_NO_WAIT,
	OPT_BACKEND,
	OPT_REQUEST_ID,
	OPT_CALL_ID,
	OPT_CHILD_CODE,
	OPT_DETACH_ON_INTERRUPT,
	OPT_ADMISSION,
};

struct opts {
	const char *language;
	const char *file;
	const char *source;
	const char *timeout_secs;
	const char *backend;
	const char *request_id;
	const char *call_id;
	const char *admission; /* --admission FILE|- */
	bool no_stdin; /* -n */
	bool sync;
	bool durable;
	bool no_wait;
	bool child_code;
	bool detach_on_interrupt;
};

static const struct option longopts[] = {
    {"language", required_argument, NULL, 'l'},
    {"file", required_argument, NULL, 'f'},
    {"eval", required_argument, NULL, 'e'},
    {"timeout-secs", required_argument, NULL, OPT_TIMEOUT_SECS},
    {"sync", no_argument, NULL, OPT_SYNC},
    {"durable", no_argument, NULL, OPT_DURABLE},
    {"wait", no_argument, NULL, OPT_WAIT},
    {"no-wait", no_argument, NULL, OPT_NO_WAIT},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"request-id", required_argument, NULL, OPT_REQUEST_ID},
    {"call-id", required_argument, NULL, OPT_CALL_ID},
    {"child-code", no_argument, NULL, OPT_CHILD_CODE},
    {"detach-on-interrupt", no_argument, NULL, OPT_DETACH_ON_INTERRUPT},
    {"admission", required_argument, NULL, OPT_ADMISSION},
    {"no-stdin", no_argument, NULL, 'n'},
    {NULL, 0, NULL, 0},
};

static int
on_opt(int c, const char *arg, void *ctx)
{
	struct opts *o = ctx;

	switch (c) {
	case 'l':
		o->language = arg;
		break;
	case 'f':
		o->file = arg;
		break;
	case 'e':
		o->source = arg;
		break;
	case OPT_TIMEOUT_SECS:
		o->timeout_secs = arg;
		break;
	case OPT_SYNC:
		o->sync = true;
		o->durable = false;
		break;
	case OPT_DURABLE:
		o->durable = true;
		o->sync = false;
		break;
	case OPT_WAIT:
		o->no_wait = false;
		break;
	case OPT_NO_WAIT:
		o->no_wait = true;
		break;
	case OPT_REQUEST_ID:
	case OPT_CALL_ID:
		/* ids travel into the key digest: printable, bounded */
		if (!nyx_id_safe(arg))
			nyx_cli_usage("%s takes 1-128 of [A-Za-z0-9_.:-]",
			    c == OPT_REQUEST_ID ? "--request-id" : "--call-id");
		if (c == OPT_REQUEST_ID)
			o->request_id = arg;
		else
			o->call_id = arg;
		break;
	case OPT_BACKEND:
		if (strcmp(arg, "nyxid") != 0 && strcmp(arg, "local") != 0)
			nyx_cli_usage("--backend takes nyxid or local");
		o->backend = arg;
		break;
	case OPT_CHILD_CODE:
		o->child_code = true;
		break;
	case OPT_DETACH_ON_INTERRUPT:
		o->detach_on_interrupt = true;
		break;
	case OPT_ADMISSION:
		o->admission = arg;
		break;
	case 'n':
		o->no_stdin = true;
		break;
	default:
		return -1;
	}
	return 0;
}

static const struct nyx_cli_spec spec = {
    "[-l LANG] (-f FILE | -e SOURCE | FILE) [--timeout-secs N] "
    "[--sync | --durable] [--wait | --no-wait] [--backend nyxid|local] "
    "[--request-id ID] [--call-id ID] [--admission FILE | -n] "
    "[--detach-on-interrupt] [--child-code] [common options]",
    "  -l, --language LANG     python, javascript, typescript or bash\n"
    "                          (inferred from .py .js .mjs .ts .sh)\n"
    "  -f, --file FILE         the program's source file (- : stdin)\n"
    "  -e, --eval SOURCE       the program's source text\n"
    "      --timeout-secs N    wall-clock limit, 1..600 (default 180)\n"
    "      --durable           POST /executions, recorded in the ledger\n"
    "                          (the default for the nyxid backend)\n"
    "      --sync              legacy POST /execute on the admitted route\n"
    "      --wait              reconcile a durable run to its result\n"
    "                          (the default)\n"
    "      --no-wait           print the exec.receipt and exit 5\n"
    "      --request-id ID     the request's id in the idempotency key\n"
    "                          (default: a fresh random id)\n"
    "      --call-id ID        the call's id in the key (default\n"
    "                          code_execute)\n"
    "      --backend nyxid|local  where to run (default: nyxid when a base\n"
    "                          URL is configured, else local)\n"
    "      --detach-on-interrupt  on SIGINT, SIGTERM or SIGHUP leave a\n"
    "                          durable run pending instead of stopping it\n"
    "      --admission FILE    read the route.admission from FILE (- : "
    "stdin)\n"
    "  -n, --no-stdin          never read stdin (for loops over files)\n"
    "      --child-code        exit with the program's own status\n",
    NYX_CLI_NET | NYX_CLI_STATE,
    "l:f:e:n",
    longopts,
    on_opt,
};

struct job {
	const char *language;
	struct nyx_buf source;
	int timeout_secs;
	struct nyx_ledger *l; /* the state: ledger and audit trail */
	char request_id[160];
	const char *call_id;
	bool fresh; /* request_id drawn at random for this run */
};

/*
 * One audit phase of a sync or local run.  The trail is write-ahead: a
 * record that cannot be appended stays frozen for audit-replay, and the
 * run goes on.
 */
static void
audit_phase(const struct job *j, const char *owner, const char *phase,
    const struct nyx_exec_outcome *oc)
{
	struct nyx_audit_subject sub = {
	    "code_execute", "cli", owner, j->request_id, j->call_id, j->fresh};

	nyx_audit_note(j->l, &sub, phase, NULL, NULL, oc);
}

/* Admission and running together, in one append: the run starts now. */
static void
audit_started(const struct job *j, const char *owner)
{
	struct nyx_audit_subject sub = {
	    "code_execute", "cli", owner, j->request_id, j->call_id, j->fresh};

	nyx_audit_note_started(j->l, &sub, NULL);
}

static int
finish_outcome(const struct opts *o, const struct job *j,
    struct nyx_exec_outcome *oc, const char *backend, int64_t started_ms)
{
	int code = oc->exit;

	oc->request_id = j->request_id;
	oc->started_ms = started_ms;
	oc->finished_ms = nyx_now_ms();
	if (!oc->success)
		nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", oc->code, oc->message,
		    nyx_cli_diag());
	nyx_cli_emit(
	    nyx_exec_result_record(oc, backend, "sync", nyx_cli_diag()));
	if (o->child_code && oc->child_exit >= 0)
		code = oc->child_exit;
	return code;
}

static volatile sig_atomic_t interrupts;

static void
on_interrupt(int sig)
{
	(void)sig;
	interrupts++;
}

/*
 * While a durable run waits, SIGINT, SIGTERM and SIGHUP are a stop, and
 * a second one detaches (PRODUCT 6); the reconcile loop looks at the
 * count at least once a second.
 */
static void
catch_interrupts(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_interrupt;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* What a local run does while its sandbox is set up. */
struct local_start {
	const struct nyx_settings *s;
	struct job *j;
	const char *owner;
	bool tried; /* the ledger was opened, or failed to */
};

/*
 * The ledger opens and the run's start is written while bwrap sets up
 * the sandbox (nyx_sandbox_req.ready): the program starts only after the
 * record is synced, and a ledger that cannot be used stops it first.
 */
static int
local_ready(void *ctx, struct nyx_err *err)
{
	struct local_start *ls = ctx;

	ls->tried = true;
	if (nyx_ledger_open(ls->s->state_dir, &ls->j->l, err) < 0)
		return -1;
	audit_started(ls->j, ls->owner);
	return 0;
}

/*
 * While the program runs: the index of the trail catches up with the
 * run's first records (a fresh run's are appended unindexed), so the
 * terminal append finds nothing left to do.  A failure here is the
 * terminal append's to meet again.
 */
static void
local_running(void *ctx)
{
	struct local_start *ls = ctx;
	struct nyx_err ignored = NYX_ERR_ZERO;

	if (ls->j->fresh)
		(void)nyx_audit_catch_up(
		    ls->j->l, nyx_ledger_dir(ls->j->l), &ignored);
}

static int
run_local(const struct opts *o, const struct nyx_common *cm,
    struct nyx_settings *s, struct job *j, struct nyx_err *err)
{
	struct nyx_sandbox_req rq;
	struct nyx_sandbox_result res;
	struct nyx_exec_outcome oc;
	struct nyx_cred cred;
	struct local_start ls = {s, j, NULL, false};
	char owner[64];
	int64_t started = nyx_now_ms();
	jv out;
	int code;

	/* parity with production (WIRE 6): a configured Agent Key is the
	 * program's NYXID_API_KEY, with NYXID_BASE_URL when there is one */
	if (nyx_cred_load(cm, s, NYX_TOKEN_EXEC, err) < 0)
		return -1;
	nyx_cred_classify(s->exec_token, &cred);

	snprintf(owner, sizeof(owner), "local:%ld", (long)geteuid());
	ls.owner = owner;
	memset(&rq, 0, sizeof(rq));
	rq.language = j->language;
	rq.source = j->source.data ? j->source.data : "";
	rq.source_len = j->source.len;
	rq.timeout_secs = j->timeout_secs;
	if (s->exec_token != NULL && cred.kind == NYX_CRED_AGENT_KEY) {
		rq.nyxid_api_key = s->exec_token;
		rq.nyxid_base_url = s->base_url;
	}
	/* an interrupt kills the whole sandbox, at once */
	catch_interrupts();
	rq.cancel = (const volatile int *)&interrupts;
	rq.ready = local_ready;
	rq.running = local_running;
	rq.ready_ctx = &ls;
	if (nyx_sandbox_run(&rq, &res, err) < 0) {
		struct nyx_err ignored = NYX_ERR_ZERO;

		/* a sandbox that failed before its set-up still leaves its
		 * run in the trail; a ledger that failed, nothing */
		if (!ls.tried && local_ready(&ls, &ignored) < 0)
			return -1;
		if (j->l == NULL)
			return -1;
		nyx_exec_outcome_init(&oc);
		oc.code = err->code;
		oc.kind = "transport_unavailable";
		oc.exit = err->exit;
		audit_phase(j, owner, "terminal", &oc);
		return -1;
	}
	nyx_exec_outcome_init(&oc);
	out = nyx_sandbox_output(&res);
	nyx_exec_outcome_completed(&oc, out, res.exit_code);
	if (res.cancelled) {
		nyx_exec_outcome_fail(&oc, "code_execution_cancelled",
		    "cancelled", "The program was stopped by an interrupt.",
		    NYX_EXIT_NO);
	} else if (res.timed_out) {
		oc.success = false;
		oc.code = "SANDBOX_TIMEOUT";
		oc.kind = "timed_out";
		oc.message = "Code execution ran out of time.";
		/* it ran and hit its limit: rerunning runs it again */
		oc.exit = NYX_EXIT_NO;
	}
	audit_phase(j, owner, "terminal", &oc);
	code = finish_outcome(o, j, &oc, "local", started);
	/* freed last: bwrap, which reported the program's end, has
	 * ended by now, and is reaped without a wait */
	nyx_sandbox_result_free(&res);
	nyx_exec_outcome_free(&oc);
	return code;
}

/* POST /execute once, on a fresh connection; never retried. */
static int
execute_sync(const struct opts *o, struct nyx_settings *s,
    struct nyx_http *http, const struct nyx_pin *rt, const struct job *j,
    struct nyx_err *err)
{
	struct nyx_buf auth = NYX_BUF_ZERO, tp = NYX_BUF_ZERO;
	struct nyx_http_resp resp = NYX_HTTP_RESP_ZERO;
	struct nyx_exec_outcome oc;
	struct nyx_http_req req;
	const char *hdrs[5];
	const char *trace = getenv("TRACEPARENT");
	char *url = NULL, *body = NULL, owner[160];
	size_t nh = 0;
	int64_t started = 0;
	int code = -1;

	url = nyx_chrono_url(s->base_url, rt->slug, rt->id, "execute");
	body = nyx_chrono_execute_body(j->language,
	    j->source.data ? j->source.data : "", j->source.len,
	    j->timeout_secs);
	auth.secret = true;
	if (url == NULL || body == NULL ||
	    nyx_buf_printf(&auth, "Authorization: Bearer %s", s->exec_token) <
	        0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	hdrs[nh++] = auth.data;
	hdrs[nh++] = "Content-Type: application/json";
	/* W3C trace context: 00-<32 hex>-<16 hex>-<2 hex> */
	if (trace != NULL && strlen(trace) == 55 &&
	    strspn(trace, "0123456789abcdef-") == 55 &&
	    nyx_buf_printf(&tp, "traceparent: %s", trace) == 0)
		hdrs[nh++] = tp.data;
	hdrs[nh] = NULL;
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = url;
	req.headers = hdrs;
	req.body = body;
	req.body_len = strlen(body);
	req.timeout_ms = (j->timeout_secs + 30) * 1000L;
	req.fresh_connect = true;
	/* an interrupt abandons the call; the program may go on (4) */
	catch_interrupts();
	req.abort = (const volatile int *)&interrupts;
	nyx_cred_owner(s->exec_token, owner, sizeof(owner));
	started = nyx_now_ms();
	audit_started(j, owner);
	nyx_http_do(http, &req, &resp);
	nyx_exec_outcome_init(&oc);
	nyx_chrono_classify_sync(&resp, &oc);
	if (interrupts > 0 && !oc.success && oc.cause != NULL)
		oc.cause = "interrupted";
	audit_phase(j, owner, "terminal", &oc);
	nyx_log(NYX_LOG_DEBUG, "POST /execute: status %ld, %zu bytes, %s",
	    resp.status, resp.body.len, oc.success ? "success" : oc.code);
	code = finish_outcome(o, j, &oc, "nyxid", started);
	nyx_exec_outcome_free(&oc);
out:
	nyx_http_resp_free(&resp);
	nyx_buf_free(&auth);
	nyx_buf_free(&tp);
	if (body != NULL) {
		nyx_secure_zero(body, strlen(body));
		free(body);
	}
	free(url);
	return code;
}

/*
 * The operation this run stands for: the one already in the ledger under
 * its key (a rerun with the same --request-id converges on it), or a new
 * one recorded with its secret material before anything is sent.
 */
static int
record_operation(struct nyx_ledger *l, struct nyx_settings *s,
    const struct nyx_pin *rt, const struct job *j, const char *key,
    struct nyx_dur *d, struct nyx_err *err)
{
	struct nyx_buf mat = NYX_BUF_ZERO;
	char ksha[NYX_SHA256_HEX], handle[32];
	int64_t now = nyx_now_ms();
	int rc;

	mat.secret = true;
	if (nyx_buf_add(&mat, key, strlen(key)) < 0 ||
	    nyx_buf_add(&mat, "\n", 1) < 0 ||
	    nyx_buf_add(&mat, j->source.data ? j->source.data : "",
	        j->source.len) < 0 ||
	    nyx_sha256_hex(key, strlen(key), ksha) < 0) {
		nyx_buf_free(&mat);
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	}
	rc = nyx_ledger_find_key(l, ksha, handle, err);
	if (rc == 1) {
		char msha[NYX_SHA256_HEX];
		bool same;

		/* the material's digest, not the material: it is gone once
		 * the operation is terminal */
		rc = nyx_ledger_get(l, handle, &d->op, err);
		same = rc == 1 &&
		    nyx_sha256_hex(mat.data, mat.len, msha) == 0 &&
		    strcmp(msha, d->op.secret_sha256) == 0 &&
		    strcmp(d->op.language, j->language) == 0 &&
		    d->op.timeout_secs == j->timeout_secs &&
		    strcmp(d->op.user_service_id, rt->id) == 0 &&
		    strcmp(d->op.slug, rt->slug) == 0 &&
		    strcmp(d->op.base_url, s->base_url) == 0;
		if (rc == 1 && !same)
			rc = nyx_err_set(err, NYX_EXIT_BLOCKED,
			    "IDEMPOTENCY_KEY_REUSE",
			    "operation %s was recorded under this request id "
			    "with another request; use a new --request-id",
			    d->op.handle);
		if (rc == 1) {
			nyx_log(NYX_LOG_INFO, "converging on %s (same request)",
			    d->op.handle);
			if (!d->op.terminal && d->op.operation_id[0] == '\0') {
				nyx_buf_free(&d->secret);
				d->secret = mat;
				return 0;
			}
		}
		nyx_buf_free(&mat);
		return rc < 0 ? -1 : 0;
	}
	if (rc < 0 || nyx_ledger_new_handle(d->op.handle) < 0) {
		nyx_buf_free(&mat);
		return rc < 0
		    ? -1
		    : nyx_err_set(err, NYX_EXIT_OSERR, "random_failed",
		          "no randomness for a handle");
	}
	/* these come from records and configuration: never truncated */
	if (!nyx_str_copy(
	        d->op.user_service_id, sizeof(d->op.user_service_id), rt->id) ||
	    !nyx_str_copy(d->op.slug, sizeof(d->op.slug), rt->slug) ||
	    !nyx_str_copy(
	        d->op.base_url, sizeof(d->op.base_url), s->base_url)) {
		nyx_buf_free(&mat);
		return nyx_err_set(err, NYX_EXIT_DATAERR,
		    "route_field_too_long",
		    "the route's id, slug or base URL is too long for the "
		    "ledger");
	}
	snprintf(d->op.language, sizeof(d->op.language), "%s", j->language);
	snprintf(d->op.status, sizeof(d->op.status), "submitting");
	snprintf(d->op.key_sha256, sizeof(d->op.key_sha256), "%s", ksha);
	d->op.timeout_secs = j->timeout_secs;
	d->op.created_at_ms = d->op.next_poll_at_ms = now;
	d->op.recovery_until_ms = now + NYX_DUR_RECOVERY_MS;
	d->op.child_exit = -1;
	/* on disk, material first, before any request */
	if (nyx_ledger_insert(l, &d->op, mat.data, mat.len, err) < 0) {
		nyx_buf_free(&mat);
		return -1;
	}
	{
		struct nyx_audit_subject sub;

		nyx_dur_subject(&d->op, &sub);
		nyx_audit_note(l, &sub, "admission", NULL, d->op.handle, NULL);
	}
	nyx_buf_free(&d->secret);
	d->secret = mat;
	return 0;
}

/*
 * POST /executions under the derived key and, with --wait, reconcile to
 * the result; every state is persisted before anything is printed.
 */
static int
run_durable(const struct opts *o, struct nyx_settings *s, struct nyx_http *http,
    const struct nyx_pin *rt, const struct job *j, struct nyx_err *err)
{
	struct nyx_rec_item it;
	struct nyx_reconcile r;
	const struct nyx_dur *d = &it.d;
	char owner[160], key[NYX_DUR_KEY_LEN + 1];
	int code = -1;
	jv rec;

	nyx_reconcile_items_init(&it, 1);
	memset(&r, 0, sizeof(r));
	r.l = j->l;
	r.http = http;
	r.token = s->exec_token;
	r.base_url = s->base_url;
	r.diag = nyx_cli_diag();
	r.exchange_ms = nyx_settings_exchange_ms(s);
	r.max_inflight = 1;
	r.wait = !o->no_wait;
	r.now = true; /* this invocation's first step is due now */
	if (r.wait) {
		catch_interrupts();
		r.interrupts = (const volatile int *)&interrupts;
		r.detach_on_interrupt = o->detach_on_interrupt;
		if (isatty(STDERR_FILENO) && !nyx_cli_quiet())
			r.progress = nyx_cli_wait_progress;
	}
	nyx_cred_owner(s->exec_token, owner, sizeof(owner));
	snprintf(it.d.op.owner, sizeof(it.d.op.owner), "%s", owner);
	snprintf(it.d.op.request_id, sizeof(it.d.op.request_id), "%s",
	    j->request_id);
	snprintf(it.d.op.call_id, sizeof(it.d.op.call_id), "%s", j->call_id);
	if (nyx_dur_key(owner, j->request_id, j->call_id, key) < 0) {
		nyx_err_set(err, NYX_EXIT_SOFTWARE, "hash_failed",
		    "cannot derive the idempotency key");
		goto out;
	}
	if (record_operation(j->l, s, rt, j, key, &it.d, err) < 0 ||
	    nyx_reconcile_run(&r, &it, 1, err) < 0)
		goto out;
	if (it.detached) {
		/* interrupted again: left pending; exec-status finishes it */
		nyx_log(NYX_LOG_WARN,
		    "%s: detached; 'exec-status --wait %s' finishes it",
		    d->op.handle, d->op.handle);
		nyx_cli_emit(nyx_dur_status_record(d, nyx_cli_diag()));
		code = NYX_EXIT_PENDING;
	} else if (it.busy) {
		/* another process is reconciling it right now */
		nyx_log(NYX_LOG_WARN,
		    "%s is being reconciled by another process; see "
		    "exec-status %s",
		    d->op.handle, d->op.handle);
		nyx_cli_emit(nyx_dur_receipt_record(&d->op, nyx_cli_diag()));
		code = NYX_EXIT_PENDING;
	} else if (d->op.terminal && !nyx_reconcile_settled_now(&it)) {
		rec = nyx_reconcile_stored(j->l, d->op.handle, nyx_cli_diag());
		if (!jv_is_valid(rec)) {
			jv_free(rec);
			code = NYX_EXIT_SOFTWARE;
		} else {
			nyx_cli_emit(rec);
			code = o->child_code && d->op.child_exit >= 0
			    ? d->op.child_exit
			    : d->op.exit_code;
		}
	} else if (d->op.terminal) {
		if (!d->oc.success)
			nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", d->oc.code,
			    d->oc.message, nyx_cli_diag());
		nyx_cli_emit(nyx_dur_result_record(d, nyx_cli_diag()));
		code = o->child_code && d->oc.child_exit >= 0 ? d->oc.child_exit
		                                              : d->oc.exit;
	} else {
		/* a receipt, even for an unconfirmed submit: the ledger holds
		 * what exec-status needs to recover it */
		nyx_cli_emit(nyx_dur_receipt_record(&d->op, nyx_cli_diag()));
		code = d->fail_exit == NYX_EXIT_NOPERM ? NYX_EXIT_NOPERM
		                                       : NYX_EXIT_PENDING;
	}
	nyx_log(NYX_LOG_INFO, "%s: %ld exchange(s), the longest %ld ms",
	    d->op.handle, it.exchanges, it.longest_ms);
out:
	nyx_secure_zero(key, sizeof(key));
	nyx_reconcile_end(&r, &it, 1);
	return code;
}

static int
run_nyxid(const struct opts *o, const struct nyx_common *cm,
    struct nyx_settings *s, struct job *j, struct nyx_err *err)
{
	struct nyx_pin rt = {NULL, NULL};
	struct nyx_http *http = nyx_http_new();
	int code = -1;

	if (http == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}
	code = nyx_admit_route(cm, s, http, NYX_CAP_CODE_EXECUTE,
	    "code_execution_credential_unavailable", &rt, err);
	if (code != 0)
		goto out;
	if (o->sync)
		code = execute_sync(o, s, http, &rt, j, err);
	else
		code = run_durable(o, s, http, &rt, j, err);
out:
	nyx_pin_free(&rt);
	nyx_http_free(http);
	return code;
}

static int
run(const struct opts *o, const struct nyx_common *cm, const char *operand,
    struct nyx_err *err)
{
	struct nyx_settings s;
	struct nyx_exec_job ej;
	struct job j;
	const char *backend;
	int code = -1;

	memset(&j, 0, sizeof(j));
	nyx_settings_init(&s);
	/* source, language and timeout, all checked before anything else */
	if (nyx_exec_admit(o->language, o->timeout_secs, o->source,
	        o->file ? o->file : operand, &ej, err) < 0) {
		nyx_exec_job_free(&ej);
		goto out;
	}
	j.language = ej.language;
	j.source = ej.source;
	j.timeout_secs = ej.timeout_secs;
	if (nyx_settings_resolve(cm, &s, err) < 0)
		goto out;
	if (o->request_id != NULL) {
		snprintf(
		    j.request_id, sizeof(j.request_id), "%s", o->request_id);
	} else if (nyx_random_hex(j.request_id, 16) < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "random_failed",
		    "no randomness for a request id");
		goto out;
	} else {
		j.fresh = true;
	}
	j.call_id = o->call_id ? o->call_id : "code_execute";
	backend = o->backend ? o->backend : s.backend;
	if (backend == NULL) {
		backend = s.base_url ? "nyxid" : "local";
		if (s.base_url == NULL)
			nyx_log_line("notice: no NyxID base URL is configured; "
			             "running on the local sandbox "
			             "(--backend local)");
	}
	/* a local run opens its ledger while its sandbox is set up */
	if (strcmp(backend, "local") == 0)
		code = run_local(o, cm, &s, &j, err);
	else if (nyx_ledger_open(s.state_dir, &j.l, err) == 0)
		code = run_nyxid(o, cm, &s, &j, err);
out:
	nyx_ledger_close(j.l);
	nyx_buf_free(&j.source);
	nyx_settings_free(&s);
	nyx_log_forget_secrets();
	return code;
}

int
main(int argc, char **argv)
{
	struct nyx_err err = NYX_ERR_ZERO;
	struct nyx_common cm;
	struct opts o;
	const char *operand = NULL;
	int idx, code, given;

	memset(&o, 0, sizeof(o));
	nyx_cli_init("code-exec");
	idx = nyx_cli_parse(argc, argv, &spec, &o, &cm);
	if (idx < argc)
		operand = argv[idx++];
	if (idx < argc)
		nyx_cli_usage("unexpected argument '%s'", argv[idx]);
	given = (o.file != NULL) + (o.source != NULL) + (operand != NULL);
	if (given != 1)
		nyx_cli_usage(
		    "give the source once: -f FILE, -e SOURCE or FILE");
	{
		bool src_stdin = (o.file && strcmp(o.file, "-") == 0) ||
		    (operand && strcmp(operand, "-") == 0);

		if (o.no_stdin && o.admission != NULL)
			nyx_cli_usage("-n excludes --admission");
		if (src_stdin && o.admission && strcmp(o.admission, "-") == 0)
			nyx_cli_usage("stdin holds the source (-f -); give the "
			              "admission with --admission FILE");
		if (src_stdin && o.no_stdin)
			nyx_cli_usage("-n excludes -f -");
		/* stdin is the source's, or refused: no admission there */
		nyx_cli_set_input(o.admission,
		    o.no_stdin || (src_stdin && o.admission == NULL));
	}
	if (nyx_time_init(&err) < 0 || nyx_http_global_init(&err) < 0)
		return nyx_cli_fail(&err);
	code = run(&o, &cm, operand, &err);
	nyx_http_global_cleanup();
	if (code < 0)
		return nyx_cli_fail(&err);
	return nyx_cli_finish(code);
}
