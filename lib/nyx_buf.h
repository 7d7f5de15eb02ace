/*
 * nyx_buf: a growable byte buffer with a hard size cap (after curl's dynbuf).
 *
 * A zeroed struct (NYX_BUF_ZERO) is a valid empty buffer with no cap; call
 * nyx_buf_init() to set one.  The buffer owns its memory; nyx_buf_free() is
 * safe on a zeroed buffer and wipes the bytes when `secret` is set.  The
 * contents are always NUL-terminated (the NUL is not counted in len).
 */
#ifndef NYX_BUF_H
#define NYX_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct nyx_buf {
	char *data;
	size_t len;
	size_t alloc;
	size_t cap; /* 0 = unlimited */
	bool secret; /* wipe before freeing */
};

#define NYX_BUF_ZERO                                                           \
	{                                                                      \
		NULL, 0, 0, 0, false                                           \
	}

void nyx_buf_init(struct nyx_buf *b, size_t cap);

/* Append; returns -1 (and appends nothing) when the cap or memory runs out. */
int nyx_buf_add(struct nyx_buf *b, const void *p, size_t n);
int nyx_buf_addstr(struct nyx_buf *b, const char *s);
int nyx_buf_printf(struct nyx_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Make room for n more bytes up front (within the cap); 0 or -1. */
int nyx_buf_reserve(struct nyx_buf *b, size_t n);

void nyx_buf_reset(struct nyx_buf *b);
void nyx_buf_free(struct nyx_buf *b);

/* Hand the heap block to the caller (NULL when empty); b becomes empty. */
char *nyx_buf_take(struct nyx_buf *b);

/*
 * Copy the string src into dst (n bytes): true, or false with dst empty
 * when it does not fit.  For input of unbounded length, where a silent
 * truncation would become a different value.
 */
bool nyx_str_copy(char *dst, size_t n, const char *src);

/*
 * Read a whole file into b.  Returns 0, or -1 with errno set (EFBIG when
 * the cap is exceeded).
 */
int nyx_buf_read_file(struct nyx_buf *b, const char *path);
int nyx_buf_read_fd(struct nyx_buf *b, int fd);

#endif
