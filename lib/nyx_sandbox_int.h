/*
 * nyx_sandbox's guards, private to lib/nyx_sandbox*.c: the seccomp filter
 * and the per-run cgroup (WIRE.md 6, revision 2).
 */
#ifndef NYX_SANDBOX_INT_H
#define NYX_SANDBOX_INT_H

#include <limits.h>
#include <stdbool.h>

#include "nyx_err.h"

/* Tasks (processes and threads) one sandbox may hold. */
#define NYX_SANDBOX_TASKS 64

/*
 * A descriptor at offset 0 holding the compiled filter, for bwrap's
 * --seccomp; the filter is built once per process.  -1 with errno.
 */
int nyx_sandbox_seccomp_fd(void);

struct nyx_cgroup {
	bool on; /* a per-run cgroup holds the sandbox */
	int procs_fd; /* its cgroup.procs, written "0" by the child */
	char path[PATH_MAX];
};

/*
 * A per-run cgroup under $NYX_CGROUP, or under the process's own cgroup v2
 * directory when that is a writable subtree with the memory, pids and cpu
 * controllers enabled for its children.  Without one, cg->on is false and
 * the sandbox falls back to rlimits.  -1 with err (71) only when
 * NYX_CGROUP names something unusable: a limit asked for is never
 * silently dropped.
 */
int nyx_cgroup_open(struct nyx_cgroup *cg, struct nyx_err *err);

/* Kill what is left in the run's cgroup and remove it. */
void nyx_cgroup_close(struct nyx_cgroup *cg);

#endif
