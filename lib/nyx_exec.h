/*
 * nyx_exec: admitting a job before any request (PRODUCT 6, 8): the
 * program or task text, its language and its time limit, checked the
 * same way for code-exec and codex-exec.
 *
 * Text is read from a literal, a file or standard input ("-") into a
 * capped secret buffer and must be UTF-8 without NUL bytes (jv would
 * silently replace invalid sequences; the exact bytes are what runs).
 * Functions return 0, or -1 with err.
 */
#ifndef NYX_EXEC_H
#define NYX_EXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "nyx_buf.h"
#include "nyx_err.h"

enum nyx_text_fail {
	NYX_TEXT_OK = 0,
	NYX_TEXT_TOO_LARGE, /* over the cap */
	NYX_TEXT_UNREADABLE, /* errno says why */
	NYX_TEXT_NOT_UTF8, /* invalid UTF-8, or a NUL byte */
};

/*
 * Load text into b (initialised here, secret, capped at cap bytes) from
 * the literal when given, else from path ("-": standard input).
 */
enum nyx_text_fail nyx_exec_load_text(
    struct nyx_buf *b, size_t cap, const char *literal, const char *path);

/* Whether n bytes are UTF-8 text without a NUL byte. */
bool nyx_exec_utf8_text(const char *s, size_t n);

/* A code-exec job, admitted. */
struct nyx_exec_job {
	const char *language;
	struct nyx_buf source; /* secret */
	int timeout_secs;
};

/*
 * Admit a job: the language (given, else inferred from the file's
 * extension .py .js .mjs .ts .sh), the timeout (1..600, default 180) and
 * the source (-e text or a file, at most 1 MiB).  -1 with err: 64
 * code_execution_request_invalid, 65 for text that is not UTF-8, 66
 * input_unreadable.
 */
int nyx_exec_admit(const char *language, const char *timeout_secs,
    const char *literal, const char *path, struct nyx_exec_job *j,
    struct nyx_err *err);
void nyx_exec_job_free(struct nyx_exec_job *j);

#endif
