/*
 * The ledger against a real SQLite file: permissions, round trips,
 * verified secret material, leases, persistence across reopen.
 * Usage: test_ledger              the suite, in a fresh temporary dir
 *        test_ledger open DIR     open DIR; exit with the error's code
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nyx_ledger.h"
#include "nyx_test.h"

static void
fill(struct nyx_op *op, int64_t t)
{
	memset(op, 0, sizeof(*op));
	nyx_ledger_new_handle(op->handle);
	snprintf(op->user_service_id, sizeof(op->user_service_id), "us-1");
	snprintf(op->slug, sizeof(op->slug), "chrono-sandbox");
	snprintf(op->base_url, sizeof(op->base_url), "http://127.0.0.1:1");
	snprintf(op->language, sizeof(op->language), "python");
	snprintf(op->status, sizeof(op->status), "submitting");
	op->timeout_secs = 180;
	op->created_at_ms = t;
	op->expires_at_ms = t + 720000;
	op->next_poll_at_ms = t;
}

static int
open_only(const char *dir)
{
	struct nyx_err e = NYX_ERR_ZERO;
	struct nyx_ledger *l;

	if (nyx_ledger_open(dir, &l, &e) < 0) {
		printf("%s: %s\n", e.code, e.message);
		return e.exit;
	}
	nyx_ledger_close(l);
	return 0;
}

int
main(int argc, char **argv)
{
	struct nyx_err e = NYX_ERR_ZERO;
	struct nyx_ledger *l, *l2;
	struct nyx_op a, b, c, d, got;
	struct nyx_buf sec = NYX_BUF_ZERO;
	char base[512] = "/tmp/nyx-ledger-test-XXXXXX", dir[600], path[700];
	const char *secret = "{\"source\":\"print(1)\",\"key\":\"tool:v1:"
	                     "operation:00\"}";
	char **list = NULL;
	struct stat st;
	int fd;

	if (argc == 3 && strcmp(argv[1], "open") == 0)
		return open_only(argv[2]);
	/* under bats the directory lives (and is removed) with the test */
	if (getenv("NYX_TEST_TMP") != NULL)
		snprintf(base, sizeof(base), "%s/ledger-XXXXXX",
		    getenv("NYX_TEST_TMP"));
	if (mkdtemp(base) == NULL)
		return 2;
	snprintf(dir, sizeof(dir), "%s/state", base);

	CHECK(nyx_ledger_open(dir, &l, &e) == 0, "open creates the state dir");
	CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700,
	    "state dir is 0700");
	snprintf(path, sizeof(path), "%s/secrets", dir);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0700,
	    "secrets/ is 0700");

	fill(&a, 1000);
	CHECK(nyx_ledger_insert(l, &a, secret, strlen(secret), &e) == 0,
	    "insert with secret material");
	snprintf(path, sizeof(path), "%s/secrets/%s", dir, a.secret_name);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600,
	    "the secret file is 0600");
	snprintf(path, sizeof(path), "%s/ledger.db-wal", dir);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600,
	    "SQLite's write-ahead log is 0600 too");
	CHECK(nyx_ledger_get(l, a.handle, &got, &e) == 1 &&
	        strcmp(got.user_service_id, "us-1") == 0 &&
	        got.expires_at_ms == 721000 && got.timeout_secs == 180 &&
	        strcmp(got.secret_sha256, a.secret_sha256) == 0,
	    "get returns what was inserted");
	CHECK(nyx_ledger_get(l, "h-none", &got, &e) == 0, "unknown handle");
	CHECK(nyx_ledger_read_secret(l, &got, &sec, &e) == 0 &&
	        sec.len == strlen(secret) &&
	        memcmp(sec.data, secret, sec.len) == 0,
	    "the secret reads back, verified");
	nyx_buf_free(&sec);

	/* the ledger file itself never holds the secret */
	{
		struct nyx_buf db = NYX_BUF_ZERO;
		int leaked = 0;
		const char *names[] = {"ledger.db", "ledger.db-wal"};
		size_t i;

		for (i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
			nyx_buf_reset(&db);
			if (nyx_buf_read_file(&db, path) == 0 && db.data &&
			    memmem(db.data, db.len, "print(1)", 8) != NULL)
				leaked = 1;
		}
		nyx_buf_free(&db);
		CHECK(!leaked, "no source in ledger.db or its WAL");
	}

	/* tampering is detected, and the material is not used */
	snprintf(path, sizeof(path), "%s/secrets/%s", dir, a.secret_name);
	fd = open(path, O_WRONLY | O_APPEND);
	(void)!write(fd, "x", 1);
	close(fd);
	CHECK(nyx_ledger_read_secret(l, &got, &sec, &e) < 0 && e.exit == 65 &&
	        strcmp(e.code, "secret_tampered") == 0,
	    "altered material is refused (65)");
	unlink(path);
	CHECK(nyx_ledger_read_secret(l, &got, &sec, &e) < 0 &&
	        strcmp(e.code, "secret_missing") == 0,
	    "missing material is refused");

	got.terminal = false;
	snprintf(got.operation_id, sizeof(got.operation_id), "op_123");
	snprintf(got.status, sizeof(got.status), "running");
	snprintf(got.etag, sizeof(got.etag), "\"v7\"");
	got.expires_at_ms = 600000;
	CHECK(nyx_ledger_update(l, &got, &e) == 0, "update");
	fill(&b, 2000);
	CHECK(nyx_ledger_insert(l, &b, "{}", 2, &e) == 0, "a second insert");
	b.terminal = true;
	nyx_ledger_update(l, &b, &e);
	CHECK(nyx_ledger_list(l, true, &list, &e) == 0 && list[0] != NULL &&
	        strcmp(list[0], a.handle) == 0 && list[1] == NULL,
	    "pending list skips terminal operations");
	nyx_ledger_free_list(list);
	CHECK(nyx_ledger_list(l, false, &list, &e) == 0 && list[1] != NULL &&
	        strcmp(list[1], b.handle) == 0 && list[2] == NULL,
	    "full list, oldest first");
	nyx_ledger_free_list(list);

	CHECK(nyx_ledger_claim(l, a.handle, "pid-1", 5000, 1000, &e) == 1,
	    "a free operation is claimed");
	CHECK(nyx_ledger_claim(l, a.handle, "pid-2", 5500, 1000, &e) == 0,
	    "a live lease keeps others out");
	CHECK(nyx_ledger_claim(l, a.handle, "pid-1", 5600, 1000, &e) == 1,
	    "the owner renews");
	CHECK(nyx_ledger_claim(l, a.handle, "pid-2", 7000, 1000, &e) == 1,
	    "an expired lease is taken over");
	CHECK(nyx_ledger_release(l, a.handle, "pid-1", &e) == 0 &&
	        nyx_ledger_claim(l, a.handle, "pid-3", 7100, 1000, &e) == 0,
	    "only the holder releases");
	nyx_ledger_release(l, a.handle, "pid-2", &e);
	CHECK(nyx_ledger_claim(l, a.handle, "pid-3", 7100, 1000, &e) == 1,
	    "released, it is free");

	/* a holder on this host that no longer exists loses its lease at
	 * once; a live one keeps it */
	{
		char me[128], dead[160], host[64] = "";
		pid_t child = fork();

		if (child == 0)
			_exit(0);
		waitpid(child, NULL, 0);
		gethostname(host, sizeof(host) - 1);
		host[strcspn(host, ":")] = '\0';
		snprintf(dead, sizeof(dead), "%s:%ld:00", host, (long)child);
		nyx_ledger_release(l, a.handle, "pid-3", &e);
		CHECK(nyx_ledger_claim(l, a.handle, dead, 8000, 60000, &e) == 1,
		    "a lease for a process that is gone");
		CHECK(nyx_ledger_owner(me) == 0 &&
		        nyx_ledger_claim(l, a.handle, me, 8001, 60000, &e) == 1,
		    "a dead holder's live lease is taken over");
		CHECK(nyx_ledger_claim(l, a.handle, dead, 8002, 60000, &e) == 0,
		    "a live holder (this process) keeps its lease");
		nyx_ledger_release(l, a.handle, me, &e);
		nyx_ledger_claim(l, a.handle, "pid-3", 7100, 1000, &e);
	}
	{
		char h[32] = "";
		char *res;

		snprintf(b.key_sha256, sizeof(b.key_sha256), "%064d", 7);
		CHECK(nyx_ledger_find_key(l, b.key_sha256, h, &e) == 0,
		    "an unknown key digest");
		fill(&c, 3000);
		snprintf(c.key_sha256, sizeof(c.key_sha256), "%064d", 7);
		CHECK(nyx_ledger_insert(l, &c, "k", 1, &e) == 0 &&
		        nyx_ledger_find_key(l, c.key_sha256, h, &e) == 1 &&
		        strcmp(h, c.handle) == 0,
		    "an operation is found by its key digest");
		fill(&d, 3001);
		snprintf(d.key_sha256, sizeof(d.key_sha256), "%064d", 7);
		CHECK(nyx_ledger_insert(l, &d, "k", 1, &e) < 0,
		    "one operation per key digest");
		c.exit_code = 4;
		c.child_exit = 3;
		CHECK(nyx_ledger_save(
		          l, &c, "{\"type\":\"exec.result\"}", &e) == 0 &&
		        nyx_ledger_get(l, c.handle, &got, &e) == 1 &&
		        got.terminal && got.exit_code == 4 &&
		        got.child_exit == 3,
		    "a result makes the operation terminal");
		res = nyx_ledger_result(l, c.handle);
		CHECK(res != NULL && strstr(res, "exec.result") != NULL,
		    "the stored result");
		free(res);
		CHECK(nyx_ledger_result(l, a.handle) == NULL,
		    "no result before terminal");
	}

	/* audit intents are frozen: never replaced */
	{
		char *rec, **ids = NULL;

		CHECK(nyx_ledger_intent_put(l, "tool:v1:terminal:x",
		          "{\"a\":1}", a.handle, &e) == 1,
		    "an intent is frozen");
		CHECK(nyx_ledger_intent_put(l, "tool:v1:terminal:x",
		          "{\"a\":1}", a.handle, &e) == 0,
		    "the same intent again");
		CHECK(nyx_ledger_intent_put(l, "tool:v1:terminal:x",
		          "{\"a\":2}", a.handle, &e) == 2,
		    "a different intent is refused");
		rec = nyx_ledger_intent_get(l, "tool:v1:terminal:x");
		CHECK(rec != NULL && strcmp(rec, "{\"a\":1}") == 0,
		    "the first intent is kept");
		free(rec);
		CHECK(nyx_ledger_intents(l, a.handle, &ids, &e) == 0 &&
		        ids[0] != NULL && ids[1] == NULL,
		    "intents of one operation");
		nyx_ledger_free_list(ids);
		CHECK(
		    nyx_ledger_intent_done(l, "tool:v1:terminal:x", &e) == 0 &&
		        nyx_ledger_intent_get(l, "tool:v1:terminal:x") == NULL,
		    "a written intent is cleared");
	}

	/* a second connection sees the same state (WAL, one file) */
	CHECK(nyx_ledger_open(dir, &l2, &e) == 0 &&
	        nyx_ledger_claim(l2, a.handle, "pid-4", 7200, 1000, &e) == 0,
	    "another process sees the lease");
	nyx_ledger_close(l2);
	nyx_ledger_close(l);

	CHECK(nyx_ledger_open(dir, &l, &e) == 0 &&
	        nyx_ledger_get(l, a.handle, &got, &e) == 1 &&
	        strcmp(got.operation_id, "op_123") == 0 &&
	        strcmp(got.etag, "\"v7\"") == 0 && got.expires_at_ms == 600000,
	    "state survives close and reopen");
	nyx_ledger_close(l);

	chmod(dir, 0755);
	CHECK(nyx_ledger_open(dir, &l, &e) < 0 && e.exit == 73 &&
	        strcmp(e.code, "state_dir_permissions") == 0,
	    "a state dir open to others is refused (73)");
	printf("# %s\n", base);
	return nyx_test_done();
}
