#!/usr/bin/env bats
# Durable execution (WIRE 5, PRODUCT 6, 7, 10): code-exec --durable and
# exec-status against a real nyx-sandboxd, a real ledger and real programs.
# Every row of WIRE 5 is rehearsed through fault plans.

load helpers/suite

setup() {
	suite_setup "$FIX/code-exec/routes.yaml"
	durable_env
}

# The key code-exec must derive, computed independently (PRODUCT 6).
key_of() {
	printf 'tool:v1:operation:%s' "$(python3 "$BATS_TEST_DIRNAME/helpers/lpdigest.py" cli u-alice "$1" code_execute)"
}

sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

# The server's executions for one key digest.
execs_for() { executions | jq -c --arg k "$1" 'select(.key_sha256==$k)'; }


@test "durable is the default: one POST with the derived key, polls without it, a real result" {
	run -0 --separate-stderr code-exec --request-id "$(rid a)" -l python -e 'import time; time.sleep(1.2); print(6*7)'
	jq_ok '.type=="exec.result" and .mode=="durable" and .backend=="nyxid" and .success==true'
	jq_ok '.output.stdout=="42\n" and (.handle|test("^h-[0-9a-f]{24}$")) and (.operation_id|test("^op_"))'
	h=$(last_line | jq -r .handle)
	k=$(sha "$(key_of "$(rid a)")")
	# exactly one execution for the key, run once
	[ "$(execs_for "$k" | jq -s 'length')" = 1 ]
	execs_for "$k" | jq -e '.runs==1 and .status=="succeeded"'
	# the key went on the submit only; status polls used If-None-Match
	[ "$(requests | jq -r --arg p "$P" 'select(.method=="POST" and .path==$p) | .idempotency_key_sha256')" = "$k" ]
	[ "$(requests | jq -s --arg p "$P" '[.[]|select(.path!=$p and .idempotency_key_sha256!=null)]|length')" = 0 ]
	durable_calls | grep -qx 'GET /OP/result'
	[ "$(durable_calls | grep -c '^POST')" = 1 ]
	# the ledger: 0700, terminal, no secret left, no source anywhere
	[ "$(stat -c %a "$NYX_STATE_DIR")" = 700 ]
	[ "$(ledger "SELECT terminal || exit_code || submits FROM operations WHERE handle='$h'")" = 101 ]
	[ -z "$(ls "$NYX_STATE_DIR/secrets")" ]
	not grep -r -a -q 'time.sleep' "$NYX_STATE_DIR"
}

@test "--no-wait prints exec.receipt (exit 5); exec-status settles it; --list needs no network" {
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'sleep 1; echo done'
	jq_ok '.type=="exec.receipt" and (.operation_id|test("^op_")) and .route.user_service_id=="us-1" and .route.slug=="chrono-sandbox"'
	jq_ok '(.status|IN("queued","provisioning","running")) and (.expires_at|endswith("Z")) and (.next_poll_at|endswith("Z"))'
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/receipt"
	h=$(last_line | jq -r .handle)
	# a secret file exists while the operation is pending, 0600
	[ "$(stat -c %a "$NYX_STATE_DIR/secrets/$h")" = 600 ]
	run -0 exec-status --wait <"$BATS_TEST_TMPDIR/receipt"
	jq_ok --arg h "$h" '.type=="exec.result" and .handle==$h and .output.stdout=="done\n"'
	# from the submit to the settling (PRODUCT 6, rev 2)
	jq_ok --arg r "$(rid a)" '.request_id==$r and (.elapsed_ms|tonumber)>=1000 and .finished_at>.started_at'
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/result"
	[ ! -e "$NYX_STATE_DIR/secrets/$h" ]
	# settled: printing it again makes no request at all
	clear_requests
	run -0 exec-status "$h"
	jq_ok '.output.stdout=="done\n"'
	# and says the same times again
	jq_ok --slurpfile r "$BATS_TEST_TMPDIR/result" '.finished_at==$r[-1].finished_at and .started_at==$r[-1].started_at'
	[ "$(request_count)" -eq 0 ]
	run -0 env -u NYX_BASE_URL -u NYX_TOKEN_FILE exec-status --list
	jq_ok --arg h "$h" '.type=="exec.status" and .handle==$h and .terminal==true and .status=="succeeded" and .next_poll_at==null'
	# PRODUCT 7 (rev 2): what tells a canary from other runs
	jq_ok --arg r "$(rid a)" '.request_id==$r and .language=="bash" and (.created_at|endswith("Z")) and (.updated_at|endswith("Z")) and .updated_at>=.created_at'
	[ "$(request_count)" -eq 0 ]
}

@test "a one-shot exec-status is one bounded step: pending is 5, and not before next_poll_at" {
	local due
	# the program must still run at the second --now
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e "sleep $(slow 3 15)"
	h=$(last_line | jq -r .handle)
	# next_poll_at, in ms since the epoch
	due=$(last_line | jq -r '.next_poll_at | capture("^(?<s>[^.]+)(\\.(?<f>[0-9]{3}))?Z$") | (.s + "Z" | fromdateiso8601) * 1000 + ((.f // "0") | tonumber)')
	clear_requests
	run -5 exec-status "$h"
	jq_ok '.type=="exec.status" and .terminal==false'
	# a step that ended before next_poll_at made no request (under
	# valgrind the two start-ups alone can outlast the 1 s Retry-After,
	# and then there is nothing to check)
	if [ "$(date +%s%3N)" -lt "$due" ]; then
		[ "$(request_count)" -eq 0 ]
	else
		[ -n "${NYX_UNDER_VALGRIND:-}" ]
	fi
	clear_requests
	run -5 exec-status --now "$h"
	jq_ok '.type=="exec.status" and .terminal==false and (.version|type)=="string"'
	[ "$(durable_calls)" = "GET /OP" ]
	# the second poll carries the ETag it was given; the answer is a 304
	clear_requests
	run -5 exec-status --now "$h"
	requests | jq -e '.if_none_match|test("^\"v[0-9]+\"$")'
	[ "$(requests | jq -r .status)" = 304 ] || [ "$(requests | jq -r .status)" = 200 ]
	run -0 exec-status --wait "$h"
}

@test "the same --request-id converges; other source is IDEMPOTENCY_KEY_REUSE, locally and on the server" {
	r=$(rid a)
	run -0 code-exec --request-id "$r" -l python -e 'print(1)'
	h=$(last_line | jq -r .handle)
	clear_requests
	run -0 code-exec --request-id "$r" -l python -e 'print(1)'
	jq_ok --arg h "$h" '.handle==$h and .output.stdout=="1\n"'
	[ -z "$(durable_calls)" ]
	run -3 --separate-stderr code-exec --request-id "$r" -l python -e 'print(2)'
	jq_ok '.type=="error" and .code=="IDEMPOTENCY_KEY_REUSE" and .exit==3'
	[ -z "$(durable_calls)" ]
	# another ledger, the same key: the server refuses the other body
	run -3 code-exec --state-dir "$BATS_TEST_TMPDIR/other" --request-id "$r" -l python -e 'print(2)'
	jq_ok '.type=="exec.result" and .error.code=="IDEMPOTENCY_KEY_REUSE" and .exit==3'
	[ "$(execs_for "$(sha "$(key_of "$r")")" | jq -s 'length')" = 1 ]
	# --call-id is part of the key
	run -0 code-exec --request-id "$r" --call-id other -l python -e 'print(2)'
}

@test "request and call ids are checked before anything is sent" {
	run -64 code-exec --request-id 'a b' -l bash -e x
	run -64 code-exec --call-id '' -l bash -e x
	run -64 exec-status not-a-handle
	run -64 exec-status
	run -64 exec-status --list --all
	[ "$(request_count)" -eq 0 ]
}

# A submit whose answer never arrives or cannot be trusted leaves the
# operation pending without a provider id; exec-status re-submits it with
# the same key, and the server runs it once.
uncertain_submit() {
	local rule=$1 code=$2 r
	N=$((${N:-0} + 1))
	r=$(rid "u$N")
	printf 'faults:\n  - %s\n' "$rule" | put_faults
	clear_requests
	run -5 --separate-stderr code-exec --no-wait --max-time 2 --request-id "$r" -l bash -e 'echo once'
	jq_ok '.type=="exec.receipt" and .operation_id==null and .status=="submitting"'
	[[ $stderr == *"$code"* ]]
	h=$(last_line | jq -r .handle)
	clear_faults
	run -0 exec-status --wait --now "$h"
	jq_ok '.output.stdout=="once\n"'
	k=$(sha "$(key_of "$r")")
	[ "$(execs_for "$k" | jq -s 'length')" = 1 ]
	execs_for "$k" | jq -e '.runs==1'
	# every submit carried the same key
	[ "$(requests | jq -r --arg p "$P" 'select(.method=="POST" and .path==$p) | .idempotency_key_sha256' | sort -u)" = "$k" ]
	[ "$(ledger "SELECT submits FROM operations WHERE handle='$h'")" -ge 2 ]
}

@test "uncertain submits (WIRE 5): a lost 202, 502, 504, 503, 429, a timeout, a dropped connection" {
	S="method: POST, path: \"$P\", nth: 1"
	uncertain_submit "{$S, drop_after: true}" durable_code_execution_submit_transport_unavailable
	uncertain_submit "{$S, status: 502, json: {error: {code: BAD_GATEWAY}}}" BAD_GATEWAY
	uncertain_submit "{$S, status: 524, body: x}" durable_code_execution_submit_outcome_uncertain
	uncertain_submit "{$S, status: 504}" durable_code_execution_submit_outcome_uncertain
	uncertain_submit "{$S, status: 503}" ASYNC_EXECUTION_UNAVAILABLE
	uncertain_submit "{$S, status: 429}" EXECUTION_CAPACITY_EXCEEDED
	uncertain_submit "{$S, delay_after_ms: 3000}" durable_code_execution_submit_timed_out
	uncertain_submit "{$S, status: 202, json: {operation_id: nope, status: queued}}" durable_code_execution_submit_accepted_receipt_unobserved
	uncertain_submit "{$S, status: 202, body: '{not json'}" durable_code_execution_submit_accepted_response_unobserved
}

@test "past the 10-minute recovery window an unconfirmed submit is never re-sent (exit 4)" {
	printf 'faults:\n  - {method: POST, path: "%s", drop: true}\n' "$P" | put_faults
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'echo x'
	h=$(last_line | jq -r .handle)
	clear_requests
	later=$(($(date +%s%3N) + 601000))
	run -4 env NYX_NOW=$later exec-status --now "$h"
	jq_ok '.error.code=="code_execution_submit_recovery_expired" and .exit==4'
	[ "$(request_count)" -eq 0 ]
}

@test "definitive submit answers settle at once: 401, 404, 413, 400" {
	for row in "401 77 NYXID_PROXY_UNAUTHORIZED" "404 76 durable_code_execution_target_not_found" \
		"413 76 EXECUTION_PAYLOAD_TOO_LARGE" "400 76 NYXID_PROXY_HTTP_400"; do
		set -- $row
		printf 'faults:\n  - {method: POST, path: "%s", status: %s}\n' "$P" "$1" | put_faults
		clear_requests
		run "-$2" code-exec --request-id "$(rid "$1")" -l bash -e 'echo x'
		jq_ok --arg c "$3" '.type=="exec.result" and .error.code==$c and .success==false'
		[ "$(durable_calls)" = "POST " ]
		h=$(last_line | jq -r .handle)
		run "-$2" exec-status "$h" # settled: no resubmit
		[ "$(durable_calls)" = "POST " ]
	done
}

@test "receipt URLs and Location are ignored; a known id that vanishes is never resubmitted (exit 4)" {
	fake=op_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345
	printf 'faults:\n  - {method: POST, path: "%s", status: 202, headers: {Location: "http://127.0.0.1:9/evil"}, json: {operation_id: %s, status: queued, status_url: "http://127.0.0.1:9/evil", created_at: "2026-01-01T00:00:00Z", expires_at: "2099-01-01T00:00:00Z"}}\n' "$P" "$fake" | put_faults
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e x
	jq_ok --arg f "$fake" '.operation_id==$f'
	h=$(last_line | jq -r .handle)
	clear_requests
	run -4 exec-status --now "$h"
	jq_ok '.error.code=="durable_code_execution_operation_not_found" and .exit==4'
	[ "$(requests | jq -r .path)" = "$P/$fake" ]
	run -4 exec-status --now "$h"
	[ "$(request_count)" -eq 1 ]
}

@test "status rows: 410 expired, 503/429 pending (5) with Retry-After clamped to 30 s, 401 stays pending" {
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'sleep 2'
	h=$(last_line | jq -r .handle)
	printf 'faults:\n  - {method: GET, path: "%s/*", status: 503, headers: {Retry-After: "300"}}\n' "$P" | put_faults
	t0=$(date +%s)
	# a recorded operation never exits 75: it is pending (PRODUCT 3, rev 2)
	run -5 exec-status --now "$h"
	jq_ok '.type=="exec.status" and .terminal==false and .error.code=="ASYNC_EXECUTION_UNAVAILABLE" and .error.retryable==true'
	d=$(($(last_line | jq -r '.next_poll_at|sub("\\.[0-9]+Z$";"Z")|fromdateiso8601') - t0))
	[ "$d" -ge 29 ]
	[ "$d" -le 32 ]
	printf 'faults:\n  - {method: GET, path: "%s/*", status: 429, headers: {Retry-After: "0"}}\n' "$P" | put_faults
	run -5 exec-status --now "$h"
	jq_ok '.error.code=="EXECUTION_CAPACITY_EXCEEDED" and .error.retryable==true'
	printf 'faults:\n  - {method: GET, path: "%s/*", status: 401}\n' "$P" | put_faults
	run -77 exec-status --now --wait "$h"
	jq_ok '.terminal==false and .error.code=="NYXID_PROXY_UNAUTHORIZED"'
	printf 'faults:\n  - {method: GET, path: "%s/*", status: 410, json: {error: {code: OPERATION_EXPIRED}}}\n' "$P" | put_faults
	run -4 exec-status --now "$h"
	jq_ok '.error.code=="OPERATION_EXPIRED" and .exit==4'
}

@test "malformed status answers: no ETag, a foreign id, a bad snapshot are protocol errors (76)" {
	for body in '{operation_id: op_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345, status: running}' '{operation_id: OPID, status: dancing, phase: execute}'; do
		run -5 code-exec --no-wait --request-id "$(rid "${#body}")" -l bash -e 'sleep 1'
		h=$(last_line | jq -r .handle)
		op=$(last_line | jq -r .operation_id)
		printf 'faults:\n  - {method: GET, path: "%s/*", status: 200, headers: {ETag: "\\"v9\\""}, json: %s}\n' "$P" "${body//OPID/$op}" | put_faults
		run -76 exec-status --now "$h"
		jq_ok '.error.code=="durable_code_execution_status_invalid"'
	done
	run -5 code-exec --no-wait --request-id "$(rid c)" -l bash -e 'sleep 1'
	h=$(last_line | jq -r .handle)
	printf 'faults:\n  - {method: GET, path: "%s/*", status: 304}\n' "$P" | put_faults
	run -76 exec-status --now "$h"
	jq_ok '.error.code=="durable_code_execution_status_etag_missing"'
}

@test "a failure without output keeps only the code and an allow-listed phase" {
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'echo hi'
	h=$(last_line | jq -r .handle)
	sleep 1
	printf 'faults:\n  - {method: GET, path: "%s/*/result", status: 200, json: {success: false, error: {code: SANDBOX_TIMEOUT, phase: execute, message: SECRET-PROVIDER-TEXT}, script: SECRET-SCRIPT}}\n' "$P" | put_faults
	run -1 --separate-stderr exec-status --now --wait "$h"
	jq_ok '.error.code=="SANDBOX_TIMEOUT" and .error.provider_phase=="execute" and .error.message=="Durable code execution failed before producing a result." and (has("output")|not)'
	[[ $output != *SECRET* ]]
	[[ $stderr != *SECRET* ]]
	not grep -r -a -q SECRET "$NYX_STATE_DIR"
	# a result that arrives while the status is not terminal is still
	# pending: the result is fetched only on succeeded/failed (the
	# program outlasts the next step's start, under valgrind too)
	run -5 code-exec --no-wait --request-id "$(rid b)" -l bash -e "sleep $(slow 2 10)"
	h=$(last_line | jq -r .handle)
	clear_faults
	clear_requests
	run -5 exec-status --now "$h"
	not grep -q result <<<"$(durable_calls)"
	run -0 exec-status --wait "$h"
}

@test "cancelled and outcome_uncertain snapshots settle without a result fetch" {
	for row in "cancelled 1 code_execution_cancelled" "outcome_uncertain 4 code_execution_outcome_uncertain"; do
		set -- $row
		run -5 code-exec --no-wait --request-id "$(rid "$1")" -l bash -e 'sleep 1'
		h=$(last_line | jq -r .handle)
		op=$(last_line | jq -r .operation_id)
		printf 'faults:\n  - {method: GET, path: "%s/*", status: 200, headers: {ETag: "\\"v9\\""}, json: {operation_id: %s, status: %s, phase: complete, cleanup_status: complete, version: 9, cancel_requested: false, result_available: false, created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z", expires_at: "2099-01-01T00:00:00Z"}}\n' "$P" "$op" "$1" | put_faults
		clear_requests
		run "-$2" exec-status --now "$h"
		jq_ok --arg c "$3" '.error.code==$c'
		[ "$(durable_calls)" = "GET /OP" ]
	done
}

@test "an operation past its expiry is cancelled once, without polling, then OPERATION_EXPIRED" {
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'sleep 5'
	h=$(last_line | jq -r .handle)
	clear_requests
	run -4 env NYX_NOW=2099-06-01T00:00:00Z exec-status --now "$h"
	jq_ok '.error.code=="OPERATION_EXPIRED"'
	[ "$(durable_calls)" = "POST /OP/cancel" ]
	run -4 exec-status --now "$h"
	[ "$(request_count)" -eq 1 ]
}

@test "--all settles every pending operation; the worst exit code wins (PRODUCT 3)" {
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'echo a'
	run -5 code-exec --no-wait --request-id "$(rid b)" -l bash -e 'exit 2'
	run -5 code-exec --no-wait --request-id "$(rid c)" -l bash -e 'echo c'
	run -1 --separate-stderr exec-status --all --wait
	[ "${#lines[@]}" -eq 3 ]
	[ "$(printf '%s\n' "$output" | jq -s 'map(select(.type=="exec.result"))|length')" = 3 ]
	run -0 exec-status --all
	[ -z "$output" ]
	run -0 exec-status --list
	[ "${#lines[@]}" -eq 3 ]
	h=$(printf '%s\n' "$output" | jq -rs 'map(.handle)[1]')
	run -2 exec-status --child-code "$h"
}

@test "an error record on stdin passes through; other records are refused (65)" {
	printf '{"v":1,"type":"error","tool":"code-exec","code":"x","exit":75}\n' |
		{ run -75 exec-status; }
	printf '{"v":1,"type":"route.admission"}\n' | { run -65 exec-status; }
}

@test "secrets: the token and the source never reach the ledger, stderr or stdout" {
	canary=CANARY-$RANDOM$RANDOM
	run -5 --separate-stderr code-exec -vvv --no-wait --request-id "$(rid a)" -l bash -e "echo $canary >/dev/null"
	all="$output$stderr"
	run -0 --separate-stderr exec-status -vvv --wait --all
	all="$all$output$stderr"
	[[ $all != *"$canary"* ]]
	[[ $all != *"$ALICE"* ]]
	[[ $all != *"tool:v1:operation:"* ]]
	not grep -r -a -q -e "$canary" -e "$ALICE" -e 'tool:v1:operation:' "$NYX_STATE_DIR"
}

@test "the README's durable commands and cron lines run as written" {
	cd "$NYX_ROOT"
	run -0 bash -c "code-exec -l python -e 'print(6*7)' | jq -r .output.stdout"
	[ "$output" = 42 ]
	# the crontab lines, with cron's \% unescaped and the schedule dropped
	# (the first of each: the canary section's; the fleet section adds
	# metrics to the same lines)
	start=$(sed -n 's/^    \*\/5 \* \* \* \* //p' README.md | head -n 1 | sed 's/\\%/%/g')
	reconcile=$(sed -n 's/^    \* \* \* \* \* //p' README.md | head -n 1 | sed 's/\\%/%/g')
	[ -n "$start" ]
	[ -n "$reconcile" ]
	# one fixed minute, so the retried line is certainly the same run
	mkdir -p "$BATS_TEST_TMPDIR/bin"
	printf '#!/bin/sh\necho 202612021200\n' >"$BATS_TEST_TMPDIR/bin/date"
	chmod +x "$BATS_TEST_TMPDIR/bin/date"
	PATH=$BATS_TEST_TMPDIR/bin:$PATH
	run -5 sh -c "$start"
	[ "$(ledger 'SELECT count(*) FROM operations')" = 2 ]
	sleep 1.5
	sh -c "$reconcile" || true
	until [ "$(ledger 'SELECT count(*) FROM operations WHERE terminal = 0')" = 0 ]; do
		sleep 0.5
		sh -c "$reconcile" || true
	done
	[ "$(jq -s 'map(select(.output.stdout=="42\n"))|length' "$HOME/canary.ndjson")" = 1 ]
	# a retried line converges on that operation: its stored result
	run -0 sh -c "$start"
	[ "$(ledger 'SELECT count(*) FROM operations')" = 2 ]
	# the canary fleet's lines, into a textfile directory of our own
	mkdir -p "$BATS_TEST_TMPDIR/textfile"
	while IFS= read -r line; do
		line=${line//\/var\/lib\/node_exporter\/textfile/$BATS_TEST_TMPDIR/textfile}
		sh -c "$line"
	done < <(sed -n 's/^    \*[/0-9]* \* \* \* \* \(.*--metrics-file.*\)/\1/p' README.md)
	run -0 check_exposition "$BATS_TEST_TMPDIR/textfile/nyx_route.prom"
	assert_line 'nyx_route_admitted{capability="code_execute"} 1'
	run -0 check_exposition "$BATS_TEST_TMPDIR/textfile/nyx_exec.prom"
	assert_line 'nyx_exec_operations{status="succeeded"} 2'
}

# wait_in_background HANDLE: an exec-status --wait that holds the
# operation's lease (its pid in $first, its output in $BATS_TEST_TMPDIR/first).
wait_in_background() {
	exec-status --wait "$1" >"$BATS_TEST_TMPDIR/first" 2>/dev/null 3>&- &
	first=$!
	until [ "$(ledger "SELECT lease_owner IS NOT NULL FROM operations WHERE handle='$1'")" = 1 ]; do sleep 0.05; done
}

@test "two processes never act on one operation at once" {
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'sleep 10; echo done'
	h=$(last_line | jq -r .handle)
	wait_in_background "$h"
	run -5 --separate-stderr exec-status -vvv --now "$h"
	jq_ok '.type=="exec.status" and .terminal==false'
	[[ $stderr == *"being reconciled by another process"* ]]
	# this process sent nothing (the first one keeps polling meanwhile,
	# so the server's log cannot tell them apart; the HTTP trace can)
	[[ $stderr != *"trace: http:"* ]]
	wait "$first"
	jq -e '.output.stdout=="done\n"' "$BATS_TEST_TMPDIR/first"
}

@test "--wait on an operation another process holds waits until it settles" {
	# the program must outlast both start-ups
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e "sleep $(slow 2 10); echo done"
	h=$(last_line | jq -r .handle)
	wait_in_background "$h"
	# a cron rerun of the same line, and a second waiter: both get the
	# result, neither gives up with the operation pending
	run -0 --separate-stderr exec-status -v --wait "$h"
	jq_ok '.type=="exec.result" and .output.stdout=="done\n"'
	[[ $stderr == *"being reconciled by another process; waiting for it"* ]]
	run -0 --separate-stderr exec-status --all --wait
	wait "$first"
	jq -e '.output.stdout=="done\n"' "$BATS_TEST_TMPDIR/first"
	executions | jq -e '.runs==1'
}

@test "--all runs many operations over a bounded number of reused connections" {
	for i in $(seq 1 12); do
		run -5 code-exec --no-wait --request-id "$(rid "$i")" -l bash -e "echo $i"
	done
	sleep 1
	run -0 --separate-stderr exec-status -v --all --now --wait
	[ "$(printf '%s\n' "$output" | jq -s 'map(select(.success))|length')" = 12 ]
	n=$(printf '%s\n' "$stderr" | sed -n 's/.* over \([0-9]*\) connection(s).*/\1/p')
	[ "$n" -ge 1 ]
	[ "$n" -le 8 ]
}

# WIRE 5, revision 2: a terminal snapshot, stored or confirmed by a 304,
# always leads to the result fetch until the result is stored.
@test "a failed /result fetch is fetched again, never lost to 304s (one-shot, --wait, --all)" {
	local k=0 row st body
	for row in '409|{error: {code: OPERATION_NOT_TERMINAL}}' '503|{}' '429|{}' '500|{}' '502|{}'; do
		st=${row%%|*} body=${row#*|} k=$((k + 1))
		clear_faults
		run -5 code-exec --no-wait --request-id "$(rid "$k")" -l bash -e 'echo done'
		h=$(last_line | jq -r .handle)
		until_settled() { [ "$(executions | jq -s 'map(select(.status=="succeeded"))|length')" -ge "$k" ]; }
		for _ in $(seq 1 100); do until_settled && break; sleep 0.1; done
		printf 'faults:\n  - {method: GET, path: "%s/*/result", nth: 1, count: 1, status: %s, json: %s}\n' "$P" "$st" "$body" | put_faults
		# the status says succeeded, the result fetch fails: pending (5)
		run -5 exec-status --now "$h"
		jq_ok '.terminal==false and .status=="succeeded"'
		[ "$st" = 409 ] || jq_ok '.error.retryable==true'
		clear_requests
		run -0 exec-status --now "$h"
		jq_ok '.type=="exec.result" and .output.stdout=="done\n"'
		[[ $(durable_calls) == *"GET /OP/result"* ]]
	done
	# a waiting code-exec, and the cron reconciler, get there too
	clear_faults
	printf 'faults:\n  - {method: GET, path: "%s/*/result", nth: 1, count: 1, status: 503}\n' "$P" | put_faults
	run -0 timeout 60 code-exec --request-id "$(rid w)" -l bash -e 'echo waited'
	jq_ok '.output.stdout=="waited\n"'
	clear_faults
	run -5 code-exec --no-wait --request-id "$(rid all)" -l bash -e 'sleep 1; echo all'
	printf 'faults:\n  - {method: GET, path: "%s/*/result", nth: 1, count: 1, status: 502}\n' "$P" | put_faults
	run -0 timeout 60 exec-status --all --wait
	jq_ok '.output.stdout=="all\n"'
	# nothing of a settled operation stays in secrets/
	[ -z "$(ls -A "$NYX_STATE_DIR/secrets")" ]
}

@test "state files: a planted link is never followed, a foreign file never used (73)" {
	mkdir -m 700 "$NYX_STATE_DIR" "$NYX_STATE_DIR/secrets"
	printf 'precious\n' >"$BATS_TEST_TMPDIR/victim"
	chmod 644 "$BATS_TEST_TMPDIR/victim"
	ln -s "$BATS_TEST_TMPDIR/victim" "$NYX_STATE_DIR/ledger.db"
	run -73 --separate-stderr exec-status --list
	jq_ok '.code=="ledger_failed" and .exit==73'
	[ "$(cat "$BATS_TEST_TMPDIR/victim")" = precious ]
	[ "$(stat -c %a "$BATS_TEST_TMPDIR/victim")" = 644 ]
	# SQLite's own companions are checked before it opens them
	rm "$NYX_STATE_DIR/ledger.db"
	run -0 exec-status --list
	# the WAL outlives a run (no checkpoint on close): plant the link
	# where the next open looks for it
	rm -f "$NYX_STATE_DIR/ledger.db-wal"
	ln -s "$BATS_TEST_TMPDIR/victim" "$NYX_STATE_DIR/ledger.db-wal"
	run -73 exec-status --list
	[ "$(cat "$BATS_TEST_TMPDIR/victim")" = precious ]
	rm "$NYX_STATE_DIR/ledger.db-wal"
	# a secret file replaced by a link is not read: an unconfirmed submit
	# needs its secret again, and finds a link
	printf 'faults:\n  - {method: POST, path: "%s", status: 503}\n' "$P" | put_faults
	run -5 code-exec --no-wait --request-id "$(rid s)" -l bash -e 'echo x' </dev/null
	jq_ok '.operation_id==null'
	h=$(last_line | jq -r .handle)
	name=$(ledger "SELECT secret_name FROM operations WHERE handle='$h'")
	mv "$NYX_STATE_DIR/secrets/$name" "$BATS_TEST_TMPDIR/moved"
	ln -s "$BATS_TEST_TMPDIR/moved" "$NYX_STATE_DIR/secrets/$name"
	clear_faults
	clear_requests
	run -65 --separate-stderr exec-status --now "$h"
	jq_ok '.code=="secret_missing"'
	[ "$(request_count)" -eq 0 ]
}

# PRODUCT 7 (rev 2): the cron reconciler's view of the ledger, for
# node_exporter's textfile collector.
@test "exec-status --all --metrics-file: operations by status, last settled, exchanges" {
	local f="$BATS_TEST_TMPDIR/nyx_exec.prom"
	run -64 exec-status --metrics-file "$f"
	run -0 code-exec --request-id "$(rid ok)" -l bash -e 'echo ok'
	run -1 code-exec --request-id "$(rid bad)" -l bash -e 'exit 3'
	run -5 code-exec --no-wait --request-id "$(rid slow)" -l bash -e 'sleep 2'
	run -5 exec-status --all --now --metrics-file "$f"
	run -0 check_exposition "$f"
	assert_line 'nyx_exec_operations{status="succeeded"} 1'
	assert_line 'nyx_exec_operations{status="failed"} 1'
	assert_line --regexp '^nyx_exec_operations\{status="(queued|provisioning|running)"\} 1$'
	assert_line --regexp '^nyx_exec_last_terminal_timestamp_seconds\{outcome="success"\} [0-9]{10}$'
	assert_line --regexp '^nyx_exec_last_terminal_timestamp_seconds\{outcome="failure"\} [0-9]{10}$'
	assert_line --regexp '^nyx_exec_reconcile_duration_seconds [0-9.]+$'
	first=$(grep '^nyx_exec_exchanges_total ' "$f" | cut -d' ' -f2)
	[ "$first" -ge 1 ]
	run -0 timeout 60 exec-status --all --wait --metrics-file "$f"
	run -0 check_exposition "$f"
	assert_line 'nyx_exec_operations{status="succeeded"} 2'
	# a counter: it only grows
	[ "$(grep '^nyx_exec_exchanges_total ' "$f" | cut -d' ' -f2)" -gt "$first" ]
}

# PRODUCT 2 and 7 (rev 2): -o table prints an aligned table on stdout.
@test "-o table: exec-status --list shows age, request id, language, status within 80 columns" {
	run -0 code-exec --request-id "$(rid t1)" -l python -e 'print(1)'
	run -5 code-exec --no-wait --request-id "canary-with-a-rather-long-request-id-$(rid t2)" -l bash -e 'sleep 1'
	run -0 --separate-stderr exec-status --list -o table
	[ "${#lines[@]}" -eq 3 ]
	[[ ${lines[0]} =~ ^HANDLE\ +AGE\ +REQUEST\ +LANGUAGE\ +STATUS ]]
	[[ ${lines[1]} =~ ^h-[0-9a-f]{24}\ +[0-9]+s\ +r-[0-9]+-t1\ +python\ +succeeded ]]
	[[ ${lines[2]} == *"canary-with-a-rather"*"..."*bash* ]]
	for l in "${lines[@]}"; do [ "${#l}" -le 80 ]; done
	# the columns line up
	c=$(awk 'NR==1 {print index($0, "LANGUAGE")}' <<<"$output")
	[ "$(awk -v c="$c" 'NR>1 {print substr($0, c, 6)}' <<<"$output" | sort -u | tr '\n' ' ')" = "bash   python " ]
	# pretty and json are records; anything else is misuse
	run -0 exec-status --list -o pretty
	[ "${lines[0]}" = "{" ]
	run -0 exec-status --list -o json
	jq_ok '.type=="exec.status"'
	run -64 --separate-stderr exec-status --list -o yaml
	[[ $stderr == *"--output must be json, pretty or table"* ]]
}

# PRODUCT 6 (rev 2): a wait on a terminal shows one line, rewritten in
# place; nothing when stderr is not a terminal.
@test "waiting shows one progress line on a terminal, rewritten in place; none otherwise" {
	command -v script >/dev/null || skip "no script(1)"
	local log="$BATS_TEST_TMPDIR/tty"
	# script(1) gives the command a terminal; its output is the terminal's
	script -qec "code-exec --request-id $(rid p) -l bash -e 'sleep 4; echo done' >$BATS_TEST_TMPDIR/out" "$log" </dev/null
	jq -e '.output.stdout=="done\n"' "$BATS_TEST_TMPDIR/out"
	# rewritten with a carriage return and erase-line, never a new line
	grep -a -q $'\r\e\[Kcode-exec: [0-9]*s, 1 pending: h-[0-9a-f]* ' "$log"
	[ "$(grep -a -c 'pending: h-' "$log")" -le 1 ]
	# exec-status --wait: the same line, not a new line every second
	run -5 code-exec --no-wait --request-id "$(rid w)" -l bash -e 'sleep 4; echo done'
	h=$(last_line | jq -r .handle)
	script -qec "exec-status --wait $h >$BATS_TEST_TMPDIR/out2" "$log.2" </dev/null
	jq -e '.output.stdout=="done\n"' "$BATS_TEST_TMPDIR/out2"
	grep -a -q $'\r\e\[Kexec-status: [0-9]*s, 1 pending: '"$h" "$log.2"
	[ "$(grep -a -c 'pending: h-' "$log.2")" -le 1 ]
	# not a terminal: silent
	run -0 --separate-stderr code-exec --request-id "$(rid q)" -l bash -e 'sleep 3; echo done'
	[[ $stderr != *pending* ]]
}
