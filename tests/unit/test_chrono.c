/*
 * Unit tests of the Chrono sync classifier (WIRE.md 4.3, 4.4): every
 * answer, or none, becomes an outcome with a fixed code, kind and exit,
 * and whether the program can have run decides 75, 1 or 4.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "nyx_chrono.h"
#include "nyx_test.h"

/* WIRE 4.4, revision 2: 75 only when nothing ran, 1 when it ran out of
 * time, 4 (the specific code as the cause) when it may have run. */
#define UNC "code_execution_outcome_uncertain", "outcome_uncertain", 4

static const struct {
	enum nyx_http_fail fail;
	bool sent;
	long status;
	const char *body, *code, *kind;
	int exit, child;
	const char *cause;
} rows[] = {
    {NYX_HTTP_OK, true, 200,
        "{\"success\":true,\"output\":{\"stdout\":\"42\\n\",\"stderr\":\"\","
        "\"exit_code\":0,\"execution_time_ms\":5}}",
        NULL, NULL, 0, 0, NULL},
    {NYX_HTTP_OK, true, 200,
        "{\"success\":false,\"output\":{\"stdout\":\"\",\"stderr\":\"x\","
        "\"exit_code\":3},\"error\":{\"code\":\"EXECUTION_FAILED\"}}",
        "EXECUTION_FAILED", "execution_failed", 1, 3, NULL},
    {NYX_HTTP_OK, true, 200,
        "{\"success\":false,\"output\":{\"stdout\":\"\",\"stderr\":\"\","
        "\"exit_code\":1},\"error\":{\"code\":\"DEPENDENCY_INSTALL_FAILED\"}}",
        "DEPENDENCY_INSTALL_FAILED", "execution_failed", 1, 1, NULL},
    {NYX_HTTP_OK, true, 200,
        "{\"success\":true,\"output\":{\"stdout\":\"\",\"stderr\":\"\","
        "\"exit_code\":2}}",
        "code_execution_response_invalid", "malformed_output", 76, -1, NULL},
    {NYX_HTTP_OK, true, 200, "{\"success\":true}",
        "code_execution_response_invalid", "malformed_output", 76, -1, NULL},
    {NYX_HTTP_OK, true, 401, "{\"error\":{\"code\":\"UNAUTHENTICATED\"}}",
        "UNAUTHENTICATED", "admission_denied", 77, -1, NULL},
    {NYX_HTTP_OK, true, 400, "{\"error\":{\"code\":\"INVALID_REQUEST\"}}",
        "INVALID_REQUEST", "admission_denied", 76, -1, NULL},
    {NYX_HTTP_OK, true, 504, "{\"error\":{\"code\":\"SANDBOX_TIMEOUT\"}}",
        "SANDBOX_TIMEOUT", "timed_out", 1, -1, NULL},
    {NYX_HTTP_OK, true, 503,
        "{\"error\":{\"code\":\"SANDBOX_CREATION_FAILED\"}}",
        "SANDBOX_CREATION_FAILED", "transport_unavailable", 75, -1, NULL},
    {NYX_HTTP_OK, true, 502,
        "{\"body\":{\"error\":{\"code\":\"SANDBOX_UNREACHABLE\"}}}", UNC, -1,
        "SANDBOX_UNREACHABLE"},
    {NYX_HTTP_OK, true, 500, "{\"error\":{\"code\":\"INTERNAL_ERROR\"}}", UNC,
        -1, "INTERNAL_ERROR"},
    {NYX_HTTP_OK, true, 401, "{}", "NYXID_PROXY_UNAUTHORIZED",
        "admission_denied", 77, -1, NULL},
    {NYX_HTTP_OK, true, 403, "{}", "NYXID_PROXY_FORBIDDEN", "admission_denied",
        77, -1, NULL},
    {NYX_HTTP_OK, true, 404, "{}", "NYXID_PROXY_HTTP_404",
        "target_not_configured", 76, -1, NULL},
    {NYX_HTTP_OK, true, 429, "{}", "NYXID_PROXY_HTTP_429",
        "transport_unavailable", 75, -1, NULL},
    {NYX_HTTP_OK, true, 504, "{}", UNC, -1, "code_execution_timed_out"},
    {NYX_HTTP_OK, true, 408, "{}", UNC, -1, "code_execution_timed_out"},
    {NYX_HTTP_OK, true, 503, "{}", UNC, -1, "NYXID_PROXY_HTTP_503"},
    {NYX_HTTP_OK, true, 524, "{}", UNC, -1, "NYXID_PROXY_HTTP_524"},
    {NYX_HTTP_OK, true, 418, "{}", "NYXID_PROXY_HTTP_418",
        "transport_unavailable", 76, -1, NULL},
    {NYX_HTTP_OK, true, 403,
        "{\"error\":\"approval_required\",\"request_id\":\"ar-9\"}",
        "NYXID_APPROVAL_REQUIRED", "approval_required", 3, -1, NULL},
    /* no answer: the request left, or it never did */
    {NYX_HTTP_TIMEOUT, true, 0, NULL, UNC, -1, "code_execution_timed_out"},
    {NYX_HTTP_TIMEOUT, false, 0, NULL, "code_execution_timed_out", "timed_out",
        75, -1, NULL},
    {NYX_HTTP_TRANSPORT, true, 0, NULL, UNC, -1,
        "code_execution_transport_unavailable"},
    {NYX_HTTP_TRANSPORT, false, 0, NULL, "code_execution_transport_unavailable",
        "transport_unavailable", 75, -1, NULL},
    {NYX_HTTP_TOO_LARGE, true, 200, NULL, "code_execution_response_too_large",
        "response_too_large", 76, -1, NULL},
};

int
main(void)
{
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;
		struct nyx_exec_outcome o;
		char name[96];
		bool ok;

		nyx_exec_outcome_init(&o);
		r.fail = rows[i].fail;
		r.sent = rows[i].sent;
		r.status = rows[i].status;
		nyx_buf_init(&r.body, 0);
		if (rows[i].body != NULL)
			nyx_buf_addstr(&r.body, rows[i].body);
		nyx_chrono_classify_sync(&r, &o);
		ok = o.exit == rows[i].exit && o.child_exit == rows[i].child &&
		    (rows[i].cause == NULL ? o.cause == NULL
		                           : o.cause != NULL &&
		                strcmp(o.cause, rows[i].cause) == 0) &&
		    (rows[i].code == NULL
		            ? o.success
		            : !o.success && strcmp(o.code, rows[i].code) == 0 &&
		                strcmp(o.kind, rows[i].kind) == 0);
		if (!ok)
			printf("#   got %s %s exit %d child %d\n",
			    o.code ? o.code : "-", o.kind ? o.kind : "-",
			    o.exit, o.child_exit);
		snprintf(name, sizeof(name), "sync row %zu: %s (%ld)", i,
		    rows[i].code ? rows[i].code : "success", rows[i].status);
		CHECK(ok, name);
		nyx_http_resp_free(&r);
		nyx_exec_outcome_free(&o);
	}
	return nyx_test_done();
}
