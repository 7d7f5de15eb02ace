/* Unit tests of libnyx plumbing: credentials, redaction, time, digests,
 * buffers, the NDJSON reader, YAML. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nyx_buf.h"
#include "nyx_config.h"
#include "nyx_cred.h"
#include "nyx_err.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_test.h"
#include "nyx_time.h"

static char *
jwt(const char *payload)
{
	char *p = nyx_b64_encode(payload, strlen(payload)), *out, *c;

	/* standard base64 to unpadded base64url */
	for (c = p; *c; c++)
		if (*c == '+')
			*c = '-';
		else if (*c == '/')
			*c = '_';
	while ((c = strrchr(p, '=')) != NULL)
		*c = '\0';
	out = malloc(strlen(p) + 64);
	snprintf(out, strlen(p) + 64, "eyJhbGciOiJub25lIn0.%s.sig", p);
	free(p);
	return out;
}

static void
test_cred(void)
{
	struct nyx_cred c;
	struct nyx_err e = NYX_ERR_ZERO;
	char *t;

	nyx_cred_classify("nyxid_ag_0123456789abcdef0123456789abcdef0123456789"
	                  "abcdef0123456789abcdef",
	    &c);
	CHECK(c.kind == NYX_CRED_AGENT_KEY, "agent key");
	CHECK_STR(c.subject, "nyxid_ag_01234567", "agent key public prefix");
	nyx_cred_classify("nyxid_ag_XYZ", &c);
	CHECK(c.kind == NYX_CRED_API_KEY, "malformed agent key is an API key");
	nyx_cred_classify("nyx_abc", &c);
	CHECK(c.kind == NYX_CRED_API_KEY, "nyx_ API key");
	nyx_cred_classify("nyxid_sk_abc", &c);
	CHECK(c.kind == NYX_CRED_API_KEY && !nyx_cred_source_readable(&c),
	    "nyxid_sk_ API key, not source-readable");
	t = jwt("{\"sub\":\"u1\",\"token_type\":\"access\"}");
	nyx_cred_classify(t, &c);
	CHECK(c.kind == NYX_CRED_USER && nyx_cred_can_write(&c) &&
	        strcmp(c.subject, "u1") == 0,
	    "user access token");
	free(t);
	t = jwt("{\"sub\":\"u1\",\"delegated\":true,\"act\":{\"sub\":\"svc\"},"
	        "\"scope\":\"proxy:* account:read\"}");
	nyx_cred_classify(t, &c);
	CHECK(c.kind == NYX_CRED_DELEGATION && nyx_cred_source_readable(&c) &&
	        !nyx_cred_can_write(&c),
	    "delegation with account:read reads, never writes");
	free(t);
	t = jwt(
	    "{\"sub\":\"u1\",\"delegated\":true,\"scope\":\"account:read\"}");
	nyx_cred_classify(t, &c);
	CHECK(c.kind == NYX_CRED_UNKNOWN,
	    "delegated without act.sub is not a delegation (nor a user)");
	free(t);
	t = jwt("{\"sub\":\"u1\",\"sa\":true,\"token_type\":\"access\"}");
	nyx_cred_classify(t, &c);
	CHECK(c.kind == NYX_CRED_SERVICE_ACCOUNT, "service account");
	free(t);
	t = jwt("{\"relay\":true}");
	nyx_cred_classify(t, &c);
	CHECK(c.kind == NYX_CRED_RELAY, "relay");
	free(t);
	nyx_cred_classify("a.b.c", &c);
	CHECK(c.kind == NYX_CRED_UNKNOWN, "garbage JWT is unknown");
	nyx_cred_classify("a.b.c.d", &c);
	CHECK(c.kind == NYX_CRED_UNKNOWN, "four parts is not a JWT");
	CHECK(nyx_cred_check("", &e) < 0 && e.exit == 77, "empty refused");
	CHECK(nyx_cred_check("Bearer abc", &e) < 0, "Bearer prefix refused");
	CHECK(nyx_cred_check("ab\tc", &e) < 0, "whitespace refused");
	CHECK(nyx_cred_check("abc", &e) == 0, "plain token accepted");
	CHECK(nyx_scope_has(" a  b ", "b") && !nyx_scope_has("ab", "a") &&
	        !nyx_scope_has(NULL, "a"),
	    "scope membership");
}

static void
test_redact(void)
{
	char out[512];
	char *t = jwt("{\"sub\":\"u1\"}");
	char in[512];

	snprintf(in, sizeof(in), "token %s end", t);
	nyx_log_redact(in, out, sizeof(out));
	CHECK_STR(out, "token [redacted] end", "JWT shapes are redacted");
	free(t);
	nyx_log_redact(
	    "key=nyxid_ag_0123456789abcdef0123 ok", out, sizeof(out));
	CHECK_STR(out, "key=[redacted] ok", "agent keys are redacted");
	nyx_log_redact("Authorization: Bearer abc.def", out, sizeof(out));
	CHECK_STR(out, "Authorization: Bearer [redacted]", "bearer values");
	nyx_log_redact("GET /x?_nyxid_via=us-1&y=2", out, sizeof(out));
	CHECK_STR(out, "GET /x?_nyxid_via=***&y=2", "_nyxid_via masked");
	nyx_log_redact("Idempotency-Key tool:v1:operation:0123456789abcdef",
	    out, sizeof(out));
	CHECK_STR(out, "Idempotency-Key [redacted]", "raw keys redacted");
	nyx_log_add_secret("s3cr3t-value");
	nyx_log_redact("x s3cr3t-value y", out, sizeof(out));
	CHECK_STR(out, "x [redacted] y", "registered secrets redacted");
	nyx_log_forget_secrets();
	nyx_log_redact("x s3cr3t-value y", out, sizeof(out));
	CHECK_STR(out, "x s3cr3t-value y", "forgotten secrets are not");
	nyx_log_redact("the nyx_ prefix in prose", out, sizeof(out));
	CHECK_STR(out, "the nyx_ prefix in prose", "a bare prefix stays");
	nyx_log_redact("abcdefgh", out, 4);
	CHECK_STR(out, "abc", "output is truncated, NUL-terminated");
}

static void
test_time(void)
{
	char out[NYX_TIME_STRLEN];
	int64_t ms;

	CHECK(nyx_time_parse("2026-12-02T12:00:00Z", &ms) == 0 &&
	        ms == 1796212800000LL,
	    "RFC 3339 Z");
	CHECK(nyx_time_parse("2026-12-02T13:00:00.5+01:00", &ms) == 0 &&
	        ms == 1796212800500LL,
	    "offset and fraction");
	CHECK(nyx_time_parse("2026-12-02 12:00:00", &ms) < 0, "zone required");
	CHECK(nyx_time_parse("2026-13-02T12:00:00Z", &ms) < 0, "bad month");
	nyx_time_format(1796212800000LL, out);
	CHECK_STR(out, "2026-12-02T12:00:00Z", "format whole seconds");
	nyx_time_format(1796212800123LL, out);
	CHECK_STR(out, "2026-12-02T12:00:00.123Z", "format milliseconds");
}

static void
test_hash(void)
{
	char out[NYX_SHA256_HEX];
	struct nyx_digest *d;
	char *dec;
	size_t n;

	nyx_sha256_hex("abc", 3, out);
	CHECK_STR(out,
	    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	    "sha256(abc)");
	d = nyx_digest_new();
	nyx_digest_add(d, "a");
	nyx_digest_add(d, NULL);
	nyx_digest_add(d, "");
	nyx_digest_finish(d, out);
	/* 00000001 61 ffffffff 00000000 */
	{
		const unsigned char raw[] = {
		    0, 0, 0, 1, 'a', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
		char want[NYX_SHA256_HEX];

		nyx_sha256_hex(raw, sizeof(raw), want);
		CHECK_STR(out, want, "length-prefixed framing, null is -1");
	}
	dec = nyx_b64url_decode("eyJhIjoxfQ", 10, &n);
	CHECK(dec && n == 7 && strcmp(dec, "{\"a\":1}") == 0, "base64url");
	free(dec);
	CHECK(nyx_b64url_decode("e$", 2, &n) == NULL, "bad base64url");
	/* RFC 4648 section 10, and the url alphabet's own two characters */
	nyx_sha256_hex("", 0, out);
	CHECK_STR(out,
	    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	    "sha256 of nothing");
	{
		static const char *const vec[][2] = {{"", ""}, {"f", "Zg=="},
		    {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="},
		    {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
		size_t i;

		for (i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
			char *e = nyx_b64_encode(vec[i][0], strlen(vec[i][0]));

			CHECK(e && strcmp(e, vec[i][1]) == 0,
			    "base64, RFC 4648 vectors");
			free(e);
		}
	}
	dec = nyx_b64url_decode("-_8", 3, &n);
	CHECK(dec && n == 2 && (unsigned char)dec[0] == 0xfb &&
	        (unsigned char)dec[1] == 0xff,
	    "base64url: - and _ are 62 and 63");
	free(dec);
	dec = nyx_b64url_decode("Zm9vYmFy", 8, &n);
	CHECK(dec && n == 6 && strcmp(dec, "foobar") == 0, "base64url, 8");
	free(dec);
	dec = nyx_b64url_decode("", 0, &n);
	CHECK(dec && n == 0 && dec[0] == '\0', "base64url, empty");
	free(dec);
	CHECK(nyx_b64url_decode("Zm9vY", 5, &n) == NULL, "base64url, 4n+1");
	CHECK(nyx_b64url_decode("Zm9v YmFy", 9, &n) == NULL,
	    "base64url: white space is not skipped");
	CHECK(nyx_b64url_decode("Zg==", 4, &n) == NULL,
	    "base64url: no padding in a JWT");
	CHECK(nyx_b64url_decode("Zm+v", 4, &n) == NULL,
	    "base64url: + is not in its alphabet");
	CHECK(nyx_secure_equal("abc", "abc") &&
	        !nyx_secure_equal("abc", "abd") &&
	        !nyx_secure_equal("abc", "ab") && !nyx_secure_equal(NULL, "a"),
	    "secure_equal");
}

static void
test_buf(void)
{
	struct nyx_buf b = NYX_BUF_ZERO;

	nyx_buf_init(&b, 8);
	CHECK(nyx_buf_add(&b, "12345678", 8) == 0, "fill to the cap");
	CHECK(nyx_buf_add(&b, "9", 1) < 0 && b.len == 8, "cap holds");
	nyx_buf_free(&b);
	nyx_buf_free(&b);
	CHECK(b.data == NULL, "free twice is safe");
}

static void
test_reader(void)
{
	struct nyx_err e = NYX_ERR_ZERO;
	struct nyx_json_reader *r;
	int fds[2], n = 0, rc;
	jv v;

	if (pipe(fds) < 0)
		return;
	(void)!write(fds[1], "{\"a\":1}{\"b\":2}\n[3]\n{\"x\":", 24);
	close(fds[1]);
	r = nyx_json_reader_new(fds[0], "stdin");
	while ((rc = nyx_json_reader_next(r, &v, &e)) == 1) {
		n++;
		jv_free(v);
	}
	CHECK(n == 3 && rc < 0 && e.exit == 65,
	    "concatenated documents, then a truncated one is 65");
	nyx_json_reader_free(r);
	close(fds[0]);
}

static void
test_yaml(void)
{
	struct nyx_err e = NYX_ERR_ZERO;
	const char *y = "a: 1\nb: [true, 'true', null, x]\nc: {d: -2.5}\n";
	jv v;

	CHECK(nyx_yaml_load_buf(y, strlen(y), "t", &v, &e) == 0, "yaml ok");
	{
		char *s = nyx_json_dump(v);

		CHECK_STR(s,
		    "{\"a\":1,\"b\":[true,\"true\",null,\"x\"],\"c\":{\"d\":-2."
		    "5}}",
		    "scalars typed, quoted strings kept");
		free(s);
	}
	y = "a: &x 1\nb: *x\n";
	CHECK(nyx_yaml_load_buf(y, strlen(y), "t", &v, &e) < 0 && e.exit == 65,
	    "aliases refused");
	y = "a: [1\n";
	CHECK(nyx_yaml_load_buf(y, strlen(y), "t", &v, &e) < 0, "broken yaml");
}

static void
test_exchange_bound(void)
{
	struct nyx_settings s;

	nyx_settings_init(&s);
	CHECK(nyx_settings_exchange_ms(&s) == 15000, "exchange bound: 15 s");
	s.timeout_ms = 2000;
	CHECK(nyx_settings_exchange_ms(&s) == 2000, "--timeout shortens it");
	s.timeout_ms = 60000;
	CHECK(nyx_settings_exchange_ms(&s) == 15000,
	    "--timeout never lengthens it (WIRE 4.1)");
	nyx_settings_free(&s);
}

static void
test_exit(void)
{
	CHECK(nyx_exit_worst(0, 5) == 5 && nyx_exit_worst(5, 1) == 1 &&
	        nyx_exit_worst(1, 3) == 3 && nyx_exit_worst(3, 4) == 4 &&
	        nyx_exit_worst(4, 75) == 75 && nyx_exit_worst(64, 78) == 64,
	    "severity order 64-78 > 4 > 3 > 1 > 5 > 0");
}

/* WIRE.md 1: what libjq lets through is malformed here */
#define SC(lit, ok, name) strict_case(lit, sizeof(lit) - 1, ok, name)
static void
strict_case(const char *doc, size_t len, bool ok, const char *name)
{
	jv v = nyx_json_parse(doc, len);

	CHECK(jv_is_valid(v) == ok, name);
	jv_free(v);
}

static void
test_strict_json(void)
{
	char deep[600];
	struct nyx_json_strict *c;
	int i;

	SC("{\"a\":1,\"b\":{\"a\":2}}", true,
	    "the same key in two objects is fine");
	SC("{\"is_active\":true,\"is_active\":false}", false,
	    "a duplicate key is malformed");
	SC("{\"a\":1,\"\\u0061\":2}", false,
	    "a duplicate key spelled with an escape");
	SC("[{\"a\":1},{\"a\":1}]", true,
	    "sibling objects have their own keys");
	SC("{\"a\":[1,{\"b\":1}],\"b\":2}", true,
	    "a key inside an array inside an object is not its parent's");
	SC("{\"slug\":\"chrono\\u0000-sandbox\"}", false,
	    "an escaped U+0000 in a string");
	SC("{\"slug\":\"a\0b\"}", false, "a raw NUL byte");
	SC("{\"phase\"\"x\"}", false,
	    "a key followed by a string, not ':' (libjq 1.6 leaked it)");
	SC("{\"a\" 1}", false, "a key followed by a value");
	SC("{ \"a\" \t\n: 1 , \"b\" :2}", true, "blanks around ':'");
	SC("{\"a\":\"x\"\"y\"}", false,
	    "two strings without ',' (libjq 1.6 leaked the second)");
	SC("[1 \"x\"]", false, "a number then a string");
	SC("[[] {}]", false, "two containers without ','");
	SC("[true null]", false, "two literals without ','");
	SC("[1\036]", false,
	    "an RS outside a string (libjq 1.6 reset mid-buffer)");
	SC("\xef\xbb\xbf{}", false, "a byte over 0x7f outside a string");
	SC("{\"a\":1;}", false, "punctuation JSON has no use for");
	SC("[1, -2.5e+3 ,true,[null],{\"a\":[]}]", true,
	    "numbers, literals and containers with ','");
	{
		/* the stdin reader's checker sees a stream of documents */
		static const char docs[] = "{\"a\":1}\n{\"a\":2} [3]\"s\"";
		struct nyx_json_strict *sc = nyx_json_strict_new();

		CHECK(nyx_json_strict_feed(sc, docs, sizeof(docs) - 1) == 0 &&
		        nyx_json_strict_end(sc) == 0,
		    "documents one after another at the top level");
		nyx_json_strict_free(sc);
	}
	SC("{\"slug\":\"\xff\"}", false, "invalid UTF-8");
	SC("{\"slug\":\"\xc0\xaf\"}", false, "an overlong");
	SC("{\"slug\":\"\xed\xa0\x80\"}", false, "an encoded surrogate");
	SC("{\"slug\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\"}", true,
	    "valid multi-byte UTF-8");
	SC("{\"s\":\"\\ud83d\\ude00\\\"\\n\"}", true,
	    "escapes and surrogate pairs");
	for (i = 0; i < 257; i++)
		deep[i] = '[';
	for (i = 0; i < 257; i++)
		deep[257 + i] = ']';
	strict_case(deep + 1, 512, true, "depth 256 is allowed");
	strict_case(deep, 514, false, "depth 257 is malformed");
	/* fed in pieces: a key and a UTF-8 sequence split across chunks */
	c = nyx_json_strict_new();
	CHECK(nyx_json_strict_feed(c, "{\"ab\":1,\"a", 10) == 0 &&
	        nyx_json_strict_feed(c, "b\":2}", 5) < 0,
	    "a duplicate split across chunks");
	nyx_json_strict_free(c);
	c = nyx_json_strict_new();
	CHECK(nyx_json_strict_feed(c, "\"\xc3", 2) == 0 &&
	        nyx_json_strict_feed(c, "\xa9\"", 2) == 0 &&
	        nyx_json_strict_end(c) == 0,
	    "a UTF-8 sequence split across chunks");
	nyx_json_strict_free(c);
	c = nyx_json_strict_new();
	CHECK(nyx_json_strict_feed(c, "{\"a\":1}{\"a\":1}", 14) == 0,
	    "a stream of documents: keys are per document");
	nyx_json_strict_free(c);
}

int
main(void)
{
	test_cred();
	test_strict_json();
	test_redact();
	test_time();
	test_hash();
	test_buf();
	test_reader();
	test_yaml();
	test_exchange_bound();
	test_exit();
	return nyx_test_done();
}
