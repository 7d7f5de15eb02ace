/*
 * The inventory: a /keys body, a newline, a /user-services body (WIRE 2,
 * 4.1), parsed strictly, joined and classified for both capabilities,
 * then the admission or blocked record built as nyx-route-inspect does.
 */
#include <string.h>

#include "fuzz.h"
#include "nyx_inventory.h"
#include "nyx_json.h"
#include "nyx_route.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *nl = memchr(p, '\n', size);
	struct nyx_inventory inv = NYX_INVENTORY_ZERO;
	char why[256];
	size_t i, klen = nl ? (size_t)(nl - p) : size;
	int ok;

	ok = nyx_inventory_parse_keys(
	         &inv, nyx_json_parse(p, klen), why, sizeof(why)) == 0;
	if (nl != NULL)
		ok = nyx_inventory_parse_services(&inv,
		         nyx_json_parse(nl + 1, size - klen - 1), why,
		         sizeof(why)) == 0 &&
		    ok;
	if (ok) {
		nyx_inventory_join(&inv);
		for (i = 0; i < 2; i++) {
			const struct nyx_capability *cap = nyx_capability_find(
			    i == 0 ? "code_execute" : "codex_managed");
			struct nyx_resolution res;

			FUZZ_ASSERT(cap != NULL);
			memset(&res, 0, sizeof(res));
			if (nyx_route_classify(&inv, cap, NULL, &res) == 0) {
				jv rec = nyx_route_admission(&inv, &res,
				    "http://127.0.0.1:1", "nyx-fuzz", 0);
				char *line = nyx_json_dump(rec);

				/* a record that prints is one line of JSON */
				FUZZ_ASSERT(
				    line != NULL && strchr(line, '\n') == NULL);
				free(line);
				/* an admitted route is one the gates pass */
				FUZZ_ASSERT(
				    res.selected == NULL || res.canonical >= 1);
				nyx_resolution_free(&res);
			}
			memset(&res, 0, sizeof(res));
			if (inv.nroutes > 0 &&
			    nyx_route_classify(
			        &inv, cap, inv.routes[0].id, &res) == 0)
				nyx_resolution_free(&res);
		}
	}
	nyx_inventory_free(&inv);
	return 0;
}
