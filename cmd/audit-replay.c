/*
 * audit-replay: complete the audit trail.  Appends every frozen audit
 * intent of the ledger (never calling a provider), or the records of
 * another host's log (--from), under the same duplicate and conflict
 * rules, and prints one audit.replay summary record; --verify recomputes
 * every content hash of a log, looks for an id written twice with two
 * different facts, and prints one audit.verify record.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_audit.h"
#include "nyx_buf.h"
#include "tool/cli.h"
#include "nyx_config.h"
#include "nyx_err.h"
#include "nyx_json.h"
#include "nyx_ledger.h"
#include "nyx_log.h"
#include "nyx_time.h"

#define LOG_MAX_BYTES (256u * 1024 * 1024)

enum {
	OPT_FROM = 2000,
	OPT_VERIFY,
};

struct opts {
	const char *from;
	bool verify;
};

static const struct option longopts[] = {
    {"from", required_argument, NULL, OPT_FROM},
    {"verify", no_argument, NULL, OPT_VERIFY},
    {NULL, 0, NULL, 0},
};

static int
on_opt(int c, const char *arg, void *ctx)
{
	struct opts *o = ctx;

	switch (c) {
	case OPT_FROM:
		o->from = arg;
		break;
	case OPT_VERIFY:
		o->verify = true;
		break;
	default:
		return -1;
	}
	return 0;
}

static const struct nyx_cli_spec spec = {
    "[--from FILE] [--verify] [common options]",
    "      --from FILE         append the records of another audit log\n"
    "                          (- for standard input)\n"
    "      --verify            recompute every content hash of the log\n"
    "                          (audit.jsonl, or --from FILE); append nothing\n",
    NYX_CLI_STATE,
    "",
    longopts,
    on_opt,
};

/* An id and the hashes of a valid line, for --verify's conflicts. */
struct seen {
	char *id;
	char content[65], semantic[65];
};

struct counts {
	long checked; /* lines (or intents) examined */
	long appended, duplicate, conflict, pending, invalid;
	struct seen *seen; /* --verify: the valid lines */
	size_t nseen;
};

/* Why a line is not a valid audit record, or NULL. */
static const char *
check_line(jv rec)
{
	const char *id = nyx_json_peek_str(rec, "audit_id");
	const char *h = nyx_json_peek_str(rec, "content_hash");
	const char *type = nyx_json_peek_str(rec, "type");
	char c[65], s[65];

	if (jv_get_kind(rec) != JV_KIND_OBJECT)
		return "malformed (not a JSON object)";
	if (type == NULL || strcmp(type, "audit.record") != 0 || id == NULL ||
	    strncmp(id, "tool:v1:", 8) != 0 || h == NULL)
		return "malformed (not an audit.record with an id and a hash)";
	if (nyx_audit_hashes(rec, c, s) < 0 || strcmp(c, h) != 0)
		return "tampered (content_hash does not match the content)";
	return NULL;
}

/* Keep a valid line's id and hashes (--verify). */
static int
remember(struct counts *n, jv rec)
{
	struct seen *sv;

	if ((n->nseen & (n->nseen + 1)) == 0) { /* 0, 1, 3, 7, ...: grow */
		sv = realloc(n->seen, (n->nseen * 2 + 2) * sizeof(*sv));
		if (sv == NULL)
			return -1;
		n->seen = sv;
	}
	sv = &n->seen[n->nseen];
	sv->id = strdup(nyx_json_peek_str(rec, "audit_id"));
	if (sv->id == NULL ||
	    nyx_audit_hashes(rec, sv->content, sv->semantic) < 0) {
		free(sv->id);
		return -1;
	}
	n->nseen++;
	return 0;
}

static int
by_id(const void *a, const void *b)
{
	const struct seen *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	/* equal ids stay in the order of the log */
	return c != 0 ? c : (x < y ? -1 : x > y);
}

/*
 * The lines whose id an earlier line already holds with another fact
 * (neither hash matches, PRODUCT 9): a conflict each.  A line written
 * twice with the same fact is only a duplicate, and still valid.
 */
static long
conflicts(struct counts *n)
{
	size_t i, first = 0;
	long c = 0;

	qsort(n->seen, n->nseen, sizeof(*n->seen), by_id);
	for (i = 1; i < n->nseen; i++) {
		const struct seen *a, *b = &n->seen[i];

		if (strcmp(n->seen[first].id, b->id) != 0) {
			first = i;
			continue;
		}
		a = &n->seen[first];
		if (strcmp(a->content, b->content) != 0 &&
		    strcmp(a->semantic, b->semantic) != 0) {
			nyx_log_line("%s is in the trail twice, with two "
			             "different facts",
			    b->id);
			c++;
		}
	}
	return c;
}

/*
 * Each line of a log: verify it, and unless verify_only append it.  A
 * record that cannot be appended is frozen as an intent (pending).
 */
static int
each_line(struct nyx_ledger *l, const char *path, bool verify_only,
    struct counts *n, struct nyx_err *err)
{
	struct nyx_buf b = NYX_BUF_ZERO;
	size_t start = 0, i, line = 0;
	bool std = strcmp(path, "-") == 0;

	nyx_buf_init(&b, LOG_MAX_BYTES);
	if ((std ? nyx_buf_read_fd(&b, 0) : nyx_buf_read_file(&b, path)) < 0) {
		int e = errno;

		nyx_buf_free(&b);
		if (e == ENOENT && !std && verify_only)
			return 0; /* no log yet: nothing to verify */
		return nyx_err_set(err,
		    e == EFBIG ? NYX_EXIT_DATAERR : NYX_EXIT_NOINPUT,
		    "input_unreadable", "cannot read %s: %s", path,
		    strerror(e));
	}
	for (i = 0; i <= b.len; i++) {
		const char *why;
		jv rec;

		if (i < b.len && b.data[i] != '\n')
			continue;
		if (i == start) { /* an empty line, or the end */
			start = i + 1;
			line++;
			continue;
		}
		line++;
		n->checked++;
		rec = nyx_json_parse(b.data + start, i - start);
		start = i + 1;
		why = check_line(rec);
		if (why != NULL) {
			nyx_log_line(
			    "%s:%zu: %s", std ? "stdin" : path, line, why);
			n->invalid++;
		} else if (verify_only) {
			if (remember(n, rec) < 0) {
				jv_free(rec);
				nyx_buf_free(&b);
				return nyx_err_set(err, NYX_EXIT_OSERR, "oom",
				    "out of memory");
			}
		} else {
			enum nyx_audit_result res;
			struct nyx_err aerr = NYX_ERR_ZERO;

			if (nyx_audit_append(
			        l, nyx_ledger_dir(l), rec, &res, &aerr) == 0) {
				if (res == NYX_AUDIT_APPENDED)
					n->appended++;
				else if (res == NYX_AUDIT_DUPLICATE)
					n->duplicate++;
				else {
					nyx_log_line("%s:%zu: conflicts with "
					             "%s in the trail",
					    std ? "stdin" : path, line,
					    nyx_json_peek_str(rec, "audit_id"));
					n->conflict++;
				}
			} else {
				char *doc = nyx_json_dump(jv_copy(rec));

				nyx_log(NYX_LOG_WARN, "%s", aerr.message);
				if (doc == NULL ||
				    nyx_ledger_intent_put(l,
				        nyx_json_peek_str(rec, "audit_id"), doc,
				        NULL, err) < 0) {
					free(doc);
					jv_free(rec);
					nyx_buf_free(&b);
					return -1;
				}
				free(doc);
			}
		}
		jv_free(rec);
	}
	nyx_buf_free(&b);
	return 0;
}

static int
replay_intents(struct nyx_ledger *l, struct counts *n, struct nyx_err *err)
{
	char **ids = NULL;
	size_t i;

	if (nyx_ledger_intents(l, NULL, &ids, err) < 0)
		return -1;
	for (i = 0; ids[i] != NULL; i++) {
		enum nyx_audit_result res = NYX_AUDIT_CONFLICT;
		struct nyx_err aerr = NYX_ERR_ZERO;
		int rc = nyx_audit_replay_intent(
		    l, nyx_ledger_dir(l), ids[i], &res, &aerr);

		n->checked++;
		if (rc < 0) {
			nyx_ledger_free_list(ids);
			*err = aerr;
			return -1;
		}
		if (rc == 0 && res == NYX_AUDIT_APPENDED)
			n->appended++;
		else if (rc == 0)
			n->duplicate++;
		else if (rc == 2)
			n->conflict++;
	}
	nyx_ledger_free_list(ids);
	return 0;
}

/* The audit.verify record (PRODUCT 9); 1 unless every line checks out
 * and nothing waits in the ledger. */
static int
verified(const struct counts *n)
{
	long ok = n->checked - n->invalid - n->conflict;
	jv rec = jv_object();
	int code;

	rec = jv_object_set(rec, jv_string("v"), jv_number(1));
	rec = jv_object_set(rec, jv_string("type"), jv_string("audit.verify"));
	rec = jv_object_set(
	    rec, jv_string("checked"), jv_number((double)n->checked));
	rec = jv_object_set(rec, jv_string("ok"), jv_number((double)ok));
	rec =
	    jv_object_set(rec, jv_string("bad"), jv_number((double)n->invalid));
	rec = jv_object_set(
	    rec, jv_string("conflict"), jv_number((double)n->conflict));
	rec = jv_object_set(
	    rec, jv_string("pending"), jv_number((double)n->pending));
	rec = jv_object_set(
	    rec, jv_string("diagnostic_id"), jv_string(nyx_cli_diag()));
	nyx_log_line("verified %ld record(s): %ld valid, %ld invalid, "
	             "%ld in conflict; %ld intent(s) pending",
	    n->checked, ok, n->invalid, n->conflict, n->pending);
	code = nyx_cli_emit(rec);
	if (code == 0 && (n->invalid || n->conflict || n->pending))
		code = NYX_EXIT_NO;
	return code;
}

static int
run(const struct opts *o, const struct nyx_common *cm, struct nyx_err *err)
{
	struct nyx_settings s;
	struct nyx_ledger *l = NULL;
	struct counts n = {.checked = 0};
	char **left = NULL;
	char path[700];
	jv rec;
	int code = -1;

	nyx_settings_init(&s);
	if (nyx_settings_resolve(cm, &s, err) < 0 ||
	    nyx_ledger_open(s.state_dir, &l, err) < 0)
		goto out;
	if (o->verify) {
		snprintf(path, sizeof(path), "%s/audit.jsonl", s.state_dir);
		if (each_line(l, o->from ? o->from : path, true, &n, err) < 0 ||
		    nyx_ledger_intents(l, NULL, &left, err) < 0)
			goto out;
		for (; left[n.pending] != NULL; n.pending++)
			;
		n.conflict = conflicts(&n);
		code = verified(&n);
		goto out;
	} else {
		/* the frozen intents first: they are this host's own */
		if (replay_intents(l, &n, err) < 0)
			goto out;
		if (o->from != NULL &&
		    each_line(l, o->from, false, &n, err) < 0)
			goto out;
		if (nyx_ledger_intents(l, NULL, &left, err) < 0)
			goto out;
		for (; left[n.pending] != NULL; n.pending++)
			;
	}
	rec = jv_object();
	rec = jv_object_set(rec, jv_string("v"), jv_number(1));
	rec = jv_object_set(rec, jv_string("type"), jv_string("audit.replay"));
	rec = jv_object_set(
	    rec, jv_string("checked"), jv_number((double)n.checked));
	rec = jv_object_set(
	    rec, jv_string("appended"), jv_number((double)n.appended));
	rec = jv_object_set(
	    rec, jv_string("duplicate"), jv_number((double)n.duplicate));
	rec = jv_object_set(
	    rec, jv_string("conflict"), jv_number((double)n.conflict));
	rec = jv_object_set(
	    rec, jv_string("pending"), jv_number((double)n.pending));
	rec = jv_object_set(
	    rec, jv_string("invalid"), jv_number((double)n.invalid));
	rec = jv_object_set(
	    rec, jv_string("diagnostic_id"), jv_string(nyx_cli_diag()));
	code = nyx_cli_emit(rec);
	if (code == 0 && (n.conflict || n.pending || n.invalid))
		code = NYX_EXIT_NO;
out:
	while (n.nseen > 0)
		free(n.seen[--n.nseen].id);
	free(n.seen);
	nyx_ledger_free_list(left);
	nyx_ledger_close(l);
	nyx_settings_free(&s);
	return code;
}

int
main(int argc, char **argv)
{
	struct nyx_err err = NYX_ERR_ZERO;
	struct nyx_common cm;
	struct opts o;
	int idx, code;

	memset(&o, 0, sizeof(o));
	nyx_cli_init("audit-replay");
	idx = nyx_cli_parse(argc, argv, &spec, &o, &cm);
	if (idx < argc)
		nyx_cli_usage("unexpected argument '%s'", argv[idx]);
	if (nyx_time_init(&err) < 0)
		return nyx_cli_fail(&err);
	code = run(&o, &cm, &err);
	if (code < 0)
		return nyx_cli_fail(&err);
	return nyx_cli_finish(code);
}
