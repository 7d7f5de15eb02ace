/*
 * nyx_config: YAML to jv, the config file, profiles, and the precedence
 * flag > environment > profile > built-in default for every setting.
 * This is the only file that includes <yaml.h>.
 *
 * Credentials are read from files or the environment only, never argv.
 * A config or token file that is group- or world-writable is refused
 * (exit 78); a token file readable by others gets a warning.
 *
 * struct nyx_settings owns its strings (tokens are wiped on free).
 */
#ifndef NYX_CONFIG_H
#define NYX_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include <jv.h>

#include "nyx_buf.h"
#include "nyx_err.h"

/* Values of the common flags, as given on the command line (NULL: unset). */
struct nyx_common {
	const char *config;
	const char *profile;
	const char *base_url;
	const char *token_file;
	const char *exec_token_file;
	const char *state_dir;
	const char *
	    max_time; /* --max-time seconds, validated by nyx_settings_resolve */
	int verbose;
	int quiet;
	bool pretty;
};

/* Inventory reads: 64 MiB, so an organisation with thousands of routes
 * is read (WIRE 4.1, revision 2); NYX_MAX_INVENTORY_BYTES changes it. */
#define NYX_INVENTORY_MAX_DEFAULT (64u * 1024u * 1024u)

struct nyx_settings {
	char *config_path; /* NULL when no file was read */
	char *profile; /* NULL when none selected */
	char *base_url; /* no trailing '/'; NULL when unset */
	char *backend; /* "nyxid", "local" or NULL */
	char *state_dir; /* always set after resolve */
	long timeout_ms; /* per-exchange override; 0 = per-call default */
	size_t max_inventory_bytes;
	char *token; /* source-readable token, NULL until loaded */
	char *exec_token; /* execution token, NULL until loaded */
	const char *token_origin; /* where the token came from (no secret) */
	const char *exec_token_origin;
	jv profile_obj; /* the selected profile (object or null) */
};

void nyx_settings_init(struct nyx_settings *s);
void nyx_settings_free(struct nyx_settings *s);

/* An environment variable's value, or NULL when unset or empty. */
const char *nyx_config_env(const char *name);

/*
 * The bound of one exchange: 15 s, or --timeout when it is shorter
 * (WIRE 4.1: the flag only ever shortens the bounds, never lengthens).
 */
long nyx_settings_exchange_ms(const struct nyx_settings *s);

/* Load the config file and resolve every non-secret setting. */
int nyx_settings_resolve(
    const struct nyx_common *c, struct nyx_settings *s, struct nyx_err *err);

/*
 * Open and read a file after the permission check (group- or
 * world-writable: 78; readable by others and secret: a warning), at most
 * cap bytes (more: 78).  A secret buffer is wiped when it grows or is
 * freed.  0, or -1 with err (66 unreadable).
 */
int nyx_config_read_file(const char *path, bool secret, size_t cap,
    struct nyx_buf *b, struct nyx_err *err);

/*
 * Parse a YAML file (or JSON, which is YAML) into jv.  Aliases are refused.
 * Returns 0 with *out set, or -1 (66 missing, 65 malformed).
 */
int nyx_yaml_load_file(const char *path, jv *out, struct nyx_err *err);
int nyx_yaml_load_buf(const char *buf, size_t len, const char *name, jv *out,
    struct nyx_err *err);

/*
 * Refuse a file writable by group or others (78); warn when `secret` and
 * it is readable by others.  Uses the open descriptor.
 */
int nyx_config_check_perms(
    int fd, const char *path, bool secret, struct nyx_err *err);

/* 0 when a base URL is configured, else -1 with err (78). */
int nyx_settings_require_base_url(
    const struct nyx_settings *s, struct nyx_err *err);

/* Expand a leading "~/" with $HOME into a new heap string. */
char *nyx_expand_home(const char *path);

#endif
