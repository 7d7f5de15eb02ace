#include "nyx_hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <nettle/base64.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

struct nyx_digest {
	struct sha256_ctx ctx;
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
	struct sha256_ctx c;
	unsigned char md[SHA256_DIGEST_SIZE];

	sha256_init(&c);
	sha256_update(&c, n, p);
	sha256_digest(&c, sizeof(md), md);
	to_hex(md, sizeof(md), out);
	return 0;
}

struct nyx_digest *
nyx_digest_new(void)
{
	struct nyx_digest *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return NULL;
	sha256_init(&d->ctx);
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
	sha256_update(&d->ctx, sizeof(len), len);
	if (n > 0)
		sha256_update(&d->ctx, n, (const uint8_t *)s);
}

void
nyx_digest_add_bool(struct nyx_digest *d, int b)
{
	nyx_digest_add(d, b ? "true" : "false");
}

int
nyx_digest_finish(struct nyx_digest *d, char out[NYX_SHA256_HEX])
{
	unsigned char md[SHA256_DIGEST_SIZE];
	int rc = -1;

	if (d == NULL)
		return -1;
	if (!d->failed) {
		sha256_digest(&d->ctx, sizeof(md), md);
		to_hex(md, sizeof(md), out);
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
	nyx_secure_zero(d, sizeof(*d));
	free(d);
}

/* A kernel without getrandom(2) (before 3.17): its device. */
static int
urandom(unsigned char *buf, size_t n)
{
	size_t got = 0;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -1;
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	return got == n ? 0 : -1;
}

int
nyx_random_hex(char *out, size_t nbytes)
{
	unsigned char buf[64];
	size_t got = 0;

	if (nbytes > sizeof(buf))
		return -1;
	/* the kernel CSPRNG: these ids need no more */
	while (got < nbytes) {
		ssize_t n = getrandom(buf + got, nbytes - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ENOSYS) {
			if (urandom(buf, nbytes) < 0)
				return -1;
			break;
		}
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	to_hex(buf, nbytes, out);
	return 0;
}

char *
nyx_b64url_decode(const char *in, size_t inlen, size_t *outlen)
{
	struct base64_decode_ctx dc;
	char *std, *out = NULL;
	size_t i, padded, n;

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
	out = malloc(BASE64_DECODE_LENGTH(padded) + 1);
	if (out == NULL)
		goto out;
	/* the alphabet is checked above: nettle would skip white space */
	base64_decode_init(&dc);
	n = BASE64_DECODE_LENGTH(padded);
	if (!base64_decode_update(&dc, &n, (uint8_t *)out, padded, std) ||
	    !base64_decode_final(&dc)) {
		free(out);
		out = NULL;
		goto out;
	}
	out[n] = '\0';
	*outlen = n;
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
	base64_encode_raw(out, n, in);
	out[BASE64_ENCODE_RAW_LENGTH(n)] = '\0';
	return out;
}

void
nyx_secure_zero(void *p, size_t n)
{
	if (p != NULL && n > 0)
		explicit_bzero(p, n);
}

bool
nyx_secure_equal(const char *a, const char *b)
{
	size_t la, lb;

	if (a == NULL || b == NULL)
		return false;
	la = strlen(a);
	lb = strlen(b);
	return la == lb && memeql_sec(a, b, la);
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
