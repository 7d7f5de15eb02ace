/*
 * nyx_chrono: the Chrono Sandbox execution contract, client side
 * (WIRE.md 4): the proxy URL, the exact /execute body, strict validation
 * of a 2xx answer, and the failure tables that turn any answer into an
 * outcome (nyx_outcome) with a fixed safe message (upstream text is never
 * copied).  Classification is pure; the exec.result record is built from
 * an outcome.
 */
#ifndef NYX_CHRONO_H
#define NYX_CHRONO_H

#include <stdbool.h>
#include <stddef.h>

#include <jv.h>

#include "nyx_http.h"
#include "nyx_outcome.h"

/*
 * {base}/api/v1/proxy/s/{slug}/{path}?_nyxid_via={id}, slug and id
 * percent-encoded.  A new heap string, or NULL.
 */
char *nyx_chrono_url(
    const char *base, const char *slug, const char *id, const char *path);

/* {"language":…,"script":…,"timeout_secs":N} as a new heap string. */
char *nyx_chrono_execute_body(const char *language, const char *script,
    size_t script_len, int timeout_secs);

/*
 * Classify a finished /execute exchange.  `resp` may carry no answer
 * (transport failure, timeout, oversized body).
 */
void nyx_chrono_classify_sync(
    const struct nyx_http_resp *resp, struct nyx_exec_outcome *out);

/*
 * Classify a 2xx body that must carry a program's output (WIRE.md 4.3);
 * also the durable result.  A malformed body is
 * code_execution_response_invalid.
 */
void nyx_chrono_classify_output(jv doc, struct nyx_exec_outcome *out);

/* The exec.result record (consumes nothing). */
jv nyx_exec_result_record(const struct nyx_exec_outcome *o, const char *backend,
    const char *mode, const char *diag);

#endif
