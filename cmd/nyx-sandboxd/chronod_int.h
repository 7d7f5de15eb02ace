/*
 * chronod_int: what the Chrono emulation's files share: the server-side
 * table of durable operations and the helpers every endpoint answers
 * with.  chronod.c serves /execute and /codex/execute and owns the
 * table's life; executions.c serves the durable /executions API over it.
 */
#ifndef NYX_SANDBOXD_CHRONOD_INT_H
#define NYX_SANDBOXD_CHRONOD_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jv.h>

#include "chronod.h"
#include "nyx_err.h"
#include "nyx_hash.h"
#include "store.h"

#define STORE_ID_LEN 35

struct exec {
	char id[40];
	char owner[128];
	char key[160];
	char body_sha[NYX_SHA256_HEX];
	char *language;
	char *script;
	int timeout_secs;
	char status[24];
	char phase[24];
	int64_t version;
	bool cancel_requested;
	volatile int cancel;
	int runs; /* how many times its program was started */
	int64_t created, updated, expires, terminal_at;
	jv result; /* the retained result, or invalid */
	char *base_url;
	char *api_key; /* a forwarded Agent Key for the program, or NULL */
	struct nyx_chronod *cd; /* the owner of the table */
	struct exec *next;
};

struct nyx_chronod {
	pthread_mutex_t mu;
	pthread_cond_t idle;
	struct exec *execs;
	int running;
	long retention_s;
	struct nyx_store *store;
	char *codex_runner; /* a shell command line; NULL: the built-in */
};

/* An answer, an error answer (Chrono's envelope), a diagnostic id. */
void chronod_answer(struct nyx_chronod_resp *rs, int status, jv body);
void chronod_error(struct nyx_chronod_resp *rs, int status, const char *code,
    const char *message);
jv chronod_diag(void);

/*
 * 0 when the delegation token grants `scope` (its user into owner, when
 * given), else the answer is set.
 */
int chronod_check_delegation(const struct nyx_chronod_req *rq,
    const char *scope, char *owner, size_t ownersz,
    struct nyx_chronod_resp *rs);

/* The body {"language","script","timeout_secs"?}, or invalid. */
jv chronod_parse_request(const struct nyx_chronod_req *rq, int *timeout);

/* executions.c */
void chronod_submit(struct nyx_chronod *cd, const struct nyx_chronod_req *rq,
    struct nyx_chronod_resp *rs);
void chronod_operation(struct nyx_chronod *cd, const struct nyx_chronod_req *rq,
    const char *rest, struct nyx_chronod_resp *rs);
/* Load the store's operations; a run the restart cut is uncertain. */
int chronod_recover(struct nyx_chronod *cd, struct nyx_err *err);
void chronod_exec_free(struct exec *e);

#endif
