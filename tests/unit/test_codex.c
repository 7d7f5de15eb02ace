/*
 * Unit tests of the Codex domain (lib/nyx_codex, lib/nyx_approval): call
 * admission, the managed CODEX_* table and NyxID's gate, the SSH exec
 * table, the canonical arguments and the wrapper, approval ids, and the
 * approval gate over a real SQLite ledger.  Tables, not servers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nyx_approval.h"
#include "nyx_codex.h"
#include "nyx_cred.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_test.h"

/* A response with a status and a body (fail: the transport's verdict). */
static void
resp(struct nyx_http_resp *r, enum nyx_http_fail fail, long status,
    const char *body)
{
	struct nyx_http_resp z = NYX_HTTP_RESP_ZERO;

	*r = z;
	r->fail = fail;
	r->status = status;
	nyx_buf_init(&r->body, 0);
	if (body != NULL)
		nyx_buf_addstr(&r->body, body);
}

static void
call_of(struct nyx_codex_call *c, bool ssh, const char *prompt)
{
	memset(c, 0, sizeof(*c));
	c->ssh = ssh;
	nyx_buf_init(&c->prompt, 0);
	nyx_buf_addstr(&c->prompt, prompt);
	c->timeout_secs = ssh ? 30 : 180;
	c->service = ssh ? "alice-devbox" : NULL;
	c->principal = ssh ? "alice" : NULL;
	c->call_id = "codex_exec";
	snprintf(c->request_id, sizeof(c->request_id), "r-1");
}

static void
test_admit(void)
{
	static const struct {
		struct nyx_codex_args a;
		const char *code; /* NULL: admitted */
		int exit;
	} rows[] = {
	    {{NULL, "p", NULL, NULL, NULL, NULL, NULL, NULL}, "invalid_target",
	        64},
	    {{"vm", "p", NULL, NULL, NULL, NULL, NULL, NULL}, "invalid_target",
	        64},
	    {{"private_ssh", "p", NULL, NULL, "s", "u", "empty_git", NULL},
	        "mixed_target", 64},
	    {{"managed_sandbox", "p", NULL, NULL, "s", NULL, NULL, NULL},
	        "mixed_target", 64},
	    {{"private_ssh", "p", NULL, NULL, "s", "", NULL, NULL},
	        "invalid_target", 64},
	    {{"managed_sandbox", "p", NULL, NULL, NULL, NULL, "repo", NULL},
	        "invalid_workspace", 64},
	    {{"managed_sandbox", NULL, NULL, NULL, NULL, NULL, NULL, NULL},
	        "invalid_arguments", 64},
	    {{"managed_sandbox", " \n", NULL, NULL, NULL, NULL, NULL, NULL},
	        "invalid_arguments", 64},
	    {{"managed_sandbox", "p", NULL, "181", NULL, NULL, NULL, NULL},
	        "invalid_timeout", 64},
	    {{"private_ssh", "p", NULL, "301", "s", "u", NULL, NULL},
	        "invalid_timeout", 64},
	    {{"private_ssh", "p", NULL, "2x", "s", "u", NULL, NULL},
	        "invalid_timeout", 64},
	    {{"managed_sandbox", "p\xff", NULL, NULL, NULL, NULL, NULL, NULL},
	        "invalid_arguments", 65},
	    {{"managed_sandbox", "p", NULL, NULL, NULL, NULL, NULL, "c-1"},
	        NULL, 0},
	    {{"private_ssh", "p", NULL, "300", "s", "u", NULL, NULL}, NULL, 0},
	};
	char big[NYX_CODEX_PROMPT_MAX + 2];
	struct nyx_codex_args a = {
	    "managed_sandbox", big, NULL, NULL, NULL, NULL, NULL, NULL};
	struct nyx_codex_call c;
	struct nyx_err e = NYX_ERR_ZERO;
	size_t i;
	bool ok = true;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int rc;

		memset(&e, 0, sizeof(e));
		rc = nyx_codex_admit(&rows[i].a, &c, &e);
		if (rows[i].code == NULL
		        ? rc != 0
		        : rc == 0 || strcmp(e.code, rows[i].code) != 0 ||
		            e.exit != rows[i].exit) {
			printf("#   row %zu: rc %d code %s exit %d\n", i, rc,
			    e.code, e.exit);
			ok = false;
		}
		nyx_codex_call_free(&c);
	}
	CHECK(ok, "admission table: every refusal has its code and exit");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memset(&e, 0, sizeof(e));
	CHECK(nyx_codex_admit(&a, &c, &e) < 0 &&
	        strcmp(e.code, "prompt_too_large") == 0,
	    "6001 bytes is prompt_too_large");
	nyx_codex_call_free(&c);
	big[NYX_CODEX_PROMPT_MAX] = '\0';
	memset(&e, 0, sizeof(e));
	CHECK(nyx_codex_admit(&a, &c, &e) == 0 && c.timeout_secs == 180 &&
	        strcmp(c.call_id, "codex_exec") == 0,
	    "6000 bytes are accepted; defaults 180 s and codex_exec");
	nyx_codex_call_free(&c);
}

static void
test_managed(void)
{
	static const struct {
		enum nyx_http_fail fail;
		long status;
		const char *body, *code, *kind;
		int exit;
	} rows[] = {
	    {NYX_HTTP_OK, 200,
	        "{\"success\":true,\"output\":{\"text\":\"done\","
	        "\"exit_code\":0}}",
	        NULL, NULL, 0},
	    {NYX_HTTP_OK, 200,
	        "{\"success\":true,\"output\":{\"text\":\"x\",\"exit_code\":2}"
	        "}",
	        "managed_execution_nonzero_exit", "terminal_failure", 1},
	    {NYX_HTTP_OK, 200, "{\"success\":true,\"output\":{}}",
	        "managed_response_invalid", "malformed_output", 76},
	    {NYX_HTTP_OK, 400,
	        "{\"error\":{\"code\":\"CODEX_PROMPT_INVALID\"}}",
	        "managed_upstream_codex_prompt_invalid", "admission_denied",
	        76},
	    {NYX_HTTP_OK, 401,
	        "{\"error\":{\"code\":\"CODEX_DELEGATION_EXPIRED\"}}",
	        "managed_upstream_codex_delegation_expired", "admission_denied",
	        77},
	    {NYX_HTTP_OK, 503,
	        "{\"body\":\"{\\\"error\\\":{\\\"code\\\":"
	        "\\\"CODEX_SANDBOX_CREATION_FAILED\\\"}}\"}",
	        "managed_upstream_codex_sandbox_creation_failed",
	        "provisioning_failed", 75},
	    {NYX_HTTP_OK, 403,
	        "{\"error\":{\"code\":\"CODEX_FEATURE_DISABLED\"}}",
	        "managed_upstream_codex_feature_disabled",
	        "target_not_configured", 3},
	    {NYX_HTTP_OK, 429,
	        "{\"error\":{\"code\":\"CODEX_CAPACITY_UNAVAILABLE\"}}",
	        "managed_upstream_codex_capacity_unavailable",
	        "capacity_unavailable", 75},
	    {NYX_HTTP_OK, 503,
	        "{\"error\":{\"code\":\"CODEX_CAPACITY_UNAVAILABLE\"}}",
	        "managed_response_invalid", "malformed_output", 76},
	    {NYX_HTTP_OK, 500, "{\"error\":{\"code\":\"CODEX_TURN_FAILED\"}}",
	        "managed_upstream_codex_turn_failed", "terminal_failure", 1},
	    {NYX_HTTP_OK, 401, "{}", "managed_proxy_authentication_failed",
	        "admission_denied", 77},
	    {NYX_HTTP_OK, 404, "{}", "managed_proxy_target_unavailable",
	        "target_not_configured", 76},
	    /* WIRE 4.4: a 504 or 502 may come after the task ran (4) */
	    {NYX_HTTP_OK, 504, "{}", "codex_outcome_uncertain",
	        "outcome_uncertain", 4},
	    {NYX_HTTP_OK, 429, "{}", "managed_proxy_unavailable",
	        "capacity_unavailable", 75},
	    {NYX_HTTP_OK, 502, "{}", "codex_outcome_uncertain",
	        "outcome_uncertain", 4},
	    {NYX_HTTP_OK, 418, "{}", "managed_proxy_failed", "terminal_failure",
	        76},
	    {NYX_HTTP_OK, 403,
	        "{\"error\":\"approval_required\",\"request_id\":\"ar-1\","
	        "\"approve_url\":\"https://nyx.example/a/ar-1\"}",
	        "NYXID_APPROVAL_REQUIRED", "approval_required", 3},
	    {NYX_HTTP_TIMEOUT, 0, NULL, "managed_proxy_timeout", "timed_out",
	        75},
	    {NYX_HTTP_TRANSPORT, 0, NULL, "managed_proxy_unavailable",
	        "terminal_failure", 75},
	    {NYX_HTTP_TOO_LARGE, 200, NULL, "managed_response_too_large",
	        "malformed_output", 76},
	};
	struct nyx_codex_outcome oc;
	struct nyx_http_resp r;
	size_t i;
	bool ok = true;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		nyx_codex_outcome_init(&oc);
		resp(&r, rows[i].fail, rows[i].status, rows[i].body);
		nyx_codex_classify_managed(&r, "KEY", &oc);
		if (oc.base.exit != rows[i].exit ||
		    (rows[i].code == NULL) != oc.base.success ||
		    (rows[i].code != NULL &&
		        (strcmp(oc.base.code, rows[i].code) != 0 ||
		            strcmp(oc.base.kind, rows[i].kind) != 0))) {
			printf("#   row %zu: %s %s %d\n", i,
			    oc.base.code ? oc.base.code : "-",
			    oc.base.kind ? oc.base.kind : "-", oc.base.exit);
			ok = false;
		}
		nyx_http_resp_free(&r);
		nyx_codex_outcome_free(&oc);
	}
	CHECK(ok, "managed table: CODEX_* codes, statuses, transport");

	nyx_codex_outcome_init(&oc);
	resp(&r, NYX_HTTP_OK, 403,
	    "{\"error\":\"approval_required\",\"request_id\":\"ar-1\","
	    "\"approve_url\":\"javascript:alert(1)\"}");
	nyx_codex_classify_managed(&r, "KEY", &oc);
	CHECK(strcmp(oc.base.approval_request_id, "ar-1") == 0 &&
	        oc.base.approve_url[0] == '\0',
	    "approval gate: the request id kept, an unsafe URL dropped");
	nyx_http_resp_free(&r);
	nyx_codex_outcome_free(&oc);

	nyx_codex_outcome_init(&oc);
	resp(&r, NYX_HTTP_OK, 200,
	    "{\"success\":true,\"output\":{\"text\":\"k=KEY;KEYKEY\","
	    "\"exit_code\":0},\"diagnostic_id\":\"d-1\"}");
	nyx_codex_classify_managed(&r, "KEY", &oc);
	CHECK(jv_get_kind(oc.base.output) == JV_KIND_STRING &&
	        strcmp(jv_string_value(oc.base.output),
	            "k=[REDACTED];[REDACTED][REDACTED]") == 0 &&
	        strcmp(oc.base.upstream_diag, "d-1") == 0,
	    "the key is redacted from the text; a safe diagnostic id kept");
	nyx_http_resp_free(&r);
	nyx_codex_outcome_free(&oc);
}

static void
test_ssh(void)
{
	static const struct {
		enum nyx_http_fail fail;
		long status;
		const char *body, *code;
		int exit;
	} rows[] = {
	    {NYX_HTTP_OK, 200,
	        "{\"exit_code\":0,\"stdout\":\"ok\",\"stderr\":\"\"}", NULL, 0},
	    {NYX_HTTP_OK, 200,
	        "{\"exit_code\":3,\"stdout\":\"\",\"stderr\":\"e\"}",
	        "codex_exec_nonzero_exit", 1},
	    {NYX_HTTP_OK, 200,
	        "{\"exit_code\":124,\"stdout\":\"\",\"stderr\":\"\","
	        "\"timed_out\":true}",
	        "codex_exec_timed_out", 1},
	    {NYX_HTTP_OK, 200, "{\"exit_code\":\"0\"}", "ssh_response_invalid",
	        76},
	    {NYX_HTTP_OK, 401, "{}", "ssh_denied", 77},
	    {NYX_HTTP_OK, 404, "{}", "target_not_configured", 3},
	    {NYX_HTTP_OK, 502, "{}", "codex_outcome_uncertain", 4},
	    {NYX_HTTP_OK, 429, "{}", "codex_exec_failed", 75},
	    {NYX_HTTP_OK, 400, "{}", "codex_exec_failed", 76},
	    {NYX_HTTP_TIMEOUT, 0, NULL, "ssh_timeout", 75},
	    {NYX_HTTP_TRANSPORT, 0, NULL, "ssh_unavailable", 75},
	    {NYX_HTTP_TOO_LARGE, 200, NULL, "ssh_response_too_large", 76},
	};
	struct nyx_codex_outcome oc;
	struct nyx_http_resp r;
	char catalog[64];
	size_t i;
	bool ok = true;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		nyx_codex_outcome_init(&oc);
		resp(&r, rows[i].fail, rows[i].status, rows[i].body);
		nyx_codex_classify_ssh(&r, &oc);
		if (oc.base.exit != rows[i].exit ||
		    (rows[i].code == NULL) != oc.base.success ||
		    (rows[i].code != NULL &&
		        strcmp(oc.base.code, rows[i].code) != 0)) {
			printf("#   row %zu: %s %d\n", i,
			    oc.base.code ? oc.base.code : "-", oc.base.exit);
			ok = false;
		}
		nyx_http_resp_free(&r);
		nyx_codex_outcome_free(&oc);
	}
	CHECK(ok, "SSH exec table");

	nyx_codex_outcome_init(&oc);
	resp(&r, NYX_HTTP_OK, 200, "{\"catalog_service_id\":\"cat-devbox\"}");
	CHECK(nyx_codex_classify_service(&r, catalog, sizeof(catalog), &oc) ==
	            0 &&
	        strcmp(catalog, "cat-devbox") == 0,
	    "service: its catalog id");
	nyx_http_resp_free(&r);
	resp(&r, NYX_HTTP_OK, 404, "{}");
	CHECK(
	    nyx_codex_classify_service(&r, catalog, sizeof(catalog), &oc) < 0 &&
	        oc.base.exit == 3,
	    "service: 404 is target_not_configured (3)");
	nyx_http_resp_free(&r);
	nyx_codex_outcome_free(&oc);
}

/* WIRE 4.4: no answer after the request left is "may have run" (4). */
static void
test_delivery(void)
{
	struct nyx_codex_outcome oc;
	struct nyx_http_resp r;

	nyx_codex_outcome_init(&oc);
	resp(&r, NYX_HTTP_TIMEOUT, 0, NULL);
	r.sent = true;
	nyx_codex_classify_managed(&r, "KEY", &oc);
	CHECK(oc.base.exit == 4 &&
	        strcmp(oc.base.code, "codex_outcome_uncertain") == 0 &&
	        strcmp(oc.base.cause, "managed_proxy_timeout") == 0,
	    "managed: a timeout after the request left is uncertain, with "
	    "its cause");
	nyx_http_resp_free(&r);
	nyx_codex_outcome_free(&oc);
	nyx_codex_outcome_init(&oc);
	resp(&r, NYX_HTTP_TRANSPORT, 0, NULL);
	r.sent = true;
	nyx_codex_classify_ssh(&r, &oc);
	CHECK(
	    oc.base.exit == 4 && strcmp(oc.base.cause, "ssh_unavailable") == 0,
	    "ssh: a connection lost after the request left is uncertain");
	nyx_http_resp_free(&r);
	nyx_codex_outcome_free(&oc);
	nyx_codex_outcome_init(&oc);
	resp(&r, NYX_HTTP_OK, 500,
	    "{\"error\":{\"code\":\"CODEX_CLEANUP_UNCONFIRMED\"}}");
	nyx_codex_classify_managed(&r, "KEY", &oc);
	CHECK(oc.base.exit == 4 &&
	        strcmp(oc.base.cause,
	            "managed_upstream_codex_cleanup_unconfirmed") == 0,
	    "managed: an unconfirmed cleanup is uncertain (the task ran)");
	nyx_http_resp_free(&r);
	nyx_codex_outcome_free(&oc);
}

static void
test_arguments(void)
{
	struct nyx_codex_call c;
	char *args, *cmd;

	call_of(&c, true, "it's $(rm -rf /) `x`");
	args = nyx_codex_ssh_arguments(&c);
	CHECK_STR(args,
	    "{\"prompt\":\"it's $(rm -rf /) `x`\",\"target\":{\"kind\":"
	    "\"private_ssh\",\"private_ssh\":{\"principal\":\"alice\","
	    "\"service\":\"alice-devbox\"}},\"timeout_secs\":30,"
	    "\"workspace\":{\"kind\":\"empty_git\"}}",
	    "canonical private_ssh arguments: sorted, compact");
	cmd = nyx_codex_ssh_command(&c);
	CHECK(cmd != NULL && strstr(cmd, "rm -rf") == NULL &&
	        strstr(cmd, "| codex exec -") != NULL &&
	        strncmp(cmd, "p='", 3) == 0,
	    "the wrapper carries the prompt only as base64");
	{
		size_t n = 0;
		char *task = cmd ? nyx_codex_ssh_task(cmd, &n) : NULL;

		CHECK(task != NULL && n == c.prompt.len &&
		        memcmp(task, c.prompt.data, n) == 0 &&
		        nyx_codex_ssh_task("p='aGk='; rm -rf /", &n) == NULL,
		    "the host side decodes exactly the wrapper it was given");
		free(task);
	}
	free(args);
	free(cmd);
	nyx_codex_call_free(&c);
	call_of(&c, false, "hi");
	args = nyx_codex_managed_body(&c);
	CHECK_STR(args,
	    "{\"prompt\":\"hi\",\"timeout_secs\":180,\"workspace\":"
	    "\"empty_git\"}",
	    "managed body: exactly prompt, timeout_secs, workspace");
	free(args);
	nyx_codex_call_free(&c);
}

static void
test_request_id(void)
{
	struct nyx_codex_call a, b;

	call_of(&a, true, "x");
	call_of(&b, true, "y");
	nyx_codex_request_id(&a, NULL);
	nyx_codex_request_id(&b, NULL);
	CHECK(strncmp(a.request_id, "ssh:", 4) == 0 &&
	        strlen(a.request_id) == 36 &&
	        strcmp(a.request_id, b.request_id) != 0,
	    "private_ssh default request id: ssh: + 32 hex, per exact call");
	{
		struct nyx_codex_call a2;
		char *args = NULL, sha[NYX_SHA256_HEX], hex[NYX_SHA256_HEX];
		struct nyx_digest *d = nyx_digest_new();

		call_of(&a2, true, "x");
		nyx_codex_request_id(&a2, NULL);
		args = nyx_codex_ssh_arguments(&a2);
		nyx_sha256_hex(args, strlen(args), sha);
		nyx_digest_add(d, "alice-devbox");
		nyx_digest_add(d, "alice");
		nyx_digest_add(d, sha);
		nyx_digest_finish(d, hex);
		CHECK(strcmp(a2.request_id, a.request_id) == 0 &&
		        strncmp(a2.request_id + 4, hex, 32) == 0,
		    "the same call gives the same id: service, principal, "
		    "arguments digest");
		free(args);
		nyx_codex_call_free(&a2);
	}
	{
		/* one owner rule for every program (PRODUCT 6) */
		const char *key = "nyx_fedcba9876543210";
		char owner[160], hex[NYX_SHA256_HEX], want[64];

		nyx_sha256_hex(key, strlen(key), hex);
		snprintf(want, sizeof(want), "token:%.16s", hex);
		nyx_cred_owner(key, owner, sizeof(owner));
		CHECK_STR(owner, want,
		    "owner of a token without a subject: token: + 16 hex");
		nyx_cred_owner("nyxid_ag_0123456789abcdef0123456789abcdef"
		               "0123456789abcdef0123456789abcdef",
		    owner, sizeof(owner));
		CHECK_STR(owner, "nyxid_ag_01234567",
		    "owner of an Agent Key: its public prefix");
		{
			/* a JWT subject is kept whole, or not at all */
			char sub[400], payload[512], *b64, jwt[700];
			size_t lens[2] = {100, 300}, k;

			for (k = 0; k < 2; k++) {
				memset(sub, 'u', lens[k]);
				sub[lens[k]] = '\0';
				snprintf(payload, sizeof(payload),
				    "{\"sub\":\"%s\"}", sub);
				b64 = nyx_b64_encode(payload, strlen(payload));
				for (char *p = b64; *p; p++)
					*p = *p == '+'  ? '-'
					    : *p == '/' ? '_'
					                : *p;
				b64[strcspn(b64, "=")] = '\0';
				snprintf(jwt, sizeof(jwt), "e30.%s.c2ln", b64);
				free(b64);
				nyx_cred_owner(jwt, owner, sizeof(owner));
				if (k == 0)
					CHECK_STR(owner, sub,
					    "a 100-character JWT subject is "
					    "the owner");
				else
					CHECK(strncmp(owner, "token:", 6) == 0,
					    "a 300-character subject is not "
					    "cut: "
					    "the fingerprint instead");
			}
		}
	}
	nyx_codex_request_id(&a, "given");
	CHECK_STR(a.request_id, "given", "a given request id wins");
	nyx_codex_call_free(&a);
	nyx_codex_call_free(&b);
}

static void
test_approval(const char *dir)
{
	struct nyx_err e = NYX_ERR_ZERO;
	struct nyx_ledger *l = NULL;
	struct nyx_approval a;
	struct nyx_buf args = NYX_BUF_ZERO;
	char id[96], sha[NYX_SHA256_HEX];
	const char *json = "{\"prompt\":\"x\"}";
	struct nyx_approval_call c = {
	    "u-alice", "r-1", "codex_exec", "codex_exec", json};
	struct nyx_approval_call other = {
	    "u-alice", "r-1", "codex_exec", "codex_exec", "{\"prompt\":\"y\"}"};
	struct nyx_digest *d = nyx_digest_new();
	char want[NYX_SHA256_HEX];

	nyx_sha256_hex(json, strlen(json), sha);
	nyx_approval_id("u-alice", "r-1", "codex_exec", "codex_exec", sha, id);
	nyx_digest_add(d, "cli");
	nyx_digest_add(d, "u-alice");
	nyx_digest_add(d, "r-1");
	nyx_digest_add(d, "codex_exec");
	nyx_digest_add(d, "codex_exec");
	nyx_digest_add(d, sha);
	nyx_digest_finish(d, want);
	CHECK(strncmp(id, "tool-approval:v1:", 17) == 0 &&
	        strcmp(id + 17, want) == 0,
	    "approval id: length-prefixed cli, owner, request, tool, call, "
	    "args sha");

	if (nyx_ledger_open(dir, &l, &e) < 0) {
		CHECK(0, "ledger opens");
		return;
	}
	CHECK(nyx_approval_gate(l, &c, &a, &e) == NYX_APPROVAL_REQUESTED &&
	        strcmp(a.id, id) == 0 && strcmp(a.state, "pending") == 0,
	    "gate: no grant records a pending request");
	CHECK(nyx_approval_gate(l, &c, &a, &e) == NYX_APPROVAL_PENDING,
	    "gate: the same call again finds it pending");
	CHECK(nyx_approval_load(l, id, true, &a, &args, &e) == 0 &&
	        args.len == strlen(json) &&
	        memcmp(args.data, json, args.len) == 0,
	    "load: the verified arguments");
	nyx_buf_free(&args);
	CHECK(nyx_approval_decide(l, &a, true, "tester", &e) == 0 &&
	        strcmp(a.state, "approved") == 0 &&
	        strcmp(a.decided_by, "tester") == 0,
	    "decide: approved by whom");
	memset(&e, 0, sizeof(e));
	CHECK(nyx_approval_gate(l, &other, &a, &e) < 0 &&
	        strcmp(e.code, "approval_grant_mismatch") == 0 && e.exit == 3,
	    "gate: the grant does not cover other arguments");
	memset(&e, 0, sizeof(e));
	CHECK(nyx_approval_gate(l, &c, &a, &e) == NYX_APPROVAL_CONSUMED,
	    "gate: the exact call consumes the grant");
	CHECK(nyx_approval_gate(l, &c, &a, &e) == NYX_APPROVAL_REQUESTED,
	    "gate: consumed once; the next run asks again");
	memset(&e, 0, sizeof(e));
	CHECK(nyx_approval_load(
	          l, "tool-approval:v1:none", true, &a, &args, &e) < 0 &&
	        strcmp(e.code, "approval_unknown") == 0,
	    "load: an unknown id is approval_unknown");
	nyx_buf_free(&args);
	nyx_ledger_close(l);
}

int
main(void)
{
	char base[] = "/tmp/nyx-codex-test-XXXXXX", dir[64];
	const char *tmp = getenv("NYX_TEST_TMP");

	test_admit();
	test_managed();
	test_ssh();
	test_delivery();
	test_arguments();
	test_request_id();
	if (tmp != NULL && *tmp != '\0') {
		snprintf(dir, sizeof(dir), "%.40s/codex-ledger", tmp);
		test_approval(dir);
	} else if (mkdtemp(base) != NULL) {
		snprintf(dir, sizeof(dir), "%s/state", base);
		test_approval(dir);
	}
	return nyx_test_done();
}
