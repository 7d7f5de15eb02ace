#include "nyx_json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nyx_buf.h"
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

/* ---- strict JSON: a push checker beside libjq ---- */

struct nyx_json_strict {
	const char *why; /* the first refusal, or NULL */
	int depth;
	/* per open container: an object's key set (jv object), or null */
	jv keys[NYX_JSON_MAX_DEPTH + 1];
	bool want_key[NYX_JSON_MAX_DEPTH + 1];
	/* inside a string */
	bool in_str, is_key, esc;
	/* a key ended: only blanks and ':' may follow (libjq 1.6 leaks the
	 * key when anything else does, so it never sees that) */
	bool colon_due;
	/* a value ended inside a container: only blanks, ',' and the close
	 * may follow (libjq 1.6 leaks a second value that does not) */
	bool value_end;
	bool in_lit; /* inside a number, true, false or null */
	int uhex; /* hex digits of \uXXXX still to read, 0 when none */
	unsigned ucode, hi_surrogate;
	struct nyx_buf key; /* the key being decoded */
	/* UTF-8 continuation bytes still expected, and the bounds of the
	 * next one (overlongs and surrogates refused) */
	int u8_left;
	unsigned char u8_lo, u8_hi;
};

struct nyx_json_strict *
nyx_json_strict_new(void)
{
	struct nyx_json_strict *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	nyx_buf_init(&c->key, NYX_JSON_MAX_DOC);
	return c;
}

void
nyx_json_strict_free(struct nyx_json_strict *c)
{
	if (c == NULL)
		return;
	while (c->depth > 0)
		jv_free(c->keys[c->depth--]);
	nyx_buf_free(&c->key);
	free(c);
}

const char *
nyx_json_strict_why(const struct nyx_json_strict *c)
{
	return c->why ? c->why : "malformed JSON";
}

static int
refuse(struct nyx_json_strict *c, const char *why)
{
	if (c->why == NULL)
		c->why = why;
	return -1;
}

/* One byte of UTF-8 validation (RFC 3629); -1 when invalid. */
static int
utf8_byte(struct nyx_json_strict *c, unsigned char b)
{
	if (c->u8_left > 0) {
		if (b < c->u8_lo || b > c->u8_hi)
			return refuse(c, "invalid UTF-8");
		c->u8_left--;
		c->u8_lo = 0x80;
		c->u8_hi = 0xbf;
		return 0;
	}
	if (b < 0x80)
		return 0;
	c->u8_lo = 0x80;
	c->u8_hi = 0xbf;
	if (b >= 0xc2 && b <= 0xdf)
		c->u8_left = 1;
	else if (b >= 0xe0 && b <= 0xef) {
		c->u8_left = 2;
		if (b == 0xe0)
			c->u8_lo = 0xa0; /* no overlong */
		else if (b == 0xed)
			c->u8_hi = 0x9f; /* no surrogates */
	} else if (b >= 0xf0 && b <= 0xf4) {
		c->u8_left = 3;
		if (b == 0xf0)
			c->u8_lo = 0x90;
		else if (b == 0xf4)
			c->u8_hi = 0x8f;
	} else
		return refuse(c, "invalid UTF-8");
	return 0;
}

/* Append a code point to the key being decoded, as UTF-8. */
static void
key_put(struct nyx_json_strict *c, unsigned cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	if (nyx_buf_add(&c->key, u, n) < 0)
		refuse(c, "an object key too large");
}

/* The end of a key: a second one in the same object is refused. */
static int
key_done(struct nyx_json_strict *c)
{
	jv set = c->keys[c->depth], k;

	if (jv_get_kind(set) != JV_KIND_OBJECT)
		return 0;
	k = jv_string_sized(c->key.data ? c->key.data : "", (int)c->key.len);
	if (jv_object_has(jv_copy(set), jv_copy(k))) {
		jv_free(k);
		return refuse(c, "duplicate key in an object");
	}
	c->keys[c->depth] = jv_object_set(set, k, jv_true());
	return 0;
}

static int
string_byte(struct nyx_json_strict *c, unsigned char b)
{
	if (c->uhex > 0) {
		int v = b >= '0' && b <= '9' ? b - '0'
		    : b >= 'a' && b <= 'f'   ? b - 'a' + 10
		    : b >= 'A' && b <= 'F'   ? b - 'A' + 10
		                             : -1;

		if (v < 0)
			return 0; /* libjq refuses it */
		c->ucode = (c->ucode << 4) | (unsigned)v;
		if (--c->uhex > 0)
			return 0;
		if (c->ucode == 0)
			return refuse(c, "a string holds U+0000");
		if (c->ucode >= 0xd800 && c->ucode <= 0xdbff) {
			c->hi_surrogate = c->ucode;
			return 0;
		}
		if (c->ucode >= 0xdc00 && c->ucode <= 0xdfff &&
		    c->hi_surrogate != 0)
			c->ucode = 0x10000 +
			    ((c->hi_surrogate - 0xd800) << 10) +
			    (c->ucode - 0xdc00);
		c->hi_surrogate = 0;
		if (c->is_key)
			key_put(c, c->ucode);
		return c->why ? -1 : 0;
	}
	if (c->esc) {
		static const char from[] = "\"\\/bfnrt",
		                  to[] = "\"\\/\b\f\n\r\t";
		const char *e = memchr(from, b, sizeof(from) - 1);

		c->esc = false;
		if (b == 'u') {
			c->uhex = 4;
			c->ucode = 0;
			return 0;
		}
		if (c->is_key && e != NULL)
			key_put(c, (unsigned char)to[e - from]);
		return 0;
	}
	if (b == '\\') {
		c->esc = true;
		return 0;
	}
	if (b == '"') {
		c->in_str = false;
		c->colon_due = c->is_key;
		c->value_end = !c->is_key;
		return c->is_key ? key_done(c) : 0;
	}
	if (b == 0)
		return refuse(c, "a string holds U+0000");
	if (c->is_key && nyx_buf_add(&c->key, &b, 1) < 0)
		return refuse(c, "an object key too large");
	return 0;
}

int
nyx_json_strict_feed(struct nyx_json_strict *c, const char *p, size_t n)
{
	size_t i;

	if (c->why != NULL)
		return -1;
	for (i = 0; i < n; i++) {
		unsigned char b = (unsigned char)p[i];

		if (utf8_byte(c, b) < 0)
			return -1;
		if (c->in_str) {
			if (string_byte(c, b) < 0)
				return -1;
			continue;
		}
		if (b == ' ' || b == '\t' || b == '\n' || b == '\r') {
			if (c->in_lit) {
				c->in_lit = false;
				c->value_end = true;
			}
			continue;
		}
		if (c->colon_due && b != ':')
			return refuse(c, "an object key without ':'");
		if ((b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') ||
		    (b >= 'A' && b <= 'Z') || b == '.' || b == '+' ||
		    b == '-') {
			if (c->value_end && c->depth > 0)
				return refuse(c, "two values without ','");
			c->in_lit = true;
			continue;
		}
		if (b == 0)
			return refuse(c, "a NUL byte");
		if (b != '"' && b != '{' && b != '[' && b != '}' && b != ']' &&
		    b != ':' && b != ',')
			/* a control character (libjq 1.6 takes RS for a
			 * record separator and resets mid-buffer), a byte
			 * over 0x7f, or punctuation JSON has no use for */
			return refuse(
			    c, "a character JSON does not allow here");
		if (c->in_lit) {
			c->in_lit = false;
			c->value_end = true;
		}
		if (c->value_end && c->depth > 0 && b != ',' && b != ']' &&
		    b != '}')
			return refuse(c, "two values without ','");
		c->value_end = false;
		switch (b) {
		case '"':
			c->in_str = true;
			c->esc = false;
			c->uhex = 0;
			c->hi_surrogate = 0;
			c->is_key = c->depth > 0 && c->want_key[c->depth];
			c->key.len = 0;
			break;
		case '{':
		case '[':
			if (c->depth >= NYX_JSON_MAX_DEPTH)
				return refuse(c, "nesting deeper than 256");
			c->depth++;
			c->keys[c->depth] = b == '{' ? jv_object() : jv_null();
			c->want_key[c->depth] = b == '{';
			break;
		case '}':
		case ']':
			if (c->depth > 0)
				jv_free(c->keys[c->depth--]);
			c->value_end = true;
			break;
		case ':':
			c->colon_due = false;
			if (c->depth > 0)
				c->want_key[c->depth] = false;
			break;
		case ',':
			if (c->depth > 0)
				c->want_key[c->depth] =
				    jv_get_kind(c->keys[c->depth]) ==
				    JV_KIND_OBJECT;
			break;
		default:
			break;
		}
	}
	return 0;
}

int
nyx_json_strict_end(struct nyx_json_strict *c)
{
	if (c->why == NULL && c->u8_left > 0)
		return refuse(c, "invalid UTF-8");
	return c->why ? -1 : 0;
}

jv
nyx_json_parse(const char *buf, size_t len)
{
	struct nyx_json_strict *c = nyx_json_strict_new();
	jv v;

	if (c == NULL)
		return jv_invalid_with_msg(jv_string("out of memory"));
	if (nyx_json_strict_feed(c, buf, len) < 0 ||
	    nyx_json_strict_end(c) < 0) {
		v = jv_invalid_with_msg(jv_string(nyx_json_strict_why(c)));
		nyx_json_strict_free(c);
		return v;
	}
	nyx_json_strict_free(c);
	return jv_parse_sized(buf, (int)(len > 0x7fffffff ? 0x7fffffff : len));
}

struct nyx_json_reader {
	int fd;
	const char *name;
	jv_parser *p;
	struct nyx_json_strict *strict;
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
	r->strict = nyx_json_strict_new();
	if (r->p == NULL || r->strict == NULL) {
		nyx_json_reader_free(r);
		return NULL;
	}
	return r;
}

void
nyx_json_reader_free(struct nyx_json_reader *r)
{
	if (r == NULL)
		return;
	if (r->p != NULL)
		jv_parser_free(r->p);
	nyx_json_strict_free(r->strict);
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
		if (jv_parser_remaining(r->p) > 0)
			/* libjq stopped mid-buffer without a value or a
			 * message: never hand it the next buffer */
			return nyx_err_set(err, NYX_EXIT_DATAERR,
			    "input_invalid_json", "%s is not valid JSON",
			    r->name);
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
		if ((n > 0 ? nyx_json_strict_feed(r->strict, r->buf, (size_t)n)
		           : nyx_json_strict_end(r->strict)) < 0)
			return nyx_err_set(err, NYX_EXIT_DATAERR,
			    "input_invalid_json", "%s is not valid JSON: %s",
			    r->name, nyx_json_strict_why(r->strict));
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
