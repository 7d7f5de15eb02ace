/*
 * admit: the route an execution runs on, shared by code-exec and
 * codex-exec.  An admitted route.admission record on stdin pins the exact
 * UserService (checked against its digest and the configured base URL; a
 * stale one is re-resolved for its id); without one the route is resolved
 * read-only as nyx-route-inspect does.  A blocked or error record on
 * stdin is passed through.  Like cli.h, this writes stdout and is only
 * called from cmd/.
 */
#ifndef NYX_ADMIT_H
#define NYX_ADMIT_H

#include "nyx_config.h"
#include "nyx_err.h"
#include "nyx_http.h"
#include "nyx_route.h"

/* The pinned route: exact UserService id and slug (heap strings). */
struct nyx_pin {
	char *id;
	char *slug;
};

void nyx_pin_free(struct nyx_pin *p);

/*
 * Pin the route for a capability (code-exec: code_execute; managed Codex:
 * codex_managed) and load the execution credential (cred_code names the
 * error when there is none).  An admission on stdin made for another
 * capability is refused (65 admission_invalid).  Returns 0 when pinned,
 * the exit code when a record was printed instead (blocked, passed
 * through), -1 with err.
 */
int nyx_admit_route(const struct nyx_common *cm, struct nyx_settings *s,
    struct nyx_http *http, const struct nyx_capability *cap,
    const char *cred_code, struct nyx_pin *rt, struct nyx_err *err);

#endif
