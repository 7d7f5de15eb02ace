/* Unit tests of job admission (lib/nyx_exec): every refusal, its code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_exec.h"
#include "nyx_test.h"

static const struct {
	const char *lang, *timeout, *literal, *path;
	const char *code; /* NULL: admitted */
	int exit;
	const char *want_lang;
} rows[] = {
    {"python", NULL, "print(1)", NULL, NULL, 0, "python"},
    {NULL, NULL, "echo", "job.sh", NULL, 0, "bash"},
    {NULL, NULL, "x", "job.mjs", NULL, 0, "javascript"},
    {NULL, NULL, "x", "job.txt", "code_execution_request_invalid", 64, NULL},
    {"cobol", NULL, "x", NULL, "code_execution_request_invalid", 64, NULL},
    {"python", "0", "x", NULL, "code_execution_request_invalid", 64, NULL},
    {"python", "601", "x", NULL, "code_execution_request_invalid", 64, NULL},
    {"python", "60s", "x", NULL, "code_execution_request_invalid", 64, NULL},
    {"python", "600", "x", NULL, NULL, 0, "python"},
    {"python", NULL, "x\xc3", NULL, "code_execution_request_invalid", 65, NULL},
    {"python", NULL, NULL, "/nonexistent/job.py", "input_unreadable", 66, NULL},
};

int
main(void)
{
	struct nyx_exec_job j;
	struct nyx_err e;
	char *big;
	size_t i;
	bool ok = true;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int rc;

		memset(&e, 0, sizeof(e));
		rc = nyx_exec_admit(rows[i].lang, rows[i].timeout,
		    rows[i].literal, rows[i].path, &j, &e);
		if (rows[i].code == NULL
		        ? rc != 0 || strcmp(j.language, rows[i].want_lang) != 0
		        : rc == 0 || strcmp(e.code, rows[i].code) != 0 ||
		            e.exit != rows[i].exit) {
			printf("#   row %zu: rc %d %s %d\n", i, rc, e.code,
			    e.exit);
			ok = false;
		}
		nyx_exec_job_free(&j);
	}
	CHECK(ok, "admission table: language, timeout, source");
	big = malloc((1u << 20) + 2);
	memset(big, 'x', (1u << 20) + 1);
	big[(1u << 20) + 1] = '\0';
	memset(&e, 0, sizeof(e));
	CHECK(nyx_exec_admit("bash", NULL, big, NULL, &j, &e) < 0 &&
	        strcmp(e.message, "The source exceeds 1 MiB.") == 0,
	    "a source over 1 MiB is refused");
	nyx_exec_job_free(&j);
	big[1u << 20] = '\0';
	CHECK(nyx_exec_admit("bash", NULL, big, NULL, &j, &e) == 0 &&
	        j.source.len == 1u << 20 && j.timeout_secs == 180,
	    "exactly 1 MiB is accepted; the default timeout is 180 s");
	nyx_exec_job_free(&j);
	free(big);
	CHECK(nyx_exec_utf8_text("h\xc3\xa9", 3) &&
	        !nyx_exec_utf8_text("a\0b", 3) &&
	        !nyx_exec_utf8_text("\xff", 1),
	    "UTF-8 text: valid sequences only, no NUL");
	return nyx_test_done();
}
