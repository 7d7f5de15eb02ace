/*
 * A very small test harness for the C unit tests: CHECK(cond, name)
 * prints one TAP line; nyx_test_done() returns the exit status.
 */
#ifndef NYX_TEST_H
#define NYX_TEST_H

#include <stdio.h>
#include <string.h>

static int nyx_test_n, nyx_test_failed;

#define CHECK(cond, name)                                                      \
	do {                                                                   \
		nyx_test_n++;                                                  \
		if (cond) {                                                    \
			printf("ok %d - %s\n", nyx_test_n, name);              \
		} else {                                                       \
			nyx_test_failed++;                                     \
			printf("not ok %d - %s (%s:%d)\n", nyx_test_n, name,   \
			    __FILE__, __LINE__);                               \
		}                                                              \
	} while (0)

#define CHECK_STR(got, want, name)                                             \
	do {                                                                   \
		const char *g_ = (got), *w_ = (want);                          \
		CHECK(g_ != NULL && strcmp(g_, w_) == 0, name);                \
		if (g_ == NULL || strcmp(g_, w_) != 0)                         \
			printf("#   got:  %s\n#   want: %s\n",                 \
			    g_ ? g_ : "(null)", w_);                           \
	} while (0)

static inline int
nyx_test_done(void)
{
	printf("1..%d\n", nyx_test_n);
	return nyx_test_failed ? 1 : 0;
}

#endif
