#!/usr/bin/env bats
# The sandbox against a hostile program or request (WIRE 6, PRODUCT 11):
# each test tries an escape and asserts it failed and the host is clean.

load helpers/suite

setup_file() {
	# a variable of the server's own environment must not reach a program
	NYX_ISOLATION_CANARY=leaked sandboxd_start "$BATS_TEST_DIRNAME/fixtures/worlds/principals.yaml"
	# a world-readable place the unprivileged sandbox user can reach
	EVIL_DIR=$(mktemp -d /tmp/nyx-isolation.XXXXXX)
	chmod 0755 "$EVIL_DIR"
	mkdir -m 1777 "$EVIL_DIR/out"
	MARKER="$EVIL_DIR/out/escaped"
	cc -shared -fPIC -O1 -DMARKER="\"$MARKER\"" \
		-o "$EVIL_DIR/evil.so" "$FIX/isolation/preload.c"
	chmod 0755 "$EVIL_DIR/evil.so"
	export EVIL_DIR MARKER
}

teardown_file() {
	sandboxd_stop
	rm -rf "$EVIL_DIR"
}

setup() {
	suite_setup "$FIX/code-exec/routes.yaml"
	rm -f "$MARKER"
}

# post AS PATH BODY: a proxied Chrono call; prints the body, then the status.
post() {
	curl -s -w '\n%{http_code}' -X POST -H "Authorization: Bearer $1" \
		-H 'Content-Type: application/json' \
		-H "Idempotency-Key: tool:v1:operation:$(printf '%s' "$3" | sha256sum | cut -c1-64)" \
		"$NYX_TEST_BASE/api/v1/proxy/s/chrono-sandbox/$2?_nyxid_via=us-1" -d "$3"
}


# The regression test of the review's escape: a request's env reached the
# environment bwrap starts with on the host, so LD_PRELOAD ran code there.
@test "escape: LD_PRELOAD, GCONV_PATH, GLIBC_TUNABLES in a request never reach the host" {
	local v body
	for v in "LD_PRELOAD:$EVIL_DIR/evil.so" "LD_LIBRARY_PATH:$EVIL_DIR" \
		"GCONV_PATH:$EVIL_DIR" "GLIBC_TUNABLES:glibc.malloc.check=3" \
		"LD_AUDIT:$EVIL_DIR/evil.so"; do
		body=$(jq -cn --arg k "${v%%:*}" --arg v "${v#*:}" \
			'{language:"bash",script:"echo ran",timeout_secs:10,env:{($k):$v}}')
		for path in execute executions; do
			run -0 post "$ALICE" "$path" "$body"
			[ "$(status_of)" = 400 ]
			body_of | jq -e '.error.code=="INVALID_REQUEST"'
		done
	done
	[ ! -e "$MARKER" ]
	run -0 requests
	not grep -q HOST-ESCAPE <<<"$output"
	# and the server is still serving programs
	run -0 post "$ALICE" execute '{"language":"bash","script":"echo ok","timeout_secs":10}'
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.output.stdout=="ok\n" and (.output.stderr|contains("HOST-ESCAPE")|not)'
	[ ! -e "$MARKER" ]
}

@test "escape: the program starts with the allow-listed environment only" {
	# nothing of the server's environment or the request: PATH HOME LANG
	# TMPDIR, and the PWD bwrap sets for --chdir
	run -0 post "$ALICE" execute '{"language":"python","script":"import os; print(sorted(os.environ))","timeout_secs":10}'
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.output.stdout | test("^\\[(\u0027(HOME|LANG|PATH|PWD|TMPDIR)\u0027(, )?)+\\]\n$")'
}

@test "requests: unknown fields and files are INVALID_REQUEST" {
	for b in '{"language":"bash","script":"echo x","files":[]}' \
		'{"language":"bash","script":"echo x","env":{}}' \
		'{"language":"bash","script":"echo x","cwd":"/"}' \
		'{"language":"bash","script":"echo x","timeout_secs":5,"x":null}'; do
		for path in execute executions; do
			run -0 post "$ALICE" "$path" "$b"
			[ "$(status_of)" = 400 ]
			body_of | jq -e '.error.code=="INVALID_REQUEST"'
		done
	done
}

# PRODUCT 10: a tool holding a token cannot be read by another process of
# its own user (ptrace, /proc/PID/environ, mem) and never dumps core.
@test "secrets: a running tool is not dumpable and has no core limit" {
	[ "$(id -u)" = 0 ] || skip "runs the tool as nobody, which needs root"
	command -v setpriv >/dev/null || skip "no setpriv"
	local d pid
	d=$(mktemp -d /tmp/nyx-dump.XXXXXX)
	chmod 0755 "$d"
	printf '%s\n' "$ALICE" >"$d/tok"
	chmod 0644 "$d/tok"
	printf 'faults: [{path: /api/v1/user-services, delay_ms: 4000}]\n' | put_faults
	HOME=$d NYX_TOKEN_SECRET_CANARY=x setpriv --reuid=nobody --regid=nogroup --clear-groups \
		nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$d/tok" >"$d/out" 2>"$d/err" 3>&- &
	pid=$!
	# the read is held for 4 s: the tool is running, its token loaded
	sleep 1
	# another process of the same user may not read it
	run setpriv --reuid=nobody --regid=nogroup --clear-groups cat "/proc/$pid/environ"
	[ "$status" -ne 0 ]
	[[ $output != *NYX_TOKEN_SECRET_CANARY* ]]
	run -0 grep -E '^Max core file size +0 +0 ' "/proc/$pid/limits"
	wait "$pid" || true
	rm -rf "$d"
}

# ---- the local sandbox (WIRE 6, revision 2) ----

@test "sandbox: no new user namespace inside (unshare -Ur fails)" {
	run -0 code-exec --backend local -l bash -e 'unshare -Ur true 2>/dev/null && echo ESCAPED || echo refused'
	jq_ok '.output.stdout=="refused\n"'
}

@test "sandbox: /tmp and /sandbox are sized tmpfs (64 MiB, NYX_SANDBOX_TMPFS_MB)" {
	prog='for d in /tmp /sandbox; do dd if=/dev/zero of=$d/fill bs=1M count=40 2>/dev/null; echo "$d $(( $(stat -c %s $d/fill) / 1048576 ))"; done'
	NYX_SANDBOX_TMPFS_MB=16 run -0 code-exec --backend local -l bash -e "$prog"
	jq_ok '.output.stdout=="/tmp 16\n/sandbox 16\n"'
	run -0 code-exec --backend local -l bash -e 'df -k /tmp /sandbox | awk "NR>1 {print \$2}"'
	jq_ok '.output.stdout=="65536\n65536\n"'
}

@test "sandbox: nothing of a run is left on the host, even after kill -9 of the client" {
	local t="$BATS_TEST_TMPDIR/tmp" canary="SOURCE-CANARY-$RANDOM$RANDOM"
	mkdir -p "$t"
	TMPDIR=$t code-exec --backend local -l bash -e "echo $canary >/sandbox/x; sleep 30" >/dev/null 2>&1 3>&- &
	pid=$!
	sleep 1.5
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	sleep 0.5
	[ -z "$(ls -A "$t")" ]
	not grep -r -a -q -F "$canary" "$t"
	# and the program died with it (--die-with-parent)
	not pgrep -f "$canary"
}
