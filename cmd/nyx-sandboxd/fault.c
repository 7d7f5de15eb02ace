#include "fault.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nyx_json.h"

#define MAX_BODY_BYTES (64L * 1024 * 1024)

static long
num(jv o, const char *k, long dflt, long lo, long hi, bool *bad)
{
	jv v = nyx_json_get(o, k);
	double d;

	if (jv_get_kind(v) == JV_KIND_INVALID ||
	    jv_get_kind(v) == JV_KIND_NULL) {
		jv_free(v);
		return dflt;
	}
	if (jv_get_kind(v) != JV_KIND_NUMBER) {
		jv_free(v);
		*bad = true;
		return dflt;
	}
	d = jv_number_value(v);
	jv_free(v);
	if (d < (double)lo || d > (double)hi || d != (double)(long)d) {
		*bad = true;
		return dflt;
	}
	return (long)d;
}

static int
parse_rule(jv r, struct nyx_fault *f, size_t i, char *why, size_t whysz)
{
	const char *m = nyx_json_peek_str(r, "method");
	const char *p = nyx_json_peek_str(r, "path");
	jv hdrs = nyx_json_get(r, "headers"), js = nyx_json_get(r, "json");
	bool bad = false;
	long bytes;

	memset(f, 0, sizeof(*f));
	f->headers = jv_object();
	f->after = nyx_json_get(r, "after");
	if (jv_get_kind(f->after) != JV_KIND_INVALID &&
	    (jv_get_kind(f->after) != JV_KIND_OBJECT ||
	        nyx_json_peek_str(f->after, "route") == NULL ||
	        nyx_json_kind(f->after, "set") != JV_KIND_OBJECT)) {
		snprintf(
		    why, whysz, "faults[%zu].after needs route and set", i);
		goto fail;
	}
	if (p == NULL) {
		snprintf(why, whysz, "faults[%zu].path must be a string", i);
		goto fail;
	}
	f->path = strdup(p);
	f->method = m ? strdup(m) : NULL;
	f->nth = num(r, "nth", 0, 1, 1000000000, &bad);
	f->count = num(r, "count", f->nth ? 1 : 0, 0, 1000000000, &bad);
	f->status = (int)num(r, "status", 0, 100, 599, &bad);
	f->delay_ms = num(r, "delay_ms", 0, 0, 600000, &bad);
	bytes = num(r, "body_bytes", -1, 10, MAX_BODY_BYTES, &bad);
	f->drop = nyx_json_bool(r, "drop") == 1;
	f->drop_after = nyx_json_bool(r, "drop_after") == 1;
	f->delay_after_ms = num(r, "delay_after_ms", 0, 0, 600000, &bad);
	f->chunked = nyx_json_bool(r, "chunked") == 1;
	if (bad) {
		snprintf(
		    why, whysz, "faults[%zu] has a number out of range", i);
		goto fail;
	}
	if (jv_get_kind(hdrs) == JV_KIND_OBJECT) {
		int k, n;
		jv keys = jv_keys(jv_copy(hdrs));

		n = jv_array_length(jv_copy(keys));
		for (k = 0; k < n; k++) {
			jv key = jv_array_get(jv_copy(keys), k);
			jv val = jv_object_get(jv_copy(hdrs), jv_copy(key));

			if (jv_get_kind(val) == JV_KIND_NUMBER)
				val = jv_dump_string(val, 0);
			if (jv_get_kind(val) != JV_KIND_STRING) {
				jv_free(key);
				jv_free(val);
				jv_free(keys);
				snprintf(why, whysz,
				    "faults[%zu].headers values "
				    "must be strings",
				    i);
				goto fail;
			}
			f->headers = jv_object_set(f->headers, key, val);
		}
		jv_free(keys);
	} else if (jv_get_kind(hdrs) != JV_KIND_INVALID) {
		snprintf(
		    why, whysz, "faults[%zu].headers must be a mapping", i);
		goto fail;
	}
	if (nyx_json_peek_str(r, "body") != NULL) {
		f->body = strdup(nyx_json_peek_str(r, "body"));
		f->body_len = strlen(f->body);
	} else if (jv_get_kind(js) != JV_KIND_INVALID) {
		f->body = nyx_json_dump(jv_copy(js));
		f->body_len = strlen(f->body);
	} else if (bytes > 0) {
		/* a valid JSON document of exactly `bytes` bytes */
		f->body = malloc((size_t)bytes + 1);
		if (f->body == NULL)
			goto fail;
		memcpy(f->body, "{\"pad\":\"", 8);
		memset(f->body + 8, 'x', (size_t)bytes - 10);
		memcpy(f->body + bytes - 2, "\"}", 2);
		f->body[bytes] = '\0';
		f->body_len = (size_t)bytes;
	}
	if (f->body != NULL && f->status == 0)
		f->status = 200;
	jv_free(hdrs);
	jv_free(js);
	return 0;
fail:
	jv_free(hdrs);
	jv_free(js);
	return -1;
}

int
nyx_faults_parse(jv doc, struct nyx_faults *out, char *why, size_t whysz)
{
	jv rules;
	size_t i, n;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (jv_get_kind(doc) == JV_KIND_OBJECT)
		rules = nyx_json_get(doc, "faults");
	else
		rules = jv_copy(doc);
	jv_free(doc);
	if (jv_get_kind(rules) == JV_KIND_NULL) {
		jv_free(rules);
		return 0;
	}
	if (jv_get_kind(rules) != JV_KIND_ARRAY) {
		jv_free(rules);
		snprintf(why, whysz, "a fault plan is a list of rules");
		return -1;
	}
	n = (size_t)jv_array_length(jv_copy(rules));
	out->v = calloc(n ? n : 1, sizeof(*out->v));
	if (out->v == NULL)
		goto out;
	for (i = 0; i < n; i++) {
		jv r = jv_array_get(jv_copy(rules), (int)i);
		int prc;

		if (jv_get_kind(r) != JV_KIND_OBJECT) {
			jv_free(r);
			snprintf(
			    why, whysz, "faults[%zu] must be a mapping", i);
			goto out;
		}
		prc = parse_rule(r, &out->v[i], i, why, whysz);
		jv_free(r);
		out->n = i + 1;
		if (prc < 0)
			goto out;
	}
	rc = 0;
out:
	jv_free(rules);
	if (rc < 0)
		nyx_faults_free(out);
	return rc;
}

void
nyx_faults_free(struct nyx_faults *f)
{
	size_t i;

	for (i = 0; i < f->n; i++) {
		free(f->v[i].method);
		free(f->v[i].path);
		free(f->v[i].body);
		jv_free(f->v[i].headers);
		jv_free(f->v[i].after);
	}
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

struct nyx_fault *
nyx_faults_match(struct nyx_faults *f, const char *method, const char *path)
{
	struct nyx_fault *hit = NULL;
	size_t i;

	for (i = 0; i < f->n; i++) {
		struct nyx_fault *r = &f->v[i];
		bool fires;

		if (r->method != NULL && strcasecmp(r->method, method) != 0)
			continue;
		if (fnmatch(r->path, path, 0) != 0)
			continue;
		r->seen++;
		if (r->nth == 0)
			fires = r->count == 0 || r->fired < r->count;
		else
			fires = r->seen >= r->nth &&
			    (r->count == 0 || r->seen < r->nth + r->count);
		/* the first rule that fires wins; later ones still count */
		if (fires && hit == NULL) {
			r->fired++;
			hit = r;
		}
	}
	return hit;
}
