#include "nyx_cred.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nyx_hash.h"
#include "nyx_log.h"
#include "nyx_buf.h"
#include "nyx_json.h"

int
nyx_cred_check(const char *token, struct nyx_err *err)
{
	const char *p;

	if (token == NULL || *token == '\0')
		return nyx_err_set(err, NYX_EXIT_NOPERM,
		    "code_execution_credential_unavailable",
		    "The credential is empty.");
	if (strncasecmp(token, "bearer ", 7) == 0)
		return nyx_err_set(err, NYX_EXIT_NOPERM,
		    "code_execution_credential_unavailable",
		    "The credential must be the bare token, without a "
		    "'Bearer ' prefix.");
	for (p = token; *p != '\0'; p++)
		if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p))
			return nyx_err_set(err, NYX_EXIT_NOPERM,
			    "code_execution_credential_unavailable",
			    "The credential contains whitespace or control "
			    "characters.");
	return 0;
}

bool
nyx_scope_has(const char *scope, const char *want)
{
	size_t wl = strlen(want);
	const char *p = scope;

	if (scope == NULL || wl == 0)
		return false;
	while (*p != '\0') {
		size_t n;

		while (isspace((unsigned char)*p))
			p++;
		n = 0;
		while (p[n] != '\0' && !isspace((unsigned char)p[n]))
			n++;
		if (n == wl && strncmp(p, want, n) == 0)
			return true;
		p += n;
	}
	return false;
}

static bool
all_lower_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		        (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[n] == '\0';
}

jv
nyx_jwt_payload(const char *token)
{
	const char *d1 = token ? strchr(token, '.') : NULL, *d2;
	char *payload;
	size_t plen;
	jv obj;

	if (d1 == NULL || (d2 = strchr(d1 + 1, '.')) == NULL ||
	    strchr(d2 + 1, '.') != NULL || d1 == token)
		return jv_invalid();
	payload = nyx_b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), &plen);
	if (payload == NULL)
		return jv_invalid();
	obj = nyx_json_parse(payload, plen);
	nyx_secure_zero(payload, plen);
	free(payload);
	if (jv_get_kind(obj) != JV_KIND_OBJECT) {
		jv_free(obj);
		return jv_invalid();
	}
	return obj;
}

static void
classify_jwt(const char *token, struct nyx_cred *out)
{
	jv obj = nyx_jwt_payload(token), act;

	if (!jv_is_valid(obj)) {
		jv_free(obj);
		return;
	}
	/* a subject or scope too long to keep whole is not kept at all: a
	 * cut one would name someone else (the owner falls back to the
	 * token's fingerprint) */
	nyx_str_copy(
	    out->subject, sizeof(out->subject), nyx_json_peek_str(obj, "sub"));
	nyx_str_copy(
	    out->scope, sizeof(out->scope), nyx_json_peek_str(obj, "scope"));
	act = nyx_json_get(obj, "act");
	if (nyx_json_bool(obj, "delegated") == 1 &&
	    nyx_json_peek_str(act, "sub") != NULL)
		out->kind = NYX_CRED_DELEGATION;
	else if (nyx_json_bool(obj, "sa") == 1)
		out->kind = NYX_CRED_SERVICE_ACCOUNT;
	else if (nyx_json_bool(obj, "relay") == 1)
		out->kind = NYX_CRED_RELAY;
	else if (nyx_json_bool(obj, "delegated") != 1 &&
	    !nyx_json_has(obj, "act") && nyx_json_peek_str(obj, "token_type") &&
	    strcmp(nyx_json_peek_str(obj, "token_type"), "access") == 0)
		out->kind = NYX_CRED_USER;
	jv_free(act);
	jv_free(obj);
}

void
nyx_cred_classify(const char *token, struct nyx_cred *out)
{
	memset(out, 0, sizeof(*out));
	if (token == NULL)
		return;
	if (strncmp(token, "nyxid_ag_", 9) == 0) {
		if (strlen(token) == 9 + 64 && all_lower_hex(token + 9, 64)) {
			out->kind = NYX_CRED_AGENT_KEY;
			/* the public prefix, as NyxID stores it */
			snprintf(
			    out->subject, sizeof(out->subject), "%.17s", token);
		} else {
			out->kind = NYX_CRED_API_KEY;
		}
		return;
	}
	if (strncmp(token, "nyxid_", 6) == 0 ||
	    strncmp(token, "nyx_", 4) == 0) {
		out->kind = NYX_CRED_API_KEY;
		return;
	}
	classify_jwt(token, out);
}

bool
nyx_cred_source_readable(const struct nyx_cred *c)
{
	return c->kind == NYX_CRED_USER ||
	    (c->kind == NYX_CRED_DELEGATION &&
	        nyx_scope_has(c->scope, "account:read"));
}

bool
nyx_cred_can_write(const struct nyx_cred *c)
{
	return c->kind == NYX_CRED_USER;
}

const char *
nyx_cred_kind_name(enum nyx_cred_kind k)
{
	switch (k) {
	case NYX_CRED_USER:
		return "user access token";
	case NYX_CRED_DELEGATION:
		return "delegation token";
	case NYX_CRED_SERVICE_ACCOUNT:
		return "service account token";
	case NYX_CRED_RELAY:
		return "relay token";
	case NYX_CRED_AGENT_KEY:
		return "Agent Key";
	case NYX_CRED_API_KEY:
		return "API key";
	default:
		return "unrecognised credential";
	}
}

void
nyx_cred_owner(const char *token, char *out, size_t n)
{
	struct nyx_cred c;
	char hex[NYX_SHA256_HEX];

	nyx_cred_classify(token, &c);
	if (c.subject[0] != '\0' && nyx_str_copy(out, n, c.subject)) {
		return;
	} else if (nyx_sha256_hex(token, strlen(token), hex) == 0) {
		snprintf(out, n, "token:%.16s", hex);
	} else {
		snprintf(out, n, "token:unknown");
	}
}

#define TOKEN_MAX_BYTES (64u * 1024u)

static int
read_token_file(const char *path, char **out, struct nyx_err *err)
{
	struct nyx_buf b = NYX_BUF_ZERO;
	char *p = nyx_expand_home(path);
	int rc;

	if (p == NULL)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	rc = nyx_config_read_file(p, true, TOKEN_MAX_BYTES, &b, err);
	free(p);
	if (rc < 0)
		return -1;
	if (b.len > 0 && b.data[b.len - 1] == '\n') {
		b.data[--b.len] = '\0';
		if (b.len > 0 && b.data[b.len - 1] == '\r')
			b.data[--b.len] = '\0';
	}
	if (b.data == NULL)
		*out = strdup("");
	else if (strlen(b.data) != b.len) {
		nyx_buf_free(&b);
		return nyx_err_set(err, NYX_EXIT_NOPERM,
		    "code_execution_credential_unavailable",
		    "the token file holds a NUL byte");
	} else
		*out = nyx_buf_take(&b);
	nyx_buf_free(&b);
	return *out ? 0 : nyx_err_set(err, NYX_EXIT_OSERR, "oom", "oom");
}

/* By precedence; 0 with the token NULL when no source names one. */
static int
load_token(const struct nyx_common *c, struct nyx_settings *s, int which,
    struct nyx_err *err)
{
	const char *flag = which ? c->exec_token_file : c->token_file;
	const char *fenv = which ? "NYX_EXEC_TOKEN_FILE" : "NYX_TOKEN_FILE";
	const char *venv = which ? "NYX_EXEC_TOKEN" : "NYX_TOKEN";
	const char *pkey = which ? "exec_token_file" : "token_file";
	char **dst = which ? &s->exec_token : &s->token;
	const char **origin = which ? &s->exec_token_origin : &s->token_origin;
	const char *v;

	nyx_secure_free(dst);
	if (flag != NULL) {
		*origin = which ? "--exec-token-file" : "--token-file";
		return read_token_file(flag, dst, err);
	}
	if ((v = nyx_config_env(fenv)) != NULL) {
		*origin = fenv;
		return read_token_file(v, dst, err);
	}
	if ((v = getenv(venv)) != NULL) {
		*origin = venv;
		*dst = strdup(v);
		return *dst ? 0
		            : nyx_err_set(err, NYX_EXIT_OSERR, "oom", "oom");
	}
	if ((v = nyx_json_peek_str(s->profile_obj, pkey)) != NULL) {
		*origin = pkey;
		return read_token_file(v, dst, err);
	}
	if (which == 1) {
		/* the execution token defaults to the source-readable one */
		if (s->token == NULL && load_token(c, s, 0, err) < 0)
			return -1;
		if (s->token != NULL) {
			*origin = s->token_origin;
			*dst = strdup(s->token);
			return *dst
			    ? 0
			    : nyx_err_set(err, NYX_EXIT_OSERR, "oom", "oom");
		}
		return 0;
	}
	if ((v = getenv("NYXID_API_KEY")) != NULL) {
		*origin = "NYXID_API_KEY";
		*dst = strdup(v);
		return *dst ? 0
		            : nyx_err_set(err, NYX_EXIT_OSERR, "oom", "oom");
	}
	return 0;
}

int
nyx_cred_load(const struct nyx_common *c, struct nyx_settings *s,
    enum nyx_token_role role, struct nyx_err *err)
{
	int which = role == NYX_TOKEN_EXEC;
	char **tok = which ? &s->exec_token : &s->token;

	if (load_token(c, s, which, err) < 0)
		return -1;
	if (*tok == NULL)
		return 1;
	nyx_log_add_secret(*tok);
	return nyx_cred_check(*tok, err) < 0 ? -1 : 0;
}
