/*
 * nyx_json: NDJSON in and out on libjq's jv, our data model.
 *
 * Ownership, as the code works: sinks (nyx_json_write, nyx_json_dump)
 * consume the jv they are given, as libjq's builders do; keep one with
 * jv_copy().  Getters borrow: nyx_json_get returns a new reference and
 * leaves the object alone, *_peek_* return a pointer that lives as long as
 * the object passed in.  Every getter checks the kind first, because jv
 * asserts on the wrong kind and input is hostile.
 *
 * Output is one compact document per line with sorted keys (or indented
 * with --pretty).  Input is read with the streaming parser, so one document
 * per line and concatenated documents both work.
 */
#ifndef NYX_JSON_H
#define NYX_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include <jv.h>

#include "nyx_err.h"

/*
 * Write one record and a newline to f, flushed (consumes v).  0, or -1
 * with errno set.  The programs' record sink (cmd/tool/cli.c) passes
 * stdout; lib/ itself never writes there.
 */
int nyx_json_write(jv v, FILE *f, bool pretty);

/* Compact, sorted serialisation into a new heap string (consumes v). */
char *nyx_json_dump(jv v);

/*
 * Parse exactly one JSON document from a buffer (consumes nothing).
 * Returns a valid jv, or an invalid jv (check with jv_is_valid) whose
 * message is the parser's.
 */
jv nyx_json_parse(const char *buf, size_t len);

/*
 * Strict JSON (WIRE.md 1), what libjq lets through: a duplicate key in an
 * object (libjq keeps the last), a string holding U+0000 (escaped or raw),
 * invalid UTF-8 (libjq substitutes U+FFFD) and nesting deeper than
 * NYX_JSON_MAX_DEPTH.  A push checker fed the same bytes as the parser, in
 * any chunks, over one document or a stream of them; libjq still decides
 * everything else.  nyx_json_parse, the reader and nyx_http apply it.
 */
#define NYX_JSON_MAX_DEPTH 256

struct nyx_json_strict;

struct nyx_json_strict *nyx_json_strict_new(void);
void nyx_json_strict_free(struct nyx_json_strict *c);
/* Feed bytes; 0, or -1 once anything was refused (then the reason). */
int nyx_json_strict_feed(struct nyx_json_strict *c, const char *p, size_t n);
/* At the end of input: -1 when a UTF-8 sequence was cut. */
int nyx_json_strict_end(struct nyx_json_strict *c);
const char *nyx_json_strict_why(const struct nyx_json_strict *c);

/* Streaming reader over a file descriptor. */
struct nyx_json_reader;

struct nyx_json_reader *nyx_json_reader_new(int fd, const char *name);
void nyx_json_reader_free(struct nyx_json_reader *r);
/*
 * Next document: 1 with *out set, 0 at end of input, -1 with err filled
 * (65 for malformed input, 74 for a read error).
 */
int nyx_json_reader_next(
    struct nyx_json_reader *r, jv *out, struct nyx_err *err);

/* Borrowing getters: NULL / false when absent or of another kind. */
const char *nyx_json_peek_str(jv obj, const char *key);
jv_kind nyx_json_kind(jv obj, const char *key); /* JV_KIND_INVALID: absent */
bool nyx_json_has(jv obj, const char *key);
/* Whether every key of an object is in the NULL-ended list (borrows). */
bool nyx_json_keys_within(jv obj, const char *const *allowed);
/* 1 true, 0 false, -1 absent/null, -2 another kind */
int nyx_json_bool(jv obj, const char *key);

/* An integral number in [lo, hi] (borrows v). */
bool nyx_json_integral(jv v, double lo, double hi);

/* Object getter that consumes nothing and returns a new reference. */
jv nyx_json_get(jv obj, const char *key);

/* jv_string from a possibly-NULL C string: NULL becomes jv_null(). */
jv nyx_json_str_or_null(const char *s);

/* A time as RFC 3339 UTC, or null when ms <= 0. */
jv nyx_json_time(int64_t ms);

#endif
