/*
 * The audit trail's batched append (nyx_audit_emit) against a real ledger
 * and audit.jsonl: one write for the batch, duplicates and conflicts
 * judged per record (within the batch too), and what cannot be appended
 * frozen as intents.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nyx_audit.h"
#include "nyx_ledger.h"
#include "nyx_outcome.h"
#include "nyx_test.h"

static int
lines_of(const char *path)
{
	FILE *f = fopen(path, "r");
	int c, n = 0;

	if (f == NULL)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static int
pending(struct nyx_ledger *l)
{
	struct nyx_err e = NYX_ERR_ZERO;
	char **ids = NULL;
	int n = 0;

	if (nyx_ledger_intents(l, NULL, &ids, &e) < 0)
		return -1;
	while (ids[n] != NULL)
		n++;
	nyx_ledger_free_list(ids);
	return n;
}

/* A batch of the phases' records for one request (no outcome). */
static jv
batch(const char *request, const char *const *phases, int n)
{
	struct nyx_audit_subject s = {
	    "code_execute", "cli", "u-test", request, "c-1", false};
	jv a = jv_array();
	int i;

	for (i = 0; i < n; i++)
		a = jv_array_append(
		    a, nyx_audit_record(&s, phases[i], NULL, NULL, 1000 + i));
	return a;
}

static jv
terminal(const char *request, int exit_code)
{
	struct nyx_audit_subject s = {
	    "code_execute", "cli", "u-test", request, "c-1", false};
	struct nyx_audit_outcome o = {exit_code == 0, NULL, NULL, exit_code,
	    NULL, exit_code == 0 ? NULL : "execute", false};

	return nyx_audit_record(&s, "terminal", NULL, &o, 2000);
}

int
main(void)
{
	static const char *const started[] = {"admission", "running"};
	char base[512] = "/tmp/nyx-audit-XXXXXX", dir[600], path[700];
	struct nyx_err e = NYX_ERR_ZERO;
	struct nyx_ledger *l;
	jv a, t0, t1;

	if (getenv("NYX_TEST_TMP") != NULL)
		snprintf(base, sizeof(base), "%s/audit-XXXXXX",
		    getenv("NYX_TEST_TMP"));
	if (mkdtemp(base) == NULL)
		return 2;
	snprintf(dir, sizeof(dir), "%s/state", base);
	snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	if (nyx_ledger_open(dir, &l, &e) < 0)
		return 2;

	a = batch("r-1", started, 2);
	CHECK(nyx_audit_emit(l, dir, a, NULL, &e) == 0, "a batch is appended");
	CHECK(lines_of(path) == 2, "two lines, one per record");
	CHECK(nyx_audit_emit(l, dir, a, NULL, &e) == 0 && lines_of(path) == 2,
	    "the same batch again: duplicates, nothing written");
	jv_free(a);

	/* one new record beside a duplicate: only the new one is written */
	a = batch("r-1", started, 1);
	a = jv_array_append(a, terminal("r-1", 0));
	CHECK(nyx_audit_emit(l, dir, a, NULL, &e) == 0 && lines_of(path) == 3,
	    "a duplicate and a new record: one line more");
	jv_free(a);

	/* the same id twice in one batch */
	t0 = terminal("r-2", 0);
	a = jv_array_append(jv_array_append(jv_array(), jv_copy(t0)), t0);
	CHECK(nyx_audit_emit(l, dir, a, NULL, &e) == 0 && lines_of(path) == 4,
	    "one fact twice in a batch: written once");
	jv_free(a);
	t0 = terminal("r-3", 0);
	t1 = terminal("r-3", 7);
	a = jv_array_append(jv_array_append(jv_array(), t0), t1);
	CHECK(nyx_audit_emit(l, dir, a, NULL, &e) == 2 && lines_of(path) == 5,
	    "two facts under one id in a batch: the first written, the "
	    "second a conflict");
	CHECK(pending(l) == 1, "the conflicting record is frozen");
	jv_free(a);

	/* the trail cannot be written: every record is frozen */
	{
		char keep[800];

		snprintf(keep, sizeof(keep), "%s.keep", path);
		CHECK(rename(path, keep) == 0 && mkdir(path, 0700) == 0,
		    "the trail becomes a directory");
		a = batch("r-4", started, 2);
		CHECK(nyx_audit_emit(l, dir, a, NULL, &e) == 1,
		    "an append that fails: 1");
		CHECK(e.exit == 73 && strstr(e.message, "audit.jsonl") != NULL,
		    "err says why (73, the file)");
		CHECK(pending(l) == 3,
		    "both records are frozen beside the "
		    "conflict");
		jv_free(a);
		CHECK(rmdir(path) == 0 && rename(keep, path) == 0,
		    "the trail is back");
	}

	/* a fresh run's first records: written, and neither looked up nor
	 * indexed until something catches up */
	{
		struct nyx_audit_subject fs = {
		    "code_execute", "cli", "u-test", "r-5", "c-1", true};
		char id[NYX_AUDIT_ID_MAX], c[65], sm[65];
		int64_t before = -1, after = -1;

		CHECK(nyx_ledger_audit_covered(l, &before, &e) == 0,
		    "the index's reach");
		CHECK(nyx_audit_note_started(l, &fs, NULL) == 0 &&
		        lines_of(path) == 7,
		    "fresh: admission and running appended");
		CHECK(nyx_ledger_audit_covered(l, &after, &e) == 0 &&
		        after == before,
		    "fresh: the index is left as it was");
		a = batch("r-5", started, 1);
		CHECK(nyx_audit_emit(l, dir, a, NULL, &e) == 0 &&
		        lines_of(path) == 7,
		    "the next append catches up first: its duplicate is known");
		jv_free(a);
		fs.request_id = "r-6";
		CHECK(nyx_audit_note_started(l, &fs, NULL) == 0 &&
		        lines_of(path) == 9,
		    "fresh again");
		CHECK(nyx_audit_catch_up(l, dir, &e) == 0, "catch up");
		CHECK(nyx_audit_id(&fs, "running", NULL, id) == 0 &&
		        nyx_ledger_audit_lookup(l, id, c, sm, &e) == 1,
		    "after nyx_audit_catch_up the records are indexed");
		{
			struct stat st;

			CHECK(stat(path, &st) == 0 &&
			        nyx_ledger_audit_covered(l, &after, &e) == 0 &&
			        after == (int64_t)st.st_size,
			    "the index covers the whole file");
		}
		/* its terminal record too: one process writes all of a fresh
		 * run's records, once (a local or sync run) */
		{
			struct nyx_exec_outcome oc;

			nyx_exec_outcome_init(&oc);
			oc.success = true;
			oc.exit = 0;
			fs.request_id = "r-7";
			CHECK(nyx_ledger_audit_covered(l, &before, &e) == 0 &&
			        nyx_audit_note_started(l, &fs, NULL) == 0 &&
			        nyx_audit_note(
			            l, &fs, "terminal", NULL, NULL, &oc) == 0 &&
			        lines_of(path) == 12,
			    "fresh: the terminal record appended after the "
			    "first ones");
			CHECK(nyx_ledger_audit_covered(l, &after, &e) == 0 &&
			        after == before,
			    "fresh: the terminal append neither looks up nor "
			    "indexes");
			CHECK(nyx_audit_catch_up(l, dir, &e) == 0 &&
			        nyx_audit_id(&fs, "terminal", NULL, id) == 0 &&
			        nyx_ledger_audit_lookup(l, id, c, sm, &e) == 1,
			    "the next catch-up indexes it");
			nyx_exec_outcome_free(&oc);
		}
	}
	nyx_ledger_close(l);
	return nyx_test_done();
}
