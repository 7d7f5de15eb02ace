/*
 * srv: the HTTP server behind nyx-sandboxd, on libmicrohttpd (only the
 * server's own files include it, through srv_int.h).  srv.c is the HTTP
 * glue and routing; nyxid.c the NyxID API and proxy; control.c the
 * control plane; chronod.c the Chrono emulation behind the proxy.
 *
 * One thread per connection, so a delayed answer never stalls another.
 * Every request is matched against the fault plan first, then routed to
 * the NyxID subset.  Each request is logged once on stderr (method, path
 * with _nyxid_via masked, status, caller id and kind; never a token or a
 * body) and kept in an in-memory request log.  With `control` the
 * loopback-only /_nyx/ endpoints let a test swap the world and the fault
 * plan and read or clear the request log without a restart.
 *
 * World and plan are replaced atomically under one lock.
 */
#ifndef NYX_SRV_H
#define NYX_SRV_H

#include <stdbool.h>
#include <stddef.h>

#include <jv.h>

#include "nyx_err.h"

struct nyx_srv;

struct nyx_srv_opts {
	const char *listen; /* "HOST:PORT", port 0 picks one */
	/* the bearer the /_nyx/ control plane requires; NULL: no plane */
	const char *control_token;
	bool allow_remote; /* a non-loopback address is refused without it */
	const char *store; /* SQLite file of durable operations, or NULL */
	long retention_s; /* how long an operation lives (0: a day) */
};

/*
 * Start serving.  world and faults (null for none) are consumed.  NULL
 * with err filled on failure (64 listen_invalid, listen_not_loopback).
 */
struct nyx_srv *nyx_srv_start(
    const struct nyx_srv_opts *o, jv world, jv faults, struct nyx_err *err);

/* The Codex runner command line (NULL: the deterministic built-in). */
int nyx_srv_set_codex_runner(
    struct nyx_srv *s, const char *cmd, struct nyx_err *err);

/* The bound port and base URL ("http://127.0.0.1:PORT"). */
int nyx_srv_port(const struct nyx_srv *s);
const char *nyx_srv_base(const struct nyx_srv *s);

/* Replace the world or the fault plan (consumed); -1 with why on error. */
int nyx_srv_set_world(struct nyx_srv *s, jv world, char *why, size_t whysz);
int nyx_srv_set_faults(struct nyx_srv *s, jv faults, char *why, size_t whysz);

void nyx_srv_stop(struct nyx_srv *s);

#endif
