#!/usr/bin/env bats
# codex-exec (PRODUCT 8, WIRE 8): argument admission, the managed sandbox
# through NyxID's proxy, and private_ssh behind a durable exact-call
# approval, against a real nyx-sandboxd running the Codex runner in the
# local sandbox.

load helpers/suite

setup() {
	suite_setup "$FIX/codex-exec/routes.yaml"
	durable_env
}

CX=/api/v1/proxy/s/chrono-sandbox/codex/execute
SSH=/api/v1/ssh/cat-devbox/exec

managed() { codex-exec --target managed_sandbox "$@"; }
ssh_run() { codex-exec --target private_ssh --service alice-devbox --principal alice "$@"; }
count_path() { requests | jq -s --arg p "$1" 'map(select(.path==$p))|length'; }

@test "argument admission: every error before any request (64)" {
	big=$(head -c 6001 /dev/zero | tr '\0' a)
	for row in "invalid_target|-P x" "invalid_target|--target ssh -P x" \
		"mixed_target|--target managed_sandbox --service s -P x" \
		"mixed_target|--target private_ssh --service s --principal p --workspace empty_git -P x" \
		"invalid_target|--target private_ssh --service s -P x" \
		"invalid_workspace|--target managed_sandbox --workspace dirty -P x" \
		"invalid_timeout|--target managed_sandbox --timeout-secs 181 -P x" \
		"invalid_timeout|--target managed_sandbox --timeout-secs 0 -P x" \
		"invalid_timeout|--target private_ssh --service s --principal p --timeout-secs 301 -P x" \
		"invalid_arguments|--target managed_sandbox" \
		"invalid_arguments|--target managed_sandbox -P x --prompt-file /dev/null" \
		"invalid_arguments|--target managed_sandbox -P  " \
		"prompt_too_large|--target managed_sandbox -P $big"; do
		# shellcheck disable=SC2086 # the row's words are the arguments
		run -64 --separate-stderr codex-exec ${row#*|}
		jq_ok --arg c "${row%%|*}" '.type=="error" and .code==$c and .exit==64'
	done
	[ "$(request_count)" -eq 0 ]
	# the bounds themselves are accepted
	run -3 ssh_run --timeout-secs 300 -P x
	run -0 managed --timeout-secs 180 -P "$(head -c 6000 /dev/zero | tr '\0' b)"
}

@test "managed_sandbox: one POST with the credential in X-API-Key; a real run" {
	run -0 --separate-stderr managed -P $'write a haiku\nabout C'
	jq_ok '.type=="codex.result" and .target=="managed_sandbox" and .status=="succeeded" and .exit_code==0'
	jq_ok '.output=="codex: done (21 bytes): write a haiku\n" and (.elapsed_ms|type)=="string" and (.upstream_diagnostic_id|startswith("chrono-"))'
	[ "$(count_path "$CX")" = 1 ]
	# X-API-Key ends at the proxy: nothing forwarded to the sandbox
	requests | jq -s -e --arg p "$CX" 'map(select(.path==$p))[0] | .forwarded_authorization==false and .nyxid_via=="us-1" and .status==200'
	# as a bearer, NyxID forwards it and the sandbox refuses
	run -77 managed --auth-header bearer -P x
	jq_ok '.error.code=="managed_upstream_codex_caller_credential_forwarded" and .error.kind=="admission_denied"'
	run -1 managed -P 'fail at once'
	jq_ok '.status=="failed" and .exit_code==1 and .error.code=="managed_execution_nonzero_exit"'
}

@test "managed_sandbox: admitted for codex_managed, not under code_execute's policy" {
	# a route set up the managed-Codex way: proxy:* delegation, no
	# forwarding, no sandbox:execute (PRODUCT 8, WIRE 2.4)
	reset_world "$FIX/nyx-route-inspect/codex-managed.yaml"
	run -0 --separate-stderr managed -P 'hello'
	jq_ok '.type=="codex.result" and .status=="succeeded"'
	[ "$(count_path /api/v1/proxy/s/chrono-sandbox/codex/execute)" = 1 ]
	# code-exec on the same route is a code_execute policy mismatch
	run -3 code-exec --sync -l bash -e 'echo x' </dev/null
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_POLICY_MISMATCH" and .capability=="code_execute"'
	# each consumer refuses the other capability's admission (65)
	nyx-route-inspect --capability codex_managed >"$BATS_TEST_TMPDIR/codex.adm"
	run -65 --separate-stderr code-exec --sync -l bash -e 'echo x' <"$BATS_TEST_TMPDIR/codex.adm"
	jq_ok '.code=="admission_invalid" and (.message|contains("codex_managed"))'
	reset_world "$FIX/codex-exec/routes.yaml"
	nyx-route-inspect >"$BATS_TEST_TMPDIR/code.adm"
	clear_requests
	run -65 --separate-stderr managed -P x <"$BATS_TEST_TMPDIR/code.adm"
	jq_ok '.code=="admission_invalid" and (.message|contains("rerun nyx-route-inspect --capability codex_managed"))'
	[ "$(request_count)" -eq 0 ]
	# its own admission is taken as is: no inventory read
	nyx-route-inspect --capability codex_managed >"$BATS_TEST_TMPDIR/codex.adm"
	clear_requests
	run -0 managed -P x <"$BATS_TEST_TMPDIR/codex.adm"
	[ "$(requests | jq -s 'map(select(.path|startswith("/api/v1/user-services")))|length')" = 0 ]
	[ "$(count_path "$CX")" = 1 ]
}

@test "managed_sandbox: the inventory is read with a user token only" {
	run -77 --separate-stderr managed --token-file "$(token_file "$ALICE_DELEG_READ")" \
		--exec-token-file "$ALICE_TOK" -P x </dev/null
	jq_ok '.blocker.code=="CODE_EXECUTION_SOURCE_CREDENTIAL_REQUIRED" and .capability=="codex_managed"'
	[ "$(request_count)" -eq 0 ]
}

@test "managed_sandbox: the CODEX_* table, never retried; capacity only with 429" {
	# WIRE 4.4 for Codex: ran out of time 1, did not start 75, may have
	# run 4 (codex_outcome_uncertain with the specific code as the cause)
	for row in "504|CODEX_EXECUTION_TIMEOUT|1|managed_upstream_codex_execution_timeout" \
		"429|CODEX_CAPACITY_UNAVAILABLE|75|managed_upstream_codex_capacity_unavailable" \
		"503|CODEX_CAPACITY_UNAVAILABLE|76|managed_response_invalid" \
		"403|CODEX_FEATURE_DISABLED|3|managed_upstream_codex_feature_disabled" \
		"502|CODEX_SANDBOX_CREATION_FAILED|75|managed_upstream_codex_sandbox_creation_failed" \
		"500|CODEX_TURN_FAILED|1|managed_upstream_codex_turn_failed" \
		"401||77|managed_proxy_authentication_failed" \
		"404||76|managed_proxy_target_unavailable" \
		"503||4|codex_outcome_uncertain"; do
		IFS='|' read -r st code ex want <<<"$row"
		printf 'faults:\n  - {path: "%s", status: %s, json: {error: {code: "%s", message: SECRET-UPSTREAM}}}\n' "$CX" "$st" "$code" | put_faults
		clear_requests
		run "-$ex" --separate-stderr managed -P x
		jq_ok --arg w "$want" '.error.code==$w and .status=="failed"'
		[[ $output$stderr != *SECRET-UPSTREAM* ]]
		[ "$(count_path "$CX")" = 1 ]
	done
	jq_ok '.error.cause=="managed_proxy_unavailable"'
	# a dropped connection after the request left: it may have run (4),
	# and still one request
	printf 'faults:\n  - {path: "%s", drop: true}\n' "$CX" | put_faults
	clear_requests
	run -4 managed -P x
	jq_ok '.error.code=="codex_outcome_uncertain" and .error.cause=="managed_proxy_unavailable"'
	[ "$(count_path "$CX")" = 1 ]
}

@test "managed_sandbox: the credential is redacted from the output; malformed answers are 76" {
	AK=$(token_file "$ALICE_AGENT")
	printf 'faults:\n  - {path: "%s", status: 200, json: {success: true, output: {text: "key=%s done", exit_code: 0}}}\n' "$CX" "$ALICE_AGENT" | put_faults
	run -0 --separate-stderr managed --exec-token-file "$AK" -P x
	jq_ok '.output=="key=[REDACTED] done"'
	[[ $output$stderr != *"$ALICE_AGENT"* ]]
	printf 'faults:\n  - {path: "%s", status: 200, json: {success: true, output: {text: "no exit code"}}}\n' "$CX" | put_faults
	run -76 managed -P x
	jq_ok '.error.code=="managed_response_invalid"'
	printf 'faults:\n  - {path: "%s", status: 200, body_bytes: 1048577}\n' "$CX" | put_faults
	run -76 managed -P x
	jq_ok '.error.code=="managed_response_too_large"'
}

@test "private_ssh: pending, approve, consume once, then pending again" {
	run -3 --separate-stderr ssh_run -P 'fix the bug'
	jq_ok '.type=="approval.request" and .state=="pending" and .tool=="codex_exec" and .target=="private_ssh" and (.request_id|test("^tool-approval:v1:[0-9a-f]{64}$"))'
	id=$(last_line | jq -r .request_id)
	[[ $stderr == *"codex-exec approve $id"* ]]
	# the id, computed independently (WIRE 8)
	args='{"prompt":"fix the bug","target":{"kind":"private_ssh","private_ssh":{"principal":"alice","service":"alice-devbox"}},"timeout_secs":30,"workspace":{"kind":"empty_git"}}'
	asha=$(printf '%s' "$args" | sha256sum | cut -d' ' -f1)
	last_line | jq -e --arg a "$asha" '.arguments_sha256==$a'
	# the default request id covers the exact call (PRODUCT 8, rev 2)
	rid="ssh:$(python3 "$BATS_TEST_DIRNAME/helpers/lpdigest.py" alice-devbox alice "$asha" | cut -c1-32)"
	[ "$id" = "tool-approval:v1:$(python3 "$BATS_TEST_DIRNAME/helpers/lpdigest.py" cli u-alice "$rid" codex_exec codex_exec "$asha")" ]
	[ "$(count_path "$SSH")" = 0 ]
	run -0 codex-exec approvals
	jq_ok --arg id "$id" '.request_id==$id and .state=="pending"'
	# a script must say --yes
	run -64 codex-exec approve "$id" </dev/null
	jq_ok '.code=="confirmation_required"'
	run -0 --separate-stderr codex-exec approve "$id" --yes </dev/null
	jq_ok '.state=="approved" and (.decided_by|length>0) and (.decided_at|endswith("Z"))'
	# --yes asks nothing and says nothing (PRODUCT 8, rev 2)
	[ -z "$stderr" ]
	run -0 ssh_run -P 'fix the bug'
	jq_ok '.type=="codex.result" and .target=="private_ssh" and .status=="succeeded" and .output=="codex: done (11 bytes): fix the bug\n" and .exit_code==0'
	[ "$(count_path "$SSH")" = 1 ]
	requests | jq -s -e --arg p "$SSH" 'map(select(.path==$p))[0].upstream=="ssh cat-devbox as alice: exit 0"'
	# consumed: the identical call needs a new approval
	run -3 ssh_run -P 'fix the bug'
	jq_ok '.state=="pending"'
	[ "$(count_path "$SSH")" = 1 ]
}

@test "private_ssh: a grant is only for its exact call (approval_grant_mismatch); deny" {
	# without --request-id another prompt is another call: its own request
	run -3 ssh_run -P 'task one'
	one=$(last_line | jq -r .request_id)
	run -3 ssh_run -P 'task two'
	jq_ok --arg one "$one" '.type=="approval.request" and .state=="pending" and .request_id!=$one'
	# under one explicit request id, a grant covers its arguments only
	run -3 ssh_run --request-id r-fixed -P 'task one'
	id=$(last_line | jq -r .request_id)
	run -0 codex-exec approve "$id" --yes </dev/null
	clear_requests
	run -3 --separate-stderr ssh_run --request-id r-fixed -P 'task two'
	jq_ok '.type=="error" and .code=="approval_grant_mismatch" and .exit==3'
	[[ $stderr == *"deny $id"* ]]
	[ "$(request_count)" -eq 0 ]
	run -3 ssh_run --request-id r-fixed --timeout-secs 31 -P 'task one'
	jq_ok '.code=="approval_grant_mismatch"'
	run -0 codex-exec deny "$id"
	jq_ok '.state=="denied"'
	run -3 ssh_run --request-id r-fixed -P 'task one'
	jq_ok '.state=="denied"'
	[ "$(request_count)" -eq 0 ]
}

@test "private_ssh: the prompt travels only as base64 inside the fixed wrapper" {
	p=$'it\'s "quoted" $(touch /tmp/pwned) `id` \u00fcn\u00efcode'
	run -3 ssh_run -P "$p"
	run -0 codex-exec approve "$(last_line | jq -r .request_id)" --yes </dev/null
	run -0 ssh_run -P "$p"
	jq_ok --arg p "$p" '.output | endswith(": " + $p + "\n")'
	[ ! -e /tmp/pwned ]
	# the emulated host runs nothing but that wrapper (126, as the
	# forced-command wrapper would)
	run -0 curl -s -H "Authorization: Bearer $ALICE" -d '{"command":"id","principal":"alice","timeout_secs":5}' "$NYX_TEST_BASE$SSH"
	printf '%s' "$output" | jq -e '.exit_code==126 and .stdout==""'
	run -0 curl -s -H "Authorization: Bearer $BOB" -d '{"command":"id","principal":"bob","timeout_secs":5}' "$NYX_TEST_BASE$SSH"
	printf '%s' "$output" | jq -e '.error=="target_not_allowed"'
}

@test "codex runs are audited: waiting_approval, running, terminal" {
	run -3 ssh_run -P 'audit me'
	id=$(last_line | jq -r .request_id)
	run -0 codex-exec approve "$id" --yes </dev/null
	run -0 ssh_run -P 'audit me'
	run -0 managed -P 'and me'
	A=$NYX_STATE_DIR/audit.jsonl
	[ "$(jq -s 'map(select(.tool=="codex_exec" and .phase=="waiting_approval" and .approval_id=='"$(jq -Rn --arg i "$id" '$i')"'))|length' "$A")" = 1 ]
	[ "$(jq -s 'map(select(.tool=="codex_exec" and .phase=="terminal" and .outcome.success))|length' "$A")" = 2 ]
	run -0 audit-replay --verify
	not grep -a -q -e 'audit me' -e "$ALICE" "$A" "$NYX_STATE_DIR/ledger.db"
}

@test "NyxID's own approval gate: a blocker with its approve URL; --wait-approval sends once more when approved" {
	reset_world "$FIX/codex-exec/gated.yaml"
	run -3 --separate-stderr managed -P 'gated task'
	jq_ok '.error.code=="NYXID_APPROVAL_REQUIRED" and .error.kind=="approval_required" and .exit==3'
	jq_ok '.error as $e | ($e.request_id|startswith("apr_")) and ($e.approve_url|endswith("/approvals/" + $e.request_id))'
	id=$(last_line | jq -r .error.request_id)
	[ "$(requests | jq -s --arg p "$CX" 'map(select(.path==$p and .status==403))|length')" = 1 ]
	# approved while it waits: the refused call is sent once more, and runs
	managed --wait-approval -P 'gated task' >"$BATS_TEST_TMPDIR/out" 2>/dev/null 3>&- &
	w=$!
	until requests | jq -e --arg i "$id" 'select(.path=="/api/v1/approvals/requests/"+$i+"/status")' >/dev/null; do sleep 0.1; done
	ctl -X POST "$NYX_TEST_BASE/_nyx/approvals/$id/approve"
	wait "$w"
	jq -e '.status=="succeeded" and .output=="codex: done (10 bytes): gated task\n"' "$BATS_TEST_TMPDIR/out"
	[ "$(requests | jq -s --arg p "$CX" 'map(select(.path==$p))|length')" = 3 ]
	# the approval was for one call: the next one is gated again; denied
	clear_requests
	managed --wait-approval -P 'again' >"$BATS_TEST_TMPDIR/out2" 2>/dev/null 3>&- &
	w=$!
	until [ "$(requests | jq -s 'map(select(.path|startswith("/api/v1/approvals/")))|length')" -ge 1 ]; do sleep 0.1; done
	id2=$(requests | jq -rs 'map(select(.path|startswith("/api/v1/approvals/")))[0].path|split("/")[5]')
	[ "$id2" != "$id" ]
	ctl -X POST "$NYX_TEST_BASE/_nyx/approvals/$id2/deny"
	rc=0
	wait "$w" || rc=$?
	[ "$rc" -eq 3 ]
	jq -e '.error.code=="NYXID_APPROVAL_DENIED"' "$BATS_TEST_TMPDIR/out2"
	[ "$(requests | jq -s --arg p "$CX" 'map(select(.path==$p))|length')" = 1 ]
	# a denial ends that request: the next call asks anew
	run -3 managed -P 'after the denial'
	jq_ok --arg d "$id2" '.error.code=="NYXID_APPROVAL_REQUIRED" and .error.request_id!=$d'
}

@test "--wait-approval shows one progress line on a terminal while it waits" {
	command -v script >/dev/null || skip "no script(1)"
	reset_world "$FIX/codex-exec/gated.yaml"
	local log="$BATS_TEST_TMPDIR/tty"
	clear_requests
	script -qec "codex-exec --target managed_sandbox --wait-approval -P 'progress task' >$BATS_TEST_TMPDIR/out" "$log" </dev/null 3>&- &
	w=$!
	for _ in $(seq 1 200); do
		requests | jq -s -e 'map(select(.path|test("^/api/v1/approvals/requests/.*/status$")))|length>=3' >/dev/null && break
		kill -0 "$w" 2>/dev/null || { cat "$BATS_TEST_TMPDIR/out" "$log"; false; }
		sleep 0.2
	done
	id=$(requests | jq -rs 'map(select(.path|startswith("/api/v1/approvals/")))[0].path|split("/")[5]')
	ctl -X POST "$NYX_TEST_BASE/_nyx/approvals/$id/approve"
	wait "$w"
	jq -e '.status=="succeeded"' "$BATS_TEST_TMPDIR/out"
	grep -a -q $'\r\e\[Kcodex-exec: waiting [0-9]*s for a human approval of apr_' "$log"
	[ "$(grep -a -c 'waiting [0-9]*s for a human approval of apr_' "$log")" -le 1 ]
}
