# The preamble the suites share: the bats libraries and a clean
# environment (common), the test worlds' tokens, one real nyx-sandboxd per
# file on the principals world, and the helpers several suites use.  A
# suite loads it and writes only what is its own:
#
#   load helpers/suite
#   setup() { suite_setup "$FIX/code-exec/routes.yaml"; durable_env; }
#
# A suite that needs a server of its own per test (crash.bats) redefines
# setup_file/teardown_file after the load.
# shellcheck shell=bash
# shellcheck source=tests/helpers/common.bash
source "$BATS_TEST_DIRNAME/helpers/common.bash"
# shellcheck source=tests/helpers/tokens.bash
source "$BATS_TEST_DIRNAME/helpers/tokens.bash"
# shellcheck source=tests/helpers/sandboxd.bash
source "$BATS_TEST_DIRNAME/helpers/sandboxd.bash"

setup_file() {
	sandboxd_start "$FIX/worlds/principals.yaml"
}

teardown_file() {
	sandboxd_stop
}

# suite_setup [ROUTES...]: a per-test HOME; with route files, a fresh
# world of them (no faults, an empty request log).
suite_setup() {
	common_setup
	[ $# -eq 0 ] || reset_world "$@"
}

# durable_env: Alice's token file (ALICE_TOK), a per-test state
# directory, and the server and token in the environment.
durable_env() {
	ALICE_TOK=$(token_file "$ALICE")
	export ALICE_TOK NYX_STATE_DIR=$BATS_TEST_TMPDIR/state
	export NYX_BASE_URL=$NYX_TEST_BASE NYX_TOKEN_FILE=$ALICE_TOK
}

# The durable API's path behind the proxy.
P=/api/v1/proxy/s/chrono-sandbox/executions

# A fresh request id per call site, so operations never collide in a file.
rid() { printf 'r-%s-%s' "$BATS_TEST_NUMBER" "$1"; }

ledger() { sqlite3 "$NYX_STATE_DIR/ledger.db" "$@"; }

# Requests to the durable API: "METHOD SUFFIX" per line.
durable_calls() {
	requests | jq -r --arg p "$P" 'select(.path|startswith($p)) | .method+" "+(.path|ltrimstr($p)|sub("op_[A-Za-z0-9_-]{32}";"OP"))'
}

# For a `run curl -w '\n%{http_code}'`: the status, and the body before it.
status_of() { printf '%s\n' "$output" | tail -n 1; }
body_of() { printf '%s\n' "$output" | sed '$d'; }
