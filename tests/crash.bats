#!/usr/bin/env bats
# The crash matrix (PRODUCT 10): kill -9 the client at each point of a
# durable run, and restart nyx-sandboxd mid-run; the next exec-status
# converges with exactly one execution per key and nothing lost.

load helpers/suite

# its own server per test (below), not one per file
setup_file() { :; }
teardown_file() { :; }

setup() {
	common_setup
	ALICE_TOK=$(token_file "$ALICE")
	export NYX_STATE_DIR=$BATS_TEST_TMPDIR/state
	# its own server with a store, so it can be restarted on the same port
	sandboxd_start "$BATS_TEST_DIRNAME/fixtures/worlds/principals.yaml" \
		--store "$BATS_TEST_TMPDIR/store.db"
	reset_world "$FIX/code-exec/routes.yaml"
	export NYX_BASE_URL=$NYX_TEST_BASE NYX_TOKEN_FILE=$ALICE_TOK
}

teardown() {
	[ -z "${CLIENT:-}" ] || kill -9 "$CLIENT" 2>/dev/null || true
	sandboxd_stop
}


# until CMD...: retry for up to 10 s.
until_true() {
	for _ in $(seq 1 200); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

submitted() { [ "$(requests | jq -s --arg p "$P" 'map(select(.method=="POST" and .path==$p))|length')" -ge 1 ]; }
has_op() { [ -n "$(ledger "SELECT operation_id FROM operations WHERE operation_id != ''" 2>/dev/null)" ]; }
settled() { [ "$(ledger "SELECT terminal FROM operations" 2>/dev/null)" = 1 ]; }
executing() { [ "$(executions | jq -s 'map(select(.status=="running"))|length')" -ge 1 ]; }
finished() { [ "$(executions | jq -s 'map(select(.status=="succeeded"))|length')" -ge "$1" ]; }

# start_client ARGS...: code-exec in the background (no bats fd 3).
start_client() {
	code-exec "$@" >"$BATS_TEST_TMPDIR/client.out" 2>&1 3>&- &
	CLIENT=$!
}

crash_client() {
	kill -9 "$CLIENT"
	wait "$CLIENT" 2>/dev/null || true
	CLIENT=
}

# After a crash: one exec-status run settles everything; the server ran
# every program once.
converges() {
	run -0 --separate-stderr exec-status --all --now --wait
	jq_ok "$1"
	[ "$(ledger 'SELECT count(*) FROM operations WHERE terminal = 0')" = 0 ]
	[ "$(executions | jq -s 'length')" = 1 ]
	executions | jq -e '.runs==1'
	# the secret material is gone once settled
	[ -z "$(ls "$NYX_STATE_DIR/secrets")" ]
}

@test "kill -9 before the submit reached the server: recorded, then submitted once" {
	printf 'faults:\n  - {method: POST, path: "%s", nth: 1, delay_ms: 10000, drop: true}\n' "$P" | put_faults
	start_client -l bash -e 'echo once'
	until_true submitted
	crash_client
	[ "$(ledger "SELECT status FROM operations")" = submitting ]
	[ -z "$(executions)" ]
	clear_faults
	converges '.output.stdout=="once\n"'
}

@test "kill -9 with the submit in flight after the server accepted it" {
	printf 'faults:\n  - {method: POST, path: "%s", nth: 1, delay_after_ms: 10000}\n' "$P" | put_faults
	start_client -l bash -e 'echo once'
	until_true finished 1
	crash_client
	[ "$(ledger "SELECT status FROM operations")" = submitting ]
	clear_faults
	converges '.output.stdout=="once\n"'
	# it was recovered by a second submit with the same key
	[ "$(requests | jq -r --arg p "$P" 'select(.method=="POST" and .path==$p) | .idempotency_key_sha256' | sort -u | wc -l)" = 1 ]
}

@test "kill -9 after the receipt, while polling: the dead holder's lease is taken at once" {
	start_client -l bash -e 'sleep 2; echo once'
	until_true has_op
	until_true executing
	crash_client
	[ "$(ledger "SELECT lease_owner IS NOT NULL FROM operations")" = 1 ]
	converges '.output.stdout=="once\n"'
}

@test "kill -9 after the result was persisted, before it was printed" {
	mkfifo "$BATS_TEST_TMPDIR/out"
	# a reader that never reads: the 300 KB record blocks in write(2)
	sleep 60 <"$BATS_TEST_TMPDIR/out" 3>&- &
	reader=$!
	code-exec -l python -e 'print("x" * 300000)' >"$BATS_TEST_TMPDIR/out" 2>/dev/null 3>&- &
	CLIENT=$!
	until_true settled
	crash_client
	kill "$reader"
	h=$(ledger "SELECT handle FROM operations")
	clear_requests
	run -0 exec-status "$h"
	jq_ok '(.output.stdout|length)==300001 and .success==true'
	[ "$(request_count)" -eq 0 ]
	[ "$(executions | jq -s 'length')" = 1 ]
}

@test "nyx-sandboxd restarts mid-run: finished operations survive, a running one is never rerun" {
	port=${NYX_TEST_BASE##*:}
	run -5 code-exec --no-wait -l bash -e 'echo kept'
	until_true finished 1
	run -5 code-exec --no-wait -l bash -e 'sleep 4; echo never'
	until_true executing
	kill -9 "$SANDBOXD_PID"
	wait "$SANDBOXD_PID" 2>/dev/null || true
	sandboxd_start "$BATS_TEST_DIRNAME/fixtures/worlds/principals.yaml" \
		--store "$BATS_TEST_TMPDIR/store.db" --listen "127.0.0.1:$port"
	[ "$NYX_TEST_BASE" = "http://127.0.0.1:$port" ]
	reset_world "$FIX/code-exec/routes.yaml"
	run -4 --separate-stderr exec-status --all --now --wait
	[ "$(printf '%s\n' "$output" | jq -s 'map(select(.output.stdout=="kept\n"))|length')" = 1 ]
	[ "$(printf '%s\n' "$output" | jq -s 'map(select(.error.code=="code_execution_outcome_uncertain"))|length')" = 1 ]
	# both operations exist once; the interrupted one ran once
	[ "$(executions | jq -s 'length')" = 2 ]
	[ "$(executions | jq -s 'map(.runs)|add')" = 2 ]
	sleep 4
	executions | jq -s -e 'map(select(.status=="outcome_uncertain")) | length==1 and .[0].runs==1'
}

@test "a secret file a crash left behind a settled operation is swept by the next exec-status" {
	run -0 code-exec --request-id sweep-1 -l bash -e 'echo ok'
	name=$(ledger "SELECT secret_name FROM operations WHERE terminal = 1")
	[ -n "$name" ]
	# as a kill -9 between the terminal commit and the unlink leaves it
	printf 'KEY\nSOURCE\n' >"$NYX_STATE_DIR/secrets/$name"
	chmod 600 "$NYX_STATE_DIR/secrets/$name"
	run -0 exec-status --list
	[ ! -e "$NYX_STATE_DIR/secrets/$name" ]
}

@test "a secret file of a writer killed before its row is swept; a pending one's is kept" {
	run -5 code-exec --no-wait --request-id sweep-2 -l bash -e 'sleep 3; echo ok'
	live=$(ledger "SELECT secret_name FROM operations WHERE terminal = 0")
	[ -s "$NYX_STATE_DIR/secrets/$live" ]
	# as kill -9 between the secret file and the INSERT leaves them
	for f in h-000000000000000000000000 h-000000000000000000000001.tmp; do
		printf 'KEY
SOURCE
' >"$NYX_STATE_DIR/secrets/$f"
		chmod 600 "$NYX_STATE_DIR/secrets/$f"
	done
	run -0 --separate-stderr exec-status -v --list
	[[ $stderr == *"removed h-000000000000000000000000, a secret file no operation names"* ]]
	[ "$(ls "$NYX_STATE_DIR/secrets")" = "$live" ]
	run -0 exec-status --all --wait
	[ -z "$(ls "$NYX_STATE_DIR/secrets")" ]
}

# ---- a stop is never lost (PRODUCT 6, 7; revision 2) ----

cancelled_on_server() { [ "$(executions | jq -s 'map(select(.status=="cancelled"))|length')" -ge 1 ]; }
client_done() { ! kill -0 "$CLIENT" 2>/dev/null; }

@test "--cancel while another process waits: the stop is persisted at once and the waiter cancels" {
	start_client --request-id stop-1 -l bash -e 'sleep 20; echo never'
	until_true executing
	until_true has_op
	h=$(ledger "SELECT handle FROM operations")
	t0=$(date +%s%3N)
	run -5 exec-status --cancel "$h"
	jq_ok '.type=="exec.status" and .stop_deadline!=null and .terminal==false'
	# the waiting code-exec noticed within a second or two and cancelled
	until_true client_done
	[ $(($(date +%s%3N) - t0)) -lt 8000 ]
	wait "$CLIENT" && rc=0 || rc=$?
	CLIENT=
	[ "$rc" = 1 ]
	tail -n 1 "$BATS_TEST_TMPDIR/client.out" | jq -e '.error.code=="code_execution_cancelled"'
	cancelled_on_server
	[ "$(requests | jq -s --arg p "$P" 'map(select(.method=="POST" and .path==$p))|length')" = 1 ]
	[ "$(executions | jq -s 'map(.runs)|add')" = 1 ]
}

@test "SIGINT on a waiting code-exec is a stop; with --detach-on-interrupt it leaves the run pending" {
	start_client --request-id stop-2 -l bash -e 'sleep 20; echo never'
	until_true executing
	until_true has_op
	kill -INT "$CLIENT"
	until_true client_done
	wait "$CLIENT" && rc=0 || rc=$?
	CLIENT=
	[ "$rc" = 1 ]
	tail -n 1 "$BATS_TEST_TMPDIR/client.out" | jq -e '.error.code=="code_execution_cancelled"'
	cancelled_on_server
	# detach: the run goes on, and exec-status finishes it normally
	start_client --detach-on-interrupt --request-id stop-3 -l bash -e 'sleep 2; echo finished'
	until_true has_op
	until_true executing
	kill -TERM "$CLIENT"
	until_true client_done
	wait "$CLIENT" && rc=0 || rc=$?
	CLIENT=
	[ "$rc" = 5 ]
	tail -n 1 "$BATS_TEST_TMPDIR/client.out" | jq -e '.type=="exec.status" and .terminal==false and .stop_deadline==null'
	run -0 exec-status --all --wait
	jq_ok '.output.stdout=="finished\n"'
}

@test "a stop persisted before its holder died is finished by the next exec-status" {
	start_client --request-id stop-4 -l bash -e 'sleep 20; echo never'
	until_true executing
	until_true has_op
	h=$(ledger "SELECT handle FROM operations")
	# persist the stop, then lose the waiter before it acts on it
	kill -STOP "$CLIENT"
	# persisted before anything that can fail: even without a credential
	NYX_TOKEN_FILE= run -77 exec-status --cancel "$h"
	[ "$(ledger "SELECT stop_deadline_ms FROM operations WHERE handle='$h'")" -gt 0 ]
	run -5 exec-status --cancel "$h"
	jq_ok '.stop_deadline!=null'
	crash_client
	run -1 exec-status --wait "$h"
	jq_ok '.error.code=="code_execution_cancelled"'
	cancelled_on_server
}
