/*
 * The durable client's I/O (see nyx_durable.h): building each step's
 * request, making the exchanges of many steps over one connection pool,
 * and loading and persisting operations in the ledger.  The decisions are
 * nyx_durable.c's pure state machine.
 */
#include "nyx_durable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_time.h"

void
nyx_dur_drop_request(struct nyx_dur *d)
{
	free(d->url);
	if (d->body != NULL) {
		nyx_secure_zero(d->body, strlen(d->body));
		free(d->body);
	}
	d->url = d->body = NULL;
	nyx_buf_free(&d->auth);
	nyx_buf_free(&d->key_hdr);
	nyx_buf_free(&d->inm);
	nyx_buf_free(&d->trace);
	d->auth.secret = d->key_hdr.secret = true;
}

static const char *
call_path(enum nyx_dur_call c)
{
	switch (c) {
	case NYX_DUR_SUBMIT:
		return "";
	case NYX_DUR_RESULT:
		return "/result";
	case NYX_DUR_CANCEL:
		return "/cancel";
	default:
		return NULL;
	}
}

/*
 * Build d's request into req: 0, 1 when the operation was settled instead
 * (unusable secret material), -1 when memory ran out.
 */
static int
build(struct nyx_dur *d, const char *token, long exchange_ms,
    struct nyx_http_req *req)
{
	const char *trace = getenv("TRACEPARENT");
	const char *key, *src;
	char path[128];
	size_t n = 0, srclen;

	nyx_dur_drop_request(d);
	memset(req, 0, sizeof(*req));
	if (d->call == NYX_DUR_SUBMIT) {
		snprintf(path, sizeof(path), "executions");
	} else {
		char *id = nyx_http_escape(d->op.operation_id);

		if (id == NULL)
			return -1;
		snprintf(path, sizeof(path), "executions/%s%s", id,
		    d->call == NYX_DUR_STATUS ? "" : call_path(d->call));
		free(id);
	}
	d->url = nyx_chrono_url(
	    d->op.base_url, d->op.slug, d->op.user_service_id, path);
	if (d->url == NULL ||
	    nyx_buf_printf(&d->auth, "Authorization: Bearer %s", token) < 0)
		return -1;
	d->hdrs[n++] = d->auth.data;
	if (d->call == NYX_DUR_SUBMIT) {
		char k[NYX_DUR_KEY_LEN + 1];

		if (nyx_dur_secret_parts(d, &key, &src, &srclen) < 0) {
			nyx_dur_settle(d, "secret_invalid", "admission_invalid",
			    "The operation's secret material is unusable; it "
			    "is never submitted without its own key.",
			    NYX_EXIT_DATAERR);
			return 1;
		}
		memcpy(k, key, NYX_DUR_KEY_LEN);
		k[NYX_DUR_KEY_LEN] = '\0';
		if (!nyx_dur_key_valid(k) ||
		    nyx_buf_printf(&d->key_hdr, "Idempotency-Key: %s", k) < 0) {
			nyx_secure_zero(k, sizeof(k));
			return -1;
		}
		nyx_secure_zero(k, sizeof(k));
		d->body = nyx_chrono_execute_body(
		    d->op.language, src, srclen, d->op.timeout_secs);
		if (d->body == NULL)
			return -1;
		d->hdrs[n++] = d->key_hdr.data;
		d->hdrs[n++] = "Content-Type: application/json";
		req->method = "POST";
		req->body = d->body;
		req->body_len = strlen(d->body);
	} else if (d->call == NYX_DUR_CANCEL) {
		d->hdrs[n++] = "Content-Type: application/json";
		req->method = "POST";
		req->body = "{}";
		req->body_len = 2;
	} else if (d->call == NYX_DUR_STATUS && d->op.etag[0] != '\0') {
		if (nyx_buf_printf(&d->inm, "If-None-Match: %s", d->op.etag) <
		    0)
			return -1;
		d->hdrs[n++] = d->inm.data;
	}
	if (trace != NULL && strlen(trace) == 55 &&
	    strspn(trace, "0123456789abcdef-") == 55 &&
	    nyx_buf_printf(&d->trace, "traceparent: %s", trace) == 0)
		d->hdrs[n++] = d->trace.data;
	d->hdrs[n] = NULL;
	req->url = d->url;
	req->headers = d->hdrs;
	req->timeout_ms = exchange_ms;
	if (d->call == NYX_DUR_SUBMIT) {
		/* libcurl would silently resend on a dead reused
		 * connection: every submit is one we count and classify */
		req->fresh_connect = true;
		d->op.submits++;
	}
	return 0;
}

int
nyx_dur_run(struct nyx_http *h, struct nyx_dur **v, size_t n, const char *token,
    long exchange_ms, size_t max_inflight, int64_t (*now)(void))
{
	struct nyx_http_req *reqs = calloc(n ? n : 1, sizeof(*reqs));
	struct nyx_http_resp *resps = calloc(n ? n : 1, sizeof(*resps));
	struct nyx_dur **live = calloc(n ? n : 1, sizeof(*live));
	size_t i, m;
	int rc = -1;

	if (reqs == NULL || resps == NULL || live == NULL)
		goto out;
	/* a step is at most two rounds: status (or cancel) then result */
	for (;;) {
		for (i = m = 0; i < n; i++) {
			if (v[i]->call == NYX_DUR_NONE)
				continue;
			int b = build(v[i], token, exchange_ms, &reqs[m]);

			if (b < 0)
				goto out;
			if (b == 0)
				live[m++] = v[i];
		}
		if (m == 0)
			break;
		for (i = 0; i < m; i++) {
			struct nyx_http_resp z = NYX_HTTP_RESP_ZERO;

			resps[i] = z;
		}
		/* one pool per caller: the single handle for a lone step
		 * (code-exec), the bounded multi pool for many */
		if (max_inflight <= 1)
			for (i = 0; i < m; i++)
				nyx_http_do(h, &reqs[i], &resps[i]);
		else
			nyx_http_do_many(h, reqs, resps, m, max_inflight);
		for (i = 0; i < m; i++) {
			nyx_dur_apply(live[i], &resps[i], now());
			nyx_dur_drop_request(live[i]);
			nyx_http_resp_free(&resps[i]);
		}
	}
	rc = 0;
out:
	free(reqs);
	free(resps);
	free(live);
	return rc;
}

int
nyx_dur_load(struct nyx_ledger *l, const char *handle, struct nyx_dur *d,
    struct nyx_err *err)
{
	int rc = nyx_ledger_get(l, handle, &d->op, err);

	if (rc <= 0)
		return rc;
	nyx_buf_free(&d->secret);
	d->secret.secret = true;
	if (!d->op.terminal && d->op.operation_id[0] == '\0' &&
	    nyx_ledger_read_secret(l, &d->op, &d->secret, err) < 0)
		return -1;
	return 1;
}

void
nyx_dur_subject(const struct nyx_op *op, struct nyx_audit_subject *s)
{
	s->tool = "code_execute";
	s->owner_kind = "cli";
	s->owner = op->owner;
	s->request_id = op->request_id;
	s->call_id = op->call_id;
	/* a durable run converges by its request id: never fresh */
	s->fresh = false;
}

int
nyx_dur_persist(struct nyx_ledger *l, struct nyx_dur *d, const char *diag,
    struct nyx_err *err)
{
	struct nyx_audit_subject sub;
	struct nyx_err aerr = NYX_ERR_ZERO;
	char *doc = NULL, *intent = NULL;
	char id[NYX_AUDIT_ID_MAX] = "";
	bool settles = d->op.terminal && !d->started_terminal;
	bool audited = d->op.owner[0] != '\0';
	int rc;

	nyx_dur_subject(&d->op, &sub);
	if (audited && d->op.operation_id[0] != '\0' && !d->started_with_id) {
		/* the provider took it: the running phase */
		nyx_audit_note(l, &sub, "running", NULL, d->op.handle, NULL);
		d->started_with_id = true;
	}
	if (settles) {
		struct nyx_audit_outcome o = nyx_audit_outcome_of(&d->oc);

		o.operation_id =
		    d->op.operation_id[0] != '\0' ? d->op.operation_id : NULL;
		jv t;

		/* one settling time for the stored and the printed record */
		if (d->settled_ms == 0)
			d->settled_ms = nyx_now_ms();
		doc = nyx_json_dump(nyx_dur_result_record(d, diag));
		t = audited
		    ? nyx_audit_record(&sub, "terminal", NULL, &o, nyx_now_ms())
		    : jv_invalid();
		if (jv_is_valid(t)) {
			snprintf(id, sizeof(id), "%s",
			    nyx_json_peek_str(t, "audit_id"));
			intent = nyx_json_dump(t);
		} else {
			jv_free(t);
		}
		if (doc == NULL || (audited && intent == NULL)) {
			free(doc);
			free(intent);
			return nyx_err_set(
			    err, NYX_EXIT_OSERR, "oom", "out of memory");
		}
	}
	rc = nyx_ledger_save_intent(
	    l, &d->op, doc, intent ? id : NULL, intent, err);
	free(doc);
	free(intent);
	if (rc < 0)
		return -1;
	d->started_terminal = d->op.terminal;
	if (id[0] != '\0') {
		rc = nyx_audit_replay_intent(
		    l, nyx_ledger_dir(l), id, NULL, &aerr);
		d->audit_pending = rc != 0;
		if (rc != 0)
			nyx_log(NYX_LOG_WARN,
			    "%s: the terminal audit record is frozen until "
			    "audit-replay or exec-status writes it (%s)",
			    d->op.handle,
			    rc == 2 ? "conflict" : "cannot write");
	}
	return 0;
}
