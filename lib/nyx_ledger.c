#include "nyx_ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nyx_hash.h"
#include "nyx_ledger_int.h"
#include "nyx_log.h"
#include "nyx_time.h"

/* The WAL is checkpointed once it holds this many pages (see below). */
#define NYX_LEDGER_WAL_PAGES 100

static const char schema_v1[] =
    "CREATE TABLE operations ("
    " handle TEXT PRIMARY KEY,"
    " user_service_id TEXT NOT NULL, slug TEXT NOT NULL,"
    " base_url TEXT NOT NULL, language TEXT NOT NULL,"
    " timeout_secs INTEGER NOT NULL,"
    " operation_id TEXT NOT NULL DEFAULT '',"
    " status TEXT NOT NULL, phase TEXT NOT NULL DEFAULT '',"
    " etag TEXT NOT NULL DEFAULT '',"
    " created_at_ms INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL,"
    " next_poll_at_ms INTEGER NOT NULL,"
    " recovery_until_ms INTEGER NOT NULL DEFAULT 0,"
    " stop_deadline_ms INTEGER NOT NULL DEFAULT 0,"
    " retry_delay_ms INTEGER NOT NULL DEFAULT 0,"
    " terminal INTEGER NOT NULL DEFAULT 0,"
    " secret_name TEXT NOT NULL, secret_sha256 TEXT NOT NULL,"
    " lease_owner TEXT, lease_until_ms INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX operations_pending ON operations(terminal, created_at_ms);";

/* 2: rerun convergence by key digest, the stored result, the snapshot */
static const char schema_v2[] =
    "ALTER TABLE operations ADD COLUMN key_sha256 TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE operations ADD COLUMN version TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE operations ADD COLUMN cancel_requested INTEGER NOT NULL "
    "DEFAULT 0;"
    "ALTER TABLE operations ADD COLUMN submits INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE operations ADD COLUMN exit_code INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE operations ADD COLUMN child_exit INTEGER NOT NULL "
    "DEFAULT -1;"
    "ALTER TABLE operations ADD COLUMN result TEXT;"
    "CREATE UNIQUE INDEX operations_key ON operations(key_sha256) "
    "WHERE key_sha256 != '';";

/*
 * 3: the audit trail's write-ahead intents (frozen: never replaced) and
 * the O(1) index of audit.jsonl (id -> content and semantic hashes, and
 * how many bytes of the file it covers).
 */
static const char schema_v3[] =
    "CREATE TABLE audit_intents (audit_id TEXT PRIMARY KEY,"
    " record TEXT NOT NULL, handle TEXT, created_at_ms INTEGER NOT NULL);"
    "CREATE TABLE audit_index (audit_id TEXT PRIMARY KEY,"
    " content_hash TEXT NOT NULL, semantic_hash TEXT NOT NULL);"
    "CREATE TABLE audit_meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
    "ALTER TABLE operations ADD COLUMN owner TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE operations ADD COLUMN request_id TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE operations ADD COLUMN call_id TEXT NOT NULL DEFAULT '';";

/* 4: durable exact-call approvals (codex-exec private_ssh) */
static const char schema_v4[] =
    "CREATE TABLE approvals (id TEXT PRIMARY KEY, owner TEXT NOT NULL,"
    " request_id TEXT NOT NULL, call_id TEXT NOT NULL,"
    " arguments_sha256 TEXT NOT NULL, secret_name TEXT NOT NULL,"
    " state TEXT NOT NULL, created_at_ms INTEGER NOT NULL,"
    " decided_by TEXT, decided_at_ms INTEGER NOT NULL DEFAULT 0,"
    " consumed_at_ms INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX approvals_call ON approvals(owner, request_id, call_id);";

/* 5: when a row last changed (exec-status --list) */
static const char schema_v5[] =
    "ALTER TABLE operations ADD COLUMN updated_at_ms INTEGER NOT NULL "
    "DEFAULT 0;"
    /* monotonic counters for the metrics file (exec-status) */
    "CREATE TABLE counters (k TEXT PRIMARY KEY, v INTEGER NOT NULL);";

int
nyx_ledger_db_fail(struct nyx_ledger *l, struct nyx_err *err, const char *what)
{
	return nyx_err_set(err, NYX_EXIT_CANTCREAT, "ledger_failed",
	    "the ledger in %s: %s: %s", l->dir, what,
	    l->db ? sqlite3_errmsg(l->db) : strerror(errno));
}

/* Create the missing parents of path (0700), as mkdir -p would. */
static void
make_parents(const char *path)
{
	char buf[512], *p;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = buf + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return;
		*p = '/';
	}
}

/* An existing directory must be ours and closed to others; else make it. */
static int
ensure_dir(const char *path, struct nyx_err *err)
{
	struct stat st;

	if (mkdir(path, 0700) == 0)
		return 0;
	if (errno != EEXIST)
		return nyx_err_set(err, NYX_EXIT_CANTCREAT, "state_dir_failed",
		    "cannot create %s: %s", path, strerror(errno));
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return nyx_err_set(err, NYX_EXIT_CANTCREAT, "state_dir_failed",
		    "%s is not a directory", path);
	if (st.st_uid != geteuid() || (st.st_mode & 077) != 0)
		return nyx_err_set(err, NYX_EXIT_CANTCREAT,
		    "state_dir_permissions",
		    "%s must be a directory of yours with mode 0700 (chmod "
		    "700 it)",
		    path);
	return 0;
}

/* A state file: regular and ours (errno EPERM otherwise). */
static bool
state_file_ok(const struct stat *st)
{
	errno = 0;
	if (S_ISREG(st->st_mode) && st->st_uid == geteuid())
		return true;
	errno = EPERM;
	return false;
}

/*
 * SQLite opens PATH-wal and PATH-shm itself, following links: one that
 * exists must be a regular file of ours (errno ELOOP or EPERM).
 */
static bool
companions_ok(const char *path)
{
	static const char *const ext[] = {"-wal", "-shm", "-journal"};
	char p[1024];
	struct stat st;
	size_t i;

	for (i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		if (snprintf(p, sizeof(p), "%s%s", path, ext[i]) >=
		    (int)sizeof(p)) {
			errno = ENAMETOOLONG;
			return false;
		}
		if (lstat(p, &st) < 0) {
			if (errno == ENOENT)
				continue;
			return false;
		}
		if (S_ISLNK(st.st_mode)) {
			errno = ELOOP;
			return false;
		}
		if (!state_file_ok(&st))
			return false;
	}
	return true;
}

/*
 * Open (creating) a SQLite file for durable single-host use: WAL, full
 * sync, a busy timeout. The file is made 0600 before SQLite touches it, so
 * the -wal and -shm files SQLite creates beside it copy that mode.
 */
int
nyx_ledger_sqlite_open(const char *path, struct sqlite3 **db)
{
	int fd, rc = -1, tries;
	struct stat st;

	*db = NULL;
	{
		struct nyx_err ignored = NYX_ERR_ZERO;

		/* the callers load it first, to say why it failed */
		if (nyx_sqlite_load(&ignored) < 0) {
			errno = ELIBACC;
			return -1;
		}
	}
	/* never through a link, never a file of someone else's */
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !state_file_ok(&st) || fchmod(fd, 0600) < 0) {
		if (errno == 0)
			errno = EPERM;
		close(fd);
		return -1;
	}
	close(fd);
	if (!companions_ok(path))
		return -1;
	if (sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE, NULL) !=
	        SQLITE_OK ||
	    sqlite3_busy_timeout(*db, 5000) != SQLITE_OK)
		return -1;
	/*
	 * Every commit that matters is synced (FULL): a checkpoint on each
	 * close only adds two more syncs per run.  But the first process to
	 * open the file rebuilds the WAL's index by reading every frame of
	 * it (4 ms at SQLite's default of 1000 pages, a whole local run's
	 * worth of overhead), so the autocheckpoint keeps the WAL short:
	 * about one checkpoint every seven local runs.
	 */
	sqlite3_db_config(*db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	sqlite3_wal_autocheckpoint(*db, NYX_LEDGER_WAL_PAGES);
	/*
	 * Switching a new file to WAL takes an exclusive lock, and SQLite
	 * answers BUSY at once, without its busy handler, when another
	 * process opens the same new file at that moment: retry, as long
	 * as the busy timeout.
	 */
	for (tries = 0; tries < 100; tries++) {
		rc = sqlite3_exec(
		    *db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
		if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
			break;
		nyx_sleep_ms(50);
	}
	return rc == SQLITE_OK &&
	        sqlite3_exec(*db, "PRAGMA synchronous = FULL", NULL, NULL,
	            NULL) == SQLITE_OK
	    ? 0
	    : -1;
}

int
nyx_ledger_exec_sql(struct nyx_ledger *l, const char *sql, struct nyx_err *err)
{
	if (sqlite3_exec(l->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "schema");
	return 0;
}

static int
user_version(struct nyx_ledger *l, int *v)
{
	sqlite3_stmt *st;
	int rc = -1;

	if (sqlite3_prepare_v2(l->db, "PRAGMA user_version", -1, &st, NULL) !=
	    SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW) {
		*v = sqlite3_column_int(st, 0);
		rc = 0;
	}
	sqlite3_finalize(st);
	return rc;
}

/* Bring the schema to NYX_LEDGER_SCHEMA, one version at a time. */
static int
migrate(struct nyx_ledger *l, struct nyx_err *err)
{
	static const char *const steps[] = {
	    schema_v1, schema_v2, schema_v3, schema_v4, schema_v5};
	char bump[64];
	int v = 0;

	if (user_version(l, &v) < 0)
		return nyx_ledger_db_fail(l, err, "reading the schema version");
	if (v > NYX_LEDGER_SCHEMA)
		return nyx_err_set(err, NYX_EXIT_CANTCREAT, "ledger_too_new",
		    "the ledger in %s has schema %d; this build knows %d",
		    l->dir, v, NYX_LEDGER_SCHEMA);

	/* one transaction per version: a crash leaves a whole version */
	for (; v < NYX_LEDGER_SCHEMA; v++) {
		if (nyx_ledger_exec_sql(l, "BEGIN IMMEDIATE", err) < 0)
			return -1;
		if (user_version(l, &v) < 0) {
			sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
			return nyx_ledger_db_fail(
			    l, err, "reading the schema version");
		}
		if (v >= NYX_LEDGER_SCHEMA) { /* another process migrated */
			sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
			break;
		}
		snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", v + 1);
		if (nyx_ledger_exec_sql(l, steps[v], err) < 0 ||
		    nyx_ledger_exec_sql(l, bump, err) < 0) {
			sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
			return -1;
		}
		if (nyx_ledger_exec_sql(l, "COMMIT", err) < 0)
			return -1;
	}
	return 0;
}

int
nyx_ledger_open(
    const char *state_dir, struct nyx_ledger **out, struct nyx_err *err)
{
	struct nyx_ledger *l = calloc(1, sizeof(*l));
	char path[700];

	*out = NULL;
	if (l == NULL)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	l->audit_covered = -1;
	snprintf(l->dir, sizeof(l->dir), "%s", state_dir);
	snprintf(l->secrets, sizeof(l->secrets), "%s/secrets", state_dir);
	snprintf(path, sizeof(path), "%s/ledger.db", state_dir);
	make_parents(l->dir);
	if (nyx_sqlite_load(err) < 0 || ensure_dir(l->dir, err) < 0 ||
	    ensure_dir(l->secrets, err) < 0)
		goto fail;
	if (nyx_ledger_sqlite_open(path, &l->db) < 0) {
		nyx_ledger_db_fail(l, err, "open");
		goto fail;
	}
	if (migrate(l, err) < 0)
		goto fail;
	*out = l;
	return 0;
fail:
	nyx_ledger_close(l);
	return -1;
}

const char *
nyx_ledger_dir(const struct nyx_ledger *l)
{
	return l->dir;
}

void
nyx_ledger_close(struct nyx_ledger *l)
{
	if (l == NULL)
		return;
	if (l->db != NULL) /* NULL: SQLite may not even be loaded */
		sqlite3_close(l->db);
	free(l);
}

int
nyx_ledger_new_handle(char out[32])
{
	char hex[25];

	if (nyx_random_hex(hex, 12) < 0)
		return -1;
	snprintf(out, 32, "h-%s", hex);
	return 0;
}

int
nyx_ledger_secrets_lock(struct nyx_ledger *l, int how)
{
	int fd = open(l->secrets, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while (flock(fd, how) < 0) {
		if (errno != EINTR) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

void
nyx_ledger_secrets_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}

/* Write the secret file durably: temp file, fsync, rename, fsync dir. */
int
nyx_ledger_write_secret(struct nyx_ledger *l, const char *name,
    const char *data, size_t n, struct nyx_err *err)
{
	char path[800], tmp[820];
	int fd, dfd;
	size_t off = 0;

	snprintf(path, sizeof(path), "%s/%s", l->secrets, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return nyx_err_set(err, NYX_EXIT_CANTCREAT,
		    "secret_write_failed", "cannot write secret material: %s",
		    strerror(errno));
	while (off < n) {
		ssize_t w = write(fd, data + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	if (off != n || fsync(fd) < 0 || close(fd) < 0 ||
	    rename(tmp, path) < 0) {
		int e = errno;

		unlink(tmp);
		return nyx_err_set(err, NYX_EXIT_CANTCREAT,
		    "secret_write_failed", "cannot write secret material: %s",
		    strerror(e));
	}
	dfd = open(l->secrets, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

void
nyx_ledger_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
}

int
nyx_ledger_insert(struct nyx_ledger *l, struct nyx_op *op, const char *secret,
    size_t secret_len, struct nyx_err *err)
{
	static const char sql[] =
	    "INSERT INTO operations (handle, user_service_id, slug, "
	    "base_url, language, timeout_secs, operation_id, status, phase, "
	    "etag, created_at_ms, expires_at_ms, next_poll_at_ms, "
	    "recovery_until_ms, stop_deadline_ms, retry_delay_ms, terminal, "
	    "secret_name, secret_sha256, key_sha256, owner, request_id, "
	    "call_id, updated_at_ms) "
	    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?11)";
	sqlite3_stmt *st = NULL;
	char path[800];
	int rc, lk;

	snprintf(op->secret_name, sizeof(op->secret_name), "%s", op->handle);
	if (nyx_sha256_hex(secret, secret_len, op->secret_sha256) < 0)
		return nyx_err_set(
		    err, NYX_EXIT_SOFTWARE, "hash_failed", "SHA-256 failed");
	/* the material first: a row never names a file that is not there;
	 * under the shared lock, so a sweep never takes it for a leftover */
	lk = nyx_ledger_secrets_lock(l, LOCK_SH);
	if (nyx_ledger_write_secret(
	        l, op->secret_name, secret, secret_len, err) < 0) {
		nyx_ledger_secrets_unlock(lk);
		return -1;
	}
	if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK) {
		rc = nyx_ledger_db_fail(l, err, "insert");
		goto undo;
	}
	nyx_ledger_bind_text(st, 1, op->handle);
	nyx_ledger_bind_text(st, 2, op->user_service_id);
	nyx_ledger_bind_text(st, 3, op->slug);
	nyx_ledger_bind_text(st, 4, op->base_url);
	nyx_ledger_bind_text(st, 5, op->language);
	sqlite3_bind_int(st, 6, op->timeout_secs);
	nyx_ledger_bind_text(st, 7, op->operation_id);
	nyx_ledger_bind_text(st, 8, op->status);
	nyx_ledger_bind_text(st, 9, op->phase);
	nyx_ledger_bind_text(st, 10, op->etag);
	sqlite3_bind_int64(st, 11, op->created_at_ms);
	sqlite3_bind_int64(st, 12, op->expires_at_ms);
	sqlite3_bind_int64(st, 13, op->next_poll_at_ms);
	sqlite3_bind_int64(st, 14, op->recovery_until_ms);
	sqlite3_bind_int64(st, 15, op->stop_deadline_ms);
	sqlite3_bind_int64(st, 16, op->retry_delay_ms);
	sqlite3_bind_int(st, 17, op->terminal);
	nyx_ledger_bind_text(st, 18, op->secret_name);
	nyx_ledger_bind_text(st, 19, op->secret_sha256);
	nyx_ledger_bind_text(st, 20, op->key_sha256);
	nyx_ledger_bind_text(st, 21, op->owner);
	nyx_ledger_bind_text(st, 22, op->request_id);
	nyx_ledger_bind_text(st, 23, op->call_id);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = nyx_ledger_db_fail(l, err, "insert");
		goto undo;
	}
	sqlite3_finalize(st);
	nyx_ledger_secrets_unlock(lk);
	return 0;
undo:
	sqlite3_finalize(st);
	snprintf(path, sizeof(path), "%s/%s", l->secrets, op->secret_name);
	unlink(path);
	nyx_ledger_secrets_unlock(lk);
	return rc;
}

void
nyx_ledger_col_text(sqlite3_stmt *st, int i, char *dst, size_t n)
{
	const unsigned char *v = sqlite3_column_text(st, i);

	snprintf(dst, n, "%s", v ? (const char *)v : "");
}

int
nyx_ledger_get(struct nyx_ledger *l, const char *handle, struct nyx_op *op,
    struct nyx_err *err)
{
	static const char sql[] =
	    "SELECT handle, user_service_id, slug, base_url, language, "
	    "timeout_secs, operation_id, status, phase, etag, created_at_ms, "
	    "expires_at_ms, next_poll_at_ms, recovery_until_ms, "
	    "stop_deadline_ms, retry_delay_ms, terminal, secret_name, "
	    "secret_sha256, key_sha256, version, cancel_requested, submits, "
	    "exit_code, child_exit, owner, request_id, call_id, updated_at_ms "
	    "FROM operations WHERE handle = ?";
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "read");
	nyx_ledger_bind_text(st, 1, handle);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		memset(op, 0, sizeof(*op));
		nyx_ledger_col_text(st, 0, op->handle, sizeof(op->handle));
		nyx_ledger_col_text(
		    st, 1, op->user_service_id, sizeof(op->user_service_id));
		nyx_ledger_col_text(st, 2, op->slug, sizeof(op->slug));
		nyx_ledger_col_text(st, 3, op->base_url, sizeof(op->base_url));
		nyx_ledger_col_text(st, 4, op->language, sizeof(op->language));
		op->timeout_secs = sqlite3_column_int(st, 5);
		nyx_ledger_col_text(
		    st, 6, op->operation_id, sizeof(op->operation_id));
		nyx_ledger_col_text(st, 7, op->status, sizeof(op->status));
		nyx_ledger_col_text(st, 8, op->phase, sizeof(op->phase));
		nyx_ledger_col_text(st, 9, op->etag, sizeof(op->etag));
		op->created_at_ms = sqlite3_column_int64(st, 10);
		op->expires_at_ms = sqlite3_column_int64(st, 11);
		op->next_poll_at_ms = sqlite3_column_int64(st, 12);
		op->recovery_until_ms = sqlite3_column_int64(st, 13);
		op->stop_deadline_ms = sqlite3_column_int64(st, 14);
		op->retry_delay_ms = (long)sqlite3_column_int64(st, 15);
		op->terminal = sqlite3_column_int(st, 16) != 0;
		nyx_ledger_col_text(
		    st, 17, op->secret_name, sizeof(op->secret_name));
		nyx_ledger_col_text(
		    st, 18, op->secret_sha256, sizeof(op->secret_sha256));
		nyx_ledger_col_text(
		    st, 19, op->key_sha256, sizeof(op->key_sha256));
		nyx_ledger_col_text(st, 20, op->version, sizeof(op->version));
		op->cancel_requested = sqlite3_column_int(st, 21) != 0;
		op->submits = sqlite3_column_int(st, 22);
		op->exit_code = sqlite3_column_int(st, 23);
		op->child_exit = sqlite3_column_int(st, 24);
		nyx_ledger_col_text(st, 25, op->owner, sizeof(op->owner));
		nyx_ledger_col_text(
		    st, 26, op->request_id, sizeof(op->request_id));
		nyx_ledger_col_text(st, 27, op->call_id, sizeof(op->call_id));
		op->updated_at_ms = sqlite3_column_int64(st, 28);
		if (op->updated_at_ms == 0) /* a row from before schema 5 */
			op->updated_at_ms = op->created_at_ms;
		sqlite3_finalize(st);
		return 1;
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_DONE)
		return 0;
	return nyx_ledger_db_fail(l, err, "read");
}

int
nyx_ledger_save(struct nyx_ledger *l, const struct nyx_op *op,
    const char *result, struct nyx_err *err)
{
	return nyx_ledger_save_intent(l, op, result, NULL, NULL, err);
}

int
nyx_ledger_save_intent(struct nyx_ledger *l, const struct nyx_op *op,
    const char *result, const char *intent_id, const char *intent,
    struct nyx_err *err)
{
	static const char sql[] =
	    "UPDATE operations SET operation_id = ?, status = ?, phase = ?, "
	    "etag = ?, expires_at_ms = ?, next_poll_at_ms = ?, "
	    "recovery_until_ms = ?, "
	    /* a stop another process persisted is never undone */
	    "stop_deadline_ms = CASE WHEN stop_deadline_ms > 0 THEN "
	    "stop_deadline_ms ELSE ? END, retry_delay_ms = ?, "
	    "terminal = ?, version = ?, cancel_requested = ?, submits = ?, "
	    "exit_code = ?, child_exit = ?, result = coalesce(?, result), "
	    "updated_at_ms = ? WHERE handle = ?";
	sqlite3_stmt *st;
	int rc;

	if (intent != NULL &&
	    nyx_ledger_exec_sql(l, "BEGIN IMMEDIATE", err) < 0)
		return -1;
	if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK) {
		rc = nyx_ledger_db_fail(l, err, "update");
		goto rollback;
	}
	nyx_ledger_bind_text(st, 1, op->operation_id);
	nyx_ledger_bind_text(st, 2, op->status);
	nyx_ledger_bind_text(st, 3, op->phase);
	nyx_ledger_bind_text(st, 4, op->etag);
	sqlite3_bind_int64(st, 5, op->expires_at_ms);
	sqlite3_bind_int64(st, 6, op->next_poll_at_ms);
	sqlite3_bind_int64(st, 7, op->recovery_until_ms);
	sqlite3_bind_int64(st, 8, op->stop_deadline_ms);
	sqlite3_bind_int64(st, 9, op->retry_delay_ms);
	sqlite3_bind_int(st, 10, op->terminal || result != NULL);
	nyx_ledger_bind_text(st, 11, op->version);
	sqlite3_bind_int(st, 12, op->cancel_requested);
	sqlite3_bind_int(st, 13, op->submits);
	sqlite3_bind_int(st, 14, op->exit_code);
	sqlite3_bind_int(st, 15, op->child_exit);
	if (result != NULL)
		nyx_ledger_bind_text(st, 16, result);
	else
		sqlite3_bind_null(st, 16);
	sqlite3_bind_int64(st, 17, nyx_now_ms());
	nyx_ledger_bind_text(st, 18, op->handle);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		rc = nyx_ledger_db_fail(l, err, "update");
		goto rollback;
	}
	if (sqlite3_changes(l->db) != 1) {
		rc = nyx_err_set(err, NYX_EXIT_DATAERR, "operation_unknown",
		    "no operation %s in the ledger", op->handle);
		goto rollback;
	}
	/* the terminal audit intent, in the same transaction: a settled
	 * operation always has its audit record written or pending */
	if (intent != NULL) {
		if (nyx_ledger_intent_put(
		        l, intent_id, intent, op->handle, err) < 0) {
			rc = -1;
			goto rollback;
		}
		if (nyx_ledger_exec_sql(l, "COMMIT", err) < 0) {
			rc = -1;
			goto rollback;
		}
	}
	if (result != NULL && op->secret_name[0] != '\0' &&
	    strchr(op->secret_name, '/') == NULL) {
		/* settled: the source and key are needed no more */
		char path[800];

		snprintf(
		    path, sizeof(path), "%s/%s", l->secrets, op->secret_name);
		unlink(path);
	}
	return 0;
rollback:
	if (intent != NULL)
		sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

int
nyx_ledger_request_stop(struct nyx_ledger *l, const char *handle, int64_t now,
    int64_t window_ms, int64_t *deadline, struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc, found = 0;

	*deadline = 0;
	if (nyx_ledger_exec_sql(l, "BEGIN IMMEDIATE", err) < 0)
		return -1;
	if (sqlite3_prepare_v2(l->db,
	        "UPDATE operations SET stop_deadline_ms = ?, next_poll_at_ms = "
	        "? WHERE handle = ? AND terminal = 0 AND stop_deadline_ms = 0",
	        -1, &st, NULL) != SQLITE_OK)
		goto fail;
	sqlite3_bind_int64(st, 1, now + window_ms);
	sqlite3_bind_int64(st, 2, now);
	nyx_ledger_bind_text(st, 3, handle);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE ||
	    sqlite3_prepare_v2(l->db,
	        "SELECT stop_deadline_ms, terminal FROM operations WHERE "
	        "handle = ?",
	        -1, &st, NULL) != SQLITE_OK)
		goto fail;
	nyx_ledger_bind_text(st, 1, handle);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 1) == 0) {
		*deadline = sqlite3_column_int64(st, 0);
		found = 1;
	}
	sqlite3_finalize(st);
	if (nyx_ledger_exec_sql(l, "COMMIT", err) < 0)
		return -1;
	return found;
fail:
	rc = nyx_ledger_db_fail(l, err, "stop");
	sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

int64_t
nyx_ledger_stop_deadline(struct nyx_ledger *l, const char *handle)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_prepare_v2(l->db,
	        "SELECT stop_deadline_ms FROM operations WHERE handle = ?", -1,
	        &st, NULL) != SQLITE_OK)
		return -1;
	nyx_ledger_bind_text(st, 1, handle);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/*
 * A writer killed between its secret file and its row leaves a file no
 * row names (or a .tmp one).  Under the exclusive lock no writer is in
 * between, so such a file is a leftover: remove it.  Busy: next time.
 */
static int
sweep_orphans(struct nyx_ledger *l, struct nyx_err *err)
{
	char **live = NULL;
	struct dirent *e;
	DIR *d;
	int lk = nyx_ledger_secrets_lock(l, LOCK_EX | LOCK_NB);

	if (lk < 0)
		return 0;
	if (nyx_ledger_strings_of(l->db,
	        "SELECT secret_name FROM operations WHERE terminal = 0 "
	        "UNION SELECT secret_name FROM approvals",
	        NULL, &live) < 0) {
		nyx_ledger_secrets_unlock(lk);
		return nyx_ledger_db_fail(l, err, "sweep");
	}
	d = opendir(l->secrets);
	while (d != NULL && (e = readdir(d)) != NULL) {
		char path[1024];
		bool named = false;
		size_t i;

		if (e->d_name[0] == '.')
			continue;
		for (i = 0; live[i] != NULL && !named; i++)
			named = strcmp(live[i], e->d_name) == 0;
		if (named)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", l->secrets,
		        e->d_name) >= sizeof(path))
			continue;
		if (unlink(path) == 0)
			nyx_log(NYX_LOG_INFO,
			    "removed %s, a secret file no operation names "
			    "(a writer was killed before its row)",
			    e->d_name);
	}
	if (d != NULL)
		closedir(d);
	nyx_ledger_free_list(live);
	nyx_ledger_secrets_unlock(lk);
	return 0;
}

int
nyx_ledger_sweep_secrets(struct nyx_ledger *l, struct nyx_err *err)
{
	char **names = NULL;
	size_t i;

	if (nyx_ledger_strings_of(l->db,
	        "SELECT secret_name FROM operations WHERE terminal = 1", NULL,
	        &names) < 0)
		return nyx_ledger_db_fail(l, err, "sweep");
	for (i = 0; names[i] != NULL; i++) {
		char path[800];

		if (names[i][0] == '\0' || names[i][0] == '.' ||
		    strchr(names[i], '/') != NULL)
			continue;
		snprintf(path, sizeof(path), "%s/%s", l->secrets, names[i]);
		if (unlink(path) == 0)
			nyx_log(NYX_LOG_INFO,
			    "removed the leftover secret file of settled %s",
			    names[i]);
	}
	nyx_ledger_free_list(names);
	return sweep_orphans(l, err);
}

int
nyx_ledger_update(
    struct nyx_ledger *l, const struct nyx_op *op, struct nyx_err *err)
{
	return nyx_ledger_save(l, op, NULL, err);
}

int
nyx_ledger_find_key(struct nyx_ledger *l, const char *key_sha256,
    char handle[32], struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(l->db,
	        "SELECT handle FROM operations WHERE key_sha256 = ?", -1, &st,
	        NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "read");
	nyx_ledger_bind_text(st, 1, key_sha256);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		nyx_ledger_col_text(st, 0, handle, 32);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : nyx_ledger_db_fail(l, err, "read");
}

char *
nyx_ledger_result(struct nyx_ledger *l, const char *handle)
{
	sqlite3_stmt *st;
	char *out = NULL;

	if (sqlite3_prepare_v2(l->db,
	        "SELECT result FROM operations WHERE handle = ?", -1, &st,
	        NULL) != SQLITE_OK)
		return NULL;
	nyx_ledger_bind_text(st, 1, handle);
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) == SQLITE_TEXT)
		out = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return out;
}

/*
 * The first column of every row of sql, as a NULL-terminated list; arg,
 * when not NULL, is bound to the statement's ?1 (never spliced in).
 */
int
nyx_ledger_strings_of(
    sqlite3 *db, const char *sql, const char *arg, char ***out)
{
	sqlite3_stmt *st;
	char **v = NULL;
	size_t n = 0, cap = 0;
	int rc;

	*out = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (arg != NULL)
		sqlite3_bind_text(st, 1, arg, -1, SQLITE_TRANSIENT);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 0);

		if (n + 2 > cap) {
			char **nv;

			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (nv == NULL) {
				rc = SQLITE_NOMEM;
				break;
			}
			v = nv;
		}
		v[n] = strdup(t ? (const char *)t : "");
		v[++n] = NULL;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		nyx_ledger_free_list(v);
		return -1;
	}
	*out = v ? v : calloc(1, sizeof(*v));
	return *out ? 0 : -1;
}

void
nyx_ledger_free_list(char **list)
{
	size_t i;

	for (i = 0; list != NULL && list[i] != NULL; i++)
		free(list[i]);
	free(list);
}

int
nyx_ledger_list(
    struct nyx_ledger *l, bool pending_only, char ***out, struct nyx_err *err)
{
	const char *sql = pending_only
	    ? "SELECT handle FROM operations WHERE terminal = 0 "
	      "ORDER BY created_at_ms, handle"
	    : "SELECT handle FROM operations ORDER BY created_at_ms, handle";

	return nyx_ledger_strings_of(l->db, sql, NULL, out) == 0
	    ? 0
	    : nyx_ledger_db_fail(l, err, "list");
}

int
nyx_ledger_read_secret(struct nyx_ledger *l, const struct nyx_op *op,
    struct nyx_buf *out, struct nyx_err *err)
{
	char path[800], got[NYX_SHA256_HEX];
	struct stat st;
	int fd;

	if (op->secret_name[0] == '\0' ||
	    strchr(op->secret_name, '/') != NULL || op->secret_name[0] == '.')
		return nyx_err_set(err, NYX_EXIT_DATAERR, "secret_invalid",
		    "operation %s names no valid secret file", op->handle);
	snprintf(path, sizeof(path), "%s/%s", l->secrets, op->secret_name);
	nyx_buf_init(out, SECRET_MAX);
	out->secret = true;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0 || !state_file_ok(&st) ||
	    nyx_buf_read_fd(out, fd) < 0) {
		if (fd >= 0)
			close(fd);
		nyx_buf_free(out);
		return nyx_err_set(err, NYX_EXIT_DATAERR, "secret_missing",
		    "the secret material of %s is missing or unreadable",
		    op->handle);
	}
	close(fd);
	if (nyx_sha256_hex(out->data ? out->data : "", out->len, got) < 0 ||
	    strcmp(got, op->secret_sha256) != 0) {
		nyx_buf_free(out);
		return nyx_err_set(err, NYX_EXIT_DATAERR, "secret_tampered",
		    "the secret material of %s does not match its digest; it "
		    "will not be used",
		    op->handle);
	}
	return 0;
}

int
nyx_ledger_owner(char out[128])
{
	char host[64] = "", hex[17];

	if (gethostname(host, sizeof(host) - 1) < 0 ||
	    nyx_random_hex(hex, 8) < 0)
		return -1;
	host[strcspn(host, ":")] = '\0';
	snprintf(out, 128, "%s:%ld:%s", host, (long)getpid(), hex);
	return 0;
}

/* Whether a lease owner named a process on this host that is gone. */
static bool
owner_gone(const char *owner)
{
	char host[64] = "", *end;
	size_t n;
	long pid;

	if (owner == NULL || gethostname(host, sizeof(host) - 1) < 0)
		return false;
	host[strcspn(host, ":")] = '\0';
	n = strlen(host);
	if (strncmp(owner, host, n) != 0 || owner[n] != ':')
		return false;
	pid = strtol(owner + n + 1, &end, 10);
	if (pid <= 0 || *end != ':')
		return false;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static int
claim_if(struct nyx_ledger *l, const char *handle, const char *owner,
    int64_t until, const char *sql, const char *arg, int64_t now_ms)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	nyx_ledger_bind_text(st, 1, owner);
	sqlite3_bind_int64(st, 2, until);
	nyx_ledger_bind_text(st, 3, handle);
	nyx_ledger_bind_text(st, 4, arg);
	if (now_ms >= 0)
		sqlite3_bind_int64(st, 5, now_ms);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return -1;
	return sqlite3_changes(l->db) == 1 ? 1 : 0;
}

int
nyx_ledger_claim(struct nyx_ledger *l, const char *handle, const char *owner,
    int64_t now_ms, int64_t lease_ms, struct nyx_err *err)
{
	/* one conditional UPDATE: free, ours, or abandoned (expired) */
	static const char sql[] =
	    "UPDATE operations SET lease_owner = ?, lease_until_ms = ? "
	    "WHERE handle = ? AND (lease_owner IS NULL OR lease_owner = ? "
	    "OR lease_until_ms < ?)";
	/* or its holder is known dead: take it only from that holder */
	static const char take[] =
	    "UPDATE operations SET lease_owner = ?, lease_until_ms = ? "
	    "WHERE handle = ? AND lease_owner = ?";
	sqlite3_stmt *st;
	char *holder = NULL;
	int rc;

	rc = claim_if(l, handle, owner, now_ms + lease_ms, sql, owner, now_ms);
	if (rc != 0)
		return rc < 0 ? nyx_ledger_db_fail(l, err, "claim") : 1;
	if (sqlite3_prepare_v2(l->db,
	        "SELECT lease_owner FROM operations WHERE handle = ?", -1, &st,
	        NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "claim");
	nyx_ledger_bind_text(st, 1, handle);
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) == SQLITE_TEXT)
		holder = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	rc = 0;
	if (owner_gone(holder))
		rc = claim_if(
		    l, handle, owner, now_ms + lease_ms, take, holder, -1);
	free(holder);
	return rc < 0 ? nyx_ledger_db_fail(l, err, "claim") : rc;
}

int
nyx_ledger_release(struct nyx_ledger *l, const char *handle, const char *owner,
    struct nyx_err *err)
{
	static const char sql[] =
	    "UPDATE operations SET lease_owner = NULL, lease_until_ms = 0 "
	    "WHERE handle = ? AND lease_owner = ?";
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "release");
	nyx_ledger_bind_text(st, 1, handle);
	nyx_ledger_bind_text(st, 2, owner);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : nyx_ledger_db_fail(l, err, "release");
}

int
nyx_ledger_counter_add(struct nyx_ledger *l, const char *name, int64_t delta,
    int64_t *total, struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(l->db,
	        "INSERT INTO counters (k, v) VALUES (?1, ?2) ON CONFLICT(k) "
	        "DO UPDATE SET v = v + ?2 RETURNING v",
	        -1, &st, NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "counter");
	nyx_ledger_bind_text(st, 1, name);
	sqlite3_bind_int64(st, 2, delta);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*total = sqlite3_column_int64(st, 0);
	/* RETURNING: the row is written when the statement is reset */
	rc = rc == SQLITE_ROW ? sqlite3_step(st) : rc;
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : nyx_ledger_db_fail(l, err, "counter");
}

int
nyx_ledger_stats(
    struct nyx_ledger *l, jv *by_status, int64_t last[3], struct nyx_err *err)
{
	sqlite3_stmt *st;
	int rc;

	*by_status = jv_object();
	last[0] = last[1] = last[2] = 0;
	if (sqlite3_prepare_v2(l->db,
	        "SELECT status, count(*) FROM operations GROUP BY status", -1,
	        &st, NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "stats");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		*by_status = jv_object_set(*by_status,
		    jv_string((const char *)sqlite3_column_text(st, 0)),
		    jv_number((double)sqlite3_column_int64(st, 1)));
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return nyx_ledger_db_fail(l, err, "stats");
	/* the tool's exit: 0 success, 4 uncertain, anything else failure */
	if (sqlite3_prepare_v2(l->db,
	        "SELECT CASE exit_code WHEN 0 THEN 0 WHEN 4 THEN 2 ELSE 1 END, "
	        "max(max(updated_at_ms, created_at_ms)) FROM operations "
	        "WHERE terminal = 1 GROUP BY 1",
	        -1, &st, NULL) != SQLITE_OK)
		return nyx_ledger_db_fail(l, err, "stats");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int k = sqlite3_column_int(st, 0);

		if (k >= 0 && k < 3)
			last[k] = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : nyx_ledger_db_fail(l, err, "stats");
}
