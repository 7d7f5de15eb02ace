/*
 * Credential classification (PRODUCT 2): the shape check, the kind, the
 * JWT payload decode, the scope lookup, for any bytes as a token.
 */
#include <string.h>

#include "fuzz.h"
#include "nyx_cred.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *tok = malloc(size + 1);
	struct nyx_err err = NYX_ERR_ZERO;
	struct nyx_cred c;
	jv payload;

	if (tok == NULL)
		return 0;
	memcpy(tok, data, size);
	tok[size] = '\0';
	(void)nyx_cred_check(tok, &err);
	nyx_cred_classify(tok, &c);
	/* the copies are bounded and terminated, whatever the token */
	FUZZ_ASSERT(memchr(c.subject, '\0', sizeof(c.subject)) != NULL);
	FUZZ_ASSERT(memchr(c.scope, '\0', sizeof(c.scope)) != NULL);
	(void)nyx_cred_kind_name(c.kind);
	(void)nyx_cred_source_readable(&c);
	(void)nyx_cred_can_write(&c);
	(void)nyx_scope_has(tok, "proxy:*");
	payload = nyx_jwt_payload(tok);
	FUZZ_ASSERT(jv_get_kind(payload) == JV_KIND_INVALID ||
	    jv_get_kind(payload) == JV_KIND_OBJECT);
	jv_free(payload);
	free(tok);
	return 0;
}
