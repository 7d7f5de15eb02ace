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

/* Whether a whitespace-separated scope string holds `want`. */
bool nyx_scope_has(const char *scope, const char *want);

/* May read inventory: a user token, or a delegation with account:read. */
bool nyx_cred_source_readable(const struct nyx_cred *c);

/* May write routes: a direct human user access token only. */
bool nyx_cred_can_write(const struct nyx_cred *c);

const char *nyx_cred_kind_name(enum nyx_cred_kind k);

/*
 * The owner a credential acts for, one rule for every program (PRODUCT
 * 6): the subject (JWT sub, or the Agent Key's public prefix), else
 * "token:" + the first 16 hex of the token's SHA-256.
 */
void nyx_cred_owner(const char *token, char *out, size_t n);

#endif
