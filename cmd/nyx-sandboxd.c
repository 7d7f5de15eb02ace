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
#include <unistd.h>

#include "tool/cli.h"
#include "nyx_buf.h"
#include "nyx_config.h"
#include "nyx_hash.h"
#include "nyx_err.h"
#include "nyx_log.h"
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
};

struct opts {
	const char *world;
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
    {NULL, 0, NULL, 0},
};

static int
on_opt(int c, const char *arg, void *ctx)
{
	struct opts *o = ctx;

	switch (c) {
	case OPT_WORLD:
		o->world = arg;
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
    "--world FILE [--listen HOST:PORT] [--port-file FILE] [--faults FILE] "
    "[--store FILE] [--retention SECS] [--codex-runner CMD] "
    "[--control --control-token-file FILE] [--allow-remote] "
    "[common options]",
    "      --world FILE        principals, orgs, routes and key facts "
    "(YAML)\n"
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

static int
load_docs(const struct opts *o, jv *world, jv *faults, struct nyx_err *err)
{
	*faults = jv_null();
	if (nyx_yaml_load_file(o->world, world, err) < 0)
		return -1;
	if (o->faults != NULL &&
	    nyx_yaml_load_file(o->faults, faults, err) < 0) {
		jv_free(*world);
		return -1;
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

static int
run(const struct opts *o, struct nyx_err *err)
{
	struct nyx_srv_opts so = {o->listen ? o->listen : "127.0.0.1:0", NULL,
	    o->allow_remote, o->store, o->retention};
	struct nyx_srv *srv;
	sigset_t set;
	jv world, faults;
	char *token = NULL;
	int sig;

	if (o->control &&
	    (token = read_control_token(o->control_token_file, err)) == NULL)
		return -1;
	so.control_token = token;
	if (load_docs(o, &world, &faults, err) < 0) {
		free(token);
		return -1;
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
	if (o.world == NULL)
		nyx_cli_usage("--world FILE is required");
	if (o.control != (o.control_token_file != NULL))
		nyx_cli_usage("--control and --control-token-file go together");
	if (nyx_time_init(&err) < 0)
		return nyx_cli_fail(&err);
	code = run(&o, &err);
	if (code < 0)
		return nyx_cli_fail(&err);
	return code;
}
