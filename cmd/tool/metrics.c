#include "metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void
nyx_metrics_init(struct nyx_metrics *m)
{
	nyx_buf_init(&m->b, 1 << 20);
	m->oom = false;
}

void
nyx_metrics_free(struct nyx_metrics *m)
{
	nyx_buf_free(&m->b);
}

void
nyx_metrics_family(
    struct nyx_metrics *m, const char *name, const char *type, const char *help)
{
	if (nyx_buf_printf(&m->b, "# HELP %s %s\n# TYPE %s %s\n", name, help,
	        name, type) < 0)
		m->oom = true;
}

void
nyx_metrics_sample(struct nyx_metrics *m, const char *name, const char *label,
    const char *value, double v)
{
	int rc = nyx_buf_printf(&m->b, "%s", name);

	if (rc == 0 && label != NULL) {
		const char *p;

		rc = nyx_buf_printf(&m->b, "{%s=\"", label);
		/* the exposition format's three escapes */
		for (p = value; rc == 0 && *p != '\0'; p++)
			rc = *p == '\\'  ? nyx_buf_addstr(&m->b, "\\\\")
			    : *p == '"'  ? nyx_buf_addstr(&m->b, "\\\"")
			    : *p == '\n' ? nyx_buf_addstr(&m->b, "\\n")
			                 : nyx_buf_add(&m->b, p, 1);
		if (rc == 0)
			rc = nyx_buf_addstr(&m->b, "\"}");
	}
	if (rc == 0)
		rc = v == (double)(long long)v
		    ? nyx_buf_printf(&m->b, " %lld\n", (long long)v)
		    : nyx_buf_printf(&m->b, " %.6f\n", v);
	if (rc < 0)
		m->oom = true;
}

int
nyx_metrics_write(struct nyx_metrics *m, const char *path, struct nyx_err *err)
{
	char tmp[4096];
	const char *slash = strrchr(path, '/');
	size_t off = 0;
	int fd, e;

	if (m->oom)
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	/* beside the target: rename(2) is atomic within one file system */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%.*s.%s.XXXXXX",
	        slash ? (int)(slash - path + 1) : 0, path,
	        slash ? slash + 1 : path) >= sizeof(tmp))
		return nyx_err_set(err, NYX_EXIT_CANTCREAT, "metrics_failed",
		    "the metrics file path is too long");
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		goto fail;
	while (off < m->b.len) {
		ssize_t w = write(fd, m->b.data + off, m->b.len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto fail_fd;
		off += (size_t)w;
	}
	/* node_exporter runs as another user: readable, not writable */
	if (fchmod(fd, 0644) < 0 || fsync(fd) < 0)
		goto fail_fd;
	if (close(fd) < 0) {
		fd = -1;
		goto fail_fd;
	}
	if (rename(tmp, path) < 0) {
		fd = -1;
		goto fail_fd;
	}
	return 0;
fail_fd:
	e = errno;
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	errno = e;
fail:
	return nyx_err_set(err, NYX_EXIT_CANTCREAT, "metrics_failed",
	    "cannot write the metrics file %s: %s", path, strerror(errno));
}
