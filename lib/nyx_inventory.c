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

/* Required string field (non-empty after trim when `id`). */
static int
req_str(jv o, const char *k, char **dst, bool id, const char *what, size_t i,
    char *why, size_t whysz)
{
	const char *v = nyx_json_peek_str(o, k);

	if (v == NULL)
		FAIL("%s[%zu].%s is missing or not a string", what, i, k);
	*dst = id ? trimmed(v, true) : strdup(v);
	if (*dst == NULL)
		FAIL("%s[%zu].%s is empty", what, i, k);
	return 0;
}

/* Optional string: absent or null gives NULL; another kind is malformed. */
static int
opt_str(jv o, const char *k, char **dst, bool blank_null, const char *what,
    size_t i, char *why, size_t whysz)
{
	jv_kind kind = nyx_json_kind(o, k);

	*dst = NULL;
	if (kind == JV_KIND_INVALID || kind == JV_KIND_NULL)
		return 0;
	if (kind != JV_KIND_STRING)
		FAIL("%s[%zu].%s is not a string", what, i, k);
	*dst = trimmed(nyx_json_peek_str(o, k), blank_null);
	return 0;
}

static int
req_bool(jv o, const char *k, bool *dst, const char *what, size_t i, char *why,
    size_t whysz)
{
	int b = nyx_json_bool(o, k);

	if (b < 0)
		FAIL("%s[%zu].%s is missing or not a boolean", what, i, k);
	*dst = b == 1;
	return 0;
}

static int
opt_bool(jv o, const char *k, int *dst, const char *what, size_t i, char *why,
    size_t whysz)
{
	int b = nyx_json_bool(o, k);

	if (b == -2)
		FAIL("%s[%zu].%s is not a boolean", what, i, k);
	*dst = b < 0 ? NYX_ABSENT : b;
	return 0;
}

static int
parse_source(jv o, struct nyx_source *src, const char *what, size_t i,
    char *why, size_t whysz)
{
	jv cs = nyx_json_get(o, "credential_source");
	const char *type;
	int rc = -1;

	memset(src, 0, sizeof(*src));
	if (jv_get_kind(cs) != JV_KIND_OBJECT) {
		snprintf(why, whysz,
		    "%s[%zu].credential_source is missing or "
		    "not an object",
		    what, i);
		goto out;
	}
	type = nyx_json_peek_str(cs, "type");
	if (type != NULL && strcmp(type, "personal") == 0) {
		src->type = NYX_SRC_PERSONAL;
		src->allowed = true;
		rc = 0;
	} else if (type != NULL && strcmp(type, "org") == 0) {
		const char *role = nyx_json_peek_str(cs, "role");
		int allowed = nyx_json_bool(cs, "allowed");

		src->type = NYX_SRC_ORG;
		if (nyx_json_peek_str(cs, "org_id") == NULL ||
		    *nyx_json_peek_str(cs, "org_id") == '\0')
			snprintf(why, whysz,
			    "%s[%zu].credential_source.org_id "
			    "is missing",
			    what, i);
		else if (role == NULL || !in_set(role, roles))
			snprintf(why, whysz,
			    "%s[%zu].credential_source.role "
			    "is missing or unknown",
			    what, i);
		else if (allowed < 0)
			snprintf(why, whysz,
			    "%s[%zu].credential_source.allowed "
			    "is missing or not a boolean",
			    what, i);
		else {
			src->org_id = strdup(nyx_json_peek_str(cs, "org_id"));
			src->role = strdup(role);
			src->allowed = allowed == 1;
			rc = 0;
		}
	} else {
		snprintf(why, whysz,
		    "%s[%zu].credential_source.type is "
		    "missing or unknown",
		    what, i);
	}
out:
	jv_free(cs);
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

static int
parse_route(jv o, struct nyx_route *r, size_t i, char *why, size_t whysz)
{
	static const char *const what = "services";
	static const char *const id_keys[] = {"id", "_id", "service_id"};
	char *dummy = NULL;
	size_t k;

	memset(r, 0, sizeof(*r));
	for (k = 0; k < 3 && r->id == NULL; k++) {
		jv_kind kind = nyx_json_kind(o, id_keys[k]);

		if (kind == JV_KIND_INVALID)
			continue;
		if (req_str(o, id_keys[k], &r->id, true, what, i, why, whysz) <
		    0)
			return -1;
	}
	if (r->id == NULL)
		FAIL("services[%zu].id is missing", i);
	if (req_str(o, "slug", &r->slug, false, what, i, why, whysz) < 0 ||
	    req_bool(o, "is_active", &r->is_active, what, i, why, whysz) < 0 ||
	    parse_source(o, &r->src, what, i, why, whysz) < 0 ||
	    opt_str(o, "catalog_service_id", &r->catalog_service_id, true, what,
	        i, why, whysz) < 0 ||
	    opt_bool(o, "forward_access_token", &r->forward_access_token, what,
	        i, why, whysz) < 0 ||
	    opt_bool(o, "inject_delegation_token", &r->inject_delegation_token,
	        what, i, why, whysz) < 0 ||
	    opt_str(o, "delegation_token_scope", &r->delegation_token_scope,
	        false, what, i, why, whysz) < 0)
		return -1;
	/* optional display fields must still have the right kind */
	if (opt_str(o, "label", &dummy, false, what, i, why, whysz) < 0)
		return -1;
	free(dummy);
	if (opt_str(o, "catalog_service_name", &dummy, false, what, i, why,
	        whysz) < 0)
		return -1;
	free(dummy);
	if (opt_str(o, "default_model", &dummy, false, what, i, why, whysz) < 0)
		return -1;
	free(dummy);
	return 0;
}

int
nyx_inventory_parse_services(
    struct nyx_inventory *inv, jv doc, char *why, size_t whysz)
{
	jv list;
	size_t i, n;
	int rc = -1;

	if (get_list(doc, "services", &list, why, whysz) < 0) {
		jv_free(doc);
		return -1;
	}
	n = (size_t)jv_array_length(jv_copy(list));
	inv->routes = calloc(n ? n : 1, sizeof(*inv->routes));
	if (inv->routes == NULL) {
		snprintf(why, whysz, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		jv o = jv_array_get(jv_copy(list), (int)i);
		int prc = parse_route(o, &inv->routes[i], i, why, whysz);

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
	jv_free(list);
	jv_free(doc);
	return rc;
}

static int
parse_key(jv o, struct nyx_key *k, size_t i, char *why, size_t whysz)
{
	static const char *const what = "keys";
	char *dummy = NULL;

	memset(k, 0, sizeof(*k));
	if (req_str(o, "id", &k->id, true, what, i, why, whysz) < 0 ||
	    req_str(o, "slug", &k->slug, false, what, i, why, whysz) < 0 ||
	    req_bool(o, "is_active", &k->is_active, what, i, why, whysz) < 0 ||
	    req_bool(o, "connected", &k->connected, what, i, why, whysz) < 0 ||
	    parse_source(o, &k->src, what, i, why, whysz) < 0 ||
	    req_str(o, "status", &k->status, false, what, i, why, whysz) < 0 ||
	    opt_str(o, "node_id", &k->node_id, true, what, i, why, whysz) < 0 ||
	    opt_str(o, "node_status", &k->node_status, false, what, i, why,
	        whysz) < 0 ||
	    opt_str(o, "catalog_service_id", &k->catalog_service_id, true, what,
	        i, why, whysz) < 0 ||
	    opt_str(o, "catalog_service_slug", &k->catalog_service_slug, true,
	        what, i, why, whysz) < 0 ||
	    opt_bool(o, "auto_connected", &k->auto_connected, what, i, why,
	        whysz) < 0)
		return -1;
	if (!in_set(k->status, key_statuses))
		FAIL("keys[%zu].status is not a known credential status", i);
	if (k->node_id != NULL && k->node_status == NULL)
		FAIL("keys[%zu].node_status is missing for a node route", i);
	if (k->node_id == NULL && k->node_status != NULL)
		FAIL("keys[%zu].node_status is present without node_id", i);
	if (k->node_status != NULL && !in_set(k->node_status, node_statuses))
		FAIL("keys[%zu].node_status is not a known node status", i);
	if (opt_str(o, "label", &dummy, false, what, i, why, whysz) < 0)
		return -1;
	free(dummy);
	if (opt_str(o, "catalog_service_name", &dummy, false, what, i, why,
	        whysz) < 0)
		return -1;
	free(dummy);
	return 0;
}

int
nyx_inventory_parse_keys(
    struct nyx_inventory *inv, jv doc, char *why, size_t whysz)
{
	jv list;
	size_t i, n;
	int rc = -1;

	if (get_list(doc, "keys", &list, why, whysz) < 0) {
		jv_free(doc);
		return -1;
	}
	n = (size_t)jv_array_length(jv_copy(list));
	inv->keys = calloc(n ? n : 1, sizeof(*inv->keys));
	if (inv->keys == NULL) {
		snprintf(why, whysz, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		jv o = jv_array_get(jv_copy(list), (int)i);
		int prc = parse_key(o, &inv->keys[i], i, why, whysz);

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
