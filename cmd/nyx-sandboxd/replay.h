/*
 * replay: a capture (code-exec --capture, nyx(7) CAPTURES) served back
 * (issue 14).  Each captured exchange becomes a fault-plan rule that
 * answers the k-th request of its method and path with the captured
 * status, headers and body (and, with timing, after the captured time);
 * a request past a path's captured answers falls through to the normal
 * emulation.  Fault answers come before authentication, so a replay
 * accepts any bearer: a capture holds no credential to check against.
 */
#ifndef NYX_REPLAY_H
#define NYX_REPLAY_H

#include <stdbool.h>
#include <stddef.h>

#include <jv.h>

#include "nyx_err.h"

/* The fault plan ({"faults":[...]}) of a capture; a line cut short (a
 * killed writer) ends it.  -1 with err: 66 unreadable, 65 malformed. */
int nyx_replay_plan(
    const char *path, bool timing, jv *plan, size_t *n, struct nyx_err *err);

/*
 * Whether a capture is safe to share: every whole line an http.exchange,
 * no token-shaped string anywhere, no source kept unless it was asked
 * for.  0 with *lines, or -1 with err 65 naming the line and the reason.
 */
int nyx_replay_check(const char *path, size_t *lines, struct nyx_err *err);

#endif
