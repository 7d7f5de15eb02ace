#include "nyx_audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nyx_buf.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_time.h"

#define LINE_MAX_BYTES (64 * 1024)

int
nyx_audit_id(const struct nyx_audit_subject *s, const char *phase,
    const char *approval_id, char *out)
{
	struct nyx_digest *d = nyx_digest_new();
	char hex[NYX_SHA256_HEX];
	bool waiting = strcmp(phase, "waiting_approval") == 0;

	if (d == NULL)
		return -1;
	nyx_digest_add(d, s->owner_kind);
	nyx_digest_add(d, s->owner);
	nyx_digest_add(d, s->request_id);
	nyx_digest_add(d, s->call_id);
	if (waiting)
		nyx_digest_add(d, approval_id);
	if (nyx_digest_finish(d, hex) < 0)
		return -1;
	snprintf(out, NYX_AUDIT_ID_MAX, "tool:v1:%s:%s",
	    waiting ? "waiting-approval" : phase, hex);
	return 0;
}

/* W3C trace context from the environment; nulls when absent or unsafe. */
static jv
correlation(void)
{
	const char *tp = getenv("TRACEPARENT"), *ts = getenv("TRACESTATE");
	jv c = jv_object();
	bool ok = tp != NULL && strlen(tp) == 55 &&
	    strspn(tp, "0123456789abcdef-") == 55 && tp[2] == '-' &&
	    tp[35] == '-' && tp[52] == '-';

	c = jv_object_set(c, jv_string("trace_id"),
	    ok ? jv_string_sized(tp + 3, 32) : jv_null());
	c = jv_object_set(c, jv_string("span_id"),
	    ok ? jv_string_sized(tp + 36, 16) : jv_null());
	c = jv_object_set(
	    c, jv_string("traceparent"), ok ? jv_string(tp) : jv_null());
	c = jv_object_set(c, jv_string("tracestate"),
	    ok && ts != NULL && strlen(ts) <= 512 &&
	            strspn(ts,
	                "abcdefghijklmnopqrstuvwxyz0123456789_-*/@=, "
	                "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == strlen(ts)
	        ? jv_string(ts)
	        : jv_null());
	/* the caller's own ids (PRODUCT 9), when they are safe ids */
	c = jv_object_set(c, jv_string("correlation_id"),
	    nyx_id_safe(getenv("NYX_CORRELATION_ID"))
	        ? jv_string(getenv("NYX_CORRELATION_ID"))
	        : jv_null());
	return jv_object_set(c, jv_string("causation_id"),
	    nyx_id_safe(getenv("NYX_CAUSATION_ID"))
	        ? jv_string(getenv("NYX_CAUSATION_ID"))
	        : jv_null());
}

static int
hash_of(jv v, char out[65])
{
	char *s = nyx_json_dump(v);
	int rc;

	if (s == NULL)
		return -1;
	rc = nyx_sha256_hex(s, strlen(s), out);
	free(s);
	return rc;
}

int
nyx_audit_hashes(jv rec, char content[65], char semantic[65])
{
	jv c = jv_copy(rec), corr;

	c = jv_object_delete(c, jv_string("occurred_at"));
	c = jv_object_delete(c, jv_string("recorded_at"));
	c = jv_object_delete(c, jv_string("content_hash"));
	if (hash_of(jv_copy(c), content) < 0) {
		jv_free(c);
		return -1;
	}
	corr = nyx_json_get(c, "correlation");
	if (jv_get_kind(corr) == JV_KIND_OBJECT) {
		corr = jv_object_delete(corr, jv_string("trace_id"));
		corr = jv_object_delete(corr, jv_string("span_id"));
		corr = jv_object_delete(corr, jv_string("traceparent"));
		corr = jv_object_delete(corr, jv_string("tracestate"));
		c = jv_object_set(c, jv_string("correlation"), corr);
	} else {
		jv_free(corr);
	}
	return hash_of(c, semantic);
}

jv
nyx_audit_record(const struct nyx_audit_subject *s, const char *phase,
    const char *approval_id, const struct nyx_audit_outcome *o,
    int64_t occurred_at_ms)
{
	char id[NYX_AUDIT_ID_MAX], t[NYX_TIME_STRLEN], h[65], sem[65];
	jv r = jv_object();

	if (nyx_audit_id(s, phase, approval_id, id) < 0)
		return jv_invalid();
	r = jv_object_set(r, jv_string("v"), jv_number(1));
	r = jv_object_set(r, jv_string("type"), jv_string("audit.record"));
	r = jv_object_set(r, jv_string("audit_id"), jv_string(id));
	r = jv_object_set(r, jv_string("phase"), jv_string(phase));
	r = jv_object_set(r, jv_string("tool"), jv_string(s->tool));
	r = jv_object_set(r, jv_string("owner"), jv_string(s->owner));
	r = jv_object_set(r, jv_string("request_id"), jv_string(s->request_id));
	r = jv_object_set(r, jv_string("call_id"), jv_string(s->call_id));
	if (approval_id != NULL)
		r = jv_object_set(
		    r, jv_string("approval_id"), jv_string(approval_id));
	r = jv_object_set(r, jv_string("correlation"), correlation());
	if (o != NULL) {
		jv oc = jv_object();

		oc = jv_object_set(
		    oc, jv_string("success"), jv_bool(o->success));
		oc = jv_object_set(
		    oc, jv_string("code"), nyx_json_str_or_null(o->code));
		oc = jv_object_set(
		    oc, jv_string("exit_code"), jv_number(o->exit_code));
		oc = jv_object_set(
		    oc, jv_string("kind"), nyx_json_str_or_null(o->kind));
		oc = jv_object_set(oc, jv_string("operation_id"),
		    nyx_json_str_or_null(o->operation_id));
		oc = jv_object_set(oc, jv_string("failure_stage"),
		    nyx_json_str_or_null(o->failure_stage));
		oc = jv_object_set(
		    oc, jv_string("retryable"), jv_bool(o->retryable));
		r = jv_object_set(r, jv_string("outcome"), oc);
	} else {
		r = jv_object_set(r, jv_string("outcome"), jv_null());
	}
	nyx_time_format(occurred_at_ms, t);
	r = jv_object_set(r, jv_string("occurred_at"), jv_string(t));
	nyx_time_format(nyx_now_ms(), t);
	r = jv_object_set(r, jv_string("recorded_at"), jv_string(t));
	if (nyx_audit_hashes(r, h, sem) < 0) {
		jv_free(r);
		return jv_invalid();
	}
	return jv_object_set(r, jv_string("content_hash"), jv_string(h));
}

static int
audit_fail(struct nyx_err *err, const char *path, int e)
{
	return nyx_err_set(err, NYX_EXIT_CANTCREAT, "audit_unavailable",
	    "cannot append to %s: %s", path, strerror(e));
}

/* Index the lines of the file from the index's end to the file's. */
static int
catch_up(struct nyx_ledger *l, int fd, const char *path, int64_t size,
    struct nyx_err *err)
{
	int64_t covered, off;
	struct nyx_buf b = NYX_BUF_ZERO;
	size_t start = 0, i;

	if (nyx_ledger_audit_covered(l, &covered, err) < 0)
		return -1;
	if (covered == size)
		return 0;
	if (covered > size) { /* truncated or replaced: start again */
		if (nyx_ledger_audit_reset(l, err) < 0)
			return -1;
		covered = 0;
	}
	nyx_buf_init(&b, (size_t)(size - covered) + 1);
	if (nyx_buf_reserve(&b, (size_t)(size - covered)) < 0)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	for (off = covered; off < size;) {
		ssize_t n = pread(fd, b.data + (off - covered),
		    (size_t)(size - off), (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			nyx_buf_free(&b);
			return audit_fail(err, path, n < 0 ? errno : EIO);
		}
		off += n;
	}
	b.len = (size_t)(size - covered);
	for (i = 0; i < b.len; i++) {
		jv rec;
		char c[65], s[65];
		const char *id;

		if (b.data[i] != '\n')
			continue;
		rec = nyx_json_parse(b.data + start, i - start);
		id = nyx_json_peek_str(rec, "audit_id");
		if (id != NULL && nyx_audit_hashes(rec, c, s) == 0 &&
		    nyx_ledger_audit_index(
		        l, id, c, s, covered + (int64_t)i + 1, NULL, err) < 0) {
			jv_free(rec);
			nyx_buf_free(&b);
			return -1;
		}
		jv_free(rec);
		start = i + 1;
	}
	nyx_buf_free(&b);
	/* a torn last line (no newline) stays unindexed */
	return nyx_ledger_audit_index(
	    l, NULL, NULL, NULL, covered + (int64_t)start, NULL, err);
}

/* Whether the first record of recs (borrowed) is a terminal one. */
static bool
is_terminal(jv recs)
{
	jv rec = jv_array_get(jv_copy(recs), 0);
	const char *phase = nyx_json_peek_str(rec, "phase");
	bool yes = phase != NULL && strcmp(phase, "terminal") == 0;

	jv_free(rec);
	return yes;
}

/* The trail's lock (every writer's), and the file checked regular. */
static int
lock_trail(int fd, const char *path, struct stat *st, struct nyx_err *err)
{
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return audit_fail(err, path, errno);
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode))
		return audit_fail(err, path, errno ? errno : EINVAL);
	return 0;
}

/*
 * Append the records of the array recs (borrowed) in one write and one
 * fsync: res[i] says what became of each.  An intent named (one record
 * only) is deleted in the same commit as its index.
 */
static int
append(struct nyx_ledger *l, const char *state_dir, jv recs, const char *intent,
    bool fresh, enum nyx_audit_result *res, struct nyx_err *err)
{
	char path[700], oc[65], os[65];
	int n = jv_array_length(jv_copy(recs)), i, fd, rc = -1, found;
	struct {
		char content[65], semantic[65];
	} h[NYX_AUDIT_BATCH];
	struct nyx_buf lines = NYX_BUF_ZERO;
	struct stat st;
	size_t off = 0, len[NYX_AUDIT_BATCH];

	if (n < 1 || n > NYX_AUDIT_BATCH)
		return nyx_err_set(err, NYX_EXIT_SOFTWARE, "audit_batch",
		    "an audit batch of %d records", n);
	for (i = 0; i < n; i++) {
		jv rec = jv_array_get(jv_copy(recs), i);
		const char *id = nyx_json_peek_str(rec, "audit_id");
		const char *claimed = nyx_json_peek_str(rec, "content_hash");
		bool bad = id == NULL || claimed == NULL ||
		    nyx_audit_hashes(rec, h[i].content, h[i].semantic) < 0 ||
		    strcmp(claimed, h[i].content) != 0;

		jv_free(rec);
		if (bad)
			return nyx_err_set(err, NYX_EXIT_DATAERR,
			    "audit_record_invalid",
			    "an audit record without an id or with a "
			    "content_hash that does not match its content");
	}
	snprintf(path, sizeof(path), "%s/audit.jsonl", state_dir);
	fd = open(
	    path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return audit_fail(err, path, errno);
	/* audit-replay and the other tools may append at the same time */
	if (lock_trail(fd, path, &st, err) < 0)
		goto out;
	/* a fresh run's records need neither a look-up nor an index now */
	if (!fresh) {
		int rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

		if (rfd < 0) {
			rc = audit_fail(err, path, errno);
			goto out;
		}
		rc = catch_up(l, rfd, path, (int64_t)st.st_size, err);
		close(rfd);
		if (rc < 0)
			goto out;
		rc = -1;
	}
	for (i = 0; i < n; i++) {
		jv rec = jv_array_get(jv_copy(recs), i);
		const char *id = nyx_json_peek_str(rec, "audit_id");
		char *line = NULL;
		int j;

		found = 0;
		/* an id an earlier record of the batch holds: judged
		 * against that one */
		for (j = 0; j < i && !found; j++) {
			jv o = jv_array_get(jv_copy(recs), j);

			if (strcmp(nyx_json_peek_str(o, "audit_id"), id) == 0) {
				memcpy(oc, h[j].content, sizeof(oc));
				memcpy(os, h[j].semantic, sizeof(os));
				found = 1;
			}
			jv_free(o);
		}
		if (!found && !fresh)
			found = nyx_ledger_audit_lookup(l, id, oc, os, err);
		if (found < 0) {
			jv_free(rec);
			goto out;
		}
		if (found == 1) {
			res[i] = strcmp(oc, h[i].content) == 0 ||
			        strcmp(os, h[i].semantic) == 0
			    ? NYX_AUDIT_DUPLICATE
			    : NYX_AUDIT_CONFLICT;
			jv_free(rec);
			continue;
		}
		res[i] = NYX_AUDIT_APPENDED;
		line = nyx_json_dump(rec); /* consumes rec */
		len[i] = line != NULL ? strlen(line) + 1 : 0;
		if (line == NULL || nyx_buf_add(&lines, line, len[i] - 1) < 0 ||
		    nyx_buf_add(&lines, "\n", 1) < 0) {
			free(line);
			rc = nyx_err_set(
			    err, NYX_EXIT_OSERR, "oom", "out of memory");
			goto out;
		}
		free(line);
	}
	while (off < lines.len) {
		ssize_t w = write(fd, lines.data + off, lines.len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;

			/* never leave a torn line behind */
			if (ftruncate(fd, st.st_size) < 0)
				nyx_log(NYX_LOG_WARN,
				    "cannot undo a partial "
				    "audit line");
			rc = audit_fail(err, path, e);
			goto out;
		}
		off += (size_t)w;
	}
	if (lines.len > 0 && fsync(fd) < 0) {
		rc = audit_fail(err, path, errno);
		goto out;
	}
	/*
	 * A fresh run's first records, and a run's terminal record (its last
	 * append) unless an intent is to be deleted with it, are indexed by
	 * the next catch-up (in any process), off the run's way.  The lines
	 * are synced; the index is only a cache of them.
	 */
	if (fresh || (intent == NULL && n == 1 && is_terminal(recs)))
		goto done;
	/* each line's index, in the order written; the last one covers the
	 * file to its new end */
	off = (size_t)st.st_size;
	for (i = 0; i < n; i++) {
		jv rec;

		if (res[i] != NYX_AUDIT_APPENDED)
			continue;
		rec = jv_array_get(jv_copy(recs), i);
		off += len[i];
		if (nyx_ledger_audit_index(l,
		        nyx_json_peek_str(rec, "audit_id"), h[i].content,
		        h[i].semantic, (int64_t)off, intent, err) < 0) {
			jv_free(rec);
			goto out;
		}
		jv_free(rec);
	}
done:
	rc = 0;
out:
	nyx_buf_free(&lines);
	close(fd); /* releases the lock */
	return rc;
}

/* A record whose id the trail holds with another fact stays frozen. */
static void
warn_conflict(const char *id)
{
	nyx_log(NYX_LOG_WARN,
	    "audit %s conflicts with the record already in the trail; the "
	    "intent is kept",
	    id);
}

/* One record (borrowed). */
static int
append_one(struct nyx_ledger *l, const char *state_dir, jv rec,
    const char *intent, enum nyx_audit_result *res, struct nyx_err *err)
{
	jv recs = jv_array_append(jv_array(), jv_copy(rec));
	int rc = append(l, state_dir, recs, intent, false, res, err);

	jv_free(recs);
	return rc;
}

int
nyx_audit_append(struct nyx_ledger *l, const char *state_dir, jv rec,
    enum nyx_audit_result *res, struct nyx_err *err)
{
	return append_one(l, state_dir, rec, NULL, res, err);
}

int
nyx_audit_replay_intent(struct nyx_ledger *l, const char *state_dir,
    const char *id, enum nyx_audit_result *out, struct nyx_err *err)
{
	char *doc = nyx_ledger_intent_get(l, id);
	jv rec = doc ? jv_parse(doc) : jv_invalid();
	enum nyx_audit_result res = NYX_AUDIT_CONFLICT;
	struct nyx_err e2 = NYX_ERR_ZERO;
	int rc;

	free(doc);
	if (jv_get_kind(rec) != JV_KIND_OBJECT) {
		jv_free(rec);
		return nyx_err_set(err, NYX_EXIT_DATAERR, "intent_invalid",
		    "the frozen audit intent %s is unreadable", id);
	}
	if (append_one(l, state_dir, rec, id, &res, &e2) < 0) {
		jv_free(rec);
		nyx_log(NYX_LOG_WARN, "audit intent %s stays frozen: %s", id,
		    e2.message);
		*err = e2;
		return 1;
	}
	jv_free(rec);
	if (out != NULL)
		*out = res;
	if (res == NYX_AUDIT_CONFLICT) {
		warn_conflict(id);
		return 2;
	}
	if (res == NYX_AUDIT_APPENDED)
		return 0; /* deleted with the index, in one commit */
	rc = nyx_ledger_intent_done(l, id, err);
	return rc < 0 ? -1 : 0;
}

/* As nyx_audit_emit(), for a fresh subject's records or not. */
static int
emit(struct nyx_ledger *l, const char *state_dir, jv recs, const char *handle,
    bool fresh, struct nyx_err *err)
{
	enum nyx_audit_result res[NYX_AUDIT_BATCH];
	struct nyx_err aerr = NYX_ERR_ZERO;
	int n = jv_array_length(jv_copy(recs)), i, rc = 0;
	bool appended;

	for (i = 0; i < NYX_AUDIT_BATCH; i++)
		res[i] = NYX_AUDIT_CONFLICT;
	appended = append(l, state_dir, recs, NULL, fresh, res, &aerr) == 0;
	for (i = 0; i < n; i++) {
		jv rec;
		const char *id;
		char *doc;

		if (appended && res[i] != NYX_AUDIT_CONFLICT)
			continue;
		/* not in the trail: frozen, for audit-replay (an intent
		 * already frozen under this id is kept, never replaced) */
		rec = jv_array_get(jv_copy(recs), i);
		id = nyx_json_peek_str(rec, "audit_id");
		doc = nyx_json_dump(jv_copy(rec));
		if (id == NULL || doc == NULL ||
		    nyx_ledger_intent_put(l, id, doc, handle, err) < 0) {
			free(doc);
			jv_free(rec);
			if (id == NULL || doc == NULL)
				nyx_err_set(err, NYX_EXIT_OSERR, "oom",
				    "out of memory");
			return -1;
		}
		free(doc);
		if (appended) {
			warn_conflict(id);
			rc = 2;
		} else if (rc == 0) {
			*err = aerr;
			rc = 1;
		}
		jv_free(rec);
	}
	return rc;
}

int
nyx_audit_emit(struct nyx_ledger *l, const char *state_dir, jv recs,
    const char *handle, struct nyx_err *err)
{
	return emit(l, state_dir, recs, handle, false, err);
}

int
nyx_audit_catch_up(
    struct nyx_ledger *l, const char *state_dir, struct nyx_err *err)
{
	char path[700];
	struct stat st;
	int fd, rc = -1;

	snprintf(path, sizeof(path), "%s/audit.jsonl", state_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : audit_fail(err, path, errno);
	if (lock_trail(fd, path, &st, err) < 0)
		goto out;
	rc = catch_up(l, fd, path, (int64_t)st.st_size, err);
out:
	close(fd); /* releases the lock */
	return rc;
}

struct nyx_audit_outcome
nyx_audit_outcome_of(const struct nyx_exec_outcome *oc)
{
	struct nyx_audit_outcome ao;

	ao.success = oc->success;
	ao.code = oc->code;
	ao.kind = oc->kind;
	ao.exit_code = oc->exit;
	ao.operation_id = NULL;
	ao.failure_stage =
	    oc->success ? NULL : (oc->stage != NULL ? oc->stage : "execute");
	ao.retryable = !oc->success && oc->exit == NYX_EXIT_TEMPFAIL;
	return ao;
}

/* Build, append (or freeze) and log the records of the phases. */
static int
note(struct nyx_ledger *l, const struct nyx_audit_subject *s,
    const char *const *phases, int n, const char *approval_id,
    const char *handle, const struct nyx_exec_outcome *oc)
{
	struct nyx_err err = NYX_ERR_ZERO;
	struct nyx_audit_outcome ao;
	jv recs = jv_array();
	int64_t now = nyx_now_ms();
	int i, rc;

	if (oc != NULL)
		ao = nyx_audit_outcome_of(oc);
	for (i = 0; i < n && jv_is_valid(recs); i++) {
		jv rec = nyx_audit_record(
		    s, phases[i], approval_id, oc ? &ao : NULL, now);

		recs = jv_is_valid(rec) ? jv_array_append(recs, rec)
		                        : (jv_free(recs), rec);
	}
	/* a fresh run's records cannot be there yet (nyx_audit_subject) */
	rc = jv_is_valid(recs) ? emit(l, nyx_ledger_dir(l), recs, handle,
	                             s->fresh && approval_id == NULL, &err)
	                       : -1;
	if (rc != 0)
		nyx_log(NYX_LOG_WARN,
		    "the %s%s%s audit record%s frozen for audit-replay%s%s",
		    phases[0], n > 1 ? " and " : "", n > 1 ? phases[n - 1] : "",
		    n > 1 ? "s are" : " is", err.message[0] ? ": " : "",
		    err.message);
	jv_free(recs);
	return rc;
}

int
nyx_audit_note(struct nyx_ledger *l, const struct nyx_audit_subject *s,
    const char *phase, const char *approval_id, const char *handle,
    const struct nyx_exec_outcome *oc)
{
	return note(l, s, &phase, 1, approval_id, handle, oc);
}

int
nyx_audit_note_started(
    struct nyx_ledger *l, const struct nyx_audit_subject *s, const char *handle)
{
	static const char *const phases[] = {"admission", "running"};

	return note(l, s, phases, 2, NULL, handle, NULL);
}
