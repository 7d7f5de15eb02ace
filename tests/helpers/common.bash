# Loaded by every bats file: libraries, PATH, a clean environment.
# shellcheck shell=bash
bats_require_minimum_version 1.5.0
bats_load_library bats-support
bats_load_library bats-assert

NYX_ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
NYX_BIN=${NYX_BIN:-$NYX_ROOT/build/bin}
NYX_TESTBIN=${NYX_TESTBIN:-$NYX_ROOT/build/tests}
FIX=$NYX_ROOT/tests/fixtures
PATH="$NYX_BIN:$PATH"
export NYX_ROOT NYX_BIN NYX_TESTBIN FIX PATH

# Nothing from the operator's own environment may leak into a test.
for v in NYX_CONFIG NYX_PROFILE NYX_BASE_URL NYX_TOKEN NYX_TOKEN_FILE \
	NYX_EXEC_TOKEN NYX_EXEC_TOKEN_FILE NYX_STATE_DIR NYX_NOW NYXID_BASE_URL \
	NYXID_API_KEY NYX_MAX_INVENTORY_BYTES TRACEPARENT XDG_CONFIG_HOME \
	XDG_STATE_HOME http_proxy https_proxy HTTP_PROXY HTTPS_PROXY; do
	unset "$v"
done
export LC_ALL=C NO_COLOR=1

# Per-test HOME so no real config is ever read.
common_setup() {
	export HOME="$BATS_TEST_TMPDIR/home"
	mkdir -p "$HOME"
}

# jq -e over the last stdout line of the previous `run`.
last_line() {
	# shellcheck disable=SC2154 # $output is set by bats' run
	printf '%s\n' "$output" | tail -n 1
}

jq_ok() {
	last_line | jq -e "$@" >/dev/null || {
		echo "jq check failed: $*" >&2
		echo "record: $(last_line)" >&2
		return 1
	}
}

# A 0600 file holding $1; prints its path.
token_file() {
	local f
	f=$(mktemp "$BATS_TEST_TMPDIR/tok.XXXXXX")
	printf '%s\n' "$1" >"$f"
	chmod 600 "$f"
	printf '%s' "$f"
}

# not CMD...: fail when CMD succeeds.  (A bare `! CMD` never fails a bats
# test under set -e, and neither does a failing `[ a ] && [ b ]` head.)
not() {
	if "$@"; then
		echo "unexpectedly succeeded: $*" >&2
		return 1
	fi
}
