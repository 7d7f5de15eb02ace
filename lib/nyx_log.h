/*
 * nyx_log: every line a program writes to stderr goes through here.
 *
 * Lines read "PROG: LEVEL: message".  Errors always show; warnings unless
 * -q; -v adds info, -vv debug, -vvv the HTTP trace (method, path with the
 * _nyxid_via value masked, status, header names; never bodies).
 *
 * nyx_log_redact() is the one redaction chokepoint: every formatted line
 * passes through it before it is written.  It replaces registered secrets
 * (the tokens a program loaded) and anything shaped like a credential
 * (Agent Keys, API keys, JWTs, Bearer values, raw idempotency keys) with
 * "[redacted]", and masks _nyxid_via values.  Registered secrets are copied
 * and wiped on nyx_log_forget_secrets().
 */
#ifndef NYX_LOG_H
#define NYX_LOG_H

#include <stddef.h>

#include <jv.h>

enum nyx_log_level {
	NYX_LOG_ERROR = 0,
	NYX_LOG_WARN = 1,
	NYX_LOG_INFO = 2,
	NYX_LOG_DEBUG = 3,
	NYX_LOG_TRACE = 4,
};

/* Program name used as the line prefix (a static string). */
void nyx_log_init(const char *prog);
const char *nyx_log_prog(void);

/* verbose = number of -v; quiet suppresses warnings. */
void nyx_log_set_verbosity(int verbose, int quiet);
int nyx_log_enabled(enum nyx_log_level level);

void nyx_log(enum nyx_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Text the operator asked for (tables, plans, check summaries): written
 * as given, redacted, whatever -q says.
 */
void nyx_log_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One plain "PROG: message" line (redacted), shown unless -q. */
void nyx_log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Remember a secret so it is never printed; ignores short strings. */
void nyx_log_add_secret(const char *secret);
void nyx_log_forget_secrets(void);

/*
 * Copy `in` into `out` (size outsz, always NUL-terminated) with every
 * secret replaced.  Returns out.
 */
char *nyx_log_redact(const char *in, char *out, size_t outsz);

/*
 * Program output: the n bytes of `in` with every registered secret (the
 * tokens this process loaded) replaced by "[REDACTED]", as a new jv
 * string (PRODUCT 10); `also`, when not NULL, is one more secret to
 * replace (a key the caller holds but never registered).  Nothing else is
 * touched: a program's own text that merely looks like a credential is
 * its business.
 */
jv nyx_log_redact_output(const char *in, size_t n, const char *also);

#endif
