/*
 * nyx_audit: the audit trail of every execution (PRODUCT.md 9).
 *
 * Records go to $STATE_DIR/audit.jsonl, one canonical JSON document per
 * line, appended under an exclusive flock and fsync'd.  Ids are
 * deterministic: "tool:v1:<phase>:" + hex SHA-256 over the length-
 * prefixed owner kind, owner, request id and call id (waiting_approval
 * adds the approval id, under "tool:v1:waiting-approval:").  content_hash
 * is the SHA-256 of the canonical record without occurred_at,
 * recorded_at and content_hash; the semantic hash also drops the trace
 * fields of correlation.  Appending an id that exists is a duplicate when
 * either hash matches (nothing written), else a conflict (nothing
 * written, never overwritten).  The ledger indexes the file, so the check
 * is O(1); a file that grew behind the index (a crash between write and
 * index, or lines from elsewhere) is indexed from where the index stopped.
 *
 * nyx_audit_emit() appends, and only when the append fails (or finds a
 * conflict) freezes the record as an intent in the ledger, for
 * audit-replay: the line's fsync is the phase's one durability point.  A
 * write-ahead intent would add a synced commit per phase and close no
 * window: a crash before the intent's commit loses the record just as a
 * crash before the line's fsync does.  (The durable path freezes its
 * terminal intent with the operation's state, in one commit, instead.)
 */
#ifndef NYX_AUDIT_H
#define NYX_AUDIT_H

#include <stdbool.h>
#include <stdint.h>

#include <jv.h>

#include "nyx_err.h"
#include "nyx_ledger.h"
#include "nyx_outcome.h"

#define NYX_AUDIT_ID_MAX 128
/* The records one append may write together. */
#define NYX_AUDIT_BATCH 8

enum nyx_audit_result {
	NYX_AUDIT_APPENDED,
	NYX_AUDIT_DUPLICATE,
	NYX_AUDIT_CONFLICT,
};

/* Who, for what: the identity every phase of one execution shares. */
struct nyx_audit_subject {
	const char *tool; /* "code_execute", "codex_exec" */
	const char *owner_kind; /* "cli" */
	const char *owner;
	const char *request_id;
	const char *call_id;
	/* request_id was drawn at random by this process for this run, and
	 * this process writes each of the run's records once (a local or
	 * sync run): none can be in the trail before it writes it, so its
	 * appends look nothing up and index nothing (the next catch-up
	 * does); see nyx_audit_note_started */
	bool fresh;
};

/* A terminal outcome; NULL strings are JSON null. */
struct nyx_audit_outcome {
	bool success;
	const char *code;
	const char *kind;
	int exit_code; /* the tool's */
	const char *operation_id; /* the provider's (durable), or NULL */
	/* admission submit status result cancel execute, or NULL */
	const char *failure_stage;
	bool retryable; /* the same command may be rerun safely (75) */
};

/* The audit outcome of an execution outcome (borrows it). */
struct nyx_audit_outcome nyx_audit_outcome_of(
    const struct nyx_exec_outcome *oc);

/* The id of a phase ("admission", "running", "terminal",
 * "waiting_approval" with approval_id).  out: NYX_AUDIT_ID_MAX. */
int nyx_audit_id(const struct nyx_audit_subject *s, const char *phase,
    const char *approval_id, char *out);

/*
 * A complete audit.record (with its id, correlation from TRACEPARENT and
 * TRACESTATE, times and content_hash).  outcome only for "terminal".
 */
jv nyx_audit_record(const struct nyx_audit_subject *s, const char *phase,
    const char *approval_id, const struct nyx_audit_outcome *outcome,
    int64_t occurred_at_ms);

/* The content and semantic hashes of a record (consumes nothing). */
int nyx_audit_hashes(jv rec, char content[65], char semantic[65]);

/*
 * Append one record (consumes nothing).  A record whose content_hash
 * does not match its content is refused (65).  -1 with err 73 when the
 * file cannot be written.
 */
int nyx_audit_append(struct nyx_ledger *l, const char *state_dir, jv rec,
    enum nyx_audit_result *res, struct nyx_err *err);

/*
 * Append the records of the array recs (borrowed; 1 to NYX_AUDIT_BATCH)
 * in one write and one fsync; those that could not be appended are
 * frozen as intents (handle: their operation, or NULL).  Returns 0 when
 * all are in the trail (appended or duplicate), 2 when one conflicts
 * (frozen too, a warning logged), else 1 when the append failed (all
 * frozen; err says why), -1 when not even an intent could be recorded.
 */
int nyx_audit_emit(struct nyx_ledger *l, const char *state_dir, jv recs,
    const char *handle, struct nyx_err *err);

/*
 * Build and append the record of one phase (an outcome only for
 * "terminal", else NULL); a record that stays frozen is logged as a
 * warning.  Returns as nyx_audit_emit().
 */
int nyx_audit_note(struct nyx_ledger *l, const struct nyx_audit_subject *s,
    const char *phase, const char *approval_id, const char *handle,
    const struct nyx_exec_outcome *oc);

/*
 * The admission and running records of an execution that starts at once
 * (local, sync), in one append: one fsync for both.  As nyx_audit_note().
 * For a fresh subject the append looks nothing up and indexes nothing
 * (no record of the run can be there to find): the index catches up at
 * the next append, or at nyx_audit_catch_up().
 */
int nyx_audit_note_started(struct nyx_ledger *l,
    const struct nyx_audit_subject *s, const char *handle);

/*
 * Index what the trail holds beyond the ledger's index (under the file's
 * lock): work an append would otherwise do first.  -1 with err.
 */
int nyx_audit_catch_up(
    struct nyx_ledger *l, const char *state_dir, struct nyx_err *err);

/*
 * Replay one frozen intent: as nyx_audit_emit's result (0, 1, 2, -1);
 * with res non-NULL, what the append did.
 */
int nyx_audit_replay_intent(struct nyx_ledger *l, const char *state_dir,
    const char *id, enum nyx_audit_result *res, struct nyx_err *err);

#endif
