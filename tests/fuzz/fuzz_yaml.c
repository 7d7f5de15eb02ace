/*
 * The YAML loaders: the same bytes as an nyx-sandboxd world, as a fault
 * plan and as a tool's config file (read through a private memory file,
 * as the tools read theirs).
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "nyx-sandboxd/fault.h"
#include "nyx-sandboxd/world.h"
#include "nyx_config.h"

static void
as_config(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-config", MFD_CLOEXEC);
	struct nyx_common c;
	struct nyx_settings s;
	struct nyx_err err = NYX_ERR_ZERO;
	char path[64];

	if (fd < 0)
		return;
	if (fchmod(fd, 0600) < 0 || write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	memset(&c, 0, sizeof(c));
	c.config = path;
	nyx_settings_init(&s);
	if (nyx_settings_resolve(&c, &s, &err) < 0)
		FUZZ_ASSERT(err.exit != 0 && err.code != NULL);
	nyx_settings_free(&s);
	close(fd);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nyx_err err = NYX_ERR_ZERO;
	char why[256];
	jv doc;

	if (nyx_yaml_load_buf((const char *)data, size, "fuzz", &doc, &err) ==
	    0) {
		struct nyx_world *w =
		    nyx_world_new(jv_copy(doc), why, sizeof(why));
		struct nyx_faults f = NYX_FAULTS_ZERO;

		nyx_world_free(w);
		if (nyx_faults_parse(jv_copy(doc), &f, why, sizeof(why)) == 0)
			nyx_faults_free(&f);
		jv_free(doc);
	} else {
		FUZZ_ASSERT(err.exit == 65 || err.exit == 66);
	}
	as_config(data, size);
	return 0;
}
