/*
 * The sandbox's guards beyond bwrap's namespaces (WIRE.md 6, revision 2):
 * a seccomp filter for the calls a program never needs and an attacker
 * does, and whole-sandbox limits in a per-run cgroup v2 where one is
 * delegated to us.
 */
#include "nyx_sandbox_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "nyx_time.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* ---- seccomp ---- */

/*
 * The filter, compiled at build time by tools/gen-seccomp.c (what it
 * denies is listed there): nyx_seccomp_bpf[].
 */
#include "nyx_seccomp_bpf.h"

int
nyx_sandbox_seccomp_fd(void)
{
	/* a descriptor of its own per run: bwrap reads from the offset */
	int fd = memfd_create("nyx-seccomp", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (pwrite(fd, nyx_seccomp_bpf, sizeof(nyx_seccomp_bpf), 0) !=
	    (ssize_t)sizeof(nyx_seccomp_bpf)) {
		close(fd);
		errno = EIO;
		return -1;
	}
	return fd;
}

/* ---- cgroup v2 ---- */

static atomic_uint run_seq;

/* Whether a space-separated list holds the word. */
static bool
has_word(const char *list, const char *w)
{
	size_t n = strlen(w);

	while (*list != '\0') {
		size_t l = strcspn(list, " \n");

		if (l == n && strncmp(list, w, n) == 0)
			return true;
		list += l;
		list += strspn(list, " \n");
	}
	return false;
}

static int
read_small(const char *dir, const char *file, char *buf, size_t n)
{
	char p[PATH_MAX + 64];
	ssize_t r;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = '\0';
	return 0;
}

static int
write_small(const char *dir, const char *file, const char *v)
{
	char p[PATH_MAX + 64];
	size_t n = strlen(v);
	int fd, rc;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = write(fd, v, n) == (ssize_t)n ? 0 : -1;
	close(fd);
	return rc;
}

/* Why dir cannot hold per-run cgroups, or NULL when it can. */
static const char *
unusable(const char *dir)
{
	struct statfs sf;
	char ctl[256];

	if (dir[0] != '/')
		return "not an absolute path";
	if (statfs(dir, &sf) < 0)
		return strerror(errno);
	if ((unsigned long)sf.f_type != CGROUP2_SUPER_MAGIC)
		return "not a cgroup v2 directory";
	if (read_small(dir, "cgroup.subtree_control", ctl, sizeof(ctl)) < 0)
		return "no cgroup.subtree_control";
	if (!has_word(ctl, "memory") || !has_word(ctl, "pids") ||
	    !has_word(ctl, "cpu"))
		return "memory, pids and cpu are not all enabled in its "
		       "cgroup.subtree_control";
	if (access(dir, W_OK) < 0)
		return "not writable";
	return NULL;
}

/* Whether dir is a cgroup v2 file system. */
static bool
is_cgroup2(const char *dir)
{
	struct statfs sf;

	return statfs(dir, &sf) == 0 &&
	    (unsigned long)sf.f_type == CGROUP2_SUPER_MAGIC;
}

/*
 * The process's own cgroup v2 directory: the cgroup2 mount point joined
 * with the "0::" line of /proc/self/cgroup.  The mount point is looked
 * for where systemd puts it (unified, then hybrid) before the mount
 * table is read: the kernel writes /proc/self/mountinfo out for every
 * mount, a tenth of a millisecond of every local run.
 */
static int
own_cgroup(char *out, size_t n)
{
	static const char *const usual[] = {
	    "/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
	char line[4096], mnt[PATH_MAX] = "", path[PATH_MAX] = "";
	FILE *f;
	size_t u;

	for (u = 0; u < sizeof(usual) / sizeof(usual[0]) && !mnt[0]; u++)
		if (is_cgroup2(usual[u]))
			snprintf(mnt, sizeof(mnt), "%s", usual[u]);
	f = mnt[0] ? NULL : fopen("/proc/self/mountinfo", "re");
	if (f == NULL && !mnt[0])
		return -1;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		char *dash = strstr(line, " - cgroup2 "), *p = line;
		int i;

		if (dash == NULL)
			continue;
		for (i = 0; i < 4 && p != NULL; i++) {
			p = strchr(p, ' ');
			p = p ? p + 1 : NULL;
		}
		if (p != NULL) {
			snprintf(
			    mnt, sizeof(mnt), "%.*s", (int)strcspn(p, " "), p);
			break;
		}
	}
	if (f != NULL)
		fclose(f);
	f = fopen("/proc/self/cgroup", "re");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "0::", 3) == 0)
			snprintf(path, sizeof(path), "%.*s",
			    (int)strcspn(line + 3, "\n"), line + 3);
	fclose(f);
	if (mnt[0] == '\0' || path[0] == '\0')
		return -1;
	if ((size_t)snprintf(
	        out, n, "%s%s", mnt, strcmp(path, "/") == 0 ? "" : path) >= n)
		return -1;
	return 0;
}

/* NYX_SANDBOX_MEMORY_MB (16..65536), default 512. */
static long
memory_mb(void)
{
	const char *v = getenv("NYX_SANDBOX_MEMORY_MB");
	char *end;
	long mb;

	if (v == NULL || *v == '\0')
		return 512;
	errno = 0;
	mb = strtol(v, &end, 10);
	return errno == 0 && *end == '\0' && mb >= 16 && mb <= 65536 ? mb : 512;
}

int
nyx_cgroup_open(struct nyx_cgroup *cg, struct nyx_err *err)
{
	const char *env = getenv("NYX_CGROUP"), *why;
	char base[PATH_MAX], v[64], p[PATH_MAX + 32];

	memset(cg, 0, sizeof(*cg));
	cg->procs_fd = -1;
	if (env != NULL && *env != '\0') {
		snprintf(base, sizeof(base), "%s", env);
		if ((why = unusable(base)) != NULL)
			return nyx_err_set(err, NYX_EXIT_OSERR,
			    "LOCAL_ISOLATION_UNAVAILABLE",
			    "NYX_CGROUP=%s is not a usable cgroup v2 subtree "
			    "(%s); refusing to run without the limits it "
			    "asks for.",
			    env, why);
	} else if (own_cgroup(base, sizeof(base)) < 0 ||
	    unusable(base) != NULL) {
		return 0; /* rlimits */
	}
	if ((size_t)snprintf(cg->path, sizeof(cg->path), "%s/nyx-%ld-%u", base,
	        (long)getpid(),
	        atomic_fetch_add(&run_seq, 1)) >= sizeof(cg->path))
		goto fail;
	if (mkdir(cg->path, 0755) < 0)
		goto fail;
	snprintf(v, sizeof(v), "%ld", memory_mb() << 20);
	if (write_small(cg->path, "memory.max", v) < 0)
		goto fail_dir;
	(void)write_small(cg->path, "memory.swap.max", "0");
	snprintf(v, sizeof(v), "%d", NYX_SANDBOX_TASKS);
	if (write_small(cg->path, "pids.max", v) < 0 ||
	    write_small(cg->path, "cpu.max", "100000 100000") < 0)
		goto fail_dir;
	snprintf(p, sizeof(p), "%s/cgroup.procs", cg->path);
	cg->procs_fd = open(p, O_WRONLY | O_CLOEXEC);
	if (cg->procs_fd < 0)
		goto fail_dir;
	cg->on = true;
	return 0;
fail_dir:
	rmdir(cg->path);
fail:
	if (env == NULL || *env == '\0') {
		memset(cg, 0, sizeof(*cg));
		cg->procs_fd = -1;
		return 0; /* the automatic choice falls back to rlimits */
	}
	return nyx_err_set(err, NYX_EXIT_OSERR, "LOCAL_ISOLATION_UNAVAILABLE",
	    "cannot make a cgroup under NYX_CGROUP=%s: %s", env,
	    strerror(errno));
}

void
nyx_cgroup_close(struct nyx_cgroup *cg)
{
	int i;

	if (!cg->on)
		return;
	if (cg->procs_fd >= 0)
		close(cg->procs_fd);
	cg->procs_fd = -1;
	/* cgroup.kill (Linux 5.14) takes every task at once */
	(void)write_small(cg->path, "cgroup.kill", "1");
	for (i = 0; i < 200; i++) {
		if (rmdir(cg->path) == 0 || errno != EBUSY)
			break;
		nyx_sleep_ms(10);
	}
	cg->on = false;
}
