/*
 * nyx-sandboxd: a local NyxID + Chrono Sandbox compatible server on
 * loopback, for tests, demos and canary rehearsals.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool/cli.h"
#include "nyx_buf.h"
#include "nyx_config.h"
#include "nyx_hash.h"
#include "nyx_err.h"
#include "nyx_log.h"
#include "nyx-sandboxd/replay.h"
#include "nyx-sandboxd/srv.h"
#include "nyx_time.h"

enum {
	OPT_WORLD = 2000,
	OPT_LISTEN,
	OPT_PORT_FILE,
	OPT_FAULTS,
	OPT_CONTROL,
	OPT_STORE,
	OPT_RETENTION,
	OPT_CODEX_RUNNER,
	OPT_CONTROL_TOKEN_FILE,
	OPT_ALLOW_REMOTE,
	OPT_DETACH,
	OPT_REPLAY,
	OPT_REPLAY_TIMING,
	OPT_CHECK,
};

#define MAX_WORLDS 16

struct opts {
	const char *worlds[MAX_WORLDS];
	size_t nworlds;
	bool detach;
	const char *replay;
	bool replay_timing;
	bool check;
	const char *listen;
	const char *port_file;
	const char *faults;
	bool control;
	const char *control_token_file;
	bool allow_remote;
	const char *store;
	long retention;
	const char *codex_runner;
};

static const struct option longopts[] = {
    {"world", required_argument, NULL, OPT_WORLD},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"port-file", required_argument, NULL, OPT_PORT_FILE},
    {"faults", required_argument, NULL, OPT_FAULTS},
    {"control", no_argument, NULL, OPT_CONTROL},
    {"store", required_argument, NULL, OPT_STORE},
    {"retention", required_argument, NULL, OPT_RETENTION},
    {"codex-runner", required_argument, NULL, OPT_CODEX_RUNNER},
    {"control-token-file", required_argument, NULL, OPT_CONTROL_TOKEN_FILE},
    {"allow-remote", no_argument, NULL, OPT_ALLOW_REMOTE},
    {"detach", no_argument, NULL, OPT_DETACH},
    {"replay", required_argument, NULL, OPT_REPLAY},
    {"replay-timing", no_argument, NULL, OPT_REPLAY_TIMING},
    {"check", no_argument, NULL, OPT_CHECK},
    {NULL, 0, NULL, 0},
};

static int
on_opt(int c, const char *arg, void *ctx)
{
	struct opts *o = ctx;

	switch (c) {
	case OPT_WORLD:
		if (o->nworlds == MAX_WORLDS)
			nyx_cli_usage("at most %d --world files", MAX_WORLDS);
		o->worlds[o->nworlds++] = arg;
		break;
	case OPT_DETACH:
		o->detach = true;
		break;
	case OPT_REPLAY:
		o->replay = arg;
		break;
	case OPT_REPLAY_TIMING:
		o->replay_timing = true;
		break;
	case OPT_CHECK:
		o->check = true;
		break;
	case OPT_LISTEN:
		o->listen = arg;
		break;
	case OPT_PORT_FILE:
		o->port_file = arg;
		break;
	case OPT_FAULTS:
		o->faults = arg;
		break;
	case OPT_CONTROL:
		o->control = true;
		break;
	case OPT_STORE:
		o->store = arg;
		break;
	case OPT_CONTROL_TOKEN_FILE:
		o->control_token_file = arg;
		break;
	case OPT_ALLOW_REMOTE:
		o->allow_remote = true;
		break;
	case OPT_CODEX_RUNNER:
		if (*arg == '\0')
			nyx_cli_usage("--codex-runner takes a command line");
		o->codex_runner = arg;
		break;
	case OPT_RETENTION: {
		char *end;

		errno = 0;
		o->retention = strtol(arg, &end, 10);
		if (errno != 0 || end == arg || *end != '\0' ||
		    o->retention < 1 || o->retention > 30L * 86400)
			nyx_cli_usage("--retention takes seconds, 1..2592000");
		break;
	}
	default:
		return -1;
	}
	return 0;
}

static const struct nyx_cli_spec spec = {
    "--world FILE [--world FILE...] [--listen HOST:PORT] [--port-file FILE]\n"
    "       [--faults FILE] [--detach] [--replay FILE [--replay-timing] | "
    "--replay FILE --check] "
    "[--store FILE] [--retention SECS] [--codex-runner CMD] "
    "[--control --control-token-file FILE] [--allow-remote] "
    "[common options]",
    "      --world FILE        principals, orgs, routes and key facts "
    "(YAML);\n"
    "                          several merge (lists concatenate)\n"
    "      --replay FILE       answer each request as the capture FILE did,\n"
    "                          in order; then the world (default: empty)\n"
    "      --replay-timing     with the captured delays\n"
    "      --check             with --replay: check that the capture is\n"
    "                          safe to share, and exit\n"
    "      --detach            run in the background once listening; print\n"
    "                          NYX_BASE_URL and NYX_SANDBOXD_PID for eval\n"
    "      --listen HOST:PORT  address to serve on (default 127.0.0.1:0)\n"
    "      --port-file FILE    write the bound port to FILE once "
    "listening\n"
    "      --faults FILE       fault plan (YAML) applied to every "
    "endpoint\n"
    "      --store FILE        keep durable operations in FILE (SQLite),\n"
    "                          across restarts\n"
    "      --retention SECS    how long an operation lives (default 86400)\n"
    "      --codex-runner CMD  the Codex runner: a shell command line that\n"
    "                          reads the task on stdin, run in the local\n"
    "                          sandbox (default: a deterministic built-in)\n"
    "      --control           enable the /_nyx/ control endpoints\n"
    "      --control-token-file FILE\n"
    "                          the bearer token they require (needed with\n"
    "                          --control)\n"
    "      --allow-remote      serve on a non-loopback --listen address\n",
    NYX_CLI_NO_RECORDS,
    "",
    longopts,
    on_opt,
};

/* Merge a later world into an earlier one: lists concatenate, maps
 * merge, any other value of the later file wins. */
static jv
merge(jv a, jv b)
{
	if (jv_get_kind(a) != JV_KIND_OBJECT ||
	    jv_get_kind(b) != JV_KIND_OBJECT) {
		jv_free(a);
		return b;
	}
	jv_object_foreach(b, k, v)
	{
		jv old = jv_object_get(jv_copy(a), jv_copy(k));

		if (jv_get_kind(old) == JV_KIND_ARRAY &&
		    jv_get_kind(v) == JV_KIND_ARRAY)
			v = jv_array_concat(old, v);
		else if (jv_get_kind(old) == JV_KIND_OBJECT &&
		    jv_get_kind(v) == JV_KIND_OBJECT)
			v = jv_object_merge(old, v);
		else
			jv_free(old);
		a = jv_object_set(a, k, v);
	}
	jv_free(b);
	return a;
}

static int
load_docs(const struct opts *o, jv *world, jv *faults, struct nyx_err *err)
{
	size_t i;

	*faults = jv_null();
	*world = o->nworlds == 0 ? jv_object() : jv_invalid();
	for (i = 0; i < o->nworlds; i++) {
		jv w;

		if (nyx_yaml_load_file(o->worlds[i], &w, err) < 0) {
			jv_free(*world);
			return -1;
		}
		*world = i == 0 ? w : merge(*world, w);
	}
	if (o->faults != NULL &&
	    nyx_yaml_load_file(o->faults, faults, err) < 0) {
		jv_free(*world);
		return -1;
	}
	if (o->replay != NULL) {
		/* the capture's answers first, then the fault plan's rules */
		jv plan, rules, more;
		size_t n;

		if (nyx_replay_plan(
		        o->replay, o->replay_timing, &plan, &n, err) < 0) {
			jv_free(*world);
			jv_free(*faults);
			return -1;
		}
		rules = jv_object_get(plan, jv_string("faults"));
		more = jv_get_kind(*faults) == JV_KIND_OBJECT
		    ? jv_object_get(jv_copy(*faults), jv_string("faults"))
		    : jv_copy(*faults);
		if (jv_get_kind(more) == JV_KIND_ARRAY)
			rules = jv_array_concat(rules, more);
		else
			jv_free(more);
		jv_free(*faults);
		*faults =
		    jv_object_set(jv_object(), jv_string("faults"), rules);
		nyx_log(NYX_LOG_INFO, "replaying %zu exchange(s) of %s", n,
		    o->replay);
	}
	return 0;
}

/*
 * Write the port atomically, only once listening: a private temporary
 * file beside it (mkstemp: O_EXCL, never a planted link), then rename,
 * which replaces a link at path rather than following it.
 */
static int
write_port_file(const char *path, int port, struct nyx_err *err)
{
	char tmp[4096], line[32];
	int fd, n;

	n = snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return nyx_err_set(err, NYX_EXIT_USAGE, "port_file_invalid",
		    "--port-file path is too long");
	n = snprintf(line, sizeof(line), "%d\n", port);
	fd = mkstemp(tmp);
	if (fd < 0 || fchmod(fd, 0644) < 0 || write(fd, line, (size_t)n) != n ||
	    fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
		int e = errno;

		if (fd >= 0)
			unlink(tmp);
		return nyx_err_set(err, NYX_EXIT_CANTCREAT, "port_file_failed",
		    "cannot write %s: %s", path, strerror(e));
	}
	return 0;
}

/* The control plane's bearer: the file's first line, not empty. */
static char *
read_control_token(const char *path, struct nyx_err *err)
{
	struct nyx_buf b = NYX_BUF_ZERO;
	char *tok;

	if (nyx_config_read_file(path, true, 4096, &b, err) < 0)
		return NULL;
	b.len = b.data ? strcspn(b.data, "\r\n") : 0;
	if (b.len < 16) {
		nyx_buf_free(&b);
		nyx_err_set(err, NYX_EXIT_CONFIG, "control_token_invalid",
		    "%s must hold a control token of at least 16 characters",
		    path);
		return NULL;
	}
	b.data[b.len] = '\0';
	tok = nyx_buf_take(&b);
	nyx_buf_free(&b);
	if (tok == NULL)
		nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	return tok;
}

/*
 * --detach, ssh-agent style: the parent waits for the child to listen,
 * prints the variables for eval and exits 0; a child that fails first
 * has said why on the shared stderr, and its exit is the parent's.
 * Returns the ready descriptor in the child, or exits in the parent.
 */
static int
detach(void)
{
	int fds[2], status;
	char line[128] = "";
	ssize_t n, got = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(fds[0]);
		setsid();
		return fds[1];
	}
	close(fds[1]);
	while (got < (ssize_t)sizeof(line) - 1 &&
	    (n = read(fds[0], line + got, sizeof(line) - 1 - (size_t)got)) !=
	        0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += n;
	}
	close(fds[0]);
	line[got] = '\0';
	if (strchr(line, '\n') == NULL) {
		if (waitpid(pid, &status, 0) == pid && WIFEXITED(status))
			exit(WEXITSTATUS(status));
		exit(NYX_EXIT_SOFTWARE);
	}
	*strchr(line, '\n') = '\0';
	printf("NYX_BASE_URL='%s'; export NYX_BASE_URL;\n"
	       "NYX_SANDBOXD_PID=%ld; export NYX_SANDBOXD_PID;\n",
	    line, (long)pid);
	exit(fflush(stdout) == 0 ? NYX_EXIT_OK : NYX_EXIT_IOERR);
}

/* In the detached child, once listening: tell the parent, then leave
 * the terminal (stdin, stdout and stderr become /dev/null). */
static void
detached_ready(int ready, const char *base)
{
	char line[128];
	int n = snprintf(line, sizeof(line), "%s\n", base), fd;

	if (n > 0 && write(ready, line, (size_t)n) != n)
		nyx_log(NYX_LOG_WARN, "cannot tell the parent: %s",
		    strerror(errno));
	close(ready);
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
	}
}

static int
run(const struct opts *o, struct nyx_err *err)
{
	struct nyx_srv_opts so = {o->listen ? o->listen : "127.0.0.1:0", NULL,
	    o->allow_remote, o->store, o->retention};
	struct nyx_srv *srv;
	sigset_t set;
	jv world, faults;
	char *token = NULL;
	int sig, ready = -1;

	if (o->control &&
	    (token = read_control_token(o->control_token_file, err)) == NULL)
		return -1;
	so.control_token = token;
	if (load_docs(o, &world, &faults, err) < 0) {
		free(token);
		return -1;
	}
	/* before any thread: a fork keeps only the calling one */
	if (o->detach && (ready = detach()) < 0) {
		free(token);
		jv_free(world);
		jv_free(faults);
		return nyx_err_set(err, NYX_EXIT_OSERR, "detach_failed",
		    "cannot detach: %s", strerror(errno));
	}
	/* threads inherit this mask: only sigwait below sees the signals */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	srv = nyx_srv_start(&so, world, faults, err);
	if (token != NULL) {
		nyx_secure_zero(token, strlen(token));
		free(token);
	}
	if (srv == NULL)
		return -1;
	if (o->codex_runner != NULL &&
	    nyx_srv_set_codex_runner(srv, o->codex_runner, err) < 0) {
		nyx_srv_stop(srv);
		return -1;
	}
	if (o->port_file != NULL &&
	    write_port_file(o->port_file, nyx_srv_port(srv), err) < 0) {
		nyx_srv_stop(srv);
		return -1;
	}
	nyx_log_line("listening on %s", nyx_srv_base(srv));
	if (ready >= 0)
		detached_ready(ready, nyx_srv_base(srv));
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig != SIGHUP)
			break;
		/* SIGHUP: reload the world and the fault plan from disk */
		if (load_docs(o, &world, &faults, err) < 0) {
			nyx_log(NYX_LOG_WARN,
			    "reload failed, keeping the old "
			    "world: %s",
			    err->message);
			continue;
		}
		{
			char why[512];

			if (nyx_srv_set_world(srv, world, why, sizeof(why)) <
			        0 ||
			    nyx_srv_set_faults(srv, faults, why, sizeof(why)) <
			        0)
				nyx_log(NYX_LOG_WARN, "reload failed: %s", why);
			else
				nyx_log_line("reloaded the world and faults");
		}
	}
	nyx_log_line("stopping on signal %d", sig);
	nyx_srv_stop(srv);
	return NYX_EXIT_OK;
}

int
main(int argc, char **argv)
{
	struct nyx_err err = NYX_ERR_ZERO;
	struct nyx_common cm;
	struct opts o;
	int idx, code;

	memset(&o, 0, sizeof(o));
	nyx_cli_init("nyx-sandboxd");
	idx = nyx_cli_parse(argc, argv, &spec, &o, &cm);
	if (idx < argc)
		nyx_cli_usage("unexpected argument '%s'", argv[idx]);
	if (o.check || o.replay_timing) {
		if (o.replay == NULL)
			nyx_cli_usage("--check and --replay-timing go with "
			              "--replay FILE");
	}
	if (o.check) {
		size_t lines;

		/* a capture to attach to a bug report: safe, or 65 */
		if (nyx_replay_check(o.replay, &lines, &err) < 0)
			return nyx_cli_fail(&err);
		nyx_log_line("%s: %zu exchange(s), no credential, no source",
		    o.replay, lines);
		return nyx_cli_finish(NYX_EXIT_OK);
	}
	if (o.nworlds == 0 && o.replay == NULL)
		nyx_cli_usage("--world FILE is required (or --replay FILE)");
	if (o.control != (o.control_token_file != NULL))
		nyx_cli_usage("--control and --control-token-file go together");
	if (nyx_time_init(&err) < 0)
		return nyx_cli_fail(&err);
	code = run(&o, &err);
	if (code < 0 && o.detach) {
		/* stdout is for eval: the error goes to stderr alone */
		nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", nyx_err_code(&err),
		    err.message, nyx_cli_diag());
		return err.exit ? err.exit : NYX_EXIT_SOFTWARE;
	}
	if (code < 0)
		return nyx_cli_fail(&err);
	return code;
}
