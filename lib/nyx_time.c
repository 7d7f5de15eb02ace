#include "nyx_time.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t fixed_now = -1;

int
nyx_time_parse(const char *s, int64_t *ms)
{
	struct tm tm;
	int y, mo, d, h, mi, se, n = 0, frac_ms = 0, digits = 0;
	const char *p;
	long off = 0;
	time_t t;

	if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 || n != 10)
		return -1;
	p = s + 10;
	if (*p != 'T' && *p != 't' && *p != ' ')
		return -1;
	p++;
	n = 0;
	if (sscanf(p, "%2d:%2d:%2d%n", &h, &mi, &se, &n) != 3 || n != 8)
		return -1;
	p += 8;
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p)) {
			if (digits < 3)
				frac_ms = frac_ms * 10 + (*p - '0');
			digits++;
			p++;
		}
		if (digits == 0)
			return -1;
		while (digits < 3) {
			frac_ms *= 10;
			digits++;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om;

		n = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5)
			return -1;
		off = (oh * 60L + om) * 60L * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
	    mi > 59 || se > 60)
		return -1;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	t = timegm(&tm);
	*ms = ((int64_t)t - off) * 1000 + frac_ms;
	return 0;
}

int
nyx_time_init(struct nyx_err *err)
{
	const char *v = getenv("NYX_NOW");
	char *end;
	long long n;

	fixed_now = -1;
	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno == 0 && *end == '\0' && n >= 0) {
		fixed_now = n;
		return 0;
	}
	if (nyx_time_parse(v, &fixed_now) == 0)
		return 0;
	fixed_now = -1;
	return nyx_err_set(err, NYX_EXIT_USAGE, "nyx_now_invalid",
	    "NYX_NOW must be RFC 3339 or unix milliseconds.");
}

int64_t
nyx_now_ms(void)
{
	struct timespec ts;

	if (fixed_now >= 0)
		return fixed_now;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
nyx_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
nyx_time_format(int64_t ms, char out[NYX_TIME_STRLEN])
{
	time_t t = (time_t)(ms / 1000);
	int frac = (int)(ms % 1000);
	struct tm tm;

	if (frac < 0) {
		frac += 1000;
		t -= 1;
	}
	gmtime_r(&t, &tm);
	if (frac == 0)
		strftime(out, NYX_TIME_STRLEN, "%Y-%m-%dT%H:%M:%SZ", &tm);
	else {
		char base[24];

		strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(out, NYX_TIME_STRLEN, "%s.%03dZ", base, frac);
	}
}

void
nyx_sleep_ms(int64_t ms)
{
	struct timespec ts;

	if (ms <= 0)
		return;
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
