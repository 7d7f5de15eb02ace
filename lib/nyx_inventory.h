/*
 * nyx_inventory: strict parsing of NyxID's two inventory bodies
 * (GET /api/v1/user-services and GET /api/v1/keys) and their join by exact
 * id (WIRE.md 2.1, reference/aevatar-code-exec.md 1.1).
 *
 * A wrong type, an unknown enum value, a duplicate id or a missing required
 * field makes the whole body malformed.  Unknown extra fields are ignored.
 * The parsed structs own copies of every string they keep, sorted by id;
 * nyx_inventory_free() releases them.  Pure: no I/O.
 */
#ifndef NYX_INVENTORY_H
#define NYX_INVENTORY_H

#include <stdbool.h>
#include <stddef.h>

#include <jv.h>

/* A tri-state flag: absent, false or true. */
#define NYX_ABSENT (-1)

enum nyx_src_type { NYX_SRC_PERSONAL = 0, NYX_SRC_ORG = 1 };

struct nyx_source {
	enum nyx_src_type type;
	char *org_id; /* org only */
	char *role; /* org only: admin, member, viewer */
	bool allowed; /* personal: always true */
};

struct nyx_route {
	char *id;
	char *slug;
	char *catalog_service_id; /* NULL when absent, null or blank */
	bool is_active;
	struct nyx_source src;
	int forward_access_token; /* NYX_ABSENT, 0, 1 */
	int inject_delegation_token; /* NYX_ABSENT, 0, 1 */
	char *delegation_token_scope; /* NULL when absent */
	const struct nyx_key *key; /* the joined key, or NULL */
};

struct nyx_key {
	char *id;
	char *slug;
	char *catalog_service_id; /* NULL when absent */
	char *catalog_service_slug; /* NULL when absent */
	char *status;
	char *node_id; /* NULL when absent */
	char *node_status; /* set exactly when node_id is */
	bool is_active;
	bool connected;
	int auto_connected; /* NYX_ABSENT, 0, 1 */
	struct nyx_source src;
};

struct nyx_inventory {
	struct nyx_route *routes; /* sorted by id */
	size_t nroutes;
	struct nyx_key *keys; /* sorted by id */
	size_t nkeys;
};

#define NYX_INVENTORY_ZERO                                                     \
	{                                                                      \
		NULL, 0, NULL, 0                                               \
	}

/*
 * Parse a /user-services body (consumes doc).  Returns 0, or -1 with a
 * short reason in why (no values from the body beyond field names and
 * indexes).
 */
int nyx_inventory_parse_services(
    struct nyx_inventory *inv, jv doc, char *why, size_t whysz);

/* Parse a /keys body (consumes doc); same contract. */
int nyx_inventory_parse_keys(
    struct nyx_inventory *inv, jv doc, char *why, size_t whysz);

/* Join routes to keys by exact id (after both parses). */
void nyx_inventory_join(struct nyx_inventory *inv);

const struct nyx_key *nyx_inventory_find_key(
    const struct nyx_inventory *inv, const char *id);

void nyx_inventory_free(struct nyx_inventory *inv);

#endif
