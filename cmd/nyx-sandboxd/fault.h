/*
 * fault: scripted fault plans for nyx-sandboxd.
 *
 * A plan is a list of rules.  A rule matches a request by method (or any)
 * and a path glob (fnmatch, '*' crosses '/'); among the matches it fires
 * on the nth (1-based) and the `count` after it (every match when nth is
 * absent).  When it fires it may delay, drop the connection without an
 * answer, or answer with a status, headers and a body (literal, JSON, or
 * a generated valid JSON document of an exact size, optionally chunked so
 * no Content-Length is sent).  A rule with only a delay lets the request
 * through afterwards, and `after` edits a route once the request has been
 * answered (a concurrent change for readback drift).  Pure: no I/O, no
 * locking.
 */
#ifndef NYX_FAULT_H
#define NYX_FAULT_H

#include <stdbool.h>
#include <stddef.h>

#include <jv.h>

struct nyx_fault {
	char *method; /* NULL: any */
	char *path; /* glob */
	long nth; /* 0: every match */
	long count; /* matches to fire on from nth; 0: unlimited */
	long seen; /* matches so far */
	long fired;
	int status; /* 0: no answer of its own */
	jv headers; /* object of strings */
	char *body;
	size_t body_len;
	bool chunked;
	bool drop;
	long delay_ms;
	/* handled normally, then the answer is delayed or never sent (an
	 * operation created whose receipt is lost) */
	long delay_after_ms;
	bool drop_after;
	/* a concurrent edit applied after the request was answered normally:
	 * {"route": ID, "set": {field: value, ...}}, or invalid */
	jv after;
};

struct nyx_faults {
	struct nyx_fault *v;
	size_t n;
};

#define NYX_FAULTS_ZERO                                                        \
	{                                                                      \
		NULL, 0                                                        \
	}

/* Parse a plan ({"faults":[…]} or a bare list); consumes doc. */
int nyx_faults_parse(jv doc, struct nyx_faults *out, char *why, size_t whysz);
void nyx_faults_free(struct nyx_faults *f);

/* The rule that fires for this request (counters advance), or NULL. */
struct nyx_fault *nyx_faults_match(
    struct nyx_faults *f, const char *method, const char *path);

#endif
