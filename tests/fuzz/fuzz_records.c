/*
 * Records on standard input (PRODUCT 1, WIRE 1): the NDJSON reader every
 * tool reads stdin with, over the input as a file.  And the strict JSON
 * checker fed the same bytes whole and in pieces must agree: a verdict
 * that depends on where a read() split the input would be a bug.
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "nyx_json.h"

static int
strict_verdict(const uint8_t *data, size_t size, size_t piece)
{
	struct nyx_json_strict *c = nyx_json_strict_new();
	size_t off = 0;
	int rc = 0;

	FUZZ_ASSERT(c != NULL);
	while (rc == 0 && off < size) {
		size_t n = size - off < piece ? size - off : piece;

		rc = nyx_json_strict_feed(c, (const char *)data + off, n);
		off += n;
	}
	if (rc == 0)
		rc = nyx_json_strict_end(c);
	nyx_json_strict_free(c);
	return rc < 0 ? -1 : 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-stdin", MFD_CLOEXEC);
	struct nyx_json_reader *r;
	jv doc;
	int rc, n = 0;

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size ||
	    lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return 0;
	}
	r = nyx_json_reader_new(fd, "stdin");
	FUZZ_ASSERT(r != NULL);
	for (;;) {
		struct nyx_err err = NYX_ERR_ZERO;

		rc = nyx_json_reader_next(r, &doc, &err);
		if (rc <= 0) {
			/* malformed input is 65, a read error 74: typed */
			FUZZ_ASSERT(
			    rc == 0 || err.exit == 65 || err.exit == 74);
			break;
		}
		FUZZ_ASSERT(jv_is_valid(doc));
		jv_free(doc);
		n++;
	}
	nyx_json_reader_free(r);
	close(fd);
	/* the verdict cannot depend on how the bytes arrived */
	if (size > 0) {
		int whole = strict_verdict(data, size, size);

		FUZZ_ASSERT(strict_verdict(data, size, 1) == whole);
		FUZZ_ASSERT(strict_verdict(data, size, 7) == whole);
	}
	return 0;
}
