#!/usr/bin/env bats
# The audit trail, stop cancellation and audit-replay (PRODUCT 7, 9;
# WIRE 7) against a real nyx-sandboxd, a real ledger and audit.jsonl.

load helpers/suite

setup() {
	suite_setup "$FIX/code-exec/routes.yaml"
	durable_env
	AUDIT=$NYX_STATE_DIR/audit.jsonl
}

record_for() { jq -c --arg id "$1" 'select(.audit_id==$id)' "$AUDIT"; }

# An audit id computed independently (PRODUCT 9).
audit_id() {
	printf 'tool:v1:%s:%s' "$1" "$(python3 "$BATS_TEST_DIRNAME/helpers/lpdigest.py" cli "$2" "$3" code_execute)"
}

# A record's content hash, computed by jq and sha256sum.
rehash() {
	jq -cS 'del(.occurred_at, .recorded_at, .content_hash)' | tr -d '\n' | sha256sum | cut -d' ' -f1
}

# Re-seal a record on stdin after an edit (a valid, different record).
reseal() {
	local r h
	r=$(cat)
	h=$(printf '%s\n' "$r" | rehash)
	printf '%s\n' "$r" | jq -cS --arg h "$h" '.content_hash = $h'
}

snapshot() { # snapshot OP STATUS: a valid snapshot body as YAML flow
	printf '{operation_id: %s, status: %s, phase: %s, cleanup_status: not_started, version: 9, cancel_requested: true, result_available: false, created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z", expires_at: "2099-01-01T00:00:00Z"}' "$1" "$2" "${3:-execute}"
}

@test "every execution appends admission, running and terminal, with deterministic ids and true hashes" {
	TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 \
		NYX_CORRELATION_ID=order-42 NYX_CAUSATION_ID=cron:canary \
		run -0 code-exec --request-id "$(rid d)" -l bash -e 'echo 1'
	run -0 code-exec --sync --request-id "$(rid s)" -l bash -e 'echo 1' </dev/null
	run -1 code-exec --backend local --request-id "$(rid l)" -l bash -e 'exit 3'
	[ "$(stat -c %a "$AUDIT")" = 600 ]
	[ "$(wc -l <"$AUDIT")" = 9 ]
	for r in d s; do
		for phase in admission running terminal; do
			id=$(audit_id "$phase" u-alice "$(rid $r)")
			[ "$(jq -c --arg id "$id" 'select(.audit_id==$id)' "$AUDIT" | wc -l)" = 1 ]
		done
	done
	id=$(audit_id terminal "local:$(id -u)" "$(rid l)")
	record_for "$id" | jq -e '.outcome=={"success":false,"code":"EXECUTION_FAILED","exit_code":1,"kind":"execution_failed","operation_id":null,"failure_stage":"execute","retryable":false}'
	# a durable terminal names the provider's operation (PRODUCT 9, rev 2)
	op=$(ledger "SELECT operation_id FROM operations WHERE request_id='$(rid d)'")
	record_for "$(audit_id terminal u-alice "$(rid d)")" | jq -e --arg op "$op" '.outcome=={"success":true,"code":null,"exit_code":0,"kind":null,"operation_id":$op,"failure_stage":null,"retryable":false}'
	record_for "$(audit_id terminal u-alice "$(rid s)")" | jq -e '.outcome.operation_id==null and .outcome.success==true'
	# the trace context travels; every hash is the canonical record's
	record_for "$(audit_id admission u-alice "$(rid d)")" | jq -e '.correlation.trace_id=="0af7651916cd43dd8448eb211c80319c" and .correlation.span_id=="b7ad6b7169203331" and .correlation.correlation_id=="order-42" and .correlation.causation_id=="cron:canary"'
	record_for "$(audit_id admission u-alice "$(rid s)")" | jq -e '.correlation.correlation_id==null and .correlation.causation_id==null'
	while IFS= read -r line; do
		[ "$(printf '%s\n' "$line" | rehash)" = "$(printf '%s\n' "$line" | jq -r .content_hash)" ]
		printf '%s\n' "$line" | jq -e '.v==1 and .type=="audit.record" and .tool=="code_execute" and (.occurred_at|endswith("Z"))'
	done <"$AUDIT"
	run -0 audit-replay --verify
	jq_ok '. == {"v":1,"type":"audit.verify","checked":9,"ok":9,"bad":0,"conflict":0,"pending":0,"diagnostic_id":.diagnostic_id}'
}

@test "a converging rerun writes nothing twice" {
	run -0 code-exec --request-id "$(rid a)" -l bash -e 'echo 1'
	before=$(wc -l <"$AUDIT")
	run -0 code-exec --request-id "$(rid a)" -l bash -e 'echo 1'
	run -0 exec-status "$(last_line | jq -r .handle)"
	[ "$(wc -l <"$AUDIT")" = "$before" ]
	[ "$(jq -r .audit_id "$AUDIT" | sort | uniq -d)" = "" ]
}

@test "duplicates and conflicts: trace- or time-only differences are duplicates, business ones conflict" {
	run -0 code-exec --request-id "$(rid a)" -l bash -e 'echo 1'
	cp "$AUDIT" "$BATS_TEST_TMPDIR/orig"
	t=$(grep -F '"phase":"terminal"' "$AUDIT")
	# another trace context, and later clocks: the same fact
	printf '%s\n' "$t" | jq -c '.correlation.trace_id="11111111111111111111111111111111" | .correlation.traceparent="00-11111111111111111111111111111111-2222222222222222-01" | .occurred_at="2030-01-01T00:00:00Z"' | reseal >"$BATS_TEST_TMPDIR/same"
	run -0 audit-replay --from "$BATS_TEST_TMPDIR/same"
	jq_ok '.duplicate==1 and .appended==0 and .conflict==0'
	# a changed outcome is another fact: a conflict, never overwritten
	printf '%s\n' "$t" | jq -c '.outcome.exit_code=0 | .outcome.success=false' | reseal >"$BATS_TEST_TMPDIR/diff"
	printf '%s\n' "$t" | jq -c '.request_id="other"' | reseal >>"$BATS_TEST_TMPDIR/diff"
	run -1 --separate-stderr audit-replay --from "$BATS_TEST_TMPDIR/diff"
	jq_ok '.conflict==2 and .appended==0'
	[[ $stderr == *"diff:1: conflicts with tool:v1:terminal:"* ]]
	cmp "$AUDIT" "$BATS_TEST_TMPDIR/orig"
	# another host's records are appended once
	printf '%s\n' "$t" | jq -c '.request_id="elsewhere" | .audit_id="tool:v1:terminal:'"$(printf %064d 1)"'"' | reseal >"$BATS_TEST_TMPDIR/host2"
	run -0 audit-replay --from - <"$BATS_TEST_TMPDIR/host2"
	jq_ok '.appended==1'
	run -0 audit-replay --from "$BATS_TEST_TMPDIR/host2"
	jq_ok '.duplicate==1 and .appended==0'
}

# A local run's terminal record is the run's last append: it is synced
# before the result is printed, and indexed by the next append's catch-up
# rather than on the run's way out.  Nothing ever goes in twice.
@test "a local run's terminal record is known to the next append: replayed, it is a duplicate" {
	run -0 code-exec --backend local --request-id "$(rid a)" -l bash -e 'echo 1'
	[ "$(wc -l <"$AUDIT")" = 3 ]
	cp "$AUDIT" "$BATS_TEST_TMPDIR/orig"
	tail -1 "$AUDIT" >"$BATS_TEST_TMPDIR/terminal"
	jq -e '.phase=="terminal"' "$BATS_TEST_TMPDIR/terminal"
	run -0 audit-replay --from "$BATS_TEST_TMPDIR/terminal"
	jq_ok '.duplicate==1 and .appended==0 and .conflict==0'
	cmp "$AUDIT" "$BATS_TEST_TMPDIR/orig"
	# the same run again: the same facts, none written twice
	run -0 code-exec --backend local --request-id "$(rid a)" -l bash -e 'echo 1'
	cmp "$AUDIT" "$BATS_TEST_TMPDIR/orig"
	run -0 audit-replay --verify
	jq_ok '.checked==3 and .ok==3 and .conflict==0 and .pending==0'
}

@test "--verify names tampered and malformed lines; --from refuses them" {
	run -0 code-exec --request-id "$(rid a)" -l bash -e 'echo 1'
	sed -i '2s/"running"/"runnin9"/' "$AUDIT"
	printf '{not json\n' >>"$AUDIT"
	run -1 --separate-stderr audit-replay --verify
	jq_ok '.type=="audit.verify" and .checked==4 and .ok==2 and .bad==2 and .conflict==0 and .pending==0'
	# it says how much it checked (PRODUCT 8, rev 2)
	[[ $stderr == *"verified 4 record(s): 2 valid, 2 invalid"* ]]
	[[ $stderr == *"audit.jsonl:2: tampered"* ]]
	[[ $stderr == *"audit.jsonl:4: malformed"* ]]
	run -1 audit-replay --from "$AUDIT"
	jq_ok '.invalid==2 and .appended==0'
}

@test "--verify: an id in the trail twice with two facts is a conflict; the same fact twice is not" {
	run -0 code-exec --request-id "$(rid a)" -l bash -e 'echo 1'
	t=$(grep -F '"phase":"terminal"' "$AUDIT")
	# the same fact again, another trace: still valid
	printf '%s\n' "$t" | jq -c '.correlation.trace_id="11111111111111111111111111111111"' | reseal >>"$AUDIT"
	run -0 audit-replay --verify
	jq_ok '.checked==4 and .ok==4 and .conflict==0'
	# another fact under the same id, sealed: a conflict
	printf '%s\n' "$t" | jq -c '.outcome.exit_code=7' | reseal >>"$AUDIT"
	run -1 --separate-stderr audit-replay --verify
	jq_ok '.checked==5 and .ok==4 and .bad==0 and .conflict==1 and .pending==0'
	[[ $stderr == *"$(printf '%s' "$t" | jq -r .audit_id) is in the trail twice, with two different facts"* ]]
}

@test "a terminal audit that cannot be written is frozen; audit-replay completes it with no provider call" {
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'echo 1'
	h=$(last_line | jq -r .handle)
	[ "$(wc -l <"$AUDIT")" = 2 ]
	sleep 1
	# the trail becomes unwritable (a directory in its place)
	mv "$AUDIT" "$BATS_TEST_TMPDIR/keep"
	mkdir "$AUDIT"
	run -5 --separate-stderr exec-status --now "$h"
	jq_ok '.type=="exec.status" and .status=="finalizing_audit" and .terminal==false'
	[[ $stderr == *finalizing_audit* ]]
	[ "$(ledger "SELECT count(*) FROM audit_intents WHERE handle='$h'")" = 1 ]
	# finalizing: never the provider again
	clear_requests
	run -5 exec-status --now --wait "$h"
	run -1 audit-replay
	jq_ok '.pending==1 and .appended==0'
	[ -z "$(durable_calls)" ]
	# what waits in the ledger is not verified yet
	run -1 audit-replay --verify --from "$BATS_TEST_TMPDIR/keep"
	jq_ok '.type=="audit.verify" and .checked==2 and .ok==2 and .pending==1'

	rmdir "$AUDIT"
	mv "$BATS_TEST_TMPDIR/keep" "$AUDIT"
	run -0 audit-replay
	jq_ok '.appended==1 and .pending==0'
	[ "$(request_count)" -eq 0 ]
	record_for "$(audit_id terminal u-alice "$(rid a)")" | jq -e '.outcome.success==true'
	run -0 exec-status "$h"
	jq_ok '.type=="exec.result" and .output.stdout=="1\n"'
	run -0 audit-replay
	jq_ok '.appended==0 and .pending==0'
}

@test "a local or sync run whose trail cannot be written freezes each phase; audit-replay appends them once" {
	mkdir -p -m 700 "$NYX_STATE_DIR"
	mkdir "$AUDIT"
	run -0 --separate-stderr code-exec --backend local --request-id "$(rid l)" -l bash -e 'echo 1'
	jq_ok '.success==true and .output.stdout=="1\n"'
	[[ $stderr == *"terminal audit record is frozen for audit-replay"* ]]
	run -0 code-exec --sync --request-id "$(rid s)" -l bash -e 'echo 2' </dev/null
	[ "$(ledger 'SELECT count(*) FROM audit_intents')" = 6 ]
	run -1 audit-replay
	jq_ok '.pending==6 and .appended==0'
	rmdir "$AUDIT"
	run -0 audit-replay
	jq_ok '.appended==6 and .pending==0'
	[ "$(ledger 'SELECT count(*) FROM audit_intents')" = 0 ]
	for r in l s; do
		owner=u-alice
		[ "$r" = s ] || owner="local:$(id -u)"
		for phase in admission running terminal; do
			[ "$(record_for "$(audit_id "$phase" "$owner" "$(rid $r)")" | wc -l)" = 1 ]
		done
	done
	run -0 audit-replay --verify
	jq_ok '.type=="audit.verify" and .checked==6 and .ok==6 and .bad==0 and .conflict==0 and .pending==0'
}

# The durability points of a local run (bench/README.md): the admission
# and running lines are written and fsync'd together, the terminal line
# after the program; the ledger's index of the trail is committed without
# a sync of its own (the trail is the record; a lost index commit is
# rebuilt from the file, and the next synced commit carries it).
@test "a local run syncs its audit trail twice (before and after the program) and the ledger not at all" {
	run -0 code-exec --backend local --request-id "$(rid a)" -l bash -e 'echo 1'
	# (LeakSanitizer cannot run under ptrace: off for this one run of
	# make asan; every other run of the suite still checks leaks)
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		strace -o "$BATS_TEST_TMPDIR/syncs" -y -e trace=fsync,fdatasync,sync_file_range,msync \
		"$NYX_BIN/code-exec" --backend local --request-id "$(rid b)" -l bash -e 'echo 1' >"$BATS_TEST_TMPDIR/out"
	jq -e '.success==true' "$BATS_TEST_TMPDIR/out"
	[ "$(wc -l <"$AUDIT")" = 6 ]
	cat "$BATS_TEST_TMPDIR/syncs" >&2
	[ "$(grep -c "<$AUDIT>" "$BATS_TEST_TMPDIR/syncs")" = 2 ]
	[ "$(grep -c 'ledger\.db' "$BATS_TEST_TMPDIR/syncs")" = 0 ]
}

# The sandbox may be set up while the admission is written, but the
# program starts only once that record is synced: whatever it does, the
# trail already says it ran.
@test "a local run's admission is synced before the program starts" {
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		strace -f -o "$BATS_TEST_TMPDIR/order" -y -e trace=fsync,execve \
		"$NYX_BIN/code-exec" --backend local --request-id "$(rid a)" -l bash -e 'echo 1' >"$BATS_TEST_TMPDIR/out"
	jq -e '.success==true and .output.stdout=="1\n"' "$BATS_TEST_TMPDIR/out"
	cat "$BATS_TEST_TMPDIR/order" >&2
	first_sync=$(grep -n "fsync([0-9]*<$AUDIT>" "$BATS_TEST_TMPDIR/order" | head -1 | cut -d: -f1)
	program=$(grep -n 'execve("/usr/bin/bash"' "$BATS_TEST_TMPDIR/order" | head -1 | cut -d: -f1)
	[ -n "$first_sync" ] && [ -n "$program" ]
	[ "$first_sync" -lt "$program" ]
}

# The first opener of the ledger reads every frame of the WAL back (it
# is kept across runs): a WAL of SQLite's default 1000 pages costs a run
# 4 ms.  50 local runs write about 300 pages, with and without a request
# id of the caller's (a fresh run's records are indexed while it runs).
@test "the ledger's WAL stays short across runs (checkpointed at 100 pages)" {
	for i in $(seq 25); do
		code-exec -q --backend local --request-id "$(rid "$i")" -l bash -e : >/dev/null
		code-exec -q --backend local -l bash -e : >/dev/null
	done
	[ "$(wc -l <"$AUDIT")" = 150 ]
	wal=$(stat -c %s "$NYX_STATE_DIR/ledger.db-wal")
	echo "WAL: $wal bytes" >&2
	[ "$wal" -lt $((200 * 4120)) ]
}

@test "concurrent audit-replay runs append each record once (file lock)" {
	for i in $(seq 1 40); do
		printf '{"v":1,"type":"audit.record","audit_id":"tool:v1:running:%064d","phase":"running","tool":"code_execute","owner":"h2","request_id":"r%d","call_id":"c","correlation":null,"outcome":null}\n' "$i" "$i" | reseal
	done >"$BATS_TEST_TMPDIR/h2"
	mkdir -p -m 700 "$NYX_STATE_DIR"
	audit-replay --from "$BATS_TEST_TMPDIR/h2" >"$BATS_TEST_TMPDIR/o1" 3>&- &
	a=$!
	audit-replay --from "$BATS_TEST_TMPDIR/h2" >"$BATS_TEST_TMPDIR/o2" 3>&- &
	b=$!
	wait "$a"
	wait "$b"
	[ "$(wc -l <"$AUDIT")" = 40 ]
	[ "$(cat "$BATS_TEST_TMPDIR/o1" "$BATS_TEST_TMPDIR/o2" | jq -s 'map(.appended)|add')" = 40 ]
	[ "$(cat "$BATS_TEST_TMPDIR/o1" "$BATS_TEST_TMPDIR/o2" | jq -s 'map(.duplicate)|add')" = 40 ]
}

# ---- stop cancellation (WIRE 7) ----

@test "cancel: confirmed by the provider (exit 1), audited" {
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'sleep 30'
	h=$(last_line | jq -r .handle)
	run -1 exec-status --cancel --wait "$h"
	jq_ok '.error.code=="code_execution_cancelled" and .error.message=="Code execution cancellation was confirmed."'
	durable_calls | grep -qx 'POST /OP/cancel'
	record_for "$(audit_id terminal u-alice "$(rid a)")" | jq -e '.outcome.code=="code_execution_cancelled"'
}

@test "cancel races: a provider that finished anyway wins (succeeded and failed)" {
	for row in "succeeded 0 .success==true" "failed 1 .error.code==\"EXECUTION_FAILED\""; do
		set -- $row
		run -5 code-exec --no-wait --request-id "$(rid "$1")" -l bash -e 'sleep 30'
		h=$(last_line | jq -r .handle)
		op=$(last_line | jq -r .operation_id)
		code=0
		[ "$1" = succeeded ] || code=3
		printf 'faults:\n  - {method: POST, path: "%s/*/cancel", status: 200, headers: {ETag: "\\"v9\\""}, json: %s}\n  - {method: GET, path: "%s/*/result", status: 200, json: {success: %s, output: {stdout: "raced\\n", stderr: "", exit_code: %s}, error: %s}}\n' \
			"$P" "$(snapshot "$op" "$1" complete)" "$P" "$([ $code = 0 ] && echo true || echo false)" "$code" "$([ $code = 0 ] && echo null || echo '{code: EXECUTION_FAILED}')" | put_faults
		run "-$2" exec-status --cancel "$h"
		jq_ok "$3 and .output.stdout==\"raced\\n\""
		clear_faults
	done
}

@test "cancel: still running at the deadline; the deadline is persisted once and reused" {
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'sleep 30'
	h=$(last_line | jq -r .handle)
	op=$(last_line | jq -r .operation_id)
	printf 'faults:\n  - {method: POST, path: "%s/*/cancel", status: 202, headers: {ETag: "\\"v9\\"", Retry-After: "5"}, json: %s}\n' "$P" "$(snapshot "$op" running)" | put_faults
	t0=$(date +%s%3N)
	run -5 env NYX_NOW=$t0 exec-status --cancel "$h"
	jq_ok --arg d "$(date -u -d @$(((t0 + 120000) / 1000)) +%Y-%m-%dT%H:%M:%S)" '.stop_deadline|startswith($d)'
	dl=$(ledger "SELECT stop_deadline_ms FROM operations WHERE handle='$h'")
	[ "$dl" = $((t0 + 120000)) ]
	# a redelivered stop a minute later reuses it; the next attempt is
	# never later than the deadline
	run -5 env NYX_NOW=$((t0 + 118000)) exec-status --cancel "$h"
	[ "$(ledger "SELECT stop_deadline_ms FROM operations WHERE handle='$h'")" = "$dl" ]
	[ "$(ledger "SELECT next_poll_at_ms FROM operations WHERE handle='$h'")" = "$dl" ]
	# past it: uncertain, and no request at all
	clear_requests
	run -4 env NYX_NOW=$((t0 + 120001)) exec-status --cancel "$h"
	jq_ok '.error.code=="code_execution_cancel_outcome_uncertain" and .exit==4'
	[ -z "$(durable_calls)" ]
}

@test "cancel: an evicted operation (410) is OPERATION_EXPIRED (exit 4)" {
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'sleep 30'
	h=$(last_line | jq -r .handle)
	printf 'faults:\n  - {method: POST, path: "%s/*/cancel", status: 410, json: {error: {code: OPERATION_EXPIRED}}}\n' "$P" | put_faults
	run -4 exec-status --cancel "$h"
	jq_ok '.error.code=="OPERATION_EXPIRED"'
}

@test "cancel with no provider id yet: no HTTP cancel; past the deadline, uncertain" {
	printf 'faults:\n  - {method: POST, path: "%s", drop: true}\n' "$P" | put_faults
	run -5 code-exec --no-wait --request-id "$(rid a)" -l bash -e 'echo x'
	h=$(last_line | jq -r .handle)
	clear_requests
	t0=$(date +%s%3N)
	run -5 env NYX_NOW=$t0 exec-status --cancel "$h"
	jq_ok '.operation_id==null and (.stop_deadline|type)=="string"'
	run -4 env NYX_NOW=$((t0 + 121000)) exec-status --cancel "$h"
	jq_ok '.error.code=="code_execution_cancel_outcome_uncertain"'
	[ "$(request_count)" -eq 0 ]
}

@test "the canary scan: no token, source or key anywhere in the state directory or the outputs" {
	canary=CANARY-$RANDOM$RANDOM
	run -0 --separate-stderr code-exec -vvv --request-id "$(rid a)" -l bash -e "echo $canary >/dev/null; echo ok"
	all="$output$stderr"
	run -5 --separate-stderr code-exec -vvv --no-wait --request-id "$(rid b)" -l bash -e "sleep 20; echo $canary"
	all="$all$output$stderr"
	run -1 --separate-stderr exec-status -vvv --cancel --wait --all
	all="$all$output$stderr"
	run -0 --separate-stderr audit-replay -vvv
	all="$all$output$stderr"
	[[ $all != *"$canary"* ]]
	[[ $all != *"$ALICE"* ]]
	[[ $all != *"tool:v1:operation:"* ]]
	not grep -r -a -q -e "$canary" -e "$ALICE" -e 'tool:v1:operation:' "$NYX_STATE_DIR"
}

@test "the terminal record says where a durable run failed and whether a rerun is safe" {
	printf 'faults:\n  - {method: POST, path: "%s", status: 401}\n' "$P" | put_faults
	run -77 code-exec --request-id "$(rid f)" -l bash -e 'echo 1' </dev/null
	record_for "$(audit_id terminal u-alice "$(rid f)")" | jq -e '.outcome.failure_stage=="submit" and .outcome.retryable==false and .outcome.operation_id==null and .outcome.exit_code==77'
	clear_faults
	# a sync call that provably never started is the one retryable case
	admission=$(nyx-route-inspect | jq -c '.base_url="http://127.0.0.1:1"')
	run -75 code-exec --sync --base-url http://127.0.0.1:1 --request-id "$(rid n)" -l bash -e 'echo 1' <<<"$admission"
	record_for "$(audit_id terminal u-alice "$(rid n)")" | jq -e '.outcome.failure_stage=="execute" and .outcome.retryable==true'
}
