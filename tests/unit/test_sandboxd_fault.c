/* Unit tests of nyx-sandboxd's fault plans: parsing and matching. */
#include <string.h>

#include "nyx-sandboxd/fault.h"
#include "nyx_config.h"
#include "nyx_test.h"

static void
test_faults(void)
{
	struct nyx_faults f;
	const char *y = "faults:\n"
	                "  - {method: GET, path: '/api/v1/*', nth: 2, count: "
	                "2, status: 500}\n"
	                "  - {path: /x, status: 418, body_bytes: 20}\n";
	struct nyx_err e = NYX_ERR_ZERO;
	char why[200];
	jv doc;
	int hits[5], i;

	nyx_yaml_load_buf(y, strlen(y), "t", &doc, &e);
	CHECK(nyx_faults_parse(doc, &f, why, sizeof(why)) == 0, "plan parses");
	for (i = 0; i < 5; i++)
		hits[i] = nyx_faults_match(&f, "GET", "/api/v1/keys") != NULL;
	CHECK(!hits[0] && hits[1] && hits[2] && !hits[3] && !hits[4],
	    "fires on the 2nd and 3rd match only");
	CHECK(nyx_faults_match(&f, "POST", "/api/v1/keys") == NULL,
	    "method must match");
	{
		struct nyx_fault *x = nyx_faults_match(&f, "PUT", "/x");

		CHECK(x && x->body_len == 20 && x->body[0] == '{' &&
		        x->body[19] == '}' && x->status == 418,
		    "exact-size generated body");
	}
	nyx_faults_free(&f);
	y = "faults: [{path: /x, nth: 0}]\n";
	nyx_yaml_load_buf(y, strlen(y), "t", &doc, &e);
	CHECK(nyx_faults_parse(doc, &f, why, sizeof(why)) < 0,
	    "nth 0 is out of range");
}

int
main(void)
{
	test_faults();
	return nyx_test_done();
}
