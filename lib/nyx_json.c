#include "nyx_json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nyx_time.h"

/* A single input document may not exceed this many bytes. */
#define NYX_JSON_MAX_DOC (64u * 1024 * 1024)

int
nyx_json_write(jv v, FILE *f, bool pretty)
{
	int flags = JV_PRINT_SORTED;

	if (pretty)
		flags |= JV_PRINT_PRETTY | JV_PRINT_INDENT_FLAGS(2);
	errno = 0;
	jv_dumpf(v, f, flags);
	if (fputc('\n', f) == EOF || fflush(f) == EOF || ferror(f)) {
		if (errno == 0)
			errno = EIO;
		return -1;
	}
	return 0;
}

char *
nyx_json_dump(jv v)
{
	jv s = jv_dump_string(v, JV_PRINT_SORTED);
	char *out = strdup(jv_string_value(s));

	jv_free(s);
	return out;
}

jv
nyx_json_parse(const char *buf, size_t len)
{
	return jv_parse_sized(buf, (int)(len > 0x7fffffff ? 0x7fffffff : len));
}

struct nyx_json_reader {
	int fd;
	const char *name;
	jv_parser *p;
	char buf[65536];
	size_t since_value; /* bytes fed since the last complete document */
	bool eof;
};

struct nyx_json_reader *
nyx_json_reader_new(int fd, const char *name)
{
	struct nyx_json_reader *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->fd = fd;
	r->name = name;
	r->p = jv_parser_new(0);
	if (r->p == NULL) {
		free(r);
		return NULL;
	}
	return r;
}

void
nyx_json_reader_free(struct nyx_json_reader *r)
{
	if (r == NULL)
		return;
	jv_parser_free(r->p);
	free(r);
}

int
nyx_json_reader_next(struct nyx_json_reader *r, jv *out, struct nyx_err *err)
{
	for (;;) {
		jv v = jv_parser_next(r->p);
		ssize_t n;

		if (jv_is_valid(v)) {
			r->since_value = 0;
			*out = v;
			return 1;
		}
		if (jv_invalid_has_msg(jv_copy(v))) {
			jv msg = jv_invalid_get_msg(v);

			nyx_err_set(err, NYX_EXIT_DATAERR, "input_invalid_json",
			    "%s is not valid JSON: %s", r->name,
			    jv_get_kind(msg) == JV_KIND_STRING
			        ? jv_string_value(msg)
			        : "parse error");
			jv_free(msg);
			return -1;
		}
		jv_free(v);
		if (r->eof)
			return 0;
		n = read(r->fd, r->buf, sizeof(r->buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			nyx_err_set(err, NYX_EXIT_IOERR, "input_read_failed",
			    "cannot read %s: %s", r->name, strerror(errno));
			return -1;
		}
		r->since_value += (size_t)n;
		if (r->since_value > NYX_JSON_MAX_DOC) {
			nyx_err_set(err, NYX_EXIT_DATAERR, "input_too_large",
			    "%s: a document exceeds %u bytes", r->name,
			    NYX_JSON_MAX_DOC);
			return -1;
		}
		if (n == 0)
			r->eof = true;
		jv_parser_set_buf(r->p, r->buf, (int)n, n != 0);
	}
}

jv
nyx_json_get(jv obj, const char *key)
{
	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return jv_invalid();
	return jv_object_get(jv_copy(obj), jv_string(key));
}

const char *
nyx_json_peek_str(jv obj, const char *key)
{
	jv v = nyx_json_get(obj, key);
	const char *s = NULL;

	/* obj keeps its own reference, so the bytes outlive v */
	if (jv_get_kind(v) == JV_KIND_STRING)
		s = jv_string_value(v);
	jv_free(v);
	return s;
}

jv_kind
nyx_json_kind(jv obj, const char *key)
{
	jv v = nyx_json_get(obj, key);
	jv_kind k = jv_get_kind(v);

	jv_free(v);
	return k;
}

bool
nyx_json_has(jv obj, const char *key)
{
	return nyx_json_kind(obj, key) != JV_KIND_INVALID;
}

bool
nyx_json_keys_within(jv obj, const char *const *allowed)
{
	bool ok = jv_get_kind(obj) == JV_KIND_OBJECT;
	int iter;

	for (iter = ok ? jv_object_iter(obj) : -1;
	     ok && jv_object_iter_valid(obj, iter);
	     iter = jv_object_iter_next(obj, iter)) {
		jv k = jv_object_iter_key(obj, iter);
		size_t i;

		ok = false;
		for (i = 0; allowed[i] != NULL && !ok; i++)
			ok = strcmp(jv_string_value(k), allowed[i]) == 0;
		jv_free(k);
	}
	return ok;
}

int
nyx_json_bool(jv obj, const char *key)
{
	switch (nyx_json_kind(obj, key)) {
	case JV_KIND_TRUE:
		return 1;
	case JV_KIND_FALSE:
		return 0;
	case JV_KIND_INVALID:
	case JV_KIND_NULL:
		return -1;
	default:
		return -2;
	}
}

jv
nyx_json_str_or_null(const char *s)
{
	return s ? jv_string(s) : jv_null();
}

bool
nyx_json_integral(jv v, double lo, double hi)
{
	double d;

	if (jv_get_kind(v) != JV_KIND_NUMBER)
		return false;
	d = jv_number_value(v);
	return isfinite(d) && d == floor(d) && d >= lo && d <= hi;
}

jv
nyx_json_time(int64_t ms)
{
	char t[NYX_TIME_STRLEN];

	if (ms <= 0)
		return jv_null();
	nyx_time_format(ms, t);
	return jv_string(t);
}
