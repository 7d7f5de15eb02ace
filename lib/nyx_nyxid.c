#include "nyx_nyxid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_buf.h"
#include "nyx_err.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"

int
nyx_inventory_load(
    struct nyx_inventory *inv, jv services, jv keys, char *why, size_t whysz)
{
	char w[256];

	if (nyx_inventory_parse_services(inv, services, w, sizeof(w)) < 0) {
		jv_free(keys);
		snprintf(why, whysz,
		    "nyxid_user_services_response_malformed: %s", w);
		return -1;
	}
	if (nyx_inventory_parse_keys(inv, keys, w, sizeof(w)) < 0) {
		snprintf(why, whysz,
		    "nyxid_user_service_keys_response_malformed: %s", w);
		return -1;
	}
	nyx_inventory_join(inv);
	return 0;
}

/* Classify one read; returns 0 with *doc set when usable. */
static int
classify(const char *path, const struct nyx_http_resp *r, int rc, jv *doc,
    struct nyx_read_fail *f)
{
	f->verdict = NYX_ROUTE_SOURCE_UNAVAILABLE;
	f->http_status = (int)r->status;
	if (rc < 0 && r->fail == NYX_HTTP_TOO_LARGE) {
		f->exit = NYX_EXIT_PROTOCOL;
		snprintf(f->message, sizeof(f->message),
		    "The NyxID route "
		    "inventory could not be read: GET %s answered with a body "
		    "over the size limit.",
		    path);
		return -1;
	}
	if (rc < 0) {
		f->exit = NYX_EXIT_TEMPFAIL;
		f->http_status = 0;
		snprintf(f->message, sizeof(f->message),
		    "The NyxID route "
		    "inventory could not be read: GET %s %s.",
		    path,
		    r->fail == NYX_HTTP_TIMEOUT ? "timed out"
		                                : "failed in transport");
		return -1;
	}
	if (r->status == 401 || r->status == 403) {
		f->verdict = NYX_ROUTE_ACCESS_DENIED;
		f->exit = NYX_EXIT_NOPERM;
		snprintf(f->message, sizeof(f->message),
		    "NyxID refused the "
		    "route inventory read: GET %s answered HTTP %ld.",
		    path, r->status);
		return -1;
	}
	if (r->status < 200 || r->status > 299) {
		f->exit =
		    (r->status == 408 || r->status == 429 || r->status >= 500)
		    ? NYX_EXIT_TEMPFAIL
		    : NYX_EXIT_PROTOCOL;
		snprintf(f->message, sizeof(f->message),
		    "The NyxID route "
		    "inventory could not be read: GET %s answered HTTP %ld.",
		    path, r->status);
		return -1;
	}
	*doc = nyx_json_parse(r->body.data ? r->body.data : "", r->body.len);
	if (!jv_is_valid(*doc)) {
		jv_free(*doc);
		*doc = jv_invalid();
		f->exit = NYX_EXIT_PROTOCOL;
		snprintf(f->message, sizeof(f->message),
		    "The NyxID route "
		    "inventory could not be read: GET %s answered with a body "
		    "that is not JSON.",
		    path);
		return -1;
	}
	return 0;
}

int
nyx_nyxid_read_inventory(const struct nyx_nyxid *c, struct nyx_inventory *inv,
    struct nyx_read_fail *fail)
{
	static const char *const paths[2] = {
	    "/api/v1/user-services", "/api/v1/keys"};
	struct nyx_buf auth = NYX_BUF_ZERO;
	char url[2][1024];
	jv docs[2] = {jv_invalid(), jv_invalid()};
	struct nyx_read_fail f[2];
	int ok[2] = {0, 0}, i, rc = -1;
	char why[400];

	memset(f, 0, sizeof(f));
	auth.secret = true;
	if (nyx_buf_printf(&auth, "Authorization: Bearer %s", c->token) < 0) {
		fail->verdict = NYX_ROUTE_SOURCE_UNAVAILABLE;
		fail->exit = NYX_EXIT_OSERR;
		snprintf(fail->message, sizeof(fail->message), "out of memory");
		return -1;
	}
	for (i = 0; i < 2; i++) {
		const char *hdrs[] = {
		    auth.data, "Accept: application/json", NULL};
		struct nyx_http_req req;
		struct nyx_http_resp resp = NYX_HTTP_RESP_ZERO;
		int hrc;

		snprintf(url[i], sizeof(url[i]), "%s%s", c->base_url, paths[i]);
		memset(&req, 0, sizeof(req));
		req.url = url[i];
		req.headers = hdrs;
		req.timeout_ms = c->timeout_ms;
		req.max_body = c->max_inventory_bytes;
		/* both reads happen, whatever the first one answered */
		hrc = nyx_http_do(c->http, &req, &resp);
		ok[i] = classify(paths[i], &resp, hrc, &docs[i], &f[i]) == 0;
		nyx_http_resp_free(&resp);
	}
	nyx_buf_free(&auth);
	for (i = 0; i < 2; i++)
		if (!ok[i]) {
			*fail = f[i];
			goto out;
		}
	if (nyx_inventory_load(inv, docs[0], docs[1], why, sizeof(why)) < 0) {
		docs[0] = docs[1] = jv_invalid();
		fail->verdict = NYX_ROUTE_SOURCE_UNAVAILABLE;
		fail->exit = NYX_EXIT_PROTOCOL;
		fail->http_status = 200;
		snprintf(fail->message, sizeof(fail->message),
		    "The NyxID route "
		    "inventory could not be read: %s.",
		    why);
		nyx_log(NYX_LOG_DEBUG, "inventory malformed: %s", why);
		goto out;
	}
	docs[0] = docs[1] = jv_invalid();
	rc = 0;
out:
	jv_free(docs[0]);
	jv_free(docs[1]);
	return rc;
}
