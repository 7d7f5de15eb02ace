/*
 * nyx_http against a live nyx-sandboxd: connection reuse for sequential
 * requests, fresh connections when asked, and the multi interface's bound
 * on requests and connections in flight.
 * Usage: test_http_multi BASE_URL TOKEN
 */
#include <stdlib.h>
#include <string.h>

#include "nyx_buf.h"
#include "nyx_http.h"
#include "nyx_test.h"

#define N 40

int
main(int argc, char **argv)
{
	struct nyx_http_req reqs[N];
	struct nyx_http_resp resps[N];
	struct nyx_buf auth = NYX_BUF_ZERO;
	struct nyx_http *h;
	char url[512];
	const char *hdrs[2];
	size_t i, ok200 = 0, answered;
	long before;

	if (argc != 3) {
		printf("1..0 # SKIP needs BASE_URL TOKEN\n");
		return 0;
	}
	nyx_http_global_init(NULL);
	snprintf(url, sizeof(url), "%s/api/v1/keys", argv[1]);
	nyx_buf_printf(&auth, "Authorization: Bearer %s", argv[2]);
	hdrs[0] = auth.data;
	hdrs[1] = NULL;
	memset(reqs, 0, sizeof(reqs));
	for (i = 0; i < N; i++) {
		reqs[i].url = url;
		reqs[i].headers = hdrs;
		memset(&resps[i], 0, sizeof(resps[i]));
	}

	h = nyx_http_new();
	for (i = 0; i < 5; i++) {
		struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;

		nyx_http_do(h, &reqs[0], &r);
		ok200 += r.status == 200;
		nyx_http_resp_free(&r);
	}
	CHECK(ok200 == 5, "five sequential requests answered 200");
	CHECK(nyx_http_connects(h) == 1,
	    "sequential requests reuse one connection");

	before = nyx_http_connects(h);
	reqs[1].fresh_connect = true;
	for (i = 0; i < 3; i++) {
		struct nyx_http_resp r = NYX_HTTP_RESP_ZERO;

		nyx_http_do(h, &reqs[1], &r);
		nyx_http_resp_free(&r);
	}
	CHECK(nyx_http_connects(h) - before == 3,
	    "fresh_connect opens a new connection every time");
	reqs[1].fresh_connect = false;

	before = nyx_http_connects(h);
	answered = nyx_http_do_many(h, reqs, resps, N, 4);
	ok200 = 0;
	for (i = 0; i < N; i++) {
		ok200 += resps[i].status == 200 && resps[i].body.len > 0;
		nyx_http_resp_free(&resps[i]);
	}
	CHECK(
	    answered == N && ok200 == N, "40 concurrent requests answered 200");
	printf("# connections opened by the multi run: %ld\n",
	    nyx_http_connects(h) - before);
	CHECK(nyx_http_connects(h) - before <= 4,
	    "at most 4 connections for 4 in flight");

	nyx_http_free(h);
	nyx_buf_free(&auth);
	nyx_http_global_cleanup();
	return nyx_test_done();
}
