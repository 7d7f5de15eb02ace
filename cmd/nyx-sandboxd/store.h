/*
 * store: nyx-sandboxd's operation store (--store), one JSON document per
 * operation in a SQLite file (WAL), so operations and their retained
 * results survive a server restart.  The provider's side of the durable
 * contract; the client's is lib/nyx_ledger.
 *
 * Functions return 0, or -1 with err filled (73 store_failed).  Documents
 * are copied in; loaded ones are heap strings the caller frees with
 * nyx_ledger_free_list().
 */
#ifndef NYX_SANDBOXD_STORE_H
#define NYX_SANDBOXD_STORE_H

#include "nyx_err.h"

struct nyx_store;

int nyx_store_open(
    const char *path, struct nyx_store **out, struct nyx_err *err);
void nyx_store_close(struct nyx_store *s);
/* Insert or replace the document of one operation. */
int nyx_store_put(
    struct nyx_store *s, const char *id, const char *doc, struct nyx_err *err);
/* Every document, as a NULL-terminated heap array, ordered by id. */
int nyx_store_load(struct nyx_store *s, char ***docs, struct nyx_err *err);

#endif
