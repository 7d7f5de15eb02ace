#!/usr/bin/env bats
# --capture FILE / NYX_CAPTURE (issue 14, item 1): every HTTP exchange of a
# run, one JSON line each, appended as it happens, with no credential and
# no source unless asked for.

load helpers/suite

setup() {
	suite_setup "$FIX/code-exec/routes.yaml"
	durable_env
	CAP=$BATS_TEST_TMPDIR/capture.ndjson
}

@test "a durable run with a 409 on its result: one line per exchange, in order, 0600" {
	printf 'faults:\n  - {method: GET, path: "%s/*/result", nth: 1, count: 1, status: 409, body: "{\\"error\\":{\\"code\\":\\"OPERATION_NOT_TERMINAL\\"}}"}\n' "$P" | put_faults
	clear_requests
	run -0 code-exec --capture "$CAP" --request-id "$(rid a)" -l python -e 'import time; time.sleep(1); print(6*7)'
	jq_ok '.output.stdout=="42\n"'
	[ "$(stat -c %a "$CAP")" = 600 ]
	# as many lines as the server saw requests, the same method and path
	[ "$(wc -l <"$CAP")" -eq "$(request_count)" ]
	diff <(jq -r '.method + " " + (.path|sub("\\?.*";""))' "$CAP") \
		<(requests | jq -r '.method + " " + .path')
	# every line is an http.exchange with the answer as it came
	jq -e -s 'all(.v==1 and .type=="http.exchange" and (.at|endswith("Z")) and (.elapsed_ms|type)=="number")' "$CAP"
	jq -e -s --arg p "$P" 'map(select(.method=="POST" and (.path|startswith($p)))) | length==1 and
		(.[0].path|test("_nyxid_via=us-1")) and .[0].status==202 and (.[0].headers.ETag|type)=="string"' "$CAP"
	jq -e -s 'map(select(.status==409)) | length==1 and (.[0].body|fromjson|.error.code)=="OPERATION_NOT_TERMINAL"' "$CAP"
	jq -e -s 'map(select(.path|test("/result"))) | last | .status==200 and (.body|fromjson|.output.stdout)=="42\n"' "$CAP"
	# the source is its SHA-256; no token anywhere
	src='import time; time.sleep(1); print(6*7)'
	jq -e -s --arg h "sha256:$(printf '%s' "$src" | sha256sum | cut -c1-64)" \
		'map(select(.request_body)) | .[0].request_body|fromjson|.script==$h' "$CAP"
	not grep -q -F "sleep(1)" "$CAP"
	not grep -q -F "$ALICE" "$CAP"
}

@test "the execution token never reaches a capture, even in a body; --capture-source keeps the source" {
	# a program that prints its injected key: the provider's body holds it
	local agent
	agent=$(token_file "$ALICE_AGENT")
	run -0 code-exec --sync --capture "$CAP" --capture-source --exec-token-file "$agent" \
		-l bash -e 'echo "key=$NYXID_API_KEY"' </dev/null
	not grep -q -F "$ALICE_AGENT" "$CAP"
	not grep -q -F "$ALICE" "$CAP"
	grep -q -F '[REDACTED]' "$CAP"
	jq -e -s 'map(select(.request_body)) | .[0].request_body|fromjson|.script=="echo \"key=$NYXID_API_KEY\""' "$CAP"
}

@test "NYX_CAPTURE appends across runs (cron); a link or an open file is refused (73)" {
	NYX_CAPTURE=$CAP run -0 nyx-route-inspect
	n=$(wc -l <"$CAP")
	[ "$n" -eq 2 ]
	NYX_CAPTURE=$CAP run -3 nyx-route-inspect --capability codex_managed --user-service-id us-nope
	[ "$(wc -l <"$CAP")" -eq $((n + 2)) ]
	ln -s "$CAP" "$BATS_TEST_TMPDIR/link"
	run -73 nyx-route-inspect --capture "$BATS_TEST_TMPDIR/link"
	jq_ok '.code=="capture_failed"'
	chmod 644 "$CAP"
	run -73 nyx-route-inspect --capture "$CAP"
	run -64 nyx-route-inspect --capture-source
}

teardown() {
	[ -z "${REPLAY_PID:-}" ] || kill "$REPLAY_PID" 2>/dev/null || true
}

# replay CAP [flags]: a second nyx-sandboxd serving the capture, empty
# world behind it; NYX_BASE_URL points at it afterwards.
replay() {
	local out
	out=$(nyx-sandboxd --replay "$@" --detach 3>&-) || return 1
	eval "$out"
	REPLAY_PID=$NYX_SANDBOXD_PID
}

# what must be the same in a run and its replay
same() { jq -c '{type, success, exit, mode, output: (.output | if type=="object" then del(.execution_time_ms) else . end), error: (.error.code // .code), blocker: .blocker.code}'; }

@test "replay: a sync run, a durable run with a 304 and a 409 on its result, a blocked admission reproduce" {
	# sync
	run -0 code-exec --sync --capture "$BATS_TEST_TMPDIR/sync" -l bash -e 'echo synced' </dev/null
	want=$(last_line | same)
	# durable, a 409 on the first result fetch
	printf 'faults:\n  - {method: GET, path: "%s/*/result", nth: 1, count: 1, status: 409, body: "{\\"error\\":{\\"code\\":\\"OPERATION_NOT_TERMINAL\\"}}"}\n' "$P" | put_faults
	run -0 code-exec --capture "$BATS_TEST_TMPDIR/dur" --request-id "$(rid d)" -l bash -e 'sleep 3; echo durable'
	want_d=$(last_line | same)
	# a poll that found nothing new: a 304, kept as an answer without a body
	jq -e -s 'map(select(.status==304)) | length>=1 and all(.body=="")' "$BATS_TEST_TMPDIR/dur"
	clear_faults
	# blocked: Bob sees Acme's drifted route
	reset_world "$FIX/nyx-route-inspect/drift.yaml"
	run -3 nyx-route-inspect --capture "$BATS_TEST_TMPDIR/blocked" --token-file "$(token_file "$BOB")"
	want_b=$(last_line | same)

	replay "$BATS_TEST_TMPDIR/sync"
	run -0 code-exec --sync -l bash -e 'echo synced' </dev/null
	[ "$(last_line | same)" = "$want" ]
	kill "$REPLAY_PID"

	replay "$BATS_TEST_TMPDIR/dur"
	NYX_STATE_DIR=$BATS_TEST_TMPDIR/replay-state run -0 code-exec --request-id "$(rid d)" -l bash -e 'sleep 3; echo durable'
	[ "$(last_line | same)" = "$want_d" ]
	kill "$REPLAY_PID"

	replay "$BATS_TEST_TMPDIR/blocked" --replay-timing
	run -3 nyx-route-inspect --token-file "$(token_file "$BOB")"
	[ "$(last_line | same)" = "$want_b" ]
	# the captured inventory is the world: read again, the same verdict
	run -3 nyx-route-inspect --token-file "$(token_file "$BOB")" --table
	[ "$(last_line | same)" = "$want_b" ]
}

@test "replay: a capture cut mid-line replays up to its last whole line, then the world" {
	run -0 code-exec --sync --capture "$CAP" -l bash -e 'echo whole' </dev/null
	# a killed writer: the last line is cut
	head -c -20 "$CAP" >"$BATS_TEST_TMPDIR/cut"
	run -0 nyx-sandboxd --replay "$BATS_TEST_TMPDIR/cut" --check
	replay "$BATS_TEST_TMPDIR/cut"
	# the inventory reads are replayed; the /execute, cut off, falls
	# through to the (empty) world's emulation: an unknown token, 401
	run -77 code-exec --sync -l bash -e 'echo whole' </dev/null
	jq_ok '.type=="exec.result" and .success==false'
}

@test "--check: a capture safe to share passes; a token or a source that was not asked for is 65" {
	run -0 code-exec --sync --capture "$CAP" -l bash -e 'echo checked' </dev/null
	run -0 --separate-stderr nyx-sandboxd --replay "$CAP" --check
	[[ $stderr == *"3 exchange(s), no credential, no source"* ]]
	# a token pasted into a body
	jq -c --arg t "$ALICE" 'if .request_body then .body=("{\"leak\":\"" + $t + "\"}") else . end' "$CAP" >"$BATS_TEST_TMPDIR/leaky"
	run -65 --separate-stderr nyx-sandboxd --replay "$BATS_TEST_TMPDIR/leaky" --check
	jq_ok '.code=="capture_unsafe" and (.message|contains("a token-shaped string"))'
	[[ $stderr != *"$ALICE"* ]]
	# the source itself, not asked for
	jq -c 'if .request_body then .request_body=("{\"script\":\"echo checked\"}") else . end' "$CAP" >"$BATS_TEST_TMPDIR/src"
	run -65 nyx-sandboxd --replay "$BATS_TEST_TMPDIR/src" --check
	jq_ok '(.message|contains("the source itself"))'
	# asked for: fine
	run -0 code-exec --sync --capture "$BATS_TEST_TMPDIR/kept" --capture-source -l bash -e 'echo kept' </dev/null
	run -0 nyx-sandboxd --replay "$BATS_TEST_TMPDIR/kept" --check
	run -66 nyx-sandboxd --replay "$BATS_TEST_TMPDIR/nope" --check
}

@test "replay: a stop cancellation and a converge that ends unverified reproduce" {
	# a long run, stopped: the receipt, then the cancel to its end
	export NYX_CAPTURE=$BATS_TEST_TMPDIR/stop
	run -5 code-exec --no-wait --request-id "$(rid s)" -l bash -e 'sleep 30'
	h=$(last_line | jq -r .handle)
	run exec-status --cancel --wait "$h"
	want_s=$(last_line | same)
	want_status=$status
	[ "$(last_line | jq -r '.error.code')" = code_execution_cancelled ]
	# a repair whose readback drifted under it
	export NYX_CAPTURE=$BATS_TEST_TMPDIR/converge
	reset_world "$FIX/nyx-route-converge/personal-drift.yaml"
	printf 'faults:\n  - {method: PUT, path: "/api/v1/user-services/*", after: {route: us-1, set: {delegation_token_scope: "proxy:* sandbox:execute"}}}\n' | put_faults
	run -75 nyx-route-converge --apply
	want_c=$(last_line | jq -c '{outcome: .convergence.outcome, kind: .convergence.failure_kind, code: .blocker.code}')
	[ "$want_c" = '{"outcome":"unverified","kind":"PostconditionMismatch","code":"CODE_EXECUTION_ROUTE_REPAIR_UNVERIFIED"}' ]
	unset NYX_CAPTURE

	replay "$BATS_TEST_TMPDIR/stop"
	export NYX_STATE_DIR=$BATS_TEST_TMPDIR/replay-state
	run -5 code-exec --no-wait --request-id "$(rid s)" -l bash -e 'sleep 30'
	run exec-status --cancel --wait "$(last_line | jq -r .handle)"
	[ "$status" = "$want_status" ]
	[ "$(last_line | same)" = "$want_s" ]
	kill "$REPLAY_PID"

	replay "$BATS_TEST_TMPDIR/converge"
	run -75 nyx-route-converge --apply
	[ "$(last_line | jq -c '{outcome: .convergence.outcome, kind: .convergence.failure_kind, code: .blocker.code}')" = "$want_c" ]
}
