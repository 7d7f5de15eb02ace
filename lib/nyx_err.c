#include "nyx_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int
nyx_err_set(
    struct nyx_err *err, int exit_code, const char *code, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return -1;
	err->exit = exit_code;
	err->retryable = nyx_exit_retryable(exit_code);
	snprintf(err->code, sizeof(err->code), "%s", code ? code : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

const char *
nyx_exit_class(int exit_code)
{
	switch (exit_code) {
	case NYX_EXIT_OK:
		return "ok";
	case NYX_EXIT_NO:
		return "failed";
	case NYX_EXIT_BLOCKED:
		return "blocked";
	case NYX_EXIT_UNCERTAIN:
		return "uncertain";
	case NYX_EXIT_PENDING:
		return "pending";
	case NYX_EXIT_USAGE:
		return "usage";
	case NYX_EXIT_DATAERR:
		return "data";
	case NYX_EXIT_NOINPUT:
		return "noinput";
	case NYX_EXIT_SOFTWARE:
		return "internal";
	case NYX_EXIT_OSERR:
		return "os";
	case NYX_EXIT_CANTCREAT:
		return "state";
	case NYX_EXIT_IOERR:
		return "io";
	case NYX_EXIT_TEMPFAIL:
		return "transient";
	case NYX_EXIT_PROTOCOL:
		return "protocol";
	case NYX_EXIT_NOPERM:
		return "credential";
	case NYX_EXIT_CONFIG:
		return "config";
	default:
		return "internal";
	}
}

bool
nyx_exit_retryable(int exit_code)
{
	return exit_code == NYX_EXIT_TEMPFAIL || exit_code == NYX_EXIT_PENDING;
}

int
nyx_exit_rank(int exit_code)
{
	if (exit_code >= 64)
		return 6;
	switch (exit_code) {
	case NYX_EXIT_UNCERTAIN:
		return 5;
	case NYX_EXIT_BLOCKED:
		return 4;
	case NYX_EXIT_NO:
		return 3;
	case NYX_EXIT_PENDING:
		return 2;
	case NYX_EXIT_OK:
		return 0;
	default:
		return 6;
	}
}

int
nyx_exit_worst(int a, int b)
{
	return nyx_exit_rank(b) > nyx_exit_rank(a) ? b : a;
}

const char *
nyx_err_code(const struct nyx_err *e)
{
	return e->code[0] != '\0' ? e->code : "internal_error";
}
