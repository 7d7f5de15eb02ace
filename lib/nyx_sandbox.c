#include "nyx_sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
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
	/* it ends with bwrap, whose end the run already saw */
	while (res->waiter > 0 && waitpid(res->waiter, NULL, 0) < 0 &&
	    errno == EINTR)
		;
	res->waiter = 0;
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
	int out_w, err_w, status_w, src, seccomp, cgroup_procs;
	int gate; /* the caller's go-ahead (nyx_sandbox_req.ready), or -1 */
	bool drop;
	rlim_t cpu;
	pid_t parent;
};

/* A pipe whose ends are 10 or above, clear of the 0-7 of bwrap's. */
static int
high_pipe(int fds[2])
{
	int p[2], i;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	for (i = 0; i < 2; i++) {
		fds[i] = fcntl(p[i], F_DUPFD_CLOEXEC, 10);
		close(p[i]);
		if (fds[i] < 0)
			return -1;
	}
	return 0;
}

/*
 * Set the task cap of the process bwrap names in "{"child-pid": N" on
 * info_r: the sandbox's first process, which waits on --block-fd with
 * every namespace set up, and starts the program only then, so the
 * program and all it starts inherit the limit.  This waiter runs with the
 * sandbox's credentials (nobody under root), which is what lets it set a
 * limit on a process in the sandbox's user namespace without
 * CAP_SYS_RESOURCE; the count is the one prlimit(1) run inside would
 * see, without its exec.  -1 with errno.  A forked child of a threaded
 * process (nyx-sandboxd): async-signal-safe calls only.
 */
static int
cap_tasks(int info_r, pid_t *first)
{
	static const char key[] = "\"child-pid\":";
	struct rlimit rl = {NYX_SANDBOX_TASKS, NYX_SANDBOX_TASKS};
	char buf[1024];
	size_t len = 0;
	const char *k;
	long n = 0;

	for (;;) { /* to EOF: bwrap writes it all, then closes its end */
		char drain[256];
		ssize_t r = len < sizeof(buf) - 1
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
		errno = ENOENT; /* bwrap failed before it named a process */
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
	return prlimit((pid_t)n, RLIMIT_NPROC, &rl, NULL);
}

/*
 * The forked child, once bwrap runs beside it: cap the sandbox, let it go
 * on, then wait and end as bwrap ended (the parent reads the status).  A
 * cap that cannot be set kills the sandbox, still blocked before the
 * program, and says so on the status descriptor: {"nyx-cap-errno": E}.
 */
static _Noreturn void
wait_bwrap(pid_t bw, int info_r, int blk_w, int gate)
{
	struct sigaction ign;
	int status = 0, e;
	pid_t first = 0;

	/* a bwrap that died after naming the sandbox closes the block
	 * pipe: the byte fails with EPIPE, and its exit is still what this
	 * waiter reports */
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &ign, NULL);
	/* the parent's pipes end with bwrap's ends, not this copy's */
	close(0);
	close(1);
	close(2);
	close(4);
	close(5);
	if (cap_tasks(info_r, &first) == 0) {
		char go = 'g';

		/* the caller's go-ahead, when it asked to give one: without
		 * it the sandbox is killed, still blocked before the program */
		if (gate >= 0 && (read(gate, &go, 1) != 1 || go != 'g')) {
			kill(first, SIGKILL);
			kill(bw, SIGKILL);
		} else {
			(void)!write(blk_w, "g", 1);
			close(blk_w);
			blk_w = -1;
		}
	} else if ((e = errno) != ENOENT) {
		char msg[48] = "{\"nyx-cap-errno\": ", *q = msg + strlen(msg);
		char digits[12];
		int i = 0;

		/* the byte never comes: it is killed while it waits */
		if (first > 1)
			kill(first, SIGKILL);
		kill(bw, SIGKILL);
		do
			digits[i++] = (char)('0' + e % 10);
		while ((e /= 10) > 0 && i < 11);
		while (i > 0)
			*q++ = digits[--i];
		*q++ = '}';
		*q++ = '\n';
		(void)!write(3, msg, (size_t)(q - msg));
	}
	close(3);
	close(info_r);
	if (gate >= 0)
		close(gate);
	while (waitpid(bw, &status, 0) < 0)
		if (errno != EINTR)
			_exit(125);
	if (blk_w >= 0)
		close(blk_w);
	if (WIFSIGNALED(status)) {
		struct sigaction dfl;

		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigaction(WTERMSIG(status), &dfl, NULL);
		kill(getpid(), WTERMSIG(status));
	}
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 125);
}

/*
 * The waiter's vfork()ed child, which shares its memory until execve:
 * system calls on its own frame only, then execve or _exit.  bwrap dies
 * with the waiter, and waits on --block-fd 6 for the cap before it
 * starts the program; --info-fd 7 names it.
 */
static _Noreturn __attribute__((noinline)) void
exec_bwrap(const struct child_plan *p, pid_t waiter, int blk_r, int info_w)
{
	struct rlimit as = {4ul << 30, 4ul << 30};
	const char *why;

	/* bwrap's and the program's, not the waiter's: the limits are each
	 * process's own (and ASan's waiter maps far more than 4 GiB) */
	setrlimit(RLIMIT_AS, &as);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != waiter ||
	    dup2(blk_r, 6) < 0 || dup2(info_w, 7) < 0)
		_exit(125);
	closefrom(8);
	execve(p->bwrap, (char *const *)p->argv, p->envp);
	/* say why on the captured stderr (the parent reports it), with no
	 * buffer: this frame is the waiter's stack */
	why = strerror(errno);
	(void)!write(2, "cannot execute ", 15);
	(void)!write(2, p->bwrap, strlen(p->bwrap));
	(void)!write(2, ": ", 2);
	(void)!write(2, why, strlen(why));
	(void)!write(2, "\n", 1);
	_exit(127);
}

/* In the child: never returns. */
static void
exec_child(const struct child_plan *p)
{
	struct rlimit rl;
	struct sigaction dfl;
	sigset_t none;
	int devnull = -1, sig, info[2], blk[2], i;
	int out_w = p->out_w, err_w = p->err_w, status_w = p->status_w;
	int src = p->src, seccomp = p->seccomp, gate = p->gate;
	int *const fds[] = {
	    &devnull, &out_w, &err_w, &status_w, &src, &seccomp, &gate};
	pid_t self, bw;

	setpgid(0, 0);
	/* into the run's cgroup first: everything after is held by it */
	if (p->cgroup_procs >= 0 && write(p->cgroup_procs, "0", 1) != 1)
		_exit(125);
	/* ignored or blocked signals survive execve: reset them */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* each descriptor to place is first moved clear of 0-9: one that
	 * happens to be 4 must not be closed by the dup2 onto 4 of another */
	devnull = open("/dev/null", O_RDONLY);
	for (i = 0; i < 7; i++)
		if (*fds[i] >= 0 &&
		    (*fds[i] = fcntl(*fds[i], F_DUPFD_CLOEXEC, 10)) < 0)
			_exit(125);
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_w, 1) < 0 ||
	    dup2(err_w, 2) < 0 || dup2(status_w, 3) < 0 || dup2(src, 4) < 0 ||
	    dup2(seccomp, 5) < 0 || (gate >= 0 && dup2(gate, 6) < 0))
		_exit(125);
	gate = gate >= 0 ? 6 : -1;
	closefrom(gate >= 0 ? 7 : 6);
	rl.rlim_cur = p->cpu;
	rl.rlim_max = p->cpu + 1;
	setrlimit(RLIMIT_CPU, &rl);
	/*
	 * The task cap is the sandbox's own: wait_bwrap() sets it on the
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
	if (p->drop &&
	    (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
	        setresuid(NOBODY, NOBODY, NOBODY) < 0))
		_exit(125);
	/*
	 * Die with the parent from here on (bwrap's --die-with-parent only
	 * starts once bwrap runs): set after the credentials change, which
	 * clears it, and checked against a parent that died already.
	 */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != p->parent ||
	    high_pipe(info) < 0 || high_pipe(blk) < 0)
		_exit(125);
	self = getpid();
	/* vfork: starting bwrap copies no page table of this waiter, and
	 * takes no copy-on-write fault (about 1 ms a run; bench/README.md) */
	bw = vfork();
	if (bw < 0)
		_exit(125);
	if (bw == 0)
		exec_bwrap(p, self, blk[0], info[1]);
	close(info[1]);
	close(blk[0]);
	/* bwrap runs: tell the caller, which waits for it (below) */
	if (gate >= 0)
		(void)!send(gate, "s", 1, MSG_NOSIGNAL);
	wait_bwrap(bw, info[0], blk[1], gate);
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

static int
supervise(pid_t pid, int out_r, int err_r, int status_r, int64_t t0,
    int timeout_secs, const volatile int *cancel,
    struct nyx_sandbox_result *res, bool *started, int *cap_errno)
{
	struct pollfd pf[4];
	struct nyx_buf status = NYX_BUF_ZERO;
	int64_t deadline = t0 + timeout_secs * 1000LL;
	int64_t reaped_at = 0;
	bool open_out = true, open_err = true, open_st = true, reaped = false;
	bool killed = false, dummy = false;
	int wstatus = 0, pfd = pid_fd(pid);

	nyx_buf_init(&status, 4096);
	/*
	 * The run is over when bwrap's three pipes are: the waiter, which
	 * ends after bwrap, is reaped later (nyx_sandbox_result_free), so
	 * its exit costs the run no wake-up.
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
		if (!reaped && waitpid(pid, &wstatus, WNOHANG) == pid) {
			reaped = true;
			reaped_at = nyx_mono_ms();
		}
	}
	if (pfd >= 0)
		close(pfd);
	while (open_st)
		open_st = pump(status_r, &status, &dummy);
	res->elapsed_ms = (long)(nyx_mono_ms() - t0);
	/* bwrap reports {"child-pid": N} once the sandbox is set up; the
	 * waiter, a task cap it could not set (the program never ran) */
	(void)status_number(&status, "\"nyx-cap-errno\": ", cap_errno);
	*started = *cap_errno == 0 && status.data != NULL &&
	    strstr(status.data, "\"child-pid\"") != NULL;
	/* the program's end, as bwrap saw it ({"exit-code": N}, 128 + the
	 * signal); without it (bwrap killed, or it failed), the waiter's,
	 * which ends as bwrap ended */
	if (status_number(&status, "\"exit-code\": ", &res->exit_code)) {
		if (!reaped)
			res->waiter = pid;
	} else if (!reaped && waitpid(pid, &wstatus, 0) != pid) {
		res->exit_code = 125;
	} else if (WIFEXITED(wstatus)) {
		res->exit_code = WEXITSTATUS(wstatus);
	} else if (WIFSIGNALED(wstatus)) {
		res->exit_code = 128 + WTERMSIG(wstatus);
	}
	nyx_buf_free(&status);
	return 0;
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
	int seccomp = -1, gate[2] = {-1, -1}, ready = 0;
	int64_t t0;
	struct nyx_cgroup cg = {.procs_fd = -1};
	size_t argc = 0, envc = 0, i;
	struct child_plan plan;
	bool started = false, drop = geteuid() == 0;
	int cap_errno = 0;
	pid_t pid;
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
	/* the go-ahead is a socket: a waiter that died cannot SIGPIPE us */
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    pipe2(st, O_CLOEXEC) < 0 ||
	    (rq->ready != NULL &&
	        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gate) < 0)) {
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
	plan.drop = drop;
	plan.seccomp = seccomp;
	plan.cgroup_procs = cg.procs_fd;
	plan.gate = gate[0];
	plan.parent = getpid();
	plan.cpu = (rlim_t)rq->timeout_secs + 1;
	pid = fork();
	if (pid < 0) {
		nyx_err_set(err, NYX_EXIT_OSERR, "sandbox_failed", "fork: %s",
		    strerror(errno));
		goto out;
	}
	if (pid == 0)
		exec_child(&plan);
	setpgid(pid, pid); /* also in the child: no race either way */
	close(out[1]);
	close(errp[1]);
	close(st[1]);
	out[1] = errp[1] = st[1] = -1;
	if (rq->ready != NULL) {
		char s;

		/*
		 * Sleep until the waiter has started bwrap (or is gone): the
		 * scheduler then wakes this process on an idle CPU, where the
		 * caller's work overlaps bwrap's set-up, instead of leaving
		 * the waiter queued behind it on this one (1 to 2 ms a run;
		 * bench/README.md).
		 */
		close(gate[0]);
		gate[0] = -1;
		(void)!recv(gate[1], &s, 1, 0);
		/* bwrap sets the sandbox up meanwhile, on its own */
		ready = rq->ready(rq->ready_ctx, err);
		/* a waiter gone already (bwrap failed) says why below */
		if (ready == 0)
			(void)!send(gate[1], "g", 1, MSG_NOSIGNAL);
		close(gate[1]);
		gate[1] = -1;
	}
	t0 = nyx_mono_ms(); /* the run's clock starts with the program */
	if (ready == 0 && rq->running != NULL)
		rq->running(rq->ready_ctx);
	supervise(pid, out[0], errp[0], st[0], t0, rq->timeout_secs, rq->cancel,
	    res, &started, &cap_errno);
	if (ready < 0) {
		/* stopped before the program: the caller's error stands */
		nyx_sandbox_result_free(res);
		goto out;
	}
	if (cap_errno != 0) {
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
		if (gate[i] >= 0)
			close(gate[i]);
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
