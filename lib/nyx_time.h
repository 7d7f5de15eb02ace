/*
 * nyx_time: the toolkit's clock and RFC 3339 formatting.
 *
 * nyx_now_ms() is wall-clock milliseconds since the epoch, or the fixed
 * time in NYX_NOW (RFC 3339, or unix milliseconds) so that tests are
 * deterministic.  nyx_time_init() validates NYX_NOW once.
 */
#ifndef NYX_TIME_H
#define NYX_TIME_H

#include <stdint.h>

#include "nyx_err.h"

#define NYX_TIME_STRLEN 32

/* Validate NYX_NOW (exit 64 with a usage error when it is malformed). */
int nyx_time_init(struct nyx_err *err);

int64_t nyx_now_ms(void);

/* Sleep ms milliseconds (restarted after signals). */
void nyx_sleep_ms(int64_t ms);

/* Monotonic milliseconds, for measuring durations (ignores NYX_NOW). */
int64_t nyx_mono_ms(void);

/* "2026-12-02T11:38:23Z" (milliseconds shown only when non-zero). */
void nyx_time_format(int64_t ms, char out[NYX_TIME_STRLEN]);

/* Parse RFC 3339 (Z or an offset, optional fraction).  Returns 0 or -1. */
int nyx_time_parse(const char *s, int64_t *ms);

#endif
