/*
 * nyx_ledger: the durable state of code-exec and exec-status
 * (PRODUCT.md section 10).  The only file that includes SQLite.
 *
 * $STATE_DIR (mode 0700) holds ledger.db (SQLite in WAL mode) and
 * secrets/ (0700).  An operation's source and raw idempotency key live
 * only in a secrets/ file (0600, written and fsync'd before the row that
 * names it), referenced from the ledger by file name and SHA-256, and
 * verified against that digest before use: the ledger itself never holds
 * a credential, source or raw key.
 *
 * Two processes never act on one operation at once: nyx_ledger_claim()
 * takes a lease (owner, expiry) with one conditional UPDATE; a lease that
 * expired may be taken over (its holder crashed).  The schema is
 * versioned (PRAGMA user_version) and migrated on open.
 *
 * Functions return 0 / -1 with err (73 for the state directory or the
 * database, 65 for tampered secret material).
 */
#ifndef NYX_LEDGER_H
#define NYX_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jv.h>

#include "nyx_buf.h"
#include "nyx_err.h"

#define NYX_LEDGER_SCHEMA 5

struct nyx_ledger;

/* One durable operation, as the ledger stores it. */
struct nyx_op {
	char handle[32]; /* "h-" + 24 hex: the ledger's name */
	char user_service_id[160];
	char slug[160];
	char base_url[512];
	char language[16];
	int timeout_secs;
	char operation_id[80]; /* the provider's id; "" before a receipt */
	char status[32]; /* provider status, or "submitting" */
	char phase[32];
	char etag[256];
	int64_t created_at_ms;
	int64_t expires_at_ms; /* only ever shrinks */
	int64_t next_poll_at_ms;
	int64_t recovery_until_ms; /* uncertain-submit window */
	int64_t stop_deadline_ms; /* 0: no stop requested */
	long retry_delay_ms;
	bool terminal;
	char secret_name[64]; /* file under secrets/ */
	char secret_sha256[65];
	/* schema 2 */
	char
	    key_sha256[65]; /* SHA-256 of the idempotency key (never the key) */
	char version[24]; /* the provider's snapshot version, "" unknown */
	bool cancel_requested;
	int submits; /* submit requests sent so far */
	int exit_code; /* the tool's exit status, once terminal */
	int child_exit; /* the program's, once terminal; -1 none */
	/* schema 3: the audit subject (not secret) */
	char owner[160];
	char request_id[160];
	char call_id[160];
	/* schema 5 */
	int64_t updated_at_ms; /* the row's last change */
};

/* Open (creating the directory 0700 and the schema as needed). */
int nyx_ledger_open(
    const char *state_dir, struct nyx_ledger **out, struct nyx_err *err);
void nyx_ledger_close(struct nyx_ledger *l);
/* The state directory the ledger lives in. */
const char *nyx_ledger_dir(const struct nyx_ledger *l);

/* A fresh handle, "h-" + 24 hex. */
int nyx_ledger_new_handle(char out[32]);

/*
 * Record an operation with its secret material (source and key), the
 * secret file first: after a crash either nothing or a complete record
 * with verified material exists.  Fills op->secret_name/secret_sha256.
 */
int nyx_ledger_insert(struct nyx_ledger *l, struct nyx_op *op,
    const char *secret, size_t secret_len, struct nyx_err *err);

/* Read an operation by handle: 1 found, 0 not found, -1 error. */
int nyx_ledger_get(struct nyx_ledger *l, const char *handle, struct nyx_op *op,
    struct nyx_err *err);

/*
 * The handle of the operation whose idempotency key has this SHA-256:
 * 1 found, 0 not found, -1 error.
 */
int nyx_ledger_find_key(struct nyx_ledger *l, const char *key_sha256,
    char handle[32], struct nyx_err *err);

/*
 * Persist every mutable field of op (by handle).  With result non-NULL
 * (the terminal exec.result record) the operation becomes terminal in the
 * same statement, and its secret file is removed: a settled operation
 * keeps only the material's digest.
 */
int nyx_ledger_save(struct nyx_ledger *l, const struct nyx_op *op,
    const char *result, struct nyx_err *err);

/*
 * nyx_ledger_save() plus, in the same transaction, a frozen audit intent
 * for the operation (nyx_ledger_intent_put; an existing one is kept).
 */
int nyx_ledger_save_intent(struct nyx_ledger *l, const struct nyx_op *op,
    const char *result, const char *intent_id, const char *intent,
    struct nyx_err *err);

/* The stored terminal record of an operation (heap string), or NULL. */
char *nyx_ledger_result(struct nyx_ledger *l, const char *handle);

/* Persist every mutable field of op (by handle). */
/*
 * Persist a stop at once, whoever holds the operation's lease (PRODUCT
 * 7): the first request sets stop_deadline = now + window_ms and makes it
 * due, later ones keep it; the holder's saves never undo it.  *deadline:
 * the operation's stop deadline.  1, 0 when the operation is unknown or
 * terminal, -1 with err.
 */
int nyx_ledger_request_stop(struct nyx_ledger *l, const char *handle,
    int64_t now, int64_t window_ms, int64_t *deadline, struct nyx_err *err);

/* The persisted stop deadline (0: none), -1 when it cannot be read. */
int64_t nyx_ledger_stop_deadline(struct nyx_ledger *l, const char *handle);

/*
 * Remove the secrets/ files of settled operations that are still there
 * (a crash between the terminal commit and the unlink leaves one).
 */
int nyx_ledger_sweep_secrets(struct nyx_ledger *l, struct nyx_err *err);

int nyx_ledger_update(
    struct nyx_ledger *l, const struct nyx_op *op, struct nyx_err *err);

/*
 * The handles of the operations (only the non-terminal ones when
 * pending_only), oldest first, as a NULL-terminated heap array of heap
 * strings (free with nyx_ledger_free_list).
 */
int nyx_ledger_list(
    struct nyx_ledger *l, bool pending_only, char ***out, struct nyx_err *err);
void nyx_ledger_free_list(char **list);

/* Add delta to a named monotonic counter; *total is its new value. */
int nyx_ledger_counter_add(struct nyx_ledger *l, const char *name,
    int64_t delta, int64_t *total, struct nyx_err *err);
/*
 * Operations per status (an object of counts), and when the last one
 * settled per outcome: last[0] success, [1] failure, [2] uncertain (unix
 * ms, 0 when none).
 */
int nyx_ledger_stats(
    struct nyx_ledger *l, jv *by_status, int64_t last[3], struct nyx_err *err);

/*
 * The secret material of op, verified against its SHA-256 (a missing or
 * altered file is 65).  out is a secret buffer.
 */
int nyx_ledger_read_secret(struct nyx_ledger *l, const struct nyx_op *op,
    struct nyx_buf *out, struct nyx_err *err);

/*
 * This process's lease owner name, "HOST:PID:RANDOM".  A lease whose
 * owner ran on this host and no longer exists is taken over at once
 * (kill -9 leaves no live holder), not only when it expires.
 */
int nyx_ledger_owner(char out[128]);

/*
 * Take the lease on an operation for owner until now + lease_ms: 1 taken
 * (or renewed), 0 held by another live owner, -1 error.
 */
int nyx_ledger_claim(struct nyx_ledger *l, const char *handle,
    const char *owner, int64_t now_ms, int64_t lease_ms, struct nyx_err *err);
int nyx_ledger_release(struct nyx_ledger *l, const char *handle,
    const char *owner, struct nyx_err *err);

/*
 * The audit trail (nyx_audit): records are first frozen here as intents
 * (write-ahead), then appended to audit.jsonl, then cleared.  An intent
 * is never replaced: put returns 1 inserted, 0 the same one exists, 2 a
 * different one exists (kept), -1 error.
 */
int nyx_ledger_intent_put(struct nyx_ledger *l, const char *id,
    const char *record, const char *handle, struct nyx_err *err);
/* The intent's record (heap string), or NULL. */
char *nyx_ledger_intent_get(struct nyx_ledger *l, const char *id);
/* Pending intent ids, oldest first (of one operation when handle). */
int nyx_ledger_intents(
    struct nyx_ledger *l, const char *handle, char ***ids, struct nyx_err *err);
int nyx_ledger_intent_done(
    struct nyx_ledger *l, const char *id, struct nyx_err *err);

/*
 * The index of audit.jsonl: id -> content and semantic hashes, and the
 * byte length of the file it covers (a longer file is indexed from there;
 * a shorter one, replaced or truncated, is re-indexed from the start).
 */
int nyx_ledger_audit_lookup(struct nyx_ledger *l, const char *id,
    char content[65], char semantic[65], struct nyx_err *err);
/*
 * Index one record (id NULL: only move the covered length) and, when
 * intent_done is given, delete that intent: one transaction.
 */
int nyx_ledger_audit_index(struct nyx_ledger *l, const char *id,
    const char *content, const char *semantic, int64_t covered,
    const char *intent_done, struct nyx_err *err);
int nyx_ledger_audit_covered(
    struct nyx_ledger *l, int64_t *covered, struct nyx_err *err);
int nyx_ledger_audit_reset(struct nyx_ledger *l, struct nyx_err *err);

/*
 * Durable exact-call approvals (codex-exec private_ssh).  The arguments
 * (they hold the prompt) live in a secrets/ file whose SHA-256 is the
 * approval's arguments_sha256, verified before they are shown.  States:
 * pending, approved, denied, consumed; nyx_ledger_approval_move() is one
 * conditional UPDATE (1 moved, 0 not in `from`), so a grant is consumed
 * exactly once.
 */
struct nyx_approval {
	char id[96]; /* tool-approval:v1:<64 hex> */
	char owner[160];
	char request_id[160];
	char call_id[160];
	char arguments_sha256[65];
	char secret_name[64];
	char state[16];
	int64_t created_at_ms;
	char decided_by[128];
	int64_t decided_at_ms;
	int64_t consumed_at_ms;
};

/* Record (or re-request) an approval with its argument JSON. */
int nyx_ledger_approval_put(struct nyx_ledger *l, struct nyx_approval *a,
    const char *args, size_t len, struct nyx_err *err);
/* 1 found, 0 not, -1 error. */
int nyx_ledger_approval_get(struct nyx_ledger *l, const char *id,
    struct nyx_approval *a, struct nyx_err *err);
/* The approved, unconsumed grant for owner/request/call: 1, 0, -1. */
int nyx_ledger_approval_grant(struct nyx_ledger *l, const char *owner,
    const char *request_id, const char *call_id, struct nyx_approval *a,
    struct nyx_err *err);
int nyx_ledger_approval_move(struct nyx_ledger *l, const char *id,
    const char *from, const char *to, const char *who, int64_t now_ms,
    struct nyx_err *err);
int nyx_ledger_approvals(
    struct nyx_ledger *l, char ***ids, struct nyx_err *err);
/* The verified argument JSON of an approval (a secret buffer). */
int nyx_ledger_approval_args(struct nyx_ledger *l, const struct nyx_approval *a,
    struct nyx_buf *out, struct nyx_err *err);

/*
 * Open (creating) a SQLite file the way every SQLite file of the project
 * is opened: made 0600 first (SQLite's -wal and -shm copy that mode), WAL,
 * full sync, a busy timeout.  0, or -1 (errno or the handle's message).
 */
struct sqlite3;
int nyx_ledger_sqlite_open(const char *path, struct sqlite3 **db);

/*
 * The first column of every row of sql, as a NULL-terminated heap list
 * (nyx_ledger_free_list); arg, when not NULL, is bound to ?1, never
 * spliced in.  0, or -1.
 */
int nyx_ledger_strings_of(
    struct sqlite3 *db, const char *sql, const char *arg, char ***out);

#endif
