/*
 * nyx_nyxid: the NyxID management calls the tools make, on nyx_http.
 *
 * nyx_nyxid_read_inventory() performs WIRE.md 2.1: GET /api/v1/user-services
 * then GET /api/v1/keys with the source-readable token, both always, parses
 * them strictly and joins them.  On failure it reports the first failed
 * read as a route verdict (access denied for 401/403, source unavailable
 * otherwise) with the exit code it implies (77, 75 or 76) and a safe
 * message that never quotes the body.
 */
#ifndef NYX_NYXID_H
#define NYX_NYXID_H

#include <stddef.h>
#include <stdint.h>

#include "nyx_config.h"
#include "nyx_cred.h"
#include "nyx_http.h"
#include "nyx_inventory.h"
#include "nyx_route.h"

struct nyx_read_fail {
	enum nyx_verdict verdict;
	int exit;
	int http_status;
	char message[1024];
};

struct nyx_nyxid {
	struct nyx_http *http;
	const char *base_url;
	const char *token; /* sent as Authorization: Bearer */
	long timeout_ms; /* 0: 15 s */
	size_t max_inventory_bytes;
};

/*
 * Ready c for the source-readable token (WIRE.md 1): require a base URL
 * (78), load the token by precedence, refuse a malformed one (77), and
 * classify it into *cred.  Whether it may read inventory is the
 * capability's rule (a user access token always; an account:read
 * delegation only where the contract allows it).  Returns 0 when c is
 * ready (c->http is made when it is NULL; the caller frees it), 1 when
 * there is no token or it may not read inventory (why holds the
 * CODE_EXECUTION_SOURCE_CREDENTIAL_REQUIRED message; no request was made),
 * -1 with err.
 */
int nyx_nyxid_open(struct nyx_nyxid *c, const struct nyx_common *cm,
    struct nyx_settings *s, const struct nyx_capability *cap,
    struct nyx_cred *cred, char *why, size_t whysz, struct nyx_err *err);

int nyx_nyxid_read_inventory(const struct nyx_nyxid *c,
    struct nyx_inventory *inv, struct nyx_read_fail *fail);

/*
 * Open and read, the way every program resolves a route online: 0 with
 * inv filled and *observed_ms the time of the read; 1 when it is blocked
 * before classification (no usable source credential: the
 * CODE_EXECUTION_SOURCE_CREDENTIAL_REQUIRED verdict with exit 77 and no
 * request made; or the read failed) with fail set; -1 with err.
 */
int nyx_nyxid_fetch(struct nyx_nyxid *c, const struct nyx_common *cm,
    struct nyx_settings *s, const struct nyx_capability *cap,
    struct nyx_inventory *inv, int64_t *observed_ms, struct nyx_read_fail *fail,
    struct nyx_err *err);

/*
 * Confirm a human token with GET /api/v1/users/me before any write.
 * 0 on 200; -1 with fail (77 on 401/403, 75 on transport/5xx/408/429,
 * 76 otherwise).
 */
int nyx_nyxid_users_me(const struct nyx_nyxid *c, struct nyx_read_fail *fail);

/*
 * One route write (PUT or POST with a JSON body, consumed), on a fresh
 * connection and never retried.  *status is 0 when no answer arrived.
 */
void nyx_nyxid_write(const struct nyx_nyxid *c, const char *method,
    const char *path, jv body, long *status);

/*
 * Parse both bodies into inv (offline mode and the reader share this).
 * Consumes both.  Returns 0, or -1 with the reason in why.
 */
int nyx_inventory_load(
    struct nyx_inventory *inv, jv services, jv keys, char *why, size_t whysz);

#endif
