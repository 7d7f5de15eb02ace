/*
 * The JSON parser's own floor for bench/inspect.sh: the time libjq needs
 * to parse the two inventory bodies (read from files once), best of N.
 * Usage: parse_floor US.json KEYS.json N   -> prints milliseconds
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <jv.h>

static char *
slurp(const char *path, long *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0)
		exit(66);
	*len = ftell(f);
	rewind(f);
	buf = malloc((size_t)*len + 1);
	if (buf == NULL || fread(buf, 1, (size_t)*len, f) != (size_t)*len)
		exit(66);
	fclose(f);
	return buf;
}

int
main(int argc, char **argv)
{
	long l1, l2;
	char *a, *b;
	double best = 1e9;
	int i, n;

	if (argc != 4)
		return 64;
	a = slurp(argv[1], &l1);
	b = slurp(argv[2], &l2);
	n = (int)strtol(argv[3], NULL, 10);
	for (i = 0; i < n; i++) {
		struct timespec t0, t1;
		double ms;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		jv_free(jv_parse_sized(a, (int)l1));
		jv_free(jv_parse_sized(b, (int)l2));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
		if (ms < best)
			best = ms;
	}
	printf("%.3f\n", best);
	free(a);
	free(b);
	return 0;
}
