#include "nyx_inventory.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_json.h"

static const char *const key_statuses[] = {"active", "expired", "revoked",
    "failed", "refresh_failed", "pending_auth", NULL};
static const char *const node_statuses[] = {
    "online", "offline", "draining", "unknown", "inaccessible", NULL};
static const char *const roles[] = {"admin", "member", "viewer", NULL};

static bool
in_set(const char *s, const char *const *set)
{
	for (; *set != NULL; set++)
		if (strcmp(s, *set) == 0)
			return true;
	return false;
}

/* A trimmed heap copy; NULL for blank when blank_null. */
static char *
trimmed(const char *s, bool blank_null)
{
	size_t n;

	while (isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		n--;
	if (n == 0 && blank_null)
		return NULL;
	return strndup(s, n);
}

#define FAIL(...)                                                              \
	do {                                                                   \
		snprintf(why, whysz, __VA_ARGS__);                             \
		return -1;                                                     \
	} while (0)

/*
 * Field names as jv strings, built once per body: jq caches a string's
 * hash inside the string, so reusing these keys makes each lookup a hash
 * probe instead of allocating and hashing a new key (inventories can hold
 * tens of thousands of objects).
 */
struct keyset {
	jv k[16];
	size_t n;
};

static void
keyset_init(struct keyset *ks, const char *const *names, size_t n)
{
	size_t j;

	ks->n = n;
	for (j = 0; j < n; j++)
		ks->k[j] = jv_string(names[j]);
}

static void
keyset_free(struct keyset *ks)
{
	size_t j;

	for (j = 0; j < ks->n; j++)
		jv_free(ks->k[j]);
}

/* The values of the key set's fields in o (jv_invalid() when absent). */
static void
collect(jv o, const struct keyset *ks, jv *out)
{
	size_t j;

	for (j = 0; j < ks->n; j++)
		out[j] = jv_object_get(jv_copy(o), jv_copy(ks->k[j]));
}

static void
drop_fields(jv *v, size_t n)
{
	size_t j;

	for (j = 0; j < n; j++)
		jv_free(v[j]);
}

/* Required string field (non-empty after trim when `id`). */
static int
req_str(jv v, const char *k, char **dst, bool id, const char *what, size_t i,
    char *why, size_t whysz)
{
	if (jv_get_kind(v) != JV_KIND_STRING)
		FAIL("%s[%zu].%s is missing or not a string", what, i, k);
	*dst =
	    id ? trimmed(jv_string_value(v), true) : strdup(jv_string_value(v));
	if (*dst == NULL)
		FAIL("%s[%zu].%s is empty", what, i, k);
	return 0;
}

/* Optional string: absent or null gives NULL; another kind is malformed. */
static int
opt_str(jv v, const char *k, char **dst, bool blank_null, const char *what,
    size_t i, char *why, size_t whysz)
{
	jv_kind kind = jv_get_kind(v);

	*dst = NULL;
	if (kind == JV_KIND_INVALID || kind == JV_KIND_NULL)
		return 0;
	if (kind != JV_KIND_STRING)
		FAIL("%s[%zu].%s is not a string", what, i, k);
	*dst = trimmed(jv_string_value(v), blank_null);
	return 0;
}

/* An optional display string: only its kind is checked. */
static int
opt_str_kind(
    jv v, const char *k, const char *what, size_t i, char *why, size_t whysz)
{
	jv_kind kind = jv_get_kind(v);

	if (kind != JV_KIND_INVALID && kind != JV_KIND_NULL &&
	    kind != JV_KIND_STRING)
		FAIL("%s[%zu].%s is not a string", what, i, k);
	return 0;
}

static int
req_bool(jv v, const char *k, bool *dst, const char *what, size_t i, char *why,
    size_t whysz)
{
	jv_kind kind = jv_get_kind(v);

	if (kind != JV_KIND_TRUE && kind != JV_KIND_FALSE)
		FAIL("%s[%zu].%s is missing or not a boolean", what, i, k);
	*dst = kind == JV_KIND_TRUE;
	return 0;
}

static int
opt_bool(jv v, const char *k, int *dst, const char *what, size_t i, char *why,
    size_t whysz)
{
	jv_kind kind = jv_get_kind(v);

	if (kind == JV_KIND_INVALID || kind == JV_KIND_NULL)
		*dst = NYX_ABSENT;
	else if (kind == JV_KIND_TRUE || kind == JV_KIND_FALSE)
		*dst = kind == JV_KIND_TRUE;
	else
		FAIL("%s[%zu].%s is not a boolean", what, i, k);
	return 0;
}

static const char *const src_names[] = {"type", "org_id", "role", "allowed"};

static int
parse_source(jv cs, const struct keyset *ks, struct nyx_source *src,
    const char *what, size_t i, char *why, size_t whysz)
{
	jv f[4];
	const char *type;
	int rc = -1;

	memset(src, 0, sizeof(*src));
	if (jv_get_kind(cs) != JV_KIND_OBJECT)
		FAIL("%s[%zu].credential_source is missing or not an object",
		    what, i);
	collect(cs, ks, f);
	type =
	    jv_get_kind(f[0]) == JV_KIND_STRING ? jv_string_value(f[0]) : NULL;
	if (type != NULL && strcmp(type, "personal") == 0) {
		src->type = NYX_SRC_PERSONAL;
		src->allowed = true;
		rc = 0;
	} else if (type != NULL && strcmp(type, "org") == 0) {
		jv_kind ak = jv_get_kind(f[3]);

		src->type = NYX_SRC_ORG;
		if (jv_get_kind(f[1]) != JV_KIND_STRING ||
		    jv_string_value(f[1])[0] == '\0')
			snprintf(why, whysz,
			    "%s[%zu].credential_source.org_id is missing", what,
			    i);
		else if (jv_get_kind(f[2]) != JV_KIND_STRING ||
		    !in_set(jv_string_value(f[2]), roles))
			snprintf(why, whysz,
			    "%s[%zu].credential_source.role is missing or "
			    "unknown",
			    what, i);
		else if (ak != JV_KIND_TRUE && ak != JV_KIND_FALSE)
			snprintf(why, whysz,
			    "%s[%zu].credential_source.allowed is missing or "
			    "not a boolean",
			    what, i);
		else {
			src->org_id = strdup(jv_string_value(f[1]));
			src->role = strdup(jv_string_value(f[2]));
			src->allowed = ak == JV_KIND_TRUE;
			rc = 0;
		}
	} else {
		snprintf(why, whysz,
		    "%s[%zu].credential_source.type is missing or unknown",
		    what, i);
	}
	drop_fields(f, 4);
	return rc;
}

/* The list under `field`, checked to be an array of objects. */
static int
get_list(jv doc, const char *field, jv *list, char *why, size_t whysz)
{
	int i, n;

	if (jv_get_kind(doc) != JV_KIND_OBJECT)
		FAIL("the body is not a JSON object");
	*list = nyx_json_get(doc, field);
	if (jv_get_kind(*list) != JV_KIND_ARRAY) {
		jv_free(*list);
		FAIL("'%s' is missing or not an array", field);
	}
	n = jv_array_length(jv_copy(*list));
	for (i = 0; i < n; i++) {
		jv e = jv_array_get(jv_copy(*list), i);
		jv_kind k = jv_get_kind(e);

		jv_free(e);
		if (k != JV_KIND_OBJECT) {
			jv_free(*list);
			FAIL("%s[%d] is not an object", field, i);
		}
	}
	return 0;
}

static void
free_source(struct nyx_source *s)
{
	free(s->org_id);
	free(s->role);
}

static void
free_route(struct nyx_route *r)
{
	free(r->id);
	free(r->slug);
	free(r->catalog_service_id);
	free(r->delegation_token_scope);
	free_source(&r->src);
}

static void
free_key(struct nyx_key *k)
{
	free(k->id);
	free(k->slug);
	free(k->catalog_service_id);
	free(k->catalog_service_slug);
	free(k->status);
	free(k->node_id);
	free(k->node_status);
	free_source(&k->src);
}

static int
cmp_route(const void *a, const void *b)
{
	return strcmp(((const struct nyx_route *)a)->id,
	    ((const struct nyx_route *)b)->id);
}

static int
cmp_key(const void *a, const void *b)
{
	return strcmp(
	    ((const struct nyx_key *)a)->id, ((const struct nyx_key *)b)->id);
}

enum {
	R_ID,
	R_UID,
	R_SID,
	R_SLUG,
	R_ACTIVE,
	R_SRC,
	R_CAT,
	R_FWD,
	R_INJ,
	R_SCOPE,
	R_LABEL,
	R_CATNAME,
	R_MODEL,
	R_N
};

static const char *const route_names[R_N] = {"id", "_id", "service_id", "slug",
    "is_active", "credential_source", "catalog_service_id",
    "forward_access_token", "inject_delegation_token", "delegation_token_scope",
    "label", "catalog_service_name", "default_model"};

static int
parse_route(jv o, const struct keyset *ks, const struct keyset *sks,
    struct nyx_route *r, size_t i, char *why, size_t whysz)
{
	static const char *const what = "services";
	static const char *const *const names = route_names;
	jv f[R_N];
	int k, rc = -1, idk = -1;

	memset(r, 0, sizeof(*r));
	collect(o, ks, f);
	/* the id may also be spelled _id or service_id */
	for (k = R_ID; k <= R_SID && idk < 0; k++)
		if (jv_is_valid(f[k]))
			idk = k;
	if (idk < 0) {
		snprintf(why, whysz, "services[%zu].id is missing", i);
		goto out;
	}
	if (req_str(f[idk], names[idk], &r->id, true, what, i, why, whysz) <
	        0 ||
	    req_str(f[R_SLUG], "slug", &r->slug, false, what, i, why, whysz) <
	        0 ||
	    req_bool(f[R_ACTIVE], "is_active", &r->is_active, what, i, why,
	        whysz) < 0 ||
	    parse_source(f[R_SRC], sks, &r->src, what, i, why, whysz) < 0 ||
	    opt_str(f[R_CAT], "catalog_service_id", &r->catalog_service_id,
	        true, what, i, why, whysz) < 0 ||
	    opt_bool(f[R_FWD], "forward_access_token", &r->forward_access_token,
	        what, i, why, whysz) < 0 ||
	    opt_bool(f[R_INJ], "inject_delegation_token",
	        &r->inject_delegation_token, what, i, why, whysz) < 0 ||
	    opt_str(f[R_SCOPE], "delegation_token_scope",
	        &r->delegation_token_scope, false, what, i, why, whysz) < 0 ||
	    opt_str_kind(f[R_LABEL], "label", what, i, why, whysz) < 0 ||
	    opt_str_kind(f[R_CATNAME], "catalog_service_name", what, i, why,
	        whysz) < 0 ||
	    opt_str_kind(f[R_MODEL], "default_model", what, i, why, whysz) < 0)
		goto out;
	rc = 0;
out:
	drop_fields(f, R_N);
	return rc;
}

int
nyx_inventory_parse_services(
    struct nyx_inventory *inv, jv doc, char *why, size_t whysz)
{
	struct keyset ks = {{{0}}, 0}, sks = {{{0}}, 0};
	jv list;
	size_t i, n;
	int rc = -1;

	if (get_list(doc, "services", &list, why, whysz) < 0) {
		jv_free(doc);
		return -1;
	}
	n = (size_t)jv_array_length(jv_copy(list));
	keyset_init(&ks, route_names, R_N);
	keyset_init(&sks, src_names, 4);
	inv->routes = calloc(n ? n : 1, sizeof(*inv->routes));
	if (inv->routes == NULL) {
		snprintf(why, whysz, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		jv o = jv_array_get(jv_copy(list), (int)i);
		int prc =
		    parse_route(o, &ks, &sks, &inv->routes[i], i, why, whysz);

		jv_free(o);
		inv->nroutes = i + 1;
		if (prc < 0)
			goto out;
	}
	qsort(inv->routes, n, sizeof(*inv->routes), cmp_route);
	for (i = 1; i < n; i++)
		if (strcmp(inv->routes[i - 1].id, inv->routes[i].id) == 0) {
			snprintf(why, whysz, "services holds a duplicate id");
			goto out;
		}
	rc = 0;
out:
	keyset_free(&ks);
	keyset_free(&sks);
	jv_free(list);
	jv_free(doc);
	return rc;
}

enum {
	K_ID,
	K_SLUG,
	K_ACTIVE,
	K_CONN,
	K_SRC,
	K_STATUS,
	K_NODE,
	K_NODESTATUS,
	K_CAT,
	K_CATSLUG,
	K_AUTO,
	K_LABEL,
	K_CATNAME,
	K_N
};

static const char *const key_names[K_N] = {"id", "slug", "is_active",
    "connected", "credential_source", "status", "node_id", "node_status",
    "catalog_service_id", "catalog_service_slug", "auto_connected", "label",
    "catalog_service_name"};

static int
parse_key(jv o, const struct keyset *ks, const struct keyset *sks,
    struct nyx_key *k, size_t i, char *why, size_t whysz)
{
	static const char *const what = "keys";
	jv f[K_N];
	int rc = -1;

	memset(k, 0, sizeof(*k));
	collect(o, ks, f);
	if (req_str(f[K_ID], "id", &k->id, true, what, i, why, whysz) < 0 ||
	    req_str(f[K_SLUG], "slug", &k->slug, false, what, i, why, whysz) <
	        0 ||
	    req_bool(f[K_ACTIVE], "is_active", &k->is_active, what, i, why,
	        whysz) < 0 ||
	    req_bool(f[K_CONN], "connected", &k->connected, what, i, why,
	        whysz) < 0 ||
	    parse_source(f[K_SRC], sks, &k->src, what, i, why, whysz) < 0 ||
	    req_str(f[K_STATUS], "status", &k->status, false, what, i, why,
	        whysz) < 0 ||
	    opt_str(f[K_NODE], "node_id", &k->node_id, true, what, i, why,
	        whysz) < 0 ||
	    opt_str(f[K_NODESTATUS], "node_status", &k->node_status, false,
	        what, i, why, whysz) < 0 ||
	    opt_str(f[K_CAT], "catalog_service_id", &k->catalog_service_id,
	        true, what, i, why, whysz) < 0 ||
	    opt_str(f[K_CATSLUG], "catalog_service_slug",
	        &k->catalog_service_slug, true, what, i, why, whysz) < 0 ||
	    opt_bool(f[K_AUTO], "auto_connected", &k->auto_connected, what, i,
	        why, whysz) < 0 ||
	    opt_str_kind(f[K_LABEL], "label", what, i, why, whysz) < 0 ||
	    opt_str_kind(
	        f[K_CATNAME], "catalog_service_name", what, i, why, whysz) < 0)
		goto out;
	if (!in_set(k->status, key_statuses))
		snprintf(why, whysz,
		    "keys[%zu].status is not a known credential status", i);
	else if (k->node_id != NULL && k->node_status == NULL)
		snprintf(why, whysz,
		    "keys[%zu].node_status is missing for a node route", i);
	else if (k->node_id == NULL && k->node_status != NULL)
		snprintf(why, whysz,
		    "keys[%zu].node_status is present without node_id", i);
	else if (k->node_status != NULL &&
	    !in_set(k->node_status, node_statuses))
		snprintf(why, whysz,
		    "keys[%zu].node_status is not a known node status", i);
	else
		rc = 0;
out:
	drop_fields(f, K_N);
	return rc;
}

int
nyx_inventory_parse_keys(
    struct nyx_inventory *inv, jv doc, char *why, size_t whysz)
{
	struct keyset ks = {{{0}}, 0}, sks = {{{0}}, 0};
	jv list;
	size_t i, n;
	int rc = -1;

	if (get_list(doc, "keys", &list, why, whysz) < 0) {
		jv_free(doc);
		return -1;
	}
	n = (size_t)jv_array_length(jv_copy(list));
	keyset_init(&ks, key_names, K_N);
	keyset_init(&sks, src_names, 4);
	inv->keys = calloc(n ? n : 1, sizeof(*inv->keys));
	if (inv->keys == NULL) {
		snprintf(why, whysz, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		jv o = jv_array_get(jv_copy(list), (int)i);
		int prc = parse_key(o, &ks, &sks, &inv->keys[i], i, why, whysz);

		jv_free(o);
		inv->nkeys = i + 1;
		if (prc < 0)
			goto out;
	}
	qsort(inv->keys, n, sizeof(*inv->keys), cmp_key);
	for (i = 1; i < n; i++)
		if (strcmp(inv->keys[i - 1].id, inv->keys[i].id) == 0) {
			snprintf(why, whysz, "keys holds a duplicate id");
			goto out;
		}
	rc = 0;
out:
	keyset_free(&ks);
	keyset_free(&sks);
	jv_free(list);
	jv_free(doc);
	return rc;
}

const struct nyx_key *
nyx_inventory_find_key(const struct nyx_inventory *inv, const char *id)
{
	struct nyx_key probe;

	if (inv->nkeys == 0 || id == NULL)
		return NULL;
	memset(&probe, 0, sizeof(probe));
	probe.id = (char *)(uintptr_t)id;
	return bsearch(
	    &probe, inv->keys, inv->nkeys, sizeof(*inv->keys), cmp_key);
}

void
nyx_inventory_join(struct nyx_inventory *inv)
{
	size_t i;

	for (i = 0; i < inv->nroutes; i++)
		inv->routes[i].key =
		    nyx_inventory_find_key(inv, inv->routes[i].id);
}

void
nyx_inventory_free(struct nyx_inventory *inv)
{
	size_t i;

	for (i = 0; i < inv->nroutes; i++)
		free_route(&inv->routes[i]);
	for (i = 0; i < inv->nkeys; i++)
		free_key(&inv->keys[i]);
	free(inv->routes);
	free(inv->keys);
	inv->routes = NULL;
	inv->keys = NULL;
	inv->nroutes = inv->nkeys = 0;
}
