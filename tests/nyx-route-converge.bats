#!/usr/bin/env bats
# nyx-route-converge against a real nyx-sandboxd (WIRE 3): plans, write
# authority, the one write, readback verification and every outcome, with
# request-log assertions.

load helpers/suite

C=$BATS_TEST_DIRNAME/fixtures/nyx-route-converge

setup() {
	suite_setup
}

# converge AS [args...]
converge() {
	local who=$1
	shift
	nyx-route-converge --base-url "$NYX_TEST_BASE" \
		--token-file "$(token_file "$who")" "$@" </dev/null
}

# The requests as "METHOD PATH" joined by commas.
calls() {
	requests | jq -r '.method+" "+.path' | paste -sd, -
}

writes() {
	requests | jq -s 'map(select(.method!="GET"))|length'
}

@test "plan: prints the exact patch, writes nothing, exits 1" {
	reset_world "$C/personal-drift.yaml"
	run -1 --separate-stderr converge "$ALICE"
	jq_ok '.status=="blocked" and .blocker.code=="CODE_EXECUTION_ROUTE_POLICY_MISMATCH"'
	jq_ok '.convergence=={"attempted":false,"verified":false,"action":"update","patch":{"forward_access_token":true,"inject_delegation_token":true,"delegation_token_scope":"proxy:* account:read sandbox:execute"},"outcome":"planned","failure_kind":null,"http_status":0}'
	[[ $stderr == *'plan: PUT /api/v1/user-services/us-1 {"delegation_token_scope":"proxy:* account:read sandbox:execute","forward_access_token":true,"inject_delegation_token":true}'* ]]
	[ "$(calls)" = "GET /api/v1/user-services,GET /api/v1/keys" ]
}

@test "apply: users/me, exactly one PUT with the exact body, then the readback" {
	reset_world "$C/personal-drift.yaml"
	run -0 --separate-stderr converge "$ALICE" --apply
	jq_ok '.status=="admitted" and .route.user_service_id=="us-1"'
	jq_ok '.convergence.attempted==true and .convergence.verified==true and .convergence.outcome=="converged" and .convergence.action=="update" and .convergence.http_status==200 and .convergence.failure_kind==null'
	[ "$(calls)" = "GET /api/v1/user-services,GET /api/v1/keys,GET /api/v1/users/me,PUT /api/v1/user-services/us-1,GET /api/v1/user-services,GET /api/v1/keys" ]
	run -0 requests
	printf '%s\n' "$output" | jq -s -e 'map(select(.method=="PUT"))[0].body=={"forward_access_token":true,"inject_delegation_token":true,"delegation_token_scope":"proxy:* account:read sandbox:execute"}'
	# it stays admitted, and a second run writes nothing
	clear_requests
	run -0 converge "$ALICE" --apply
	jq_ok '.convergence.outcome=="unchanged" and .convergence.attempted==false and .convergence.verified==true'
	[ "$(writes)" -eq 0 ]
}

@test "already compliant: unchanged, nothing written, no users/me" {
	reset_world "$C/compliant.yaml"
	run -0 converge "$ALICE" --apply
	jq_ok '.status=="admitted" and .convergence.outcome=="unchanged" and .convergence.action=="none" and .convergence.patch==null'
	[ "$(calls)" = "GET /api/v1/user-services,GET /api/v1/keys" ]
	run -0 converge "$ALICE"
	jq_ok '.convergence.outcome=="unchanged"'
}

@test "--apply with anything but a human user token: zero requests (3)" {
	reset_world "$C/personal-drift.yaml"
	for t in "$ALICE_AGENT" "$ALICE_APIKEY" "$ALICE_DELEG_READ" "$SERVICE_ACCOUNT" "$RELAY"; do
		run -3 --separate-stderr converge "$t" --apply
		jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_WRITE_AUTHORITY_REQUIRED" and .blocker.remediation.kind=="request_access"'
		jq_ok '.convergence.attempted==false and .convergence.outcome=="not_writable"'
	done
	[ "$(request_count)" -eq 0 ]
	# planning only reads: a delegation token with account:read may plan
	run -1 converge "$ALICE_DELEG_READ"
	jq_ok '.convergence.outcome=="planned"'
	[ "$(writes)" -eq 0 ]
}

@test "no token: CREDENTIAL_REQUIRED, zero requests (77)" {
	reset_world "$C/personal-drift.yaml"
	run -77 nyx-route-converge --base-url "$NYX_TEST_BASE" --apply </dev/null
	jq_ok '.blocker.code=="CODE_EXECUTION_SOURCE_CREDENTIAL_REQUIRED"'
	[ "$(request_count)" -eq 0 ]
}

@test "org routes: the admin repairs, a member never writes, a viewer is denied" {
	reset_world "$C/org-drift.yaml"
	run -3 converge "$BOB" --apply
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_WRITE_AUTHORITY_REQUIRED" and .convergence.outcome=="not_writable"'
	run -3 converge "$CAROL" --apply
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_ACCESS_DENIED" and .convergence.outcome=="not_applicable"'
	[ "$(writes)" -eq 0 ]
	run -0 converge "$ALICE" --apply
	jq_ok '.convergence.outcome=="converged" and .route.user_service_id=="us-acme"'
	[ "$(writes)" -eq 1 ]
	run -0 requests
	printf '%s\n' "$output" | jq -s -e 'map(select(.method=="PUT"))[0].body.delegation_token_scope=="llm:proxy proxy:* sandbox:execute"'
	# the member may now use it
	run -0 nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$BOB")"
}

@test "two writable candidates: AMBIGUOUS, nothing written; an exact id repairs one" {
	reset_world "$C/two-writable.yaml"
	run -3 converge "$ALICE" --apply
	# WIRE 3: several candidates are ambiguous, not a mismatch
	jq_ok '.convergence.outcome=="not_applicable" and .convergence.attempted==false and .blocker.code=="CODE_EXECUTION_ROUTE_AMBIGUOUS"'
	jq_ok '.blocker.message|test("--user-service-id")'
	[ "$(writes)" -eq 0 ]
	run -3 converge "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_AMBIGUOUS"'
	[ "$(writes)" -eq 0 ]
	run -0 converge "$ALICE" --apply --user-service-id us-b
	jq_ok '.route.user_service_id=="us-b" and .convergence.outcome=="converged"'
	run -0 requests
	printf '%s\n' "$output" | jq -s -e 'map(select(.method=="PUT"))|length==1 and .[0].path=="/api/v1/user-services/us-b"'
}

@test "--capability codex_managed: inject and proxy:* only, never forward_access_token" {
	reset_world "$C/codex-drift.yaml"
	run -1 --separate-stderr converge "$ALICE" --capability codex_managed
	jq_ok '.capability=="codex_managed" and .convergence.outcome=="planned"'
	jq_ok '.convergence.patch=={"inject_delegation_token":true,"delegation_token_scope":"llm:proxy proxy:*"}'
	[ "$(writes)" -eq 0 ]
	run -0 converge "$ALICE" --capability codex_managed --apply
	jq_ok '.status=="admitted" and .capability=="codex_managed" and .convergence.outcome=="converged" and .convergence.verified==true'
	run -0 requests
	printf '%s\n' "$output" | jq -s -e 'map(select(.method=="PUT"))|length==1 and .[0].body=={"inject_delegation_token":true,"delegation_token_scope":"llm:proxy proxy:*"}'
	# forward_access_token is what it was: code_execute still drifts
	run -3 nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$ALICE")"
	jq_ok '.blocker.message|test("forward_access_token: false -> true")'
	# an admitted codex_managed record on stdin keeps its capability
	nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$ALICE")" \
		--capability codex_managed >"$BATS_TEST_TMPDIR/adm"
	run -0 nyx-route-converge --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$ALICE")" \
		--recheck <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.capability=="codex_managed" and .convergence.outcome=="unchanged"'
	run -65 --separate-stderr nyx-route-converge --base-url "$NYX_TEST_BASE" \
		--token-file "$(token_file "$ALICE")" --capability code_execute <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.code=="admission_invalid"'
}

@test "an auto-connected route is never PUT: the personal alias is created" {
	reset_world "$C/auto-connected.yaml"
	run -1 --separate-stderr converge "$ALICE"
	jq_ok '.convergence.action=="create_alias" and .convergence.outcome=="planned"'
	[[ $stderr == *"plan: POST /api/v1/keys"*"us-platform is auto-connected and never written"* ]]
	clear_requests
	run -0 converge "$ALICE" --apply
	jq_ok '.status=="admitted" and .route.slug=="chrono-sandbox-aevatar" and .convergence.outcome=="alias_created" and .convergence.verified==true'
	run -0 requests
	printf '%s\n' "$output" | jq -s -e 'map(select(.method=="PUT"))|length==0'
	printf '%s\n' "$output" | jq -s -e 'map(select(.method=="POST"))[0].body=={"service_slug":"chrono-sandbox","slug":"chrono-sandbox-aevatar","label":"Aevatar Code Execution","forward_access_token":true,"inject_delegation_token":true,"delegation_token_scope":"proxy:* sandbox:execute","node_id":"node-9"}'
	# the alias now serves; the platform route is untouched
	run -0 nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$ALICE")"
	jq_ok '.route.slug=="chrono-sandbox-aevatar"'
}

@test "409 on the alias means a concurrent create: re-read and verify" {
	reset_world "$C/auto-connected-pending-alias.yaml"
	printf 'faults:\n  - {method: POST, path: /api/v1/keys, status: 409, json: {error: conflict, error_code: 1004, message: x}, after: {route: us-concurrent, set: {is_active: true}}}\n' | put_faults
	run -0 converge "$ALICE" --apply
	jq_ok '.convergence.outcome=="alias_created" and .convergence.http_status==409 and .route.user_service_id=="us-concurrent"'
}

@test "an unknown auto_connected is never guessed writable" {
	reset_world "$C/auto-connected-unknown.yaml"
	run -3 converge "$ALICE" --apply
	jq_ok '.convergence.outcome=="not_writable"'
	[ "$(writes)" -eq 0 ]
}

@test "a definitive 4xx on the write is rejected (3), with its status" {
	for st in 403 422 400; do
		reset_world "$C/personal-drift.yaml"
		printf 'faults:\n  - {method: PUT, path: "/api/v1/user-services/*", status: %s, json: {error: forbidden}}\n' "$st" | put_faults
		run -3 --separate-stderr converge "$ALICE" --apply
		jq_ok ".blocker.code==\"CODE_EXECUTION_ROUTE_REPAIR_REJECTED\" and .blocker.http_status==$st and .blocker.remediation.kind==\"request_access\""
		jq_ok ".convergence.outcome==\"rejected\" and .convergence.failure_kind==\"MutationRejected\" and .convergence.http_status==$st and .convergence.attempted==true"
		jq_ok ".blocker.message==\"NyxID rejected the platform code route repair. failureKind=MutationRejected httpStatus=$st The shared route contract is owner-granted: it requires forward_access_token=true, inject_delegation_token=true, and a delegation_token_scope containing proxy:* and sandbox:execute.\""
		[ "$(writes)" -eq 1 ]
		# the readback still happened
		[ "$(calls | tr ',' '\n' | grep -c 'GET /api/v1/keys')" -eq 2 ]
	done
}

@test "transport, 408, 429 and 5xx on the write are unverified (75)" {
	for st in 408 429 500 503; do
		reset_world "$C/personal-drift.yaml"
		printf 'faults:\n  - {method: PUT, path: "/api/v1/user-services/*", status: %s, body: "{}"}\n' "$st" | put_faults
		run -75 converge "$ALICE" --apply
		jq_ok ".blocker.code==\"CODE_EXECUTION_ROUTE_REPAIR_UNVERIFIED\" and .blocker.remediation.kind==\"refresh_source\" and .convergence.outcome==\"unverified\""
		jq_ok ".blocker.message==\"The platform code execution route repair could not be verified. failureKind=MutationRejected httpStatus=$st\""
	done
	reset_world "$C/personal-drift.yaml"
	printf 'faults:\n  - {method: PUT, path: "/api/v1/user-services/*", drop: true}\n' | put_faults
	run -75 converge "$ALICE" --apply
	jq_ok '.convergence.failure_kind=="UpdateException" and .convergence.http_status==0'
	jq_ok '.blocker.message=="The platform code execution route repair could not be verified. failureKind=UpdateException"'
	[ "$(writes)" -eq 1 ] # never retried
}

@test "a failed write followed by a verified readback converged" {
	reset_world "$C/personal-drift.yaml"
	printf 'faults:\n  - {method: PUT, path: "/api/v1/user-services/*", status: 502, body: "{}", after: {route: us-1, set: {forward_access_token: true, inject_delegation_token: true, delegation_token_scope: "proxy:* account:read sandbox:execute"}}}\n' | put_faults
	run -0 converge "$ALICE" --apply
	jq_ok '.convergence.outcome=="converged" and .convergence.verified==true and .convergence.http_status==502 and .convergence.failure_kind==null'
}

@test "readback drift is unverified: a scope added or dropped concurrently" {
	reset_world "$C/personal-drift.yaml"
	printf 'faults:\n  - {method: PUT, path: "/api/v1/user-services/*", after: {route: us-1, set: {delegation_token_scope: "proxy:* account:read sandbox:execute account:admin"}}}\n' | put_faults
	run -75 converge "$ALICE" --apply
	jq_ok '.convergence.outcome=="unverified" and .convergence.failure_kind=="PostconditionMismatch" and .convergence.http_status==200'
	reset_world "$C/personal-drift.yaml"
	printf 'faults:\n  - {method: PUT, path: "/api/v1/user-services/*", after: {route: us-1, set: {delegation_token_scope: "proxy:* sandbox:execute"}}}\n' | put_faults
	run -75 converge "$ALICE" --apply
	jq_ok '.convergence.failure_kind=="PostconditionMismatch"'
	# the identity changing under us is drift too
	reset_world "$C/personal-drift.yaml"
	printf 'faults:\n  - {method: PUT, path: "/api/v1/user-services/*", after: {route: us-1, set: {catalog_service_id: cat-other}}}\n' | put_faults
	run -75 converge "$ALICE" --apply
	jq_ok '.convergence.outcome=="unverified"'
}

@test "NyxID must confirm the human token before any write" {
	reset_world "$C/personal-drift.yaml"
	printf 'faults:\n  - {path: /api/v1/users/me, status: 401, body: "{}"}\n' | put_faults
	run -3 converge "$ALICE" --apply
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_WRITE_AUTHORITY_REQUIRED" and .blocker.http_status==401 and .convergence.attempted==false'
	[ "$(writes)" -eq 0 ]
	printf 'faults:\n  - {path: /api/v1/users/me, status: 503, body: "{}"}\n' | put_faults
	run -75 converge "$ALICE" --apply
	[ "$(writes)" -eq 0 ]
}

@test "stdin: an admitted record passes through unless --recheck" {
	reset_world "$C/compliant.yaml"
	nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$ALICE")" >"$BATS_TEST_TMPDIR/adm"
	clear_requests
	run -0 nyx-route-converge --apply --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$ALICE")" <"$BATS_TEST_TMPDIR/adm"
	[ "$output" = "$(cat "$BATS_TEST_TMPDIR/adm")" ]
	[ "$(request_count)" -eq 0 ]
	run -0 nyx-route-converge --recheck --apply --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$ALICE")" <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.convergence.outcome=="unchanged" and .route.user_service_id=="us-1"'
	[ "$(request_count)" -eq 2 ]
}

@test "stdin: other blocked records and error records flow through unchanged" {
	reset_world "$FIX/nyx-route-inspect/inactive.yaml"
	nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$ALICE")" >"$BATS_TEST_TMPDIR/blocked" || true
	clear_requests
	run -3 nyx-route-converge --apply --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$ALICE")" <"$BATS_TEST_TMPDIR/blocked"
	[ "$output" = "$(cat "$BATS_TEST_TMPDIR/blocked")" ]
	printf '{"class":"transient","code":"x","diagnostic_id":"nyx-00000000000000000000000000000000","exit":75,"message":"m","retryable":true,"tool":"t","type":"error","v":1}\n' >"$BATS_TEST_TMPDIR/err"
	run -75 nyx-route-converge --apply --base-url "$NYX_TEST_BASE" <"$BATS_TEST_TMPDIR/err"
	[ "$output" = "$(cat "$BATS_TEST_TMPDIR/err")" ]
	[ "$(request_count)" -eq 0 ]
	run -65 nyx-route-converge --base-url "$NYX_TEST_BASE" <<<'{"v":1,"type":"exec.result"}'
	# a route.admission is admitted or blocked; nothing is repaired for another status
	jq -c '.status="pending"' "$BATS_TEST_TMPDIR/blocked" >"$BATS_TEST_TMPDIR/odd"
	run -65 nyx-route-converge --apply --base-url "$NYX_TEST_BASE" --token-file "$(token_file "$ALICE")" <"$BATS_TEST_TMPDIR/odd"
	jq_ok '.code=="input_invalid"'
	run -65 nyx-route-converge --base-url "$NYX_TEST_BASE" <<<'garbage'
}

@test "--table shows the candidates before and after" {
	reset_world "$C/personal-drift.yaml"
	run -0 --separate-stderr converge "$ALICE" --apply --table
	[[ $stderr == *"before:"*"us-1  chrono-sandbox  ready=yes writable=yes forward_access_token=false"* ]]
	[[ $stderr == *"after:"*"us-1  chrono-sandbox  ready=yes writable=yes forward_access_token=true inject_delegation_token=true delegation_token_scope=\"proxy:* account:read sandbox:execute\""* ]]
}

@test "no token ever reaches stdout, stderr or the server's log" {
	reset_world "$C/personal-drift.yaml"
	run -0 --separate-stderr converge "$ALICE" --apply -vvv
	[[ $stderr != *"$ALICE"* && $output != *"$ALICE"* && $stderr != *eyJ* ]]
	run -0 cat "$SANDBOXD_DIR/stderr"
	[[ $output != *"$ALICE"* ]]
	run -0 requests
	[[ $output != *"$ALICE"* ]]
}

@test "an unreadable token file is 66; a malformed inventory 76, nothing written" {
	run -66 nyx-route-converge --apply --base-url "$NYX_TEST_BASE" --token-file /nonexistent/token </dev/null
	jq_ok '.type=="error" and .exit==66'
	reset_world "$C/personal-drift.yaml"
	printf 'faults:\n  - {path: /api/v1/keys, status: 200, body: "{\\"keys\\": 7}"}\n' | put_faults
	run -76 converge "$ALICE" --apply
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_SOURCE_UNAVAILABLE" and .convergence.outcome=="not_applicable" and .convergence.attempted==false'
	[ "$(writes)" -eq 0 ]
}
