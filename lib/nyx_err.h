/*
 * nyx_err: the one error type of the toolkit.
 *
 * Library functions return 0 or -1 and, on -1, fill a struct nyx_err: the
 * exit code it maps to (PRODUCT.md section 3), a stable machine code, a safe
 * human message (never a credential, source text or upstream body), whether
 * repeating the same command may succeed, and the HTTP status that caused it
 * (0 when none).  The struct owns no heap memory; it can be copied freely.
 */
#ifndef NYX_ERR_H
#define NYX_ERR_H

#include <stdbool.h>

/* Exit codes, PRODUCT.md section 3. */
enum nyx_exit {
	NYX_EXIT_OK = 0,
	NYX_EXIT_NO = 1,
	NYX_EXIT_BLOCKED = 3,
	NYX_EXIT_UNCERTAIN = 4,
	NYX_EXIT_PENDING = 5,
	NYX_EXIT_USAGE = 64,
	NYX_EXIT_DATAERR = 65,
	NYX_EXIT_NOINPUT = 66,
	NYX_EXIT_SOFTWARE = 70,
	NYX_EXIT_OSERR = 71,
	NYX_EXIT_CANTCREAT = 73,
	NYX_EXIT_IOERR = 74,
	NYX_EXIT_TEMPFAIL = 75,
	NYX_EXIT_PROTOCOL = 76,
	NYX_EXIT_NOPERM = 77,
	NYX_EXIT_CONFIG = 78,
};

struct nyx_err {
	int exit; /* enum nyx_exit */
	int http_status; /* 0 when no HTTP answer caused it */
	bool retryable; /* the same command may succeed later */
	char code[96]; /* stable machine code */
	char message[512]; /* safe, fixed wording */
};

#define NYX_ERR_ZERO                                                           \
	{                                                                      \
		0, 0, false, "", ""                                            \
	}

/* Fill err; always returns -1 so callers can `return nyx_err_set(...)`. */
int nyx_err_set(struct nyx_err *err, int exit_code, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The class name of an exit code ("usage", "transient", ...). */
/* The error's stable code; "internal_error" for one never filled in. */
const char *nyx_err_code(const struct nyx_err *e);

const char *nyx_exit_class(int exit_code);

/* Whether an exit code is retryable by rerunning the same command. */
bool nyx_exit_retryable(int exit_code);

/*
 * Severity rank used to combine several outcomes into one exit code:
 * 64-78 > 4 > 3 > 1 > 5 > 0.  Higher is more severe.
 */
int nyx_exit_rank(int exit_code);

/* The more severe of two exit codes. */
int nyx_exit_worst(int a, int b);

#endif
