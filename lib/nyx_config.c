#include "nyx_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "nyx_buf.h"
#include "nyx_hash.h"
#include "nyx_http.h"
#include "nyx_json.h"
#include "nyx_log.h"

#define CONFIG_MAX_BYTES (1024u * 1024u)
#define YAML_MAX_DEPTH 64

/* ---- YAML to jv ---- */

static jv
scalar_to_jv(const yaml_event_t *ev)
{
	const char *v = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	char *end;
	double d;

	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return jv_string_sized(v, (int)n);
	if (n == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
	    strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0)
		return jv_null();
	if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 ||
	    strcmp(v, "TRUE") == 0)
		return jv_true();
	if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0 ||
	    strcmp(v, "FALSE") == 0)
		return jv_false();
	if ((v[0] >= '0' && v[0] <= '9') || v[0] == '-' || v[0] == '+') {
		errno = 0;
		d = strtod(v, &end);
		if (errno == 0 && *end == '\0' && end != v)
			return jv_number(d);
	}
	return jv_string_sized(v, (int)n);
}

struct yctx {
	yaml_parser_t p;
	const char *name;
	struct nyx_err *err;
};

static int ynode(struct yctx *y, yaml_event_t *ev, jv *out, int depth);

static int
ynext(struct yctx *y, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&y->p, ev))
		return nyx_err_set(y->err, NYX_EXIT_DATAERR, "yaml_invalid",
		    "%s:%zu: %s", y->name, y->p.problem_mark.line + 1,
		    y->p.problem ? y->p.problem : "malformed YAML");
	return 0;
}

static int
ycollection(struct yctx *y, bool mapping, jv *out, int depth)
{
	yaml_event_t ev;
	jv acc = mapping ? jv_object() : jv_array();

	for (;;) {
		jv key = jv_invalid(), val;

		if (ynext(y, &ev) < 0)
			goto fail;
		if (ev.type ==
		    (mapping ? YAML_MAPPING_END_EVENT
		             : YAML_SEQUENCE_END_EVENT)) {
			yaml_event_delete(&ev);
			*out = acc;
			return 0;
		}
		if (mapping) {
			if (ev.type != YAML_SCALAR_EVENT) {
				yaml_event_delete(&ev);
				nyx_err_set(y->err, NYX_EXIT_DATAERR,
				    "yaml_invalid",
				    "%s: mapping keys must be "
				    "scalars",
				    y->name);
				goto fail;
			}
			key =
			    jv_string_sized((const char *)ev.data.scalar.value,
			        (int)ev.data.scalar.length);
			yaml_event_delete(&ev);
			if (ynext(y, &ev) < 0) {
				jv_free(key);
				goto fail;
			}
		}
		if (ynode(y, &ev, &val, depth + 1) < 0) {
			jv_free(key);
			goto fail;
		}
		if (mapping)
			acc = jv_object_set(acc, key, val);
		else
			acc = jv_array_append(acc, val);
	}
fail:
	jv_free(acc);
	return -1;
}

/* Convert the node that starts with *ev (consumed). */
static int
ynode(struct yctx *y, yaml_event_t *ev, jv *out, int depth)
{
	int rc;

	if (depth > YAML_MAX_DEPTH) {
		yaml_event_delete(ev);
		return nyx_err_set(y->err, NYX_EXIT_DATAERR, "yaml_invalid",
		    "%s: nesting deeper than %d", y->name, YAML_MAX_DEPTH);
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		*out = scalar_to_jv(ev);
		yaml_event_delete(ev);
		return 0;
	case YAML_SEQUENCE_START_EVENT:
		yaml_event_delete(ev);
		return ycollection(y, false, out, depth);
	case YAML_MAPPING_START_EVENT:
		yaml_event_delete(ev);
		return ycollection(y, true, out, depth);
	case YAML_ALIAS_EVENT:
		yaml_event_delete(ev);
		return nyx_err_set(y->err, NYX_EXIT_DATAERR, "yaml_invalid",
		    "%s: YAML aliases are not accepted", y->name);
	default:
		rc = nyx_err_set(y->err, NYX_EXIT_DATAERR, "yaml_invalid",
		    "%s: unexpected YAML structure", y->name);
		yaml_event_delete(ev);
		return rc;
	}
}

int
nyx_yaml_load_buf(
    const char *buf, size_t len, const char *name, jv *out, struct nyx_err *err)
{
	struct yctx y;
	yaml_event_t ev;
	int rc = -1;

	memset(&y, 0, sizeof(y));
	y.name = name;
	y.err = err;
	if (!yaml_parser_initialize(&y.p))
		return nyx_err_set(err, NYX_EXIT_OSERR, "yaml_init_failed",
		    "cannot initialise the YAML parser");
	yaml_parser_set_input_string(&y.p, (const unsigned char *)buf, len);
	/* STREAM-START, then DOCUMENT-START or STREAM-END (empty file) */
	if (ynext(&y, &ev) < 0)
		goto out;
	yaml_event_delete(&ev);
	if (ynext(&y, &ev) < 0)
		goto out;
	if (ev.type == YAML_STREAM_END_EVENT) {
		yaml_event_delete(&ev);
		*out = jv_null();
		rc = 0;
		goto out;
	}
	yaml_event_delete(&ev);
	if (ynext(&y, &ev) < 0)
		goto out;
	rc = ynode(&y, &ev, out, 0);
out:
	yaml_parser_delete(&y.p);
	return rc;
}

int
nyx_config_check_perms(
    int fd, const char *path, bool secret, struct nyx_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return nyx_err_set(err, NYX_EXIT_NOINPUT, "file_unreadable",
		    "cannot stat %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return nyx_err_set(err, NYX_EXIT_CONFIG, "file_not_regular",
		    "%s is not a regular file", path);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return nyx_err_set(err, NYX_EXIT_CONFIG,
		    "file_permissions_unsafe",
		    "%s is writable by group or others; refusing it (chmod "
		    "go-w)",
		    path);
	if (secret && (st.st_mode & (S_IRGRP | S_IROTH)))
		nyx_log(NYX_LOG_WARN,
		    "%s is readable by group or others "
		    "(chmod 600 recommended)",
		    path);
	return 0;
}

int
nyx_config_read_file(const char *path, bool secret, size_t cap,
    struct nyx_buf *b, struct nyx_err *err)
{
	int fd, rc = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return nyx_err_set(err, NYX_EXIT_NOINPUT, "file_unreadable",
		    "cannot open %s: %s", path, strerror(errno));
	if (nyx_config_check_perms(fd, path, secret, err) < 0)
		goto out;
	nyx_buf_init(b, cap);
	b->secret = secret;
	if (nyx_buf_read_fd(b, fd) < 0) {
		nyx_err_set(err,
		    errno == EFBIG ? NYX_EXIT_CONFIG : NYX_EXIT_NOINPUT,
		    "file_unreadable", "cannot read %s: %s", path,
		    errno == EFBIG ? "file too large" : strerror(errno));
		nyx_buf_free(b);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

int
nyx_yaml_load_file(const char *path, jv *out, struct nyx_err *err)
{
	struct nyx_buf b = NYX_BUF_ZERO;
	int rc;

	if (nyx_config_read_file(path, false, 256u * 1024 * 1024, &b, err) < 0)
		return -1;
	rc = nyx_yaml_load_buf(b.data ? b.data : "", b.len, path, out, err);
	nyx_buf_free(&b);
	return rc;
}

char *
nyx_expand_home(const char *path)
{
	const char *home;
	char *out;
	size_t n;

	if (path == NULL)
		return NULL;
	if (strncmp(path, "~/", 2) != 0 && strcmp(path, "~") != 0)
		return strdup(path);
	home = getenv("HOME");
	if (home == NULL)
		home = "";
	n = strlen(home) + strlen(path);
	out = malloc(n + 1);
	if (out != NULL)
		snprintf(out, n + 1, "%s%s", home, path + 1);
	return out;
}

/* ---- settings ---- */

void
nyx_settings_init(struct nyx_settings *s)
{
	memset(s, 0, sizeof(*s));
	s->max_inventory_bytes = NYX_INVENTORY_MAX_DEFAULT;
	s->profile_obj = jv_null();
}

void
nyx_settings_free(struct nyx_settings *s)
{
	free(s->config_path);
	free(s->profile);
	free(s->base_url);
	free(s->backend);
	free(s->state_dir);
	nyx_secure_free(&s->token);
	nyx_secure_free(&s->exec_token);
	jv_free(s->profile_obj);
	s->profile_obj = jv_null();
	s->config_path = s->profile = s->base_url = s->backend = NULL;
	s->state_dir = NULL;
}

const char *
nyx_config_env(const char *name)
{
	const char *v = getenv(name);

	return (v != NULL && *v != '\0') ? v : NULL;
}

/* A string key of the profile, else of the top level; borrowed. */
static const char *
cfg_str(jv cfg, jv prof, const char *key)
{
	const char *v = nyx_json_peek_str(prof, key);

	return v ? v : nyx_json_peek_str(cfg, key);
}

static int
check_keys(jv obj, const char *where, const char *const *known)
{
	jv keys;
	int i, n;

	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return 0;
	keys = jv_keys(jv_copy(obj));
	n = jv_array_length(jv_copy(keys));
	for (i = 0; i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i);
		const char *const *p;
		bool ok = false;

		for (p = known; *p != NULL; p++)
			if (strcmp(*p, jv_string_value(k)) == 0)
				ok = true;
		if (!ok)
			nyx_log(NYX_LOG_WARN, "%s: unknown key '%s' ignored",
			    where, jv_string_value(k));
		jv_free(k);
	}
	jv_free(keys);
	return 0;
}

static int
parse_secs(const char *v, const char *what, long *ms, struct nyx_err *err)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || n < 1 || n > 3600)
		return nyx_err_set(err, NYX_EXIT_USAGE, "max_time_invalid",
		    "%s must be a whole number of seconds from 1 to 3600",
		    what);
	*ms = n * 1000;
	return 0;
}

static int
load_config_file(const struct nyx_common *c, struct nyx_settings *s, jv *cfg,
    struct nyx_err *err)
{
	static const char *const top_keys[] = {
	    "default_profile", "state_dir", "profiles", NULL};
	const char *explicit_path =
	    c->config ? c->config : nyx_config_env("NYX_CONFIG");
	char *path = NULL;
	struct nyx_buf b = NYX_BUF_ZERO;
	int rc = -1;

	*cfg = jv_null();
	if (explicit_path != NULL) {
		path = nyx_expand_home(explicit_path);
	} else {
		const char *xdg = nyx_config_env("XDG_CONFIG_HOME");
		const char *home = nyx_config_env("HOME");
		size_t n;

		if (xdg == NULL && home == NULL)
			return 0;
		n = strlen(xdg ? xdg : home) + 32;
		path = malloc(n);
		if (path == NULL)
			return nyx_err_set(
			    err, NYX_EXIT_OSERR, "oom", "out of memory");
		if (xdg)
			snprintf(path, n, "%s/nyx/config.yaml", xdg);
		else
			snprintf(path, n, "%s/.config/nyx/config.yaml", home);
		if (access(path, F_OK) != 0) {
			free(path);
			return 0;
		}
	}
	if (path == NULL)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	if (nyx_config_read_file(path, false, CONFIG_MAX_BYTES, &b, err) < 0) {
		/* a named config that is missing is a configuration error */
		if (err->exit == NYX_EXIT_NOINPUT)
			err->exit = NYX_EXIT_CONFIG;
		goto out;
	}
	if (nyx_yaml_load_buf(b.data ? b.data : "", b.len, path, cfg, err) <
	    0) {
		err->exit = NYX_EXIT_CONFIG;
		snprintf(err->code, sizeof(err->code), "config_invalid");
		goto out;
	}
	if (jv_get_kind(*cfg) == JV_KIND_NULL) {
		jv_free(*cfg);
		*cfg = jv_object();
	}
	if (jv_get_kind(*cfg) != JV_KIND_OBJECT) {
		nyx_err_set(err, NYX_EXIT_CONFIG, "config_invalid",
		    "%s: the top level must be a mapping", path);
		goto out;
	}
	check_keys(*cfg, path, top_keys);
	s->config_path = path;
	path = NULL;
	rc = 0;
out:
	nyx_buf_free(&b);
	free(path);
	return rc;
}

static char *
dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

int
nyx_settings_resolve(
    const struct nyx_common *c, struct nyx_settings *s, struct nyx_err *err)
{
	static const char *const prof_keys[] = {"base_url", "token_file",
	    "exec_token_file", "backend", "state_dir", "timeout",
	    "max_inventory_bytes", NULL};
	jv cfg = jv_null(), profs, prof = jv_null();
	const char *name, *v;
	int rc = -1;

	if (load_config_file(c, s, &cfg, err) < 0)
		goto out;
	name = c->profile ? c->profile : nyx_config_env("NYX_PROFILE");
	if (name == NULL)
		name = nyx_json_peek_str(cfg, "default_profile");
	profs = nyx_json_get(cfg, "profiles");
	if (jv_get_kind(profs) != JV_KIND_OBJECT &&
	    jv_get_kind(profs) != JV_KIND_INVALID &&
	    jv_get_kind(profs) != JV_KIND_NULL) {
		jv_free(profs);
		nyx_err_set(err, NYX_EXIT_CONFIG, "config_invalid",
		    "%s: 'profiles' must be a mapping", s->config_path);
		goto out;
	}
	if (name != NULL) {
		prof = nyx_json_get(profs, name);
		if (jv_get_kind(prof) != JV_KIND_OBJECT) {
			jv_free(prof);
			jv_free(profs);
			nyx_err_set(err, NYX_EXIT_CONFIG, "profile_unknown",
			    "profile '%s' is not defined%s%s", name,
			    s->config_path ? " in " : "",
			    s->config_path ? s->config_path : "");
			goto out;
		}
		s->profile = strdup(name);
		check_keys(prof, s->config_path, prof_keys);
	}
	jv_free(profs);

	v = c->base_url ? c->base_url : nyx_config_env("NYX_BASE_URL");
	if (v == NULL)
		v = nyx_config_env("NYXID_BASE_URL");
	if (v == NULL)
		v = nyx_json_peek_str(prof, "base_url");
	if (v != NULL) {
		size_t n;

		s->base_url = strdup(v);
		n = strlen(s->base_url);
		while (n > 0 && s->base_url[n - 1] == '/')
			s->base_url[--n] = '\0';
		if (nyx_http_check_base_url(s->base_url, err) < 0)
			goto out;
	}
	s->backend = dup_or_null(nyx_json_peek_str(prof, "backend"));
	if (s->backend != NULL && strcmp(s->backend, "nyxid") != 0 &&
	    strcmp(s->backend, "local") != 0) {
		nyx_err_set(err, NYX_EXIT_CONFIG, "config_invalid",
		    "profile backend must be 'nyxid' or 'local'");
		goto out;
	}

	v = c->state_dir ? c->state_dir : nyx_config_env("NYX_STATE_DIR");
	if (v == NULL)
		v = cfg_str(cfg, prof, "state_dir");
	if (v != NULL) {
		s->state_dir = nyx_expand_home(v);
	} else {
		const char *xdg = nyx_config_env("XDG_STATE_HOME");
		const char *home = nyx_config_env("HOME");
		size_t n = strlen(xdg ? xdg : home ? home : "/tmp") + 32;

		s->state_dir = malloc(n);
		if (s->state_dir != NULL) {
			if (xdg)
				snprintf(s->state_dir, n, "%s/nyx", xdg);
			else
				snprintf(s->state_dir, n, "%s/.local/state/nyx",
				    home ? home : "/tmp");
		}
	}
	if (s->state_dir == NULL) {
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
		goto out;
	}

	if (c->max_time != NULL) {
		if (parse_secs(c->max_time, "--max-time", &s->timeout_ms, err) <
		    0)
			goto out;
	} else if (nyx_json_kind(prof, "timeout") == JV_KIND_NUMBER) {
		jv t = nyx_json_get(prof, "timeout");
		double d = jv_number_value(t);

		jv_free(t);
		if (d < 1 || d > 3600 || d != (long)d) {
			nyx_err_set(err, NYX_EXIT_CONFIG, "config_invalid",
			    "profile timeout must be 1..3600 seconds");
			goto out;
		}
		s->timeout_ms = (long)d * 1000;
	}
	v = nyx_config_env("NYX_MAX_INVENTORY_BYTES");
	if (v != NULL ||
	    nyx_json_kind(prof, "max_inventory_bytes") == JV_KIND_NUMBER) {
		double d;

		if (v != NULL) {
			char *end;

			errno = 0;
			d = strtod(v, &end);
			if (errno != 0 || *end != '\0')
				d = -1;
		} else {
			jv t = nyx_json_get(prof, "max_inventory_bytes");

			d = jv_number_value(t);
			jv_free(t);
		}
		if (d < 1024 || d > 256.0 * 1024 * 1024 ||
		    d != (double)(size_t)d) {
			nyx_err_set(err, NYX_EXIT_CONFIG, "config_invalid",
			    "max_inventory_bytes must be 1024..268435456");
			goto out;
		}
		s->max_inventory_bytes = (size_t)d;
	}
	s->profile_obj = jv_copy(prof);
	rc = 0;
out:
	jv_free(prof);
	jv_free(cfg);
	return rc;
}

long
nyx_settings_exchange_ms(const struct nyx_settings *s)
{
	return s->timeout_ms > 0 && s->timeout_ms < NYX_HTTP_EXCHANGE_MS
	    ? s->timeout_ms
	    : NYX_HTTP_EXCHANGE_MS;
}

int
nyx_settings_require_base_url(const struct nyx_settings *s, struct nyx_err *err)
{
	if (s->base_url != NULL)
		return 0;
	return nyx_err_set(err, NYX_EXIT_CONFIG, "base_url_missing",
	    "no NyxID base URL is configured (--base-url, NYX_BASE_URL or a "
	    "profile's base_url)");
}
