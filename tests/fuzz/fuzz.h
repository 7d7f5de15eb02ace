/*
 * libFuzzer targets (make fuzz): each feeds arbitrary bytes to one parser
 * or classifier of the toolkit, under ASan and UBSan.  A target checks
 * what must hold whatever the input (no crash, no leak, invariants noted
 * in it); the seed corpora under tests/fuzz/corpus/ are replayed by
 * make test.
 */
#ifndef NYX_FUZZ_H
#define NYX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant the input broke: abort, so libFuzzer keeps the input. */
#define FUZZ_ASSERT(c)                                                         \
	do {                                                                   \
		if (!(c))                                                      \
			abort();                                               \
	} while (0)

#endif
