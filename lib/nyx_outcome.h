/*
 * nyx_outcome: the one outcome type every execution path settles into:
 * a sync /execute, a durable operation, a local run, managed Codex and
 * SSH exec alike (a path with more to say embeds it, as nyx_codex does).
 *
 * An outcome carries success, the tool's exit code, a stable error code,
 * kind and fixed message (upstream text is never copied), the HTTP
 * status, and the safe upstream facts the records may show: a diagnostic
 * id, NyxID's approval request id and approve URL.  The helpers here read
 * those facts from an upstream answer the same way for every path.
 *
 * Ownership: an outcome owns its `output` jv (nyx_exec_outcome_free);
 * code, kind and message point to static text or into code_buf.  The
 * readers borrow the document they are given.
 */
#ifndef NYX_OUTCOME_H
#define NYX_OUTCOME_H

#include <stdbool.h>
#include <stdint.h>

#include <jv.h>

#include "nyx_http.h"

struct nyx_exec_outcome {
	bool success;
	jv output; /* the path's output document, or invalid */
	int child_exit; /* the program's exit status; -1 when none */
	const char *code; /* error code, NULL on success */
	const char *kind; /* error kind */
	const char *message; /* fixed text */
	const char *cause; /* the specific code behind an uncertain one */
	/* the exchange that failed (submit status result cancel), NULL:
	 * the execution itself */
	const char *stage;
	int exit; /* the tool's exit code */
	int http_status;
	char upstream_diag[129]; /* "" when none or unsafe */
	char approval_request_id[129];
	char approve_url[512];
	char provider_phase[32]; /* allow-listed provider phase, or "" */
	char code_buf[128]; /* storage for a code built from an answer */
	/* the run's request id and clock (PRODUCT 6, rev 2): set, they
	 * become request_id, started_at, finished_at and elapsed_ms */
	const char *request_id;
	int64_t started_ms, finished_ms;
};

void nyx_exec_outcome_init(struct nyx_exec_outcome *o);
void nyx_exec_outcome_free(struct nyx_exec_outcome *o);

/* A failure: code, kind and message must outlive the outcome. */
void nyx_exec_outcome_fail(struct nyx_exec_outcome *o, const char *code,
    const char *kind, const char *message, int exit_code);

/* A failure whose code is built from a format into code_buf. */
void nyx_exec_outcome_failf(struct nyx_exec_outcome *o, const char *kind,
    const char *message, int exit_code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* A completed program run (local or remote): consumes output. */
void nyx_exec_outcome_completed(
    struct nyx_exec_outcome *o, jv output, int exit_code);

/*
 * A non-replayable request (sync /execute, managed Codex, SSH exec) that
 * may have run (WIRE 4.4): exit 4 with uncertain_code, the specific code
 * the outcome had kept as its cause.
 */
void nyx_exec_outcome_maybe_ran(struct nyx_exec_outcome *o,
    const char *uncertain_code, const char *message);

/* How a path names the failures of an exchange that got no answer. */
struct nyx_no_answer {
	const char *uncertain_code, *uncertain_message;
	const char *too_large_code, *too_large_kind, *too_large_message;
	const char *timeout_code, *timeout_message;
	const char *unreachable_code, *unreachable_kind, *unreachable_message;
};

/*
 * The one ladder for a non-replayable exchange without a usable answer:
 * an oversized answer is 76; a timeout or a lost connection is 75 when no
 * byte of the request was sent (nothing can have run), else the program
 * may have run (4, the timeout or transport code as the cause).  Returns
 * false, touching nothing, when the exchange has an answer to classify.
 */
bool nyx_outcome_no_answer(struct nyx_exec_outcome *o,
    const struct nyx_http_resp *r, const struct nyx_no_answer *w);

/*
 * A safe id from elsewhere (an upstream diagnostic id, a request id, an
 * approval request id): 1-128 of [A-Za-z0-9_.:-].
 */
bool nyx_id_safe(const char *s);

/*
 * The upstream diagnostic id, when safe: at the top level, inside
 * "error", or inside a NyxID-style "body" object, first found wins.
 */
void nyx_outcome_take_diag(struct nyx_exec_outcome *o, jv doc);

/*
 * error.code at the top level, or one level into a NyxID-style body (an
 * object or a JSON string).  Copied into buf (n bytes); NULL when absent.
 */
const char *nyx_outcome_upstream_code(jv doc, char *buf, size_t n);

/*
 * NyxID's own human gate (403 {"error":"approval_required",...}): when
 * the answer is one, set the NYXID_APPROVAL_REQUIRED blocker (exit 3)
 * with its safe request id and approve URL and return true.
 */
bool nyx_outcome_approval_required(
    struct nyx_exec_outcome *o, long status, jv doc);

#endif
