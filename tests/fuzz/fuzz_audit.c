/*
 * Audit lines (PRODUCT 8), as audit-replay reads them: a line of JSON
 * whose content and semantic hashes are recomputed.
 */
#include <string.h>

#include "fuzz.h"
#include "nyx_audit.h"
#include "nyx_json.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	jv rec = nyx_json_parse((const char *)data, size);
	char content[65], semantic[65];

	if (jv_get_kind(rec) == JV_KIND_OBJECT &&
	    nyx_audit_hashes(rec, content, semantic) == 0) {
		/* the hashes are hex digests, and stable */
		char c2[65], s2[65];

		FUZZ_ASSERT(strlen(content) == 64 && strlen(semantic) == 64);
		FUZZ_ASSERT(nyx_audit_hashes(rec, c2, s2) == 0 &&
		    strcmp(c2, content) == 0 && strcmp(s2, semantic) == 0);
	}
	jv_free(rec);
	return 0;
}
