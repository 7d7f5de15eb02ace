#include "table.h"

#include <stdlib.h>
#include <string.h>

#include "nyx_json.h"
#include "nyx_time.h"

#define MAX_COLS 10
#define WIDTH 80
#define MIN_CELL 8

struct col {
	const char *head;
	const char *path; /* dotted; "@age" the time since created_at */
};

struct layout {
	const char *type;
	struct col cols[MAX_COLS];
};

static const struct layout layouts[] = {
    {"route.admission",
        {{"STATUS", "status"}, {"CAPABILITY", "capability"},
            {"ROUTE", "route.user_service_id"}, {"SLUG", "route.slug"},
            {"OUTCOME", "outcome"}, {"BLOCKER", "blocker.code"}}},
    {"exec.result",
        {{"REQUEST", "request_id"}, {"SUCCESS", "success"},
            {"EXIT", "output.exit_code"}, {"MODE", "mode"},
            {"ELAPSED_MS", "elapsed_ms"}, {"ERROR", "error.code"},
            {"STDOUT", "output.stdout"}}},
    {"exec.receipt",
        {{"HANDLE", "handle"}, {"STATUS", "status"},
            {"OPERATION", "operation_id"}, {"NEXT_POLL", "next_poll_at"}}},
    {"exec.status",
        {{"HANDLE", "handle"}, {"AGE", "@age"}, {"REQUEST", "request_id"},
            {"LANGUAGE", "language"}, {"STATUS", "status"},
            {"ERROR", "error.code"}}},
    {"codex.result",
        {{"TARGET", "target"}, {"STATUS", "status"}, {"EXIT", "exit_code"},
            {"ELAPSED_MS", "elapsed_ms"}, {"ERROR", "error.code"}}},
    {"error", {{"CODE", "code"}, {"EXIT", "exit"}, {"MESSAGE", "message"}}},
};

/* The value at a dotted path as one line of text (heap), "" when absent. */
static char *
cell(jv rec, const char *path)
{
	jv v;
	char *out, *nl;
	const char *p = path;

	if (strcmp(path, "@age") == 0) {
		const char *t = nyx_json_peek_str(rec, "created_at");
		int64_t at, s;
		char buf[32];

		if (t == NULL || nyx_time_parse(t, &at) < 0)
			return strdup("");
		s = (nyx_now_ms() - at) / 1000;
		if (s < 0)
			s = 0;
		if (s < 120)
			snprintf(buf, sizeof(buf), "%llds", (long long)s);
		else if (s < 7200)
			snprintf(buf, sizeof(buf), "%lldm", (long long)s / 60);
		else if (s < 172800)
			snprintf(
			    buf, sizeof(buf), "%lldh", (long long)s / 3600);
		else
			snprintf(
			    buf, sizeof(buf), "%lldd", (long long)s / 86400);
		return strdup(buf);
	}
	v = jv_copy(rec);
	while (*p != '\0' && jv_get_kind(v) == JV_KIND_OBJECT) {
		size_t n = strcspn(p, ".");
		jv k = jv_string_sized(p, (int)n);

		v = jv_object_get(v, k);
		p += n + (p[n] == '.');
	}
	if (*p != '\0' || !jv_is_valid(v)) {
		jv_free(v);
		return strdup("");
	}
	switch (jv_get_kind(v)) {
	case JV_KIND_STRING:
		out = strdup(jv_string_value(v));
		break;
	case JV_KIND_NULL:
		out = strdup("");
		break;
	default: {
		jv s = jv_dump_string(jv_copy(v), 0);

		out = strdup(jv_string_value(s));
		jv_free(s);
	}
	}
	jv_free(v);
	if (out != NULL && (nl = strpbrk(out, "\r\n\t")) != NULL)
		*nl = '\0'; /* the first line */
	return out;
}

/* The generic columns: a record's scalar fields but the bookkeeping. */
static size_t
generic(jv rec, struct col *cols, char names[MAX_COLS][32],
    char paths[MAX_COLS][32])
{
	size_t n = 0;

	jv_object_foreach(jv_copy(rec), k, v)
	{
		const char *name = jv_string_value(k);
		jv_kind kind = jv_get_kind(v);

		if (n < MAX_COLS && strcmp(name, "v") != 0 &&
		    strcmp(name, "type") != 0 &&
		    strcmp(name, "diagnostic_id") != 0 &&
		    kind != JV_KIND_OBJECT && kind != JV_KIND_ARRAY) {
			size_t i;

			snprintf(names[n], 32, "%s", name);
			snprintf(paths[n], 32, "%s", name);
			for (i = 0; names[n][i] != '\0'; i++)
				if (names[n][i] >= 'a' && names[n][i] <= 'z')
					names[n][i] = (char)(names[n][i] - 32);
			cols[n].head = names[n];
			cols[n].path = paths[n];
			n++;
		}
		jv_free(k);
		jv_free(v);
	}
	return n;
}

static void
print_group(FILE *f, jv rows, int from, int to)
{
	jv first = jv_array_get(jv_copy(rows), from);
	const char *type = nyx_json_peek_str(first, "type");
	struct col cols[MAX_COLS];
	char names[MAX_COLS][32], paths[MAX_COLS][32], ***cells;
	size_t w[MAX_COLS], ncol = 0, i, total;
	bool used[MAX_COLS];
	int r, nrow = to - from;

	memset(cols, 0, sizeof(cols));
	for (i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (type != NULL && strcmp(type, layouts[i].type) == 0) {
			for (ncol = 0; ncol < MAX_COLS &&
			     layouts[i].cols[ncol].head != NULL;
			     ncol++)
				cols[ncol] = layouts[i].cols[ncol];
			break;
		}
	if (ncol == 0)
		ncol = generic(first, cols, names, paths);
	cells = calloc((size_t)nrow, sizeof(*cells));
	if (cells == NULL)
		goto out;
	for (i = 0; i < ncol; i++) {
		w[i] = strlen(cols[i].head);
		used[i] = false;
	}
	for (r = 0; r < nrow; r++) {
		jv rec = jv_array_get(jv_copy(rows), from + r);

		cells[r] = calloc(ncol, sizeof(char *));
		for (i = 0; cells[r] != NULL && i < ncol; i++) {
			cells[r][i] = cell(rec, cols[i].path);
			if (cells[r][i] != NULL && cells[r][i][0] != '\0') {
				used[i] = true;
				if (strlen(cells[r][i]) > w[i])
					w[i] = strlen(cells[r][i]);
			}
		}
		jv_free(rec);
	}
	/* fit 80 columns: narrow the widest until it fits */
	for (;;) {
		size_t widest = ncol;

		for (total = 0, i = 0; i < ncol; i++)
			if (used[i]) {
				total += w[i] + 2;
				if (widest == ncol || w[i] > w[widest])
					widest = i;
			}
		if (total <= WIDTH + 2 || widest == ncol ||
		    w[widest] <= MIN_CELL)
			break;
		w[widest]--;
	}
	for (r = -1; r < nrow; r++) {
		size_t last = ncol;
		char line[1024];
		size_t off = 0;

		for (i = 0; i < ncol; i++)
			if (used[i])
				last = i;
		for (i = 0; i < ncol && off < sizeof(line) - 1; i++) {
			const char *c = r < 0         ? cols[i].head
			    : cells[r] && cells[r][i] ? cells[r][i]
			                              : "";
			size_t n = strlen(c);
			int k;

			if (!used[i])
				continue;
			if (n > w[i])
				k = snprintf(line + off, sizeof(line) - off,
				    "%.*s...", (int)(w[i] - 3), c);
			else
				k = snprintf(line + off, sizeof(line) - off,
				    "%-*s", i == last ? 0 : (int)w[i], c);
			if (k < 0)
				break;
			off += (size_t)k < sizeof(line) - off
			    ? (size_t)k
			    : sizeof(line) - off - 1;
			if (i != last && off + 2 < sizeof(line)) {
				line[off++] = ' ';
				line[off++] = ' ';
				line[off] = '\0';
			}
		}
		fprintf(f, "%s\n", line);
	}
	for (r = 0; r < nrow; r++) {
		for (i = 0; cells[r] != NULL && i < ncol; i++)
			free(cells[r][i]);
		free(cells[r]);
	}
	free(cells);
out:
	jv_free(first);
}

void
nyx_table_print(FILE *f, jv rows)
{
	int n = jv_array_length(jv_copy(rows)), from = 0, i;

	for (i = 1; i <= n; i++) {
		jv a, b;
		const char *ta, *tb;
		bool same;

		if (i < n) {
			a = jv_array_get(jv_copy(rows), from);
			b = jv_array_get(jv_copy(rows), i);
			ta = nyx_json_peek_str(a, "type");
			tb = nyx_json_peek_str(b, "type");
			same = ta && tb && strcmp(ta, tb) == 0;
			jv_free(a);
			jv_free(b);
			if (same)
				continue;
		}
		if (from > 0)
			fputc('\n', f);
		print_group(f, rows, from, i);
		from = i;
	}
}
