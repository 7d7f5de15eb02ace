#include "nyx_buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nyx_hash.h"

void
nyx_buf_init(struct nyx_buf *b, size_t cap)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->cap = cap;
	b->secret = false;
}

int
nyx_buf_add(struct nyx_buf *b, const void *p, size_t n)
{
	size_t need;
	char *nd;

	if (b->cap != 0 && (n > b->cap || b->len > b->cap - n)) {
		errno = EFBIG;
		return -1;
	}
	need = b->len + n + 1;
	if (need > b->alloc) {
		size_t na = b->alloc ? b->alloc : 256;

		while (na < need)
			na *= 2;
		if (b->secret) {
			/* never leave a stale copy of a secret behind */
			nd = malloc(na);
			if (nd != NULL && b->data != NULL) {
				memcpy(nd, b->data, b->len);
				nyx_secure_zero(b->data, b->alloc);
				free(b->data);
			}
		} else {
			nd = realloc(b->data, na);
		}
		if (nd == NULL)
			return -1;
		b->data = nd;
		b->alloc = na;
	}
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int
nyx_buf_reserve(struct nyx_buf *b, size_t n)
{
	char *nd;

	if (b->secret || (b->cap != 0 && n > b->cap) ||
	    b->len + n + 1 <= b->alloc)
		return 0;
	nd = realloc(b->data, b->len + n + 1);
	if (nd == NULL)
		return -1;
	b->data = nd;
	b->alloc = b->len + n + 1;
	b->data[b->len] = '\0';
	return 0;
}

int
nyx_buf_addstr(struct nyx_buf *b, const char *s)
{
	return nyx_buf_add(b, s, strlen(s));
}

int
nyx_buf_printf(struct nyx_buf *b, const char *fmt, ...)
{
	char small[512];
	char *big = NULL;
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if ((size_t)n < sizeof(small))
		return nyx_buf_add(b, small, (size_t)n);
	big = malloc((size_t)n + 1);
	if (big == NULL)
		return -1;
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	rc = nyx_buf_add(b, big, (size_t)n);
	free(big);
	return rc;
}

void
nyx_buf_reset(struct nyx_buf *b)
{
	if (b->data != NULL) {
		if (b->secret)
			nyx_secure_zero(b->data, b->alloc);
		b->data[0] = '\0';
	}
	b->len = 0;
}

void
nyx_buf_free(struct nyx_buf *b)
{
	if (b == NULL)
		return;
	if (b->data != NULL && b->secret)
		nyx_secure_zero(b->data, b->alloc);
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
}

char *
nyx_buf_take(struct nyx_buf *b)
{
	char *p = b->data;

	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	return p;
}

int
nyx_buf_read_fd(struct nyx_buf *b, int fd)
{
	char chunk[65536];
	ssize_t r;

	for (;;) {
		r = read(fd, chunk, sizeof(chunk));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		if (nyx_buf_add(b, chunk, (size_t)r) < 0) {
			if (errno != EFBIG)
				errno = ENOMEM;
			nyx_secure_zero(chunk, sizeof(chunk));
			return -1;
		}
	}
	nyx_secure_zero(chunk, sizeof(chunk));
	return 0;
}

int
nyx_buf_read_file(struct nyx_buf *b, const char *path)
{
	int fd, rc, saved;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = nyx_buf_read_fd(b, fd);
	saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

bool
nyx_str_copy(char *dst, size_t n, const char *src)
{
	size_t len = src ? strlen(src) : 0;

	if (n == 0)
		return false;
	if (len >= n) {
		dst[0] = '\0';
		return false;
	}
	memcpy(dst, src ? src : "", len + 1);
	return true;
}
