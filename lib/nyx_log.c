#include "nyx_log.h"

#include "nyx_buf.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nyx_hash.h"

#define MAX_SECRETS 8
#define REDACTED "[redacted]"

static const char *log_prog = "nyx";
static int log_verbose;
static int log_quiet;
static char *secrets[MAX_SECRETS];

void
nyx_log_init(const char *prog)
{
	log_prog = prog;
}

const char *
nyx_log_prog(void)
{
	return log_prog;
}

void
nyx_log_set_verbosity(int verbose, int quiet)
{
	log_verbose = verbose;
	log_quiet = quiet;
}

int
nyx_log_enabled(enum nyx_log_level level)
{
	if (level == NYX_LOG_ERROR)
		return 1;
	if (level == NYX_LOG_WARN)
		return !log_quiet;
	return log_verbose >= (int)level - 1;
}

void
nyx_log_add_secret(const char *secret)
{
	size_t i;

	if (secret == NULL || strlen(secret) < 4)
		return;
	for (i = 0; i < MAX_SECRETS; i++) {
		if (secrets[i] != NULL && strcmp(secrets[i], secret) == 0)
			return;
		if (secrets[i] == NULL) {
			secrets[i] = strdup(secret);
			return;
		}
	}
}

void
nyx_log_forget_secrets(void)
{
	size_t i;

	for (i = 0; i < MAX_SECRETS; i++) {
		if (secrets[i] != NULL) {
			nyx_secure_zero(secrets[i], strlen(secrets[i]));
			free(secrets[i]);
			secrets[i] = NULL;
		}
	}
}

static int
is_b64url(int c)
{
	return isalnum(c) || c == '-' || c == '_';
}

static int
is_tokenchar(int c)
{
	return c > 0x20 && c < 0x7f && c != '"' && c != '\'' && c != ',' &&
	    c != ';' && c != ')' && c != ']' && c != '}';
}

/* Length of a credential-shaped run starting at s, or 0. */
static size_t
credential_at(const char *s)
{
	static const char *prefixes[] = {
	    "nyxid_ag_", "nyxid_sk_", "nyxid_", "nyx_", "tool:v1:operation:"};
	size_t i, n, dots;

	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i]);

		if (strncmp(s, prefixes[i], pl) != 0)
			continue;
		n = pl;
		while (isalnum((unsigned char)s[n]) || s[n] == '_')
			n++;
		/* a bare prefix in prose is not a credential */
		if (n - pl >= 8)
			return n;
	}
	/* JWT: eyJ... '.' b64url '.' b64url */
	if (strncmp(s, "eyJ", 3) == 0) {
		n = 0;
		dots = 0;
		while (is_b64url((unsigned char)s[n]) || s[n] == '.') {
			if (s[n] == '.')
				dots++;
			n++;
		}
		if (dots == 2)
			return n;
	}
	return 0;
}

char *
nyx_log_redact(const char *in, char *out, size_t outsz)
{
	size_t o = 0, i, k, n;

	if (outsz == 0)
		return out;
#define PUT(str, len)                                                          \
	do {                                                                   \
		size_t l_ = (len);                                             \
		if (o + l_ >= outsz)                                           \
			l_ = outsz - 1 - o;                                    \
		memcpy(out + o, (str), l_);                                    \
		o += l_;                                                       \
	} while (0)
	for (i = 0; in[i] != '\0' && o + 1 < outsz;) {
		int matched = 0;

		for (k = 0; k < MAX_SECRETS && secrets[k] != NULL; k++) {
			n = strlen(secrets[k]);
			if (strncmp(in + i, secrets[k], n) == 0) {
				PUT(REDACTED, strlen(REDACTED));
				i += n;
				matched = 1;
				break;
			}
		}
		if (matched)
			continue;
		if ((i == 0 || !is_b64url((unsigned char)in[i - 1])) &&
		    (n = credential_at(in + i)) > 0) {
			PUT(REDACTED, strlen(REDACTED));
			i += n;
			continue;
		}
		if (strncasecmp(in + i, "bearer ", 7) == 0) {
			PUT(in + i, 7);
			i += 7;
			n = 0;
			while (is_tokenchar((unsigned char)in[i + n]))
				n++;
			if (n > 0)
				PUT(REDACTED, strlen(REDACTED));
			i += n;
			continue;
		}
		if (strncmp(in + i, "_nyxid_via=", 11) == 0) {
			PUT("_nyxid_via=***", 14);
			i += 11;
			while (in[i] != '\0' && in[i] != '&' && in[i] != ' ')
				i++;
			continue;
		}
		PUT(in + i, 1);
		i++;
	}
#undef PUT
	out[o] = '\0';
	return out;
}

void
nyx_log(enum nyx_log_level level, const char *fmt, ...)
{
	static const char *names[] = {
	    "error", "warning", "info", "debug", "trace"};
	char raw[2048], clean[2048];
	va_list ap;

	if (!nyx_log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	nyx_log_redact(raw, clean, sizeof(clean));
	fprintf(stderr, "%s: %s: %s\n", log_prog, names[level], clean);
	nyx_secure_zero(raw, sizeof(raw));
}

void
nyx_log_line(const char *fmt, ...)
{
	char raw[2048], clean[2048];
	va_list ap;

	if (log_quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	nyx_log_redact(raw, clean, sizeof(clean));
	fprintf(stderr, "%s: %s\n", log_prog, clean);
}

void
nyx_log_text(const char *fmt, ...)
{
	char raw[2048], clean[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	nyx_log_redact(raw, clean, sizeof(clean));
	fputs(clean, stderr);
}

jv
nyx_log_redact_output(const char *in, size_t n, const char *also)
{
	struct nyx_buf b = NYX_BUF_ZERO;
	size_t i = 0, start = 0, k, al = also ? strlen(also) : 0;
	jv out;

	b.secret = true;
	while (i < n) {
		size_t hit = 0;

		if (al > 0 && al <= n - i && memcmp(in + i, also, al) == 0)
			hit = al;
		for (k = 0; k < MAX_SECRETS && secrets[k] != NULL && !hit;
		     k++) {
			size_t sl = strlen(secrets[k]);

			if (sl <= n - i && memcmp(in + i, secrets[k], sl) == 0)
				hit = sl;
		}
		if (hit == 0) {
			i++;
			continue;
		}
		if (nyx_buf_add(&b, in + start, i - start) < 0 ||
		    nyx_buf_addstr(&b, "[REDACTED]") < 0)
			break;
		i += hit;
		start = i;
	}
	if (start == 0) {
		nyx_buf_free(&b);
		return jv_string_sized(in ? in : "", (int)n);
	}
	nyx_buf_add(&b, in + start, n - start);
	out = jv_string_sized(b.data ? b.data : "", (int)b.len);
	nyx_buf_free(&b);
	return out;
}
