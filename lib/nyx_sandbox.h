/*
 * nyx_sandbox: run one program in an isolated local sandbox (WIRE.md 6).
 *
 * bubblewrap gives the program no network, a read-only /usr, its source
 * read-only at /code, an empty writable /sandbox (its working directory
 * and HOME), a fresh /tmp, no view of host processes or the caller's
 * files, and a fixed environment (PATH, HOME, LANG, TMPDIR, plus the
 * server-owned NYXID_API_KEY and NYXID_BASE_URL when given); bwrap itself
 * starts with that environment, so nothing a caller names reaches the
 * host side.  It runs in a process group of
 * its own with resource limits; at the wall-clock timeout the whole group
 * is killed.  stdout and stderr are each kept up to 1 MiB; the rest is
 * drained and discarded and the truncation flagged.  When run as root the
 * sandbox drops to the unprivileged user nobody first, so the process
 * limit applies.  Nothing ever runs unisolated: no bwrap, or a bwrap that
 * cannot set up its namespaces, is LOCAL_ISOLATION_UNAVAILABLE (exit 71).
 *
 * A result owns its output buffers and, until it is freed, may hold the
 * sandbox's exited waiting process unreaped; nyx_sandbox_result_free()
 * them, once each result.
 */
#ifndef NYX_SANDBOX_H
#define NYX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jv.h>

#include "nyx_buf.h"
#include "nyx_err.h"

#define NYX_SANDBOX_OUTPUT_MAX (1024u * 1024u)
#define NYX_SANDBOX_SOURCE_MAX (1024u * 1024u)

struct nyx_sandbox_req {
	const char *language; /* python, javascript, typescript, bash */
	const char *source;
	size_t source_len;
	int timeout_secs;
	const char *nyxid_api_key; /* NULL: not injected */
	const char *nyxid_base_url; /* NULL: not injected */
	/* when set and it becomes non-zero, the run is killed (cancelled) */
	const volatile int *cancel;
	/*
	 * When set, called in the caller's process once the sandbox is on
	 * its way up, while bwrap sets up its namespaces: the program starts
	 * only after it returns 0, so whatever it makes durable is so before
	 * the program runs.  -1 (with err) stops the sandbox before the
	 * program, and nyx_sandbox_run() fails with that error.
	 */
	int (*ready)(void *ctx, struct nyx_err *err);
	/*
	 * When set (with ready), called with ready_ctx once the program has
	 * been let go, while it runs, its output waiting in the pipes: for
	 * work the caller needs only at the run's end.
	 */
	void (*running)(void *ctx);
	void *ready_ctx;
};

struct nyx_sandbox_result {
	int exit_code; /* the program's status; 128+N when killed by N */
	bool timed_out;
	bool cancelled;
	struct nyx_buf out;
	struct nyx_buf err;
	bool out_truncated;
	bool err_truncated;
	long elapsed_ms;
	/* how the sandbox as a whole was limited: "cgroup" or "rlimit" */
	const char *limits;
	/* bwrap, when the run ended on its report, before bwrap itself
	 * had: nyx_sandbox_result_free() reaps it */
	pid_t bwrap;
};

/* Whether the language is one of the four. */
bool nyx_sandbox_language_known(const char *language);

/*
 * Run the program.  0 when it ran (whatever its exit status, or a
 * timeout); -1 with err for LANGUAGE_UNAVAILABLE or
 * LOCAL_ISOLATION_UNAVAILABLE (71) or a system failure.
 */
int nyx_sandbox_run(const struct nyx_sandbox_req *req,
    struct nyx_sandbox_result *res, struct nyx_err *err);

void nyx_sandbox_result_free(struct nyx_sandbox_result *res);

/*
 * The result as the contract's output object: stdout, stderr, exit_code,
 * execution_time_ms, stdout_truncated, stderr_truncated.
 */
jv nyx_sandbox_output(const struct nyx_sandbox_result *res);

#endif
