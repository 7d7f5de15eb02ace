#include "nyx_nyxid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_buf.h"
#include "nyx_err.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_time.h"

/* "Authorization: Bearer <token>" into a secret (wiped) buffer. */
static int
bearer(struct nyx_buf *b, const char *token)
{
	b->secret = true;
	return nyx_buf_printf(b, "Authorization: Bearer %s", token);
}

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
classify(const char *path, const char *url, const struct nyx_http_resp *r,
    int rc, jv *doc, struct nyx_read_fail *f)
{
	f->verdict = NYX_ROUTE_SOURCE_UNAVAILABLE;
	f->http_status = (int)r->status;
	if (rc < 0 && r->fail == NYX_HTTP_TOO_LARGE) {
		f->exit = NYX_EXIT_PROTOCOL;
		snprintf(f->message, sizeof(f->message),
		    "The NyxID route "
		    "inventory could not be read: GET %s answered with %s.",
		    path, r->errmsg);
		return -1;
	}
	if (rc < 0) {
		f->exit = NYX_EXIT_TEMPFAIL;
		f->http_status = 0;
		/* the URL (no query) and the transport's own reason */
		snprintf(f->message, sizeof(f->message),
		    "The NyxID route "
		    "inventory could not be read: GET %.480s %s: %.320s.",
		    url,
		    r->fail == NYX_HTTP_TIMEOUT ? "timed out"
		                                : "failed in transport",
		    r->errmsg[0] ? r->errmsg : "no answer");
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
	/* parsed while streaming (parse_json) */
	*doc = jv_copy(r->json);
	if (!jv_is_valid(*doc)) {
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
	static const char *const malformed[2] = {
	    "nyxid_user_services_response_malformed",
	    "nyxid_user_service_keys_response_malformed"};
	struct nyx_buf auth = NYX_BUF_ZERO;
	struct nyx_read_fail f[2];
	int ok[2] = {0, 0}, i;
	int64_t t0, t1, t2;
	char url[1024], why[300];

	memset(f, 0, sizeof(f));
	auth.secret = true;
	if (bearer(&auth, c->token) < 0) {
		fail->verdict = NYX_ROUTE_SOURCE_UNAVAILABLE;
		fail->exit = NYX_EXIT_OSERR;
		snprintf(fail->message, sizeof(fail->message), "out of memory");
		return -1;
	}
	/*
	 * Each body is parsed, checked and dropped before the next request,
	 * so only one body and one JSON tree are ever held at a time.
	 */
	for (i = 0; i < 2; i++) {
		const char *hdrs[] = {
		    auth.data, "Accept: application/json", NULL};
		struct nyx_http_req req;
		struct nyx_http_resp resp = NYX_HTTP_RESP_ZERO;
		jv doc = jv_invalid();
		int hrc, prc;

		snprintf(url, sizeof(url), "%s%s", c->base_url, paths[i]);
		memset(&req, 0, sizeof(req));
		req.url = url;
		req.headers = hdrs;
		req.timeout_ms = c->timeout_ms;
		req.max_body = c->max_inventory_bytes;
		req.parse_json = true;
		/* both reads happen, whatever the first one answered */
		t0 = nyx_mono_ms();
		hrc = nyx_http_do(c->http, &req, &resp);
		t1 = nyx_mono_ms();
		ok[i] = classify(paths[i], url, &resp, hrc, &doc, &f[i]) == 0;
		nyx_http_resp_free(&resp);
		t2 = nyx_mono_ms();
		if (ok[i]) {
			prc = i == 0 ? nyx_inventory_parse_services(
			                   inv, doc, why, sizeof(why))
			             : nyx_inventory_parse_keys(
			                   inv, doc, why, sizeof(why));
			if (prc < 0) {
				ok[i] = 0;
				f[i].verdict = NYX_ROUTE_SOURCE_UNAVAILABLE;
				f[i].exit = NYX_EXIT_PROTOCOL;
				f[i].http_status = 200;
				snprintf(f[i].message, sizeof(f[i].message),
				    "The NyxID route inventory could not be "
				    "read: %s: %s.",
				    malformed[i], why);
			}
		} else {
			jv_free(doc);
		}
		nyx_log(NYX_LOG_DEBUG,
		    "GET %s: exchange and streaming JSON parse %ld ms, strict "
		    "check %ld ms",
		    paths[i], (long)(t1 - t0), (long)(nyx_mono_ms() - t2));
	}
	nyx_buf_free(&auth);
	for (i = 0; i < 2; i++)
		if (!ok[i]) {
			*fail = f[i];
			return -1;
		}
	nyx_inventory_join(inv);
	nyx_log(NYX_LOG_DEBUG, "inventory: %zu routes, %zu keys", inv->nroutes,
	    inv->nkeys);
	return 0;
}

int
nyx_nyxid_users_me(const struct nyx_nyxid *c, struct nyx_read_fail *fail)
{
	struct nyx_buf auth = NYX_BUF_ZERO;
	struct nyx_http_resp resp = NYX_HTTP_RESP_ZERO;
	struct nyx_http_req req;
	const char *hdrs[3];
	char url[1024];
	int rc = -1;

	memset(fail, 0, sizeof(*fail));
	auth.secret = true;
	if (bearer(&auth, c->token) < 0) {
		fail->exit = NYX_EXIT_OSERR;
		return -1;
	}
	hdrs[0] = auth.data;
	hdrs[1] = "Accept: application/json";
	hdrs[2] = NULL;
	snprintf(url, sizeof(url), "%s/api/v1/users/me", c->base_url);
	memset(&req, 0, sizeof(req));
	req.url = url;
	req.headers = hdrs;
	req.timeout_ms = c->timeout_ms;
	if (nyx_http_do(c->http, &req, &resp) < 0) {
		fail->exit = resp.fail == NYX_HTTP_TOO_LARGE
		    ? NYX_EXIT_PROTOCOL
		    : NYX_EXIT_TEMPFAIL;
		snprintf(fail->message, sizeof(fail->message),
		    "GET /api/v1/users/me failed: %s.", resp.errmsg);
	} else if (resp.status == 200) {
		rc = 0;
	} else {
		fail->http_status = (int)resp.status;
		fail->exit = (resp.status == 401 || resp.status == 403)
		    ? NYX_EXIT_NOPERM
		    : (resp.status == 408 || resp.status == 429 ||
		          resp.status >= 500)
		    ? NYX_EXIT_TEMPFAIL
		    : NYX_EXIT_PROTOCOL;
		snprintf(fail->message, sizeof(fail->message),
		    "NyxID did not confirm the token as a human user: GET "
		    "/api/v1/users/me answered HTTP %ld.",
		    resp.status);
	}
	nyx_http_resp_free(&resp);
	nyx_buf_free(&auth);
	return rc;
}

void
nyx_nyxid_write(const struct nyx_nyxid *c, const char *method, const char *path,
    jv body, long *status)
{
	struct nyx_buf auth = NYX_BUF_ZERO;
	struct nyx_http_resp resp = NYX_HTTP_RESP_ZERO;
	struct nyx_http_req req;
	const char *hdrs[4];
	char url[1024], *json = nyx_json_dump(body);

	*status = 0;
	auth.secret = true;
	if (json == NULL || bearer(&auth, c->token) < 0) {
		free(json);
		return;
	}
	hdrs[0] = auth.data;
	hdrs[1] = "Content-Type: application/json";
	hdrs[2] = "Accept: application/json";
	hdrs[3] = NULL;
	snprintf(url, sizeof(url), "%s%s", c->base_url, path);
	memset(&req, 0, sizeof(req));
	req.method = method;
	req.url = url;
	req.headers = hdrs;
	req.body = json;
	req.body_len = strlen(json);
	req.timeout_ms = c->timeout_ms;
	req.fresh_connect = true; /* a write is never resent by libcurl */
	if (nyx_http_do(c->http, &req, &resp) == 0)
		*status = resp.status;
	nyx_log(NYX_LOG_DEBUG, "%s %s: status %ld", method, path, *status);
	nyx_http_resp_free(&resp);
	nyx_buf_free(&auth);
	free(json);
}

int
nyx_nyxid_open(struct nyx_nyxid *c, const struct nyx_common *cm,
    struct nyx_settings *s, const struct nyx_capability *cap,
    struct nyx_cred *cred, char *why, size_t whysz, struct nyx_err *err)
{
	int rc;

	memset(cred, 0, sizeof(*cred));
	if (nyx_settings_require_base_url(s, err) < 0 ||
	    (rc = nyx_cred_load(cm, s, NYX_TOKEN_SOURCE, err)) < 0)
		return -1;
	if (rc == 1) {
		snprintf(why, whysz,
		    "No source-readable NyxID credential is configured "
		    "(--token-file, NYX_TOKEN_FILE, NYX_TOKEN or a profile's "
		    "token_file).");
		return 1;
	}
	nyx_cred_classify(s->token, cred);
	if (cap == NULL)
		cap = NYX_CAP_CODE_EXECUTE;
	if (!cap->delegation_reads && cred->kind != NYX_CRED_USER) {
		snprintf(why, whysz,
		    "The configured credential (%s, from %s) cannot read NyxID "
		    "inventory for %s; only a user access token may.",
		    nyx_cred_kind_name(cred->kind), s->token_origin, cap->name);
		return 1;
	}
	if (!nyx_cred_source_readable(cred)) {
		snprintf(why, whysz,
		    "The configured credential (%s, from %s) cannot read NyxID "
		    "inventory; a user access token or a delegation token with "
		    "account:read is required.",
		    nyx_cred_kind_name(cred->kind), s->token_origin);
		return 1;
	}
	if (c->http == NULL && (c->http = nyx_http_new()) == NULL)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	c->base_url = s->base_url;
	c->token = s->token;
	c->timeout_ms = nyx_settings_exchange_ms(s);
	c->max_inventory_bytes = s->max_inventory_bytes;
	return 0;
}

int
nyx_nyxid_fetch(struct nyx_nyxid *c, const struct nyx_common *cm,
    struct nyx_settings *s, const struct nyx_capability *cap,
    struct nyx_inventory *inv, int64_t *observed_ms, struct nyx_read_fail *fail,
    struct nyx_err *err)
{
	struct nyx_cred cred;
	int rc;

	memset(fail, 0, sizeof(*fail));
	rc = nyx_nyxid_open(
	    c, cm, s, cap, &cred, fail->message, sizeof(fail->message), err);
	if (rc < 0)
		return -1;
	if (rc == 1) {
		fail->verdict = NYX_ROUTE_CREDENTIAL_REQUIRED;
		fail->exit = NYX_EXIT_NOPERM;
		return 1;
	}
	*observed_ms = nyx_now_ms();
	return nyx_nyxid_read_inventory(c, inv, fail) < 0 ? 1 : 0;
}
