#include "nyx_hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

struct nyx_digest {
	EVP_MD_CTX *ctx;
	int failed;
};

static void
to_hex(const unsigned char *md, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[2 * n] = '\0';
}

int
nyx_sha256_hex(const void *p, size_t n, char out[NYX_SHA256_HEX])
{
	unsigned char md[32];
	size_t mdlen = sizeof(md);

	if (!EVP_Q_digest(NULL, "SHA256", NULL, p, n, md, &mdlen))
		return -1;
	to_hex(md, mdlen, out);
	return 0;
}

struct nyx_digest *
nyx_digest_new(void)
{
	struct nyx_digest *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return NULL;
	d->ctx = EVP_MD_CTX_new();
	if (d->ctx == NULL || !EVP_DigestInit_ex(d->ctx, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(d->ctx);
		free(d);
		return NULL;
	}
	return d;
}

void
nyx_digest_add(struct nyx_digest *d, const char *s)
{
	unsigned char len[4];
	size_t n = s ? strlen(s) : 0;
	long v = s ? (long)n : -1;

	if (n > 0x7fffffff) {
		d->failed = 1;
		return;
	}
	len[0] = (unsigned char)(((unsigned long)v >> 24) & 0xff);
	len[1] = (unsigned char)(((unsigned long)v >> 16) & 0xff);
	len[2] = (unsigned char)(((unsigned long)v >> 8) & 0xff);
	len[3] = (unsigned char)((unsigned long)v & 0xff);
	if (!EVP_DigestUpdate(d->ctx, len, 4))
		d->failed = 1;
	if (n > 0 && !EVP_DigestUpdate(d->ctx, s, n))
		d->failed = 1;
}

void
nyx_digest_add_bool(struct nyx_digest *d, int b)
{
	nyx_digest_add(d, b ? "true" : "false");
}

int
nyx_digest_finish(struct nyx_digest *d, char out[NYX_SHA256_HEX])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	int rc = -1;

	if (d == NULL)
		return -1;
	if (!d->failed && EVP_DigestFinal_ex(d->ctx, md, &mdlen) &&
	    mdlen == 32) {
		to_hex(md, mdlen, out);
		rc = 0;
	}
	nyx_digest_free(d);
	return rc;
}

void
nyx_digest_free(struct nyx_digest *d)
{
	if (d == NULL)
		return;
	EVP_MD_CTX_free(d->ctx);
	free(d);
}

int
nyx_random_hex(char *out, size_t nbytes)
{
	unsigned char buf[64];
	size_t got = 0;

	if (nbytes > sizeof(buf))
		return -1;
	/*
	 * The kernel CSPRNG directly: initialising OpenSSL's DRBG costs about
	 * a millisecond at every start, and these ids need no more than this.
	 */
	while (got < nbytes) {
		ssize_t n = getrandom(buf + got, nbytes - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* no getrandom(2): fall back to OpenSSL's DRBG */
			if (RAND_bytes(buf, (int)nbytes) != 1)
				return -1;
			break;
		}
		got += (size_t)n;
	}
	to_hex(buf, nbytes, out);
	return 0;
}

char *
nyx_b64url_decode(const char *in, size_t inlen, size_t *outlen)
{
	char *std, *out = NULL;
	size_t i, padded;
	int n;

	if (inlen % 4 == 1 || inlen > 1u << 20)
		return NULL;
	padded = (inlen + 3) / 4 * 4;
	std = malloc(padded + 1);
	if (std == NULL)
		return NULL;
	for (i = 0; i < inlen; i++) {
		char c = in[i];

		if (c == '-')
			c = '+';
		else if (c == '_')
			c = '/';
		else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		             (c >= '0' && c <= '9')))
			goto out;
		std[i] = c;
	}
	for (; i < padded; i++)
		std[i] = '=';
	std[padded] = '\0';
	out = malloc(padded / 4 * 3 + 1);
	if (out == NULL)
		goto out;
	n = EVP_DecodeBlock(
	    (unsigned char *)out, (unsigned char *)std, (int)padded);
	if (n < 0) {
		free(out);
		out = NULL;
		goto out;
	}
	/* EVP_DecodeBlock counts padding bytes as zero output bytes */
	n -= (int)(padded - inlen);
	out[n] = '\0';
	*outlen = (size_t)n;
out:
	free(std);
	return out;
}

char *
nyx_b64_encode(const void *in, size_t n)
{
	char *out;

	if (n > (1u << 28))
		return NULL;
	out = malloc((n + 2) / 3 * 4 + 1);
	if (out == NULL)
		return NULL;
	EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	return out;
}

void
nyx_secure_zero(void *p, size_t n)
{
	if (p != NULL && n > 0)
		OPENSSL_cleanse(p, n);
}

bool
nyx_secure_equal(const char *a, const char *b)
{
	size_t la, lb;

	if (a == NULL || b == NULL)
		return false;
	la = strlen(a);
	lb = strlen(b);
	return la == lb && CRYPTO_memcmp(a, b, la) == 0;
}

void
nyx_secure_free(char **p)
{
	if (*p != NULL) {
		nyx_secure_zero(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}
