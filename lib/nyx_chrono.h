/*
 * nyx_chrono: the Chrono Sandbox execution contract, client side
 * (WIRE.md 4): the proxy URL, the exact /execute body, strict validation
 * of a 2xx answer, and the failure tables that turn any answer into an
 * outcome with a fixed safe message (upstream text is never copied).
 * Classification is pure; the exec.result record is built from an
 * outcome.  An outcome owns its `output` jv; nyx_exec_outcome_free() it.
 */
#ifndef NYX_CHRONO_H
#define NYX_CHRONO_H

#include <stdbool.h>
#include <stddef.h>

#include <jv.h>

#include "nyx_http.h"

struct nyx_exec_outcome {
	bool success;
	jv output; /* {stdout,stderr,exit_code,...} or invalid */
	int child_exit; /* the program's exit status; -1 when none */
	const char *code; /* error code, NULL on success */
	const char *kind; /* error kind */
	const char *message; /* fixed text */
	int exit; /* the tool's exit code */
	int http_status;
	char upstream_diag[129]; /* "" when none or unsafe */
	char approval_request_id[129];
	char approve_url[512];
	char provider_phase[32]; /* allow-listed provider phase, or "" */
};

void nyx_exec_outcome_init(struct nyx_exec_outcome *o);
void nyx_exec_outcome_free(struct nyx_exec_outcome *o);

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

/* Set the outcome of a completed program run (local or remote). */
void nyx_exec_outcome_completed(
    struct nyx_exec_outcome *o, jv output, int exit_code);

/* A safe upstream diagnostic id: 1-128 of [A-Za-z0-9_.:-]. */
bool nyx_diag_id_safe(const char *s);

/* The exec.result record (consumes nothing). */
jv nyx_exec_result_record(const struct nyx_exec_outcome *o, const char *backend,
    const char *mode, const char *diag);

#endif
