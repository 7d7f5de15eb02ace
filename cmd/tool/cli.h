/*
 * cli: what every program shares at its edges.
 *
 * Start-up (program name, fds 0-2 open, SIGPIPE ignored, a fresh
 * diagnostic id), the common flags of PRODUCT.md section 2 parsed with
 * getopt_long alongside each program's own, --help and --version, misuse
 * (exit 64), and the single place an error is reported: one stderr line,
 * one error record as the last stdout line, and the exit code.
 *
 * This module may write stdout and exit; it is only called from cmd/.
 */
#ifndef NYX_CLI_H
#define NYX_CLI_H

#include <getopt.h>
#include <stdbool.h>

#include <jv.h>

#include "nyx_config.h"
#include "nyx_reconcile.h"
#include "nyx_route.h"
#include "nyx_err.h"

/* Which common flag groups a program accepts. */
#define NYX_CLI_NET                                                            \
	0x1 /* --base-url --token-file --exec-token-file --timeout */
#define NYX_CLI_STATE 0x2 /* --state-dir */
#define NYX_CLI_NO_RECORDS 0x4 /* prints no records: no -o */

/* Option codes of long-only common flags (own long-only flags use >= 2000). */
enum {
	NYX_OPT_PRETTY = 1000,
	NYX_OPT_BASE_URL,
	NYX_OPT_TOKEN_FILE,
	NYX_OPT_EXEC_TOKEN_FILE,
	NYX_OPT_MAX_TIME,
	NYX_OPT_STATE_DIR,
	NYX_OPT_OUTPUT,
	NYX_OPT_CAPTURE,
	NYX_OPT_CAPTURE_SOURCE,
};

struct nyx_cli_spec {
	const char *synopsis; /* after the program name */
	const char *options; /* the program's own option lines */
	unsigned flags; /* NYX_CLI_NET | NYX_CLI_STATE */
	const char *shortopts; /* the program's own short options */
	const struct option *longopts; /* NULL-terminated, own only */
	/* Handle an own option; return 0, or -1 for misuse (message set). */
	int (*on_opt)(int c, const char *arg, void *ctx);
};

void nyx_cli_init(const char *prog);
const char *nyx_cli_prog(void);
const char *nyx_cli_diag(void);

/*
 * Parse argv.  Exits 0 after --help/--version and 64 on misuse; returns
 * optind otherwise.  Common values land in *cm.
 */
int nyx_cli_parse(int argc, char **argv, const struct nyx_cli_spec *spec,
    void *ctx, struct nyx_common *cm);

/* Print "PROG: usage: msg" and "Try 'PROG --help'", exit 64. */
_Noreturn void nyx_cli_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* The capability named by a --capability argument; 64 when unknown. */
const struct nyx_capability *nyx_cli_capability(const char *arg);

/*
 * A wait's progress on a terminal (PRODUCT 6): one stderr line rewritten
 * in place (elapsed, pending, the first one's status, next poll), for
 * struct nyx_reconcile's progress hook; the caller installs it only when
 * stderr is a terminal and not -q.  Cleared before any record or exit.
 */
void nyx_cli_wait_progress(
    const struct nyx_rec_item *v, size_t n, int64_t elapsed, void *arg);
void nyx_cli_progress_clear(void);
/* A progress line of one's own text ("PROG: text"), same rules. */
void nyx_cli_progress(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* Whether -q was given. */
bool nyx_cli_quiet(void);

/* Emit one record on stdout (consumes it); -1 after a write error. */
int nyx_cli_emit(jv rec);

/* The error record for err (without emitting it). */
jv nyx_cli_error_record(const struct nyx_err *err);

/*
 * Report err once: stderr line, error record, and return its exit code.
 * Returns 74 instead when stdout cannot be written.
 */
int nyx_cli_fail(const struct nyx_err *err);

/* The exit code after the last record: 74 when stdout failed. */
int nyx_cli_finish(int code);

/*
 * The one record a pipeline hands a tool on stdin: 1 with *rec, 0 when
 * stdin is a terminal or empty, -1 with err (65 for malformed input or
 * more than one record, 74 for a read error).
 */
int nyx_cli_read_record(jv *rec, struct nyx_err *err);

/*
 * Where nyx_cli_read_record reads (PRODUCT 6): path "-" is stdin even on
 * a terminal, another path that file (66 when unreadable); with none,
 * nothing is read (-n, or stdin taken by the source).  Default: stdin
 * unless it is a terminal.
 */
void nyx_cli_set_input(const char *path, bool none);

/* What an upstream record on stdin is (nyx_cli_read_upstream). */
enum nyx_upstream {
	NYX_UPSTREAM_NONE, /* no record: stdin is a terminal or empty */
	NYX_UPSTREAM_ERROR, /* an error record */
	NYX_UPSTREAM_ADMITTED, /* a route.admission with status admitted */
	NYX_UPSTREAM_BLOCKED, /* a route.admission with status blocked */
};

/*
 * Read at most one record from stdin (nyx_cli_read_record) and say what it
 * is; anything but an error record or an admitted or blocked
 * route.admission is refused, -1 with err 65. *rec is set unless NONE.
 */
int nyx_cli_read_upstream(jv *rec, struct nyx_err *err);

/*
 * Pass a record on unchanged (consumes it). An error record keeps the
 * exit code it carries in "exit" (1..125); any other record (a blocked
 * admission: 3) and an error without one exit with dflt.
 */
int nyx_cli_pass_through(jv rec, int dflt);

/*
 * Report a record once: when it carries a blocker, its "CODE: message"
 * on stderr (with the diagnostic id); then emit it (consumed).  Returns
 * code.
 */
int nyx_cli_emit_blocked(jv rec, int code);

/* Set when --pretty was given. */
void nyx_cli_set_pretty(bool pretty);

#endif
