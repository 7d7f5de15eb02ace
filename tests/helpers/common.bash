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

# check_exposition FILE: every line a valid Prometheus text exposition
# line, every sample's family announced by HELP and TYPE before it, no
# family twice.  Prints the samples as "name{labels} value".
check_exposition() {
	python3 - "$1" <<'PY'
import re, sys
name = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
sample = re.compile(rf'^({name})(\{{{label}(?:,{label})*\}})? (-?[0-9.]+(?:e[+-]?[0-9]+)?|NaN|[+-]Inf)$')
helps, types, seen = set(), {}, set()
for n, line in enumerate(open(sys.argv[1]).read().split('\n')[:-1], 1):
    m = re.match(rf'^# HELP ({name}) .+$', line)
    if m:
        assert m.group(1) not in helps, f'{n}: HELP twice'
        helps.add(m.group(1)); continue
    m = re.match(rf'^# TYPE ({name}) (gauge|counter)$', line)
    if m:
        assert m.group(1) in helps and m.group(1) not in types, f'{n}: TYPE'
        types[m.group(1)] = m.group(2); continue
    m = sample.match(line)
    assert m, f'{n}: not an exposition line: {line!r}'
    assert m.group(1) in types, f'{n}: sample before its TYPE'
    assert (m.group(1), m.group(2)) not in seen, f'{n}: sample twice'
    seen.add((m.group(1), m.group(2)))
    print(line)
PY
}

# slow NORMAL VALGRIND: a bound or a wait, widened under make valgrind-check
slow() { if [ -n "${NYX_UNDER_VALGRIND:-}" ]; then echo "$2"; else echo "$1"; fi; }
