#include "nyx_approval.h"

#include <stdio.h>
#include <string.h>

#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_time.h"

int
nyx_approval_id(const char *owner, const char *request_id, const char *tool,
    const char *call_id, const char *args_sha256, char out[96])
{
	struct nyx_digest *d = nyx_digest_new();
	char hex[NYX_SHA256_HEX];

	if (d == NULL)
		return -1;
	nyx_digest_add(d, "cli");
	nyx_digest_add(d, owner);
	nyx_digest_add(d, request_id);
	nyx_digest_add(d, tool);
	nyx_digest_add(d, call_id);
	nyx_digest_add(d, args_sha256);
	if (nyx_digest_finish(d, hex) < 0)
		return -1;
	snprintf(out, 96, NYX_APPROVAL_ID_PREFIX "%s", hex);
	return 0;
}

/* A new pending request for the call (replacing a consumed one). */
static int
request(struct nyx_ledger *l, const struct nyx_approval_call *c, const char *id,
    const char *args_sha, struct nyx_approval *a, struct nyx_err *err)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->id, sizeof(a->id), "%s", id);
	snprintf(a->owner, sizeof(a->owner), "%s", c->owner);
	snprintf(a->request_id, sizeof(a->request_id), "%s", c->request_id);
	snprintf(a->call_id, sizeof(a->call_id), "%s", c->call_id);
	snprintf(
	    a->arguments_sha256, sizeof(a->arguments_sha256), "%s", args_sha);
	snprintf(a->state, sizeof(a->state), "pending");
	a->created_at_ms = nyx_now_ms();
	return nyx_ledger_approval_put(l, a, c->args, strlen(c->args), err);
}

int
nyx_approval_gate(struct nyx_ledger *l, const struct nyx_approval_call *c,
    struct nyx_approval *a, struct nyx_err *err)
{
	struct nyx_approval g;
	char sha[NYX_SHA256_HEX], id[96];
	int got;

	if (nyx_sha256_hex(c->args, strlen(c->args), sha) < 0 ||
	    nyx_approval_id(
	        c->owner, c->request_id, c->tool, c->call_id, sha, id) < 0)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	/* the grant: exactly this call, consumed once */
	got = nyx_ledger_approval_grant(
	    l, c->owner, c->request_id, c->call_id, &g, err);
	if (got < 0)
		return -1;
	if (got == 1 && strcmp(g.id, id) != 0)
		return nyx_err_set(err, NYX_EXIT_BLOCKED,
		    "approval_grant_mismatch",
		    "The durable approval grant %s does not match this exact "
		    "call; 'codex-exec deny %s' it, or pass another "
		    "--request-id.",
		    g.id, g.id);
	if (got == 1) {
		switch (nyx_ledger_approval_move(
		    l, id, "approved", "consumed", NULL, nyx_now_ms(), err)) {
		case 1:
			return NYX_APPROVAL_CONSUMED;
		case 0:
			break; /* consumed or denied meanwhile */
		default:
			return -1;
		}
	}
	/* no usable grant: the pending request stands, or a new one */
	got = nyx_ledger_approval_get(l, id, a, err);
	if (got < 0)
		return -1;
	if (got == 1 && strcmp(a->state, "consumed") != 0)
		return NYX_APPROVAL_PENDING;
	return request(l, c, id, sha, a, err) < 0 ? -1 : NYX_APPROVAL_REQUESTED;
}

int
nyx_approval_load(struct nyx_ledger *l, const char *id, bool approve,
    struct nyx_approval *a, struct nyx_buf *args, struct nyx_err *err)
{
	int got = nyx_ledger_approval_get(l, id, a, err);

	if (got < 0)
		return -1;
	if (got == 0)
		return nyx_err_set(err, NYX_EXIT_DATAERR, "approval_unknown",
		    "no approval %s in the ledger", id);
	/* pending can be decided; an approved grant can still be denied */
	if (strcmp(a->state, "pending") != 0 &&
	    !(strcmp(a->state, "approved") == 0 && !approve))
		return nyx_err_set(err, NYX_EXIT_DATAERR,
		    "approval_not_pending", "approval %s is %s, not pending",
		    id, a->state);
	return nyx_ledger_approval_args(l, a, args, err);
}

int
nyx_approval_decide(struct nyx_ledger *l, struct nyx_approval *a, bool approve,
    const char *who, struct nyx_err *err)
{
	char id[96];

	snprintf(id, sizeof(id), "%s", a->id);
	switch (nyx_ledger_approval_move(l, id, a->state,
	    approve ? "approved" : "denied", who, nyx_now_ms(), err)) {
	case 1:
		break;
	case 0:
		return nyx_err_set(err, NYX_EXIT_DATAERR,
		    "approval_not_pending", "approval %s changed meanwhile",
		    id);
	default:
		return -1;
	}
	return nyx_ledger_approval_get(l, id, a, err) == 1
	    ? 0
	    : nyx_err_set(err, NYX_EXIT_DATAERR, "approval_unknown",
	          "approval %s vanished", id);
}

jv
nyx_approval_record(const struct nyx_approval *a, const char *diag)
{
	jv r = jv_object();
	char t[NYX_TIME_STRLEN];

	r = jv_object_set(r, jv_string("v"), jv_number(1));
	r = jv_object_set(r, jv_string("type"), jv_string("approval.request"));
	r = jv_object_set(r, jv_string("request_id"), jv_string(a->id));
	r = jv_object_set(r, jv_string("tool"), jv_string("codex_exec"));
	r = jv_object_set(r, jv_string("target"), jv_string("private_ssh"));
	r = jv_object_set(
	    r, jv_string("arguments_sha256"), jv_string(a->arguments_sha256));
	r = jv_object_set(r, jv_string("state"), jv_string(a->state));
	nyx_time_format(a->created_at_ms, t);
	r = jv_object_set(r, jv_string("created_at"), jv_string(t));
	if (a->decided_at_ms > 0) {
		nyx_time_format(a->decided_at_ms, t);
		r = jv_object_set(r, jv_string("decided_at"), jv_string(t));
		r = jv_object_set(
		    r, jv_string("decided_by"), jv_string(a->decided_by));
	}
	return jv_object_set(r, jv_string("diagnostic_id"), jv_string(diag));
}
