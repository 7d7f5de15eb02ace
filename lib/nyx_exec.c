#include "nyx_exec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jv.h>

#include "nyx_sandbox.h"

bool
nyx_exec_utf8_text(const char *s, size_t n)
{
	jv check;
	bool ok;

	if (n > 0 && memchr(s, '\0', n) != NULL)
		return false;
	check = jv_string_sized(s ? s : "", (int)n);
	ok = (size_t)jv_string_length_bytes(jv_copy(check)) == n;
	jv_free(check);
	return ok;
}

enum nyx_text_fail
nyx_exec_load_text(
    struct nyx_buf *b, size_t cap, const char *literal, const char *path)
{
	int rc;

	nyx_buf_init(b, cap);
	b->secret = true;
	if (literal != NULL)
		rc = nyx_buf_addstr(b, literal);
	else if (strcmp(path, "-") == 0)
		rc = nyx_buf_read_fd(b, STDIN_FILENO);
	else
		rc = nyx_buf_read_file(b, path);
	if (rc < 0)
		return literal != NULL || errno == EFBIG ? NYX_TEXT_TOO_LARGE
		                                         : NYX_TEXT_UNREADABLE;
	if (b->len > cap)
		return NYX_TEXT_TOO_LARGE;
	return nyx_exec_utf8_text(b->data, b->len) ? NYX_TEXT_OK
	                                           : NYX_TEXT_NOT_UTF8;
}

static const char *
infer_language(const char *path)
{
	static const struct {
		const char *ext, *lang;
	} map[] = {{".py", "python"}, {".js", "javascript"},
	    {".mjs", "javascript"}, {".ts", "typescript"}, {".sh", "bash"}};
	const char *dot = path ? strrchr(path, '.') : NULL;
	size_t i;

	for (i = 0; dot != NULL && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(dot, map[i].ext) == 0)
			return map[i].lang;
	return NULL;
}

static int
invalid(struct nyx_err *err, const char *msg)
{
	return nyx_err_set(
	    err, NYX_EXIT_USAGE, "code_execution_request_invalid", "%s", msg);
}

int
nyx_exec_admit(const char *language, const char *timeout_secs,
    const char *literal, const char *path, struct nyx_exec_job *j,
    struct nyx_err *err)
{
	char *end;
	long t = 180;

	memset(j, 0, sizeof(*j));
	if (timeout_secs != NULL) {
		errno = 0;
		t = strtol(timeout_secs, &end, 10);
		if (errno != 0 || end == timeout_secs || *end != '\0' ||
		    t < 1 || t > 600)
			return invalid(err,
			    "'timeout_secs' must be an integer "
			    "between 1 and 600.");
	}
	j->timeout_secs = (int)t;
	j->language = language ? language : infer_language(path);
	if (j->language == NULL)
		return invalid(err,
		    "The language cannot be inferred; pass -l "
		    "python, javascript, typescript or bash.");
	if (!nyx_sandbox_language_known(j->language))
		return invalid(err,
		    "'language' must be python, javascript, "
		    "typescript or bash.");
	switch (nyx_exec_load_text(
	    &j->source, NYX_SANDBOX_SOURCE_MAX, literal, path)) {
	case NYX_TEXT_OK:
		return 0;
	case NYX_TEXT_TOO_LARGE:
		return invalid(err, "The source exceeds 1 MiB.");
	case NYX_TEXT_NOT_UTF8:
		return nyx_err_set(err, NYX_EXIT_DATAERR,
		    "code_execution_request_invalid",
		    "The source is not valid UTF-8 text.");
	default:
		return nyx_err_set(err, NYX_EXIT_NOINPUT, "input_unreadable",
		    "cannot read %s: %s", path, strerror(errno));
	}
}

void
nyx_exec_job_free(struct nyx_exec_job *j)
{
	nyx_buf_free(&j->source);
}
