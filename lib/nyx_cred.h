/*
 * nyx_cred: classify a credential locally, never by asking a server
 * (WIRE.md section 1).  JWT payloads are peeked at without verification:
 * the server remains the authority, this only decides what the client may
 * attempt.  Pure functions; no I/O.
 */
#ifndef NYX_CRED_H
#define NYX_CRED_H

#include <stdbool.h>
#include <stddef.h>

#include <jv.h>

#include "nyx_config.h"
#include "nyx_err.h"

enum nyx_cred_kind {
	NYX_CRED_UNKNOWN = 0,
	NYX_CRED_USER, /* JWT token_type "access" */
	NYX_CRED_DELEGATION, /* JWT delegated:true with act.sub */
	NYX_CRED_SERVICE_ACCOUNT, /* JWT sa:true */
	NYX_CRED_RELAY, /* JWT relay:true */
	NYX_CRED_AGENT_KEY, /* nyxid_ag_ + 64 lowercase hex */
	NYX_CRED_API_KEY, /* nyx_, nyxid_, nyxid_sk_ */
};

struct nyx_cred {
	enum nyx_cred_kind kind;
	char subject[160]; /* JWT sub, or the Agent Key's public prefix */
	char scope[1024]; /* JWT scope claim ("" when none) */
};

/*
 * The shape check every credential passes before any request: not empty,
 * no whitespace, no "Bearer " prefix.  Fails with exit 77,
 * code_execution_credential_unavailable.
 */
int nyx_cred_check(const char *token, struct nyx_err *err);

void nyx_cred_classify(const char *token, struct nyx_cred *out);

/*
 * The payload of a JWT (three dot-separated parts, the first non-empty),
 * decoded and parsed without verifying anything: an object, or invalid
 * when the token is not a JWT.  The decoded bytes are wiped.
 */
jv nyx_jwt_payload(const char *token);

/* Whether a whitespace-separated scope string holds `want`. */
bool nyx_scope_has(const char *scope, const char *want);

/* May read inventory: a user token, or a delegation with account:read. */
bool nyx_cred_source_readable(const struct nyx_cred *c);

/* May write routes: a direct human user access token only. */
bool nyx_cred_can_write(const struct nyx_cred *c);

const char *nyx_cred_kind_name(enum nyx_cred_kind k);

/* Which token a program needs (PRODUCT 2). */
enum nyx_token_role {
	NYX_TOKEN_SOURCE, /* reads inventory, writes routes */
	NYX_TOKEN_EXEC, /* sent on execution calls; defaults to the source */
};

/*
 * The one credential loader: the token of a role by precedence (the file
 * flag, the *_FILE variable, the variable, the profile's file; the
 * execution token falls back to the source token, the source token to
 * NYXID_API_KEY inside a sandbox), one trailing newline removed, then
 * registered for redaction and shape-checked.  0 with it in s->token or
 * s->exec_token; 1 when no source names one; -1 with err (78 a refused
 * file, 66 an unreadable one, 77 a malformed token).
 */
int nyx_cred_load(const struct nyx_common *c, struct nyx_settings *s,
    enum nyx_token_role role, struct nyx_err *err);

/*
 * The owner a credential acts for, one rule for every program (PRODUCT
 * 6): the subject (JWT sub, or the Agent Key's public prefix), else
 * "token:" + the first 16 hex of the token's SHA-256.
 */
void nyx_cred_owner(const char *token, char *out, size_t n);

#endif
