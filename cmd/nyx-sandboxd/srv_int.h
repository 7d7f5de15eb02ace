/*
 * srv_int: what the server's HTTP glue (srv.c), its NyxID API (nyxid.c)
 * and its control plane (control.c) share: the server, a request's
 * state, an answer, and the helpers every handler uses.  Handlers run
 * under s->mu unless they say otherwise.
 */
#ifndef NYX_SANDBOXD_SRV_INT_H
#define NYX_SANDBOXD_SRV_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <jv.h>
#include <microhttpd.h>

#include "chronod.h"
#include "fault.h"
#include "nyx_buf.h"
#include "srv.h"
#include "world.h"

#define REQ_BODY_MAX (8u * 1024 * 1024)
#define LOG_MAX 200000
#define CACHE_MAX 64

struct cache_ent {
	char *user;
	int endpoint; /* 0 user-services, 1 keys */
	char *body;
	size_t len;
};

struct nyx_srv {
	struct MHD_Daemon *d;
	pthread_mutex_t mu;
	struct nyx_world *world;
	struct nyx_faults faults;
	jv log; /* array of request entries */
	long seq;
	char *control_token; /* NULL: no control plane */
	int port;
	char base[96];
	struct cache_ent cache[CACHE_MAX];
	size_t ncache;
	struct nyx_chronod *chrono;
	jv approvals; /* NyxID's approval requests: [{id,user,route,state}] */
};

/* Per-request state across libmicrohttpd's callbacks. */
struct req {
	struct nyx_buf body;
	bool too_big;
};

/* What a handler decided to answer. */
struct answer {
	int status;
	char *body; /* heap, may be NULL */
	size_t len;
	jv headers; /* object of strings */
	bool chunked;
	bool drop;
	/* copies, so a world swapped meanwhile cannot pull them away */
	char principal[128];
	char kind[32];
	/* proxy calls: what NyxID forwarded (never the credentials) */
	bool proxied;
	bool forwarded_auth;
	char delegation_scope[512];
	char upstream[192];
	/* a management write's body (policy fields, labels; never a proxy
	 * body, which carries source), for request-log assertions */
	jv logged_body;
};

void srv_cache_flush(struct nyx_srv *s);
void srv_answer_json(struct answer *a, int status, jv body);
void srv_answer_error(
    struct answer *a, int status, const char *error, int code, const char *msg);
/* The bearer token or X-API-Key of a request (borrowed), or NULL. */
const char *srv_request_token(struct MHD_Connection *c);
void srv_note_caller(struct answer *a, const struct nyx_principal *p);

/* nyxid.c: the NyxID API, its SSH exec and its proxy. */
void srv_handle_api(struct nyx_srv *s, struct MHD_Connection *c,
    const char *method, const char *url, const struct req *r, struct answer *a);
void srv_handle_approval_status(struct nyx_srv *s, struct MHD_Connection *c,
    const char *url, struct answer *a);
void srv_handle_ssh(struct nyx_srv *s, struct MHD_Connection *c,
    const char *method, const char *url, const struct req *r, struct answer *a);
void srv_handle_proxy(struct nyx_srv *s, struct MHD_Connection *c,
    const char *method, const char *url, const struct req *r, struct answer *a);

/* control.c: the /_nyx/ endpoints (world, faults, request log, ...). */
void srv_handle_control(struct nyx_srv *s, const char *method, const char *path,
    const struct req *r, struct answer *a);

#endif
