#include "nyx_sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nyx_hash.h"
#include "nyx_log.h"
#include "nyx_sandbox_int.h"
#include "nyx_time.h"

#define NOBODY 65534
#define TS_MODULE "/usr/share/nodejs/typescript/lib/typescript.js"
#define MAX_ARGS 80
#define MAX_ENV 8
#define NYX_STR2(x) #x
#define NYX_STR(x) NYX_STR2(x)

/*
 * TypeScript without node's type stripping: transpile with the locally
 * installed compiler (no type check, as type stripping), then run it.
 */
static const char ts_runner[] =
    "const ts=require('" TS_MODULE "'),fs=require('fs');"
    "const r=ts.transpileModule(fs.readFileSync('/code/main.ts','utf8'),"
    "{reportDiagnostics:true,compilerOptions:{module:ts.ModuleKind.CommonJS,"
    "target:ts.ScriptTarget.ES2020}});"
    "if(r.diagnostics&&r.diagnostics.length){for(const d of r.diagnostics)"
    "process.stderr.write('main.ts: '+ts.flattenDiagnosticMessageText("
    "d.messageText,'\\n')+'\\n');process.exit(1)}"
    "fs.writeFileSync('/tmp/.main.js',r.outputText);"
    "process.argv[1]='/code/main.ts';require('/tmp/.main.js');";

static const char *const languages[] = {
    "python", "javascript", "typescript", "bash"};

bool
nyx_sandbox_language_known(const char *language)
{
	size_t i;

	for (i = 0; i < sizeof(languages) / sizeof(languages[0]); i++)
		if (language != NULL && strcmp(language, languages[i]) == 0)
			return true;
	return false;
}

void
nyx_sandbox_result_free(struct nyx_sandbox_result *res)
{
	if (res == NULL)
		return;
	nyx_buf_free(&res->out);
	nyx_buf_free(&res->err);
	/* bwrap, whose report of the program's end the run already saw,
	 * is about to end, or has */
	while (res->bwrap > 0 && waitpid(res->bwrap, NULL, 0) < 0 &&
	    errno == EINTR)
		;
	res->bwrap = 0;
}

static bool
executable(const char *path)
{
	return access(path, X_OK) == 0;
}

/* bwrap: $NYX_BWRAP, else /usr/bin/bwrap, else the first on $PATH. */
static int
find_bwrap(char *out, size_t n)
{
	const char *env = getenv("NYX_BWRAP"), *path = getenv("PATH");

	if (env != NULL && *env != '\0') {
		snprintf(out, n, "%s", env);
		return executable(out) ? 0 : -1;
	}
	snprintf(out, n, "/usr/bin/bwrap");
	if (executable(out))
		return 0;
	while (path != NULL && *path != '\0') {
		const char *c = strchr(path, ':');
		size_t l = c ? (size_t)(c - path) : strlen(path);

		snprintf(out, n, "%.*s/bwrap", (int)l, path);
		if (l > 0 && executable(out))
			return 0;
		path = c ? c + 1 : NULL;
	}
	return -1;
}

/* Whether this node can strip TypeScript types itself (22.6 and later). */
static bool
probe_node_strips_types(void)
{
	int fds[2], status, major = 0, minor = 0;
	char buf[64] = "";
	pid_t pid;
	ssize_t n;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return false;
	pid = fork();
	if (pid == 0) {
		char *const argv[] = {
		    (char *)"node", (char *)"--version", NULL};
		char *const envp[] = {NULL};

		dup2(fds[1], 1);
		execve("/usr/bin/node", argv, envp);
		_exit(127);
	}
	close(fds[1]);
	n = pid > 0 ? read(fds[0], buf, sizeof(buf) - 1) : -1;
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	if (sscanf(buf, "v%d.%d", &major, &minor) != 2)
		return false;
	return major > 22 || (major == 22 && minor >= 6);
}

static bool node_strips;
static pthread_once_t node_probed = PTHREAD_ONCE_INIT;

static void
probe_node(void)
{
	node_strips = probe_node_strips_types();
}

/* The probe forks node --version: once per process, not once per run. */
static bool
node_strips_types(void)
{
	pthread_once(&node_probed, probe_node);
	return node_strips;
}

/* The interpreter command for a language, or -1 when unavailable. */
static int
command_for(
    const char *lang, const char **argv, size_t *argc, const char **file)
{
	size_t n = *argc;

	if (strcmp(lang, "python") == 0) {
		if (!executable("/usr/bin/python3"))
			return -1;
		*file = "main.py";
		argv[n++] = "/usr/bin/python3";
		argv[n++] = "-I";
		argv[n++] = "/code/main.py";
	} else if (strcmp(lang, "javascript") == 0) {
		if (!executable("/usr/bin/node"))
			return -1;
		*file = "main.js";
		argv[n++] = "/usr/bin/node";
		argv[n++] = "/code/main.js";
	} else if (strcmp(lang, "bash") == 0) {
		if (!executable("/usr/bin/bash"))
			return -1;
		*file = "main.sh";
		argv[n++] = "/usr/bin/bash";
		argv[n++] = "/code/main.sh";
	} else if (strcmp(lang, "typescript") == 0) {
		if (!executable("/usr/bin/node"))
			return -1;
		*file = "main.ts";
		argv[n++] = "/usr/bin/node";
		if (node_strips_types()) {
			argv[n++] = "--experimental-strip-types";
			argv[n++] = "--no-warnings";
			argv[n++] = "/code/main.ts";
		} else if (access(TS_MODULE, R_OK) == 0) {
			argv[n++] = "-e";
			argv[n++] = ts_runner;
		} else {
			return -1;
		}
	} else {
		return -1;
	}
	*argc = n;
	return 0;
}

/* The size of the sandbox's /tmp and /sandbox tmpfs: 64 MiB, or
 * NYX_SANDBOX_TMPFS_MB (1..4096). */
static const char *
tmpfs_size(char buf[24])
{
	const char *v = getenv("NYX_SANDBOX_TMPFS_MB");
	char *end;
	long mb = 64;

	if (v != NULL && *v != '\0') {
		errno = 0;
		mb = strtol(v, &end, 10);
		if (errno != 0 || *end != '\0' || mb < 1 || mb > 4096)
			mb = 64;
	}
	snprintf(buf, 24, "%ld", mb * 1024 * 1024);
	return buf;
}

/*
 * The source in an anonymous memory file: bwrap copies it to /code
 * (--ro-bind-data), so it is never on the host disk, never readable by
 * another user, and gone with the last descriptor, kill -9 or not.
 */
static int
source_fd(const char *data, size_t n)
{
	int fd = memfd_create("nyx-source", MFD_CLOEXEC);
	size_t off = 0;

	if (fd < 0)
		return -1;
	while (off < n) {
		ssize_t w = write(fd, data + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

struct child_plan {
	const char *bwrap;
	const char **argv;
	char **envp;
	/* bwrap's 0 to 7: /dev/null, the program's two output pipes,
	 * --json-status-fd, --ro-bind-data, --seccomp, --block-fd and
	 * --info-fd */
	int out_w, err_w, status_w, src, seccomp, blk_r, info_w;
	int cgroup_procs;
	bool drop;
	rlim_t cpu;
	pid_t parent;
};

/*
 * The process bwrap names in "{"child-pid": N" on info_r: the sandbox's
 * first process, which waits on --block-fd with every namespace and
 * mount set up, and starts the program only then.  Read to EOF (bwrap
 * writes it all, then closes its end), looking at the cancel flag and
 * the deadline meanwhile.  0, or -1 with errno: ENOENT when bwrap ended
 * before it named a process (its stderr says why), ETIMEDOUT, ECANCELED.
 */
static int
first_process(
    int info_r, const volatile int *cancel, int64_t deadline, pid_t *first)
{
	static const char key[] = "\"child-pid\":";
	char buf[1024];
	size_t len = 0;
	const char *k;
	long n = 0;

	for (;;) {
		struct pollfd pf = {info_r, POLLIN, 0};
		char drain[256];
		ssize_t r;
		int64_t left = deadline - nyx_mono_ms();

		if (cancel != NULL && *cancel) {
			errno = ECANCELED;
			return -1;
		}
		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (poll(&pf, 1, left < 100 ? (int)left : 100) <= 0)
			continue; /* EINTR, or another look at the flag */
		r = len < sizeof(buf) - 1
		    ? read(info_r, buf + len, sizeof(buf) - 1 - len)
		    : read(info_r, drain, sizeof(drain));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (len < sizeof(buf) - 1)
			len += (size_t)r;
	}
	buf[len] = '\0';
	if ((k = strstr(buf, key)) == NULL) {
		errno = ENOENT;
		return -1;
	}
	for (k += sizeof(key) - 1; *k == ' '; k++)
		;
	for (; *k >= '0' && *k <= '9' && n < 1L << 30; k++)
		n = n * 10 + (*k - '0');
	if (n <= 1) {
		errno = EPROTO;
		return -1;
	}
	*first = (pid_t)n;
	return 0;
}

/*
 * Set the task cap on the sandbox's first process.  prlimit(2) lets a
 * caller without CAP_SYS_RESOURCE in the sandbox's user namespace (root
 * in a container often lacks it) limit a process whose real, effective
 * and saved ids are the caller's real ids.  Under root those are
 * nobody's: this thread then takes nobody's as its real ids for the one
 * call, root staying its effective and saved ids (so it keeps its
 * capabilities), and takes its own back.  Raw system calls: this thread
 * only, not every thread of a threaded caller.  0, or -1 with errno.
 */
static int
cap_first(pid_t first, bool drop)
{
	struct rlimit cap = {NYX_SANDBOX_TASKS, NYX_SANDBOX_TASKS};
	uid_t uid = getuid();
	gid_t gid = getgid();
	int rc, e;

	if ((rc = prlimit(first, RLIMIT_NPROC, &cap, NULL)) == 0 ||
	    errno != EPERM || !drop)
		return rc;
	if (syscall(SYS_setresgid, NOBODY, -1, -1) < 0)
		return -1;
	if (syscall(SYS_setresuid, NOBODY, -1, -1) < 0) {
		e = errno;
		if (syscall(SYS_setresgid, gid, -1, -1) < 0)
			abort();
		errno = e;
		return -1;
	}
	rc = prlimit(first, RLIMIT_NPROC, &cap, NULL);
	e = errno;
	/* the effective id is still root's: this cannot fail, and a thread
	 * left with another real id must not go on */
	if (syscall(SYS_setresuid, uid, -1, -1) < 0 ||
	    syscall(SYS_setresgid, gid, -1, -1) < 0)
		abort();
	errno = e;
	return rc;
}

/*
 * The vfork()ed child, which runs on the caller's memory until execve:
 * system calls on this frame only, then execve or _exit.  Every signal
 * is blocked (the caller did so before vfork), so no handler of the
 * caller's runs here; dispositions go back to default, then the mask is
 * cleared.  The credentials change through raw system calls: glibc's
 * wrappers would signal every thread of a threaded caller (nyx-sandboxd)
 * to change theirs too.
 */
static _Noreturn __attribute__((noinline)) void
exec_bwrap(const struct child_plan *p)
{
	struct rlimit rl;
	struct sigaction dfl;
	sigset_t none;
	const char *why;
	int devnull = -1, sig, i;
	int fd[8] = {-1, p->out_w, p->err_w, p->status_w, p->src, p->seccomp,
	    p->blk_r, p->info_w};

	setpgid(0, 0);
	/* into the run's cgroup first: everything after is held by it */
	if (p->cgroup_procs >= 0 && write(p->cgroup_procs, "0", 1) != 1)
		_exit(125);
	/* ignored signals survive execve: reset them, then unblock */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL);
	/*
	 * Each descriptor to place is first moved clear of 0-9: one that
	 * happens to be 4 must not be closed by the dup2 onto 4 of another.
	 */
	fd[0] = devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0)
		_exit(125);
	for (i = 0; i < 8; i++)
		if ((fd[i] = fcntl(fd[i], F_DUPFD_CLOEXEC, 10)) < 0)
			_exit(125);
	for (i = 0; i < 8; i++)
		if (dup2(fd[i], i) < 0)
			_exit(125);
	closefrom(8);
	rl.rlim_cur = p->cpu;
	rl.rlim_max = p->cpu + 1;
	setrlimit(RLIMIT_CPU, &rl);
	/*
	 * The task cap is the sandbox's own: the caller sets it on the
	 * sandbox's first process, inside its user namespace, where the
	 * kernel (5.14+) counts only the sandbox's tasks, threads included.
	 * Outside, root lifts the limit it would otherwise impose on all of
	 * nobody's tasks together.
	 */
	if (p->drop) {
		rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
		setrlimit(RLIMIT_NPROC, &rl);
	}
	rl.rlim_cur = rl.rlim_max = 256ul << 20;
	setrlimit(RLIMIT_FSIZE, &rl);
	rl.rlim_cur = rl.rlim_max = 256;
	setrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max = 0;
	setrlimit(RLIMIT_CORE, &rl);
	rl.rlim_cur = rl.rlim_max = 4ul << 30;
	setrlimit(RLIMIT_AS, &rl);
	if (p->drop &&
	    (syscall(SYS_setgroups, 0, NULL) < 0 ||
	        syscall(SYS_setresgid, NOBODY, NOBODY, NOBODY) < 0 ||
	        syscall(SYS_setresuid, NOBODY, NOBODY, NOBODY) < 0))
		_exit(125);
	/*
	 * Die with the caller from here on (bwrap's --die-with-parent only
	 * starts once bwrap runs): set after the credentials change, which
	 * clears it, and checked against a caller that died already.
	 */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != p->parent)
		_exit(125);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(p->bwrap, (char *const *)p->argv, p->envp);
	/* say why on the captured stderr (the caller reports it), with no
	 * buffer: this frame is on the caller's stack */
	why = strerror(errno);
	(void)!write(2, "cannot execute ", 15);
	(void)!write(2, p->bwrap, strlen(p->bwrap));
	(void)!write(2, ": ", 2);
	(void)!write(2, why, strlen(why));
	(void)!write(2, "\n", 1);
	_exit(127);
}

/*
 * Start bwrap as this process's child with vfork: no page table is
 * copied, no copy-on-write fault taken, and no process stands between
 * the caller and bwrap (bench/README.md).  All signals stay blocked in
 * the caller until the child has gone on to bwrap.  The pid, or -1.
 */
static pid_t
spawn_bwrap(const struct child_plan *p)
{
	sigset_t all, old;
	pid_t pid;
	int e;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = vfork();
	if (pid == 0)
		exec_bwrap(p);
	e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid > 0)
		setpgid(pid, pid); /* also in the child: no race either way */
	errno = e;
	return pid;
}

/* Keep up to the cap, drain the rest.  Returns 0 at EOF, 1 otherwise. */
static int
pump(int fd, struct nyx_buf *b, bool *truncated)
{
	char chunk[65536];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n < 0)
		return (errno == EINTR || errno == EAGAIN) ? 1 : 0;
	if (n == 0)
		return 0;
	if (b->len < NYX_SANDBOX_OUTPUT_MAX) {
		size_t room = NYX_SANDBOX_OUTPUT_MAX - b->len;
		size_t keep = (size_t)n < room ? (size_t)n : room;

		if (nyx_buf_add(b, chunk, keep) < 0 || keep < (size_t)n)
			*truncated = true;
	} else {
		*truncated = true;
	}
	return 1;
}

/* A descriptor that polls readable when pid exits (Linux 5.3+), or -1. */
static int
pid_fd(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	return -1;
#endif
}

/* The number after key in the status lines, when there is one. */
static bool
status_number(const struct nyx_buf *status, const char *key, int *out)
{
	const char *k;
	char *end;
	long v;

	if (status->data == NULL || (k = strstr(status->data, key)) == NULL)
		return false;
	errno = 0;
	v = strtol(k + strlen(key), &end, 10);
	if (errno != 0 || end == k + strlen(key) || v < INT_MIN || v > INT_MAX)
		return false;
	*out = (int)v;
	return true;
}

/* What the pipe holds now, up to the cap, without waiting for its EOF. */
static void
drain(int fd, struct nyx_buf *b, bool *truncated)
{
	struct pollfd pf = {fd, POLLIN, 0};

	while (poll(&pf, 1, 0) == 1 && (pf.revents & POLLIN) &&
	    pump(fd, b, truncated) == 1)
		;
}

/*
 * Collect the output until the run is over, killing it at the deadline
 * or on cancel.  Whether the sandbox was set up ({"child-pid": N}).
 */
static bool
supervise(pid_t pid, int out_r, int err_r, int status_r, int64_t t0,
    int timeout_secs, const volatile int *cancel,
    struct nyx_sandbox_result *res)
{
	struct pollfd pf[4];
	struct nyx_buf status = NYX_BUF_ZERO;
	int64_t deadline = t0 + timeout_secs * 1000LL;
	int64_t reaped_at = 0;
	bool open_out = true, open_err = true, open_st = true, reaped = false;
	bool killed = false, dummy = false, started;
	int wstatus = 0, pfd = pid_fd(pid), code;

	nyx_buf_init(&status, 4096);
	/*
	 * The run is over when bwrap's three pipes are, or sooner, when
	 * bwrap reports the program's end (below).
	 */
	while (open_out || open_err || open_st) {
		int64_t now = nyx_mono_ms();
		/* with a pidfd every event wakes us; without, poll briefly */
		int tmo = pfd >= 0 ? 1000 : 5, i, n = 0;

		if (!killed && cancel != NULL && *cancel) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			killed = true;
			res->cancelled = true;
		}
		/* a cancellable run looks at its flag ten times a second */
		if (cancel != NULL && tmo > 100)
			tmo = 100;
		if (!killed && now >= deadline) {
			/* the whole group, and the pid namespace with it */
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			killed = true;
			res->timed_out = true;
		}
		if (reaped && now - reaped_at > 2000) {
			/* a straggler holds a pipe: stop waiting for it */
			kill(-pid, SIGKILL);
			break;
		}
		if (!killed && deadline - now < tmo)
			tmo = (int)(deadline - now) + 1;
		if (open_out)
			pf[n++] = (struct pollfd){out_r, POLLIN, 0};
		if (open_err)
			pf[n++] = (struct pollfd){err_r, POLLIN, 0};
		if (open_st)
			pf[n++] = (struct pollfd){status_r, POLLIN, 0};
		if (pfd >= 0 && !reaped)
			pf[n++] = (struct pollfd){pfd, POLLIN, 0};
		if (poll(n > 0 ? pf : NULL, (nfds_t)n, tmo) < 0 &&
		    errno != EINTR)
			break;
		for (i = 0; i < n; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)) ||
			    pf[i].fd == pfd)
				continue;
			if (pf[i].fd == out_r)
				open_out =
				    pump(out_r, &res->out, &res->out_truncated);
			else if (pf[i].fd == err_r)
				open_err =
				    pump(err_r, &res->err, &res->err_truncated);
			else
				open_st = pump(status_r, &status, &dummy);
		}
		/*
		 * {"exit-code": N} comes once the sandbox's first process is
		 * reaped, which the kernel does only after every process of
		 * its pid namespace has gone: all the output there will ever
		 * be is in the pipes.  bwrap's own exit, which closes them,
		 * is not waited for (about 1 ms; bench/README.md); it is
		 * reaped later, by nyx_sandbox_result_free().
		 */
		if (status_number(&status, "\"exit-code\": ", &code)) {
			if (open_out)
				drain(out_r, &res->out, &res->out_truncated);
			if (open_err)
				drain(err_r, &res->err, &res->err_truncated);
			break;
		}
		if (!reaped && waitpid(pid, &wstatus, WNOHANG) == pid) {
			reaped = true;
			reaped_at = nyx_mono_ms();
		}
	}
	if (pfd >= 0)
		close(pfd);
	while (open_st && !status_number(&status, "\"exit-code\": ", &code))
		open_st = pump(status_r, &status, &dummy);
	res->elapsed_ms = (long)(nyx_mono_ms() - t0);
	/* bwrap reports {"child-pid": N} once the sandbox is set up */
	started =
	    status.data != NULL && strstr(status.data, "\"child-pid\"") != NULL;
	/* the program's end, as bwrap saw it ({"exit-code": N}, 128 + the
	 * signal); without it (bwrap killed, or it failed), bwrap's own */
	if (status_number(&status, "\"exit-code\": ", &res->exit_code)) {
		if (!reaped)
			res->bwrap = pid;
	} else if (!reaped && waitpid(pid, &wstatus, 0) != pid) {
		res->exit_code = 125;
	} else if (WIFEXITED(wstatus)) {
		res->exit_code = WEXITSTATUS(wstatus);
	} else if (WIFSIGNALED(wstatus)) {
		res->exit_code = 128 + WTERMSIG(wstatus);
	}
	nyx_buf_free(&status);
	return started;
}

int
nyx_sandbox_run(const struct nyx_sandbox_req *rq,
    struct nyx_sandbox_result *res, struct nyx_err *err)
{
	const char *argv[MAX_ARGS];
	char *envp[MAX_ENV];
	char bwrap[1024], dest[32], size[24];
	char keyv[512] = "", urlv[1200] = "";
	const char *file = NULL;
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, st[2] = {-1, -1}, src = -1;
	int seccomp = -1, info[2] = {-1, -1}, blk[2] = {-1, -1}, ready = 0;
	int64_t t0;
	struct nyx_cgroup cg = {.procs_fd = -1};
	size_t argc = 0, envc = 0, i;
	struct child_plan plan;
	bool started = false, drop = geteuid() == 0, go = false;
	int cap_errno = 0;
	pid_t pid, first = 0;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	nyx_buf_init(&res->out, 0);
	nyx_buf_init(&res->err, 0);
	if (!nyx_sandbox_language_known(rq->language))
		return nyx_err_set(err, NYX_EXIT_USAGE,
		    "code_execution_request_invalid",
		    "'language' must be python, javascript, typescript or "
		    "bash.");
	if (find_bwrap(bwrap, sizeof(bwrap)) < 0)
		return nyx_err_set(err, NYX_EXIT_OSERR,
		    "LOCAL_ISOLATION_UNAVAILABLE",
		    "bubblewrap (bwrap) is not installed; refusing to run the "
		    "program without isolation.");

	argv[argc++] = bwrap;
	{
		/* every namespace, and none created inside (--disable-userns
		 * needs the user namespace asked for by name) */
		static const char *const fixed[] = {"--unshare-all",
		    "--unshare-user", "--disable-userns", "--die-with-parent",
		    "--new-session", "--cap-drop", "ALL", "--hostname",
		    "sandbox", "--ro-bind", "/usr", "/usr", "--symlink",
		    "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
		    "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64",
		    "/lib64", "--ro-bind-try", "/etc/ld.so.cache",
		    "/etc/ld.so.cache", "--ro-bind-try", "/etc/alternatives",
		    "/etc/alternatives", "--ro-bind-try", "/etc/localtime",
		    "/etc/localtime", "--proc", "/proc", "--dev", "/dev",
		    "--json-status-fd", "3", "--info-fd", "7", "--block-fd",
		    "6"};

		for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
			argv[argc++] = fixed[i];
	}
	/* /tmp and the work directory are sized tmpfs: nothing of a run
	 * lands on the host disk, or outlives it */
	tmpfs_size(size);
	argv[argc++] = "--size";
	argv[argc++] = size;
	argv[argc++] = "--tmpfs";
	argv[argc++] = "/tmp";
	argv[argc++] = "--size";
	argv[argc++] = size;
	argv[argc++] = "--tmpfs";
	argv[argc++] = "/sandbox";
	argv[argc++] = "--ro-bind-data";
	argv[argc++] = "4"; /* the source's memory file, below */
	argv[argc++] = dest;
	argv[argc++] = "--chdir";
	argv[argc++] = "/sandbox";
	argv[argc++] = "--seccomp";
	argv[argc++] = "5"; /* the filter's memory file */
	argv[argc++] = "--";
	if (command_for(rq->language, argv, &argc, &file) < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "LANGUAGE_UNAVAILABLE",
		    "No %s interpreter is installed for the local sandbox.",
		    rq->language);
		goto out;
	}
	argv[argc] = NULL;
	snprintf(dest, sizeof(dest), "/code/%s", file);
	src = source_fd(rq->source ? rq->source : "", rq->source_len);
	seccomp = nyx_sandbox_seccomp_fd();
	if (src < 0 || seccomp < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "LOCAL_ISOLATION_UNAVAILABLE",
		    "cannot prepare the sandbox: %s", strerror(errno));
		goto out;
	}

	/*
	 * bwrap starts on the host with this fixed environment and passes it
	 * on: no name or value of a caller's ever reaches the host side,
	 * where the dynamic loader honours LD_PRELOAD, GCONV_PATH,
	 * GLIBC_TUNABLES and friends.  The values travel in the environment,
	 * not as --setenv, because argv is world-readable in /proc and
	 * NYXID_API_KEY is a credential.
	 */
	envp[envc++] = (char *)"PATH=/usr/local/bin:/usr/bin:/bin";
	envp[envc++] = (char *)"HOME=/sandbox";
	envp[envc++] = (char *)"LANG=C.UTF-8";
	envp[envc++] = (char *)"TMPDIR=/tmp";
	if (rq->nyxid_api_key != NULL) {
		snprintf(
		    keyv, sizeof(keyv), "NYXID_API_KEY=%s", rq->nyxid_api_key);
		envp[envc++] = keyv;
	}
	if (rq->nyxid_base_url != NULL) {
		snprintf(urlv, sizeof(urlv), "NYXID_BASE_URL=%s",
		    rq->nyxid_base_url);
		envp[envc++] = urlv;
	}
	envp[envc] = NULL;

	if (nyx_cgroup_open(&cg, err) < 0)
		goto out;
	res->limits = cg.on ? "cgroup" : "rlimit";
	/* the go-ahead is a socket: a bwrap gone cannot SIGPIPE us */
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    pipe2(st, O_CLOEXEC) < 0 || pipe2(info, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, blk) < 0 ||
	    fcntl(out[0], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(errp[0], F_SETFL, O_NONBLOCK) < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "sandbox_failed", "pipe: %s",
		    strerror(errno));
		goto out;
	}
	memset(&plan, 0, sizeof(plan));
	plan.bwrap = bwrap;
	plan.argv = argv;
	plan.envp = envp;
	plan.out_w = out[1];
	plan.err_w = errp[1];
	plan.status_w = st[1];
	plan.src = src;
	plan.seccomp = seccomp;
	plan.blk_r = blk[0];
	plan.info_w = info[1];
	plan.drop = drop;
	plan.cgroup_procs = cg.procs_fd;
	plan.parent = getpid();
	plan.cpu = (rlim_t)rq->timeout_secs + 1;
	pid = spawn_bwrap(&plan);
	if (pid < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "sandbox_failed", "vfork: %s",
		    strerror(errno));
		goto out;
	}
	close(out[1]);
	close(errp[1]);
	close(st[1]);
	close(info[1]);
	close(blk[0]);
	out[1] = errp[1] = st[1] = info[1] = blk[0] = -1;
	/* bwrap sets the sandbox up meanwhile, on its own, on another CPU
	 * where there is one: the caller's work overlaps it */
	if (rq->ready != NULL)
		ready = rq->ready(rq->ready_ctx, err);
	/* the task cap on the sandbox's first process, which holds every
	 * other (cap_first), then the go-ahead */
	if (ready == 0) {
		if (first_process(info[0], rq->cancel,
		        nyx_mono_ms() + rq->timeout_secs * 1000LL,
		        &first) < 0 ||
		    cap_first(first, drop) < 0)
			cap_errno = errno;
		else
			go = send(blk[1], "g", 1, MSG_NOSIGNAL) == 1;
	}
	if (!go) {
		/* killed while it waits for the byte: the program never
		 * starts (closing the socket alone would let it go on) */
		if (first > 1)
			kill(first, SIGKILL);
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
	}
	close(blk[1]);
	close(info[0]);
	blk[1] = info[0] = -1;
	t0 = nyx_mono_ms(); /* the run's clock starts with the program */
	if (go && rq->running != NULL)
		rq->running(rq->ready_ctx);
	started = supervise(
	    pid, out[0], errp[0], st[0], t0, rq->timeout_secs, rq->cancel, res);
	if (ready < 0) {
		/* stopped before the program: the caller's error stands */
		nyx_sandbox_result_free(res);
		goto out;
	}
	/*
	 * Before the go-ahead: a stop is the run's cancellation; bwrap that
	 * never named the sandbox (ENOENT: it ended, and its stderr says
	 * why; ETIMEDOUT: not within the run's time) did not set it up.
	 */
	if (cap_errno == ECANCELED)
		started = res->cancelled = true;
	else if (cap_errno == ENOENT || cap_errno == ETIMEDOUT)
		started = false;
	else if (cap_errno != 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "LOCAL_ISOLATION_UNAVAILABLE",
		    "cannot set the sandbox's task limit (%s); refusing to run "
		    "the program without it.",
		    strerror(cap_errno));
		nyx_sandbox_result_free(res);
		goto out;
	}
	if (!started) {
		/* bwrap's own message says why (no user namespaces, ...) */
		char why[200] = "";
		const char *e = res->err.data ? res->err.data : "";

		snprintf(why, sizeof(why), "%.*s", (int)strcspn(e, "\n"), e);
		nyx_err_set(err, NYX_EXIT_OSERR, "LOCAL_ISOLATION_UNAVAILABLE",
		    "the sandbox could not be set up (%s); refusing to run the "
		    "program without isolation.",
		    why[0] ? why : "bwrap failed");
		nyx_sandbox_result_free(res);
		goto out;
	}
	rc = 0;
out:
	for (i = 0; i < 2; i++) {
		if (info[i] >= 0)
			close(info[i]);
		if (blk[i] >= 0)
			close(blk[i]);
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
		if (st[i] >= 0)
			close(st[i]);
	}
	if (src >= 0)
		close(src);
	if (seccomp >= 0)
		close(seccomp);
	nyx_cgroup_close(&cg);
	nyx_secure_zero(keyv, sizeof(keyv));
	return rc;
}

jv
nyx_sandbox_output(const struct nyx_sandbox_result *res)
{
	jv out = jv_object();

	out = jv_object_set(out, jv_string("stdout"),
	    jv_string_sized(
	        res->out.data ? res->out.data : "", (int)res->out.len));
	out = jv_object_set(out, jv_string("stderr"),
	    jv_string_sized(
	        res->err.data ? res->err.data : "", (int)res->err.len));
	out = jv_object_set(
	    out, jv_string("exit_code"), jv_number(res->exit_code));
	out = jv_object_set(out, jv_string("execution_time_ms"),
	    jv_number((double)res->elapsed_ms));
	if (res->limits != NULL)
		out = jv_object_set(
		    out, jv_string("limits"), jv_string(res->limits));
	out = jv_object_set(
	    out, jv_string("stdout_truncated"), jv_bool(res->out_truncated));
	return jv_object_set(
	    out, jv_string("stderr_truncated"), jv_bool(res->err_truncated));
}
