/*
 * nyx_hash: SHA-256, the length-prefixed digest of PRODUCT.md section 4,
 * random identifiers, base64url and secure wiping.  The digests and base64
 * are Nettle's, the randomness the kernel's (getrandom(2)), the wiping
 * glibc's explicit_bzero().  This is the only file that includes Nettle
 * headers.  (Not OpenSSL: libcrypto's load and provider set-up cost every
 * local run about 2 ms of its 5 over the sandbox floor; bench/README.md.)
 *
 * Length-prefixed digest: each component is a 4-byte big-endian signed
 * length followed by its UTF-8 bytes; NULL is length -1 with no bytes.
 * A struct nyx_digest is opaque; create, add components, finish once.
 */
#ifndef NYX_HASH_H
#define NYX_HASH_H

#include <stdbool.h>
#include <stddef.h>

#define NYX_SHA256_HEX 65 /* 64 hex digits and a NUL */

/* Lowercase hex SHA-256 of n bytes.  Returns 0 or -1. */
int nyx_sha256_hex(const void *p, size_t n, char out[NYX_SHA256_HEX]);

struct nyx_digest;

struct nyx_digest *nyx_digest_new(void);
/* Add one component; s may be NULL (length -1). */
void nyx_digest_add(struct nyx_digest *d, const char *s);
void nyx_digest_add_bool(struct nyx_digest *d, int b);
/* Finish into out and free d.  Returns 0 or -1. */
int nyx_digest_finish(struct nyx_digest *d, char out[NYX_SHA256_HEX]);
void nyx_digest_free(struct nyx_digest *d);

/* n random bytes from the CSPRNG as 2n lowercase hex (out: 2n+1). */
int nyx_random_hex(char *out, size_t nbytes);

/*
 * Decode unpadded base64url into a new NUL-terminated heap block; *outlen
 * gets the length.  Returns NULL on invalid input.
 */
char *nyx_b64url_decode(const char *in, size_t inlen, size_t *outlen);

/* Standard base64 (with padding) into a new heap string; NULL on failure. */
char *nyx_b64_encode(const void *in, size_t n);

/* Wipe memory so the compiler cannot drop it. */
void nyx_secure_zero(void *p, size_t n);

/* Wipe and free a heap string that held a secret; *p becomes NULL. */
void nyx_secure_free(char **p);

/* Whether two strings are equal, in time that depends on their lengths
 * only (for comparing a presented secret). */
bool nyx_secure_equal(const char *a, const char *b);

#endif
