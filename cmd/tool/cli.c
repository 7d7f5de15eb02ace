#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nyx_hash.h"
#include "nyx_http.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_time.h"
#include "nyx_version.h"
#include "table.h"

static const char *prog = "nyx";
static char diag[4 + 32 + 1];
static bool pretty;
/* -o table: the records, rendered by nyx_cli_finish (invalid: JSON) */
static jv table_rows;
/* a progress line is on the terminal, to be cleared before output */
static bool progress_shown;
static bool quiet_flag;
static bool stdout_failed;
static int stdout_errno;

void
nyx_cli_init(const char *name)
{
	static const struct rlimit nocore = {0, 0};
	struct sigaction sa;
	char hex[33];
	int fd;

	prog = name;
	nyx_log_init(name);
	/*
	 * Before any credential is read: no core file and no ptrace or
	 * /proc/PID/mem, environ and fd access by other processes of this
	 * user (PRODUCT 10).  execve gives a child its own setting back.
	 */
	setrlimit(RLIMIT_CORE, &nocore);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* make sure 0-2 are open so no file we open lands on them */
	while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
		;
	if (fd > 2)
		close(fd);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);
	if (nyx_random_hex(hex, 16) < 0) {
		fprintf(stderr, "%s: error: no randomness available\n", prog);
		exit(NYX_EXIT_OSERR);
	}
	snprintf(diag, sizeof(diag), "nyx-%s", hex);
}

const char *
nyx_cli_prog(void)
{
	return prog;
}

const char *
nyx_cli_diag(void)
{
	return diag;
}

void
nyx_cli_set_pretty(bool p)
{
	pretty = p;
}

void
nyx_cli_usage(const char *fmt, ...)
{
	char raw[1024];
	va_list ap;

	/* the message may quote argv: it goes through the redactor too */
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	nyx_log_text("%s: usage: %s\nTry '%s --help'\n", prog, raw, prog);
	exit(NYX_EXIT_USAGE);
}

static const char common_help[] =
    "Common options:\n"
    "  -h, --help              print this help and exit\n"
    "  -V, --version           print the version and exit\n"
    "  -c, --config FILE       read the configuration from FILE\n"
    "  -p, --profile NAME      use configuration profile NAME\n"
    "  -v, --verbose           more detail on stderr (repeat; -vvv traces "
    "HTTP)\n"
    "  -q, --quiet             no warnings on stderr\n"
    "      --pretty            indent JSON records for humans\n";

static const char output_help[] =
    "  -o, --output FMT        json (default), pretty, or table: an aligned\n"
    "                          table on stdout instead of records\n";

static const char net_help[] =
    "Network options:\n"
    "      --base-url URL      NyxID public API base URL\n"
    "      --token-file FILE   source-readable token (inventory, route "
    "writes)\n"
    "      --exec-token-file FILE  token sent on execution calls\n"
    "      --max-time SECS     bound on each HTTP exchange (1..3600)\n"
    "      --capture FILE      append every HTTP exchange to FILE "
    "(NYX_CAPTURE)\n"
    "      --capture-source    keep the source in a capture, not its "
    "SHA-256\n";

static const char state_help[] =
    "State options:\n"
    "      --state-dir DIR     ledger, secrets and audit log directory\n";

static void
help(const struct nyx_cli_spec *spec)
{
	printf("usage: %s %s\n\n", prog, spec->synopsis);
	if (spec->options != NULL && *spec->options != '\0')
		printf("Options:\n%s\n", spec->options);
	fputs(common_help, stdout);
	if (!(spec->flags & NYX_CLI_NO_RECORDS))
		fputs(output_help, stdout);
	if (spec->flags & NYX_CLI_NET)
		printf("\n%s", net_help);
	if (spec->flags & NYX_CLI_STATE)
		printf("\n%s", state_help);
	printf("\nSee %s(%s) and nyx(7).\n", prog,
	    strcmp(prog, "nyx-sandboxd") == 0 ? "8" : "1");
}

/* Edit distance of two short words (options), a swap of two neighbours
 * counting as one edit (optimal string alignment), capped at 9. */
static int
distance(const char *a, size_t na, const char *b, size_t nb)
{
	int d[64][64];
	size_t i, j;

	if (na >= 63 || nb >= 63)
		return 9;
	for (i = 0; i <= na; i++)
		d[i][0] = (int)i;
	for (j = 0; j <= nb; j++)
		d[0][j] = (int)j;
	for (i = 1; i <= na; i++)
		for (j = 1; j <= nb; j++) {
			int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[na][nb] > 9 ? 9 : d[na][nb];
}

/* An unknown long option: name the renamed one, or the nearest. */
__attribute__((noreturn)) static void
unknown_long(const char *arg, const struct option *all)
{
	const char *name = arg + (strncmp(arg, "--", 2) == 0 ? 2 : 0);
	size_t n = strcspn(name, "="), i;
	const char *best = NULL;
	int bestd = 9;

	if (n == 7 && strncmp(name, "timeout", 7) == 0)
		nyx_cli_usage("unknown option '%s'; the bound on each exchange "
		              "is now '--max-time' (the program's own limit "
		              "is '--timeout-secs')",
		    arg);
	for (i = 0; all[i].name != NULL; i++) {
		int d = distance(name, n, all[i].name, strlen(all[i].name));

		if (d < bestd) {
			bestd = d;
			best = all[i].name;
		}
	}
	/* a guess only when it is close: two edits, one for words under 4 */
	if (best != NULL && bestd <= (n >= 4 ? 2 : 1))
		nyx_cli_usage(
		    "unknown option '%s'; did you mean '--%s'?", arg, best);
	nyx_cli_usage("unknown option '%s'", arg);
}

int
nyx_cli_parse(int argc, char **argv, const struct nyx_cli_spec *spec, void *ctx,
    struct nyx_common *cm)
{
	static const struct option common[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {"config", required_argument, NULL, 'c'},
	    {"profile", required_argument, NULL, 'p'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"pretty", no_argument, NULL, NYX_OPT_PRETTY},
	};
	static const struct option net[] = {
	    {"base-url", required_argument, NULL, NYX_OPT_BASE_URL},
	    {"token-file", required_argument, NULL, NYX_OPT_TOKEN_FILE},
	    {"exec-token-file", required_argument, NULL,
	        NYX_OPT_EXEC_TOKEN_FILE},
	    {"max-time", required_argument, NULL, NYX_OPT_MAX_TIME},
	    {"capture", required_argument, NULL, NYX_OPT_CAPTURE},
	    {"capture-source", no_argument, NULL, NYX_OPT_CAPTURE_SOURCE},
	};
	static const struct option state[] = {
	    {"state-dir", required_argument, NULL, NYX_OPT_STATE_DIR},
	};
	static const struct option output = {
	    "output", required_argument, NULL, 'o'};
	struct option all[96];
	char shortopts[128];
	const char *capture = NULL;
	bool capture_source = false;
	size_t n = 0, i;
	int c;

	memset(cm, 0, sizeof(*cm));
	for (i = 0; i < sizeof(common) / sizeof(common[0]); i++)
		all[n++] = common[i];
	if (spec->flags & NYX_CLI_NET)
		for (i = 0; i < sizeof(net) / sizeof(net[0]); i++)
			all[n++] = net[i];
	if (spec->flags & NYX_CLI_STATE)
		all[n++] = state[0];
	if (!(spec->flags & NYX_CLI_NO_RECORDS))
		all[n++] = output;
	for (i = 0; spec->longopts != NULL && spec->longopts[i].name != NULL &&
	     n < sizeof(all) / sizeof(all[0]) - 1;
	     i++)
		all[n++] = spec->longopts[i];
	memset(&all[n], 0, sizeof(all[n]));
	/* no '+': options and operands in any order, as GNU tools take
	 * them (PRODUCT 2); "--" still ends the options */
	snprintf(shortopts, sizeof(shortopts), ":hVc:p:vq%s%s",
	    spec->flags & NYX_CLI_NO_RECORDS ? "" : "o:",
	    spec->shortopts ? spec->shortopts : "");

	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, all, NULL)) != -1) {
		switch (c) {
		case 'h':
			help(spec);
			exit(fflush(stdout) == 0 && !ferror(stdout)
			        ? NYX_EXIT_OK
			        : NYX_EXIT_IOERR);
		case 'V':
			printf("%s %s\n", prog, NYX_VERSION);
			exit(fflush(stdout) == 0 && !ferror(stdout)
			        ? NYX_EXIT_OK
			        : NYX_EXIT_IOERR);
		case 'c':
			cm->config = optarg;
			break;
		case 'p':
			cm->profile = optarg;
			break;
		case 'v':
			cm->verbose++;
			break;
		case 'q':
			cm->quiet = 1;
			break;
		case NYX_OPT_PRETTY:
			cm->pretty = true;
			break;
		case 'o':
			if (strcmp(optarg, "pretty") == 0)
				cm->pretty = true;
			else if (strcmp(optarg, "table") == 0)
				table_rows = jv_array();
			else if (strcmp(optarg, "json") != 0)
				nyx_cli_usage(
				    "--output must be json, pretty or "
				    "table, not '%s'",
				    optarg);
			break;
		case NYX_OPT_BASE_URL:
			cm->base_url = optarg;
			break;
		case NYX_OPT_TOKEN_FILE:
			cm->token_file = optarg;
			break;
		case NYX_OPT_EXEC_TOKEN_FILE:
			cm->exec_token_file = optarg;
			break;
		case NYX_OPT_MAX_TIME:
			cm->max_time = optarg;
			break;
		case NYX_OPT_STATE_DIR:
			cm->state_dir = optarg;
			break;
		case NYX_OPT_CAPTURE:
			capture = optarg;
			break;
		case NYX_OPT_CAPTURE_SOURCE:
			capture_source = true;
			break;
		case ':':
			nyx_cli_usage(
			    "option '%s' needs a value", argv[optind - 1]);
		case '?':
			if (optopt != 0)
				nyx_cli_usage("unknown option '-%c'", optopt);
			unknown_long(argv[optind - 1], all);
		default:
			if (spec->on_opt == NULL ||
			    spec->on_opt(c, optarg, ctx) < 0)
				exit(NYX_EXIT_USAGE);
		}
	}
	nyx_log_set_verbosity(cm->verbose, cm->quiet);
	quiet_flag = cm->quiet != 0;
	if (capture_source && capture == NULL && getenv("NYX_CAPTURE") == NULL)
		nyx_cli_usage("--capture-source goes with --capture FILE");
	if (spec->flags & NYX_CLI_NET) {
		const char *env = getenv("NYX_CAPTURE");
		struct nyx_err err = NYX_ERR_ZERO;

		if (capture == NULL && env != NULL && *env != '\0')
			capture = env;
		if (capture != NULL &&
		    nyx_http_capture_open(capture, capture_source, &err) < 0)
			exit(nyx_cli_fail(&err));
	}
	nyx_cli_set_pretty(cm->pretty);
	return optind;
}

const struct nyx_capability *
nyx_cli_capability(const char *arg)
{
	const struct nyx_capability *cap = nyx_capability_find(arg);

	if (cap == NULL)
		nyx_cli_usage("--capability must be %s, not '%s'",
		    nyx_capability_names(), arg);
	return cap;
}

int
nyx_cli_emit(jv rec)
{
	nyx_cli_progress_clear();
	if (stdout_failed) {
		jv_free(rec);
		return -1;
	}
	if (jv_is_valid(table_rows)) {
		table_rows = jv_array_append(table_rows, rec);
		return 0;
	}
	if (nyx_json_write(rec, stdout, pretty) < 0) {
		stdout_failed = true;
		stdout_errno = errno;
		return -1;
	}
	return 0;
}

jv
nyx_cli_error_record(const struct nyx_err *err)
{
	jv rec = jv_object();

	rec = jv_object_set(rec, jv_string("v"), jv_number(1));
	rec = jv_object_set(rec, jv_string("type"), jv_string("error"));
	rec = jv_object_set(rec, jv_string("tool"), jv_string(prog));
	rec =
	    jv_object_set(rec, jv_string("code"), jv_string(nyx_err_code(err)));
	rec = jv_object_set(
	    rec, jv_string("class"), jv_string(nyx_exit_class(err->exit)));
	rec = jv_object_set(rec, jv_string("exit"), jv_number(err->exit));
	rec =
	    jv_object_set(rec, jv_string("retryable"), jv_bool(err->retryable));
	rec = jv_object_set(rec, jv_string("message"), jv_string(err->message));
	rec = jv_object_set(rec, jv_string("diagnostic_id"), jv_string(diag));
	if (err->http_status != 0)
		rec = jv_object_set(
		    rec, jv_string("http_status"), jv_number(err->http_status));
	return rec;
}

int
nyx_cli_fail(const struct nyx_err *err)
{
	int code = err->exit ? err->exit : NYX_EXIT_SOFTWARE;

	nyx_log(NYX_LOG_ERROR, "%s: %s (%s)", nyx_err_code(err), err->message,
	    diag);
	nyx_cli_emit(nyx_cli_error_record(err));
	return nyx_cli_finish(code);
}

bool
nyx_cli_quiet(void)
{
	return quiet_flag;
}

void
nyx_cli_progress_clear(void)
{
	if (progress_shown)
		fputs("\r\033[K", stderr);
	progress_shown = false;
}

void
nyx_cli_progress(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "\r\033[K%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
	progress_shown = true;
}

void
nyx_cli_wait_progress(
    const struct nyx_rec_item *v, size_t n, int64_t elapsed, void *arg)
{
	const struct nyx_rec_item *first = NULL;
	size_t i, left = 0;
	long long next;

	(void)arg;
	for (i = 0; i < n; i++)
		if (!v[i].done && !v[i].d.op.terminal && left++ == 0)
			first = &v[i];
	if (first == NULL)
		return;
	next = (long long)(first->d.op.next_poll_at_ms - nyx_now_ms()) / 1000;
	/* one line, rewritten in place (PRODUCT 6) */
	nyx_cli_progress("%llds, %zu pending: %s %s%s%s, next poll in %llds",
	    (long long)elapsed / 1000, left, first->d.op.handle,
	    first->d.op.status, first->d.op.phase[0] ? "/" : "",
	    first->d.op.phase, next < 0 ? 0 : next);
}

int
nyx_cli_finish(int code)
{
	nyx_cli_progress_clear();
	if (jv_is_valid(table_rows)) {
		jv rows = table_rows;

		table_rows = jv_invalid();
		if (!stdout_failed)
			nyx_table_print(stdout, rows);
		jv_free(rows);
	}
	if (!stdout_failed && (fflush(stdout) == EOF || ferror(stdout))) {
		stdout_failed = true;
		stdout_errno = errno;
	}
	if (stdout_failed) {
		/* a reader that went away is not worth a message */
		if (stdout_errno != EPIPE)
			nyx_log(NYX_LOG_ERROR, "write error on stdout: %s (%s)",
			    strerror(stdout_errno ? stdout_errno : EIO), diag);
		return NYX_EXIT_IOERR;
	}
	return code;
}

static const char *input_path; /* NULL: stdin unless a terminal */
static bool input_none;

void
nyx_cli_set_input(const char *path, bool none)
{
	input_path = path;
	input_none = none;
}

int
nyx_cli_read_record(jv *rec, struct nyx_err *err)
{
	struct nyx_json_reader *r;
	const char *name = "stdin";
	jv extra;
	int rc, more, fd = 0;

	if (input_none)
		return 0;
	if (input_path != NULL && strcmp(input_path, "-") != 0) {
		fd = open(input_path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return nyx_err_set(err, NYX_EXIT_NOINPUT,
			    "input_unreadable", "cannot read %s: %s",
			    input_path, strerror(errno));
		name = input_path;
	} else if (input_path == NULL && isatty(0))
		return 0;
	r = nyx_json_reader_new(fd, name);
	if (r == NULL) {
		if (fd != 0)
			close(fd);
		return nyx_err_set(err, NYX_EXIT_OSERR, "oom", "out of memory");
	}
	rc = nyx_json_reader_next(r, rec, err);
	if (rc == 1 && (more = nyx_json_reader_next(r, &extra, err)) != 0) {
		if (more == 1) {
			jv_free(extra);
			nyx_err_set(err, NYX_EXIT_DATAERR, "input_invalid",
			    "%s holds more than one record", name);
		}
		jv_free(*rec);
		rc = -1;
	}
	nyx_json_reader_free(r);
	if (fd != 0)
		close(fd);
	return rc;
}

int
nyx_cli_read_upstream(jv *rec, struct nyx_err *err)
{
	const char *type, *status;
	int got = nyx_cli_read_record(rec, err);

	if (got <= 0)
		return got < 0 ? -1 : NYX_UPSTREAM_NONE;
	type = nyx_json_peek_str(*rec, "type");
	status = nyx_json_peek_str(*rec, "status");
	if (type != NULL && strcmp(type, "error") == 0)
		return NYX_UPSTREAM_ERROR;
	if (type != NULL && strcmp(type, "route.admission") == 0 &&
	    status != NULL && strcmp(status, "admitted") == 0)
		return NYX_UPSTREAM_ADMITTED;
	if (type != NULL && strcmp(type, "route.admission") == 0 &&
	    status != NULL && strcmp(status, "blocked") == 0)
		return NYX_UPSTREAM_BLOCKED;
	jv_free(*rec);
	*rec = jv_invalid();
	return nyx_err_set(err, NYX_EXIT_DATAERR, "input_invalid",
	    "stdin must hold a route.admission (admitted or blocked) or an "
	    "error record");
}

int
nyx_cli_pass_through(jv rec, int dflt)
{
	const char *type = nyx_json_peek_str(rec, "type");
	jv e = nyx_json_get(rec, "exit");
	int code = dflt;

	/* only an error record's "exit" travels (PRODUCT §2, §6) */
	if (type != NULL && strcmp(type, "error") == 0 &&
	    nyx_json_integral(e, 1, 125))
		code = (int)jv_number_value(e);
	jv_free(e);
	nyx_log(NYX_LOG_INFO, "passing the upstream %s record through",
	    type ? type : "input");
	nyx_cli_emit(rec);
	return code;
}

int
nyx_cli_emit_blocked(jv rec, int code)
{
	jv b = nyx_json_get(rec, "blocker");

	if (jv_get_kind(b) == JV_KIND_OBJECT)
		nyx_log(NYX_LOG_ERROR, "%s: %s (%s)",
		    nyx_json_peek_str(b, "code") ? nyx_json_peek_str(b, "code")
		                                 : "blocked",
		    nyx_json_peek_str(b, "message")
		        ? nyx_json_peek_str(b, "message")
		        : "",
		    diag);
	jv_free(b);
	nyx_cli_emit(rec);
	return code;
}
