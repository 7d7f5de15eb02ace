#!/usr/bin/env bats
# nyx-route-inspect against a real nyx-sandboxd: classification (WIRE 2),
# failures, hostile input, credentials, config, offline mode.

load helpers/suite

R=$BATS_TEST_DIRNAME/fixtures/nyx-route-inspect

setup() {
	suite_setup
	export NYX_NOW=2026-12-02T12:00:00Z
}

# inspect AS [args...]: run nyx-route-inspect online as a principal.
inspect() {
	local who=$1
	shift
	nyx-route-inspect --base-url "$NYX_TEST_BASE" \
		--token-file "$(token_file "$who")" "$@"
}

@test "admits the one compliant personal route with proof and digests" {
	reset_world "$R/compliant.yaml"
	run -0 --separate-stderr inspect "$ALICE"
	jq_ok '.type=="route.admission" and .v==1 and .status=="admitted"'
	jq_ok '.route.user_service_id=="us-1" and .route.slug=="chrono-sandbox"'
	jq_ok '.route.catalog_service_id=="cat-sandbox" and .route.auto_connected==false'
	jq_ok '.counts=={"canonical":1,"accessible":1,"active":1,"eligible":1}'
	jq_ok ".base_url==\"$NYX_TEST_BASE\""
	jq_ok '.proof.schema=="external-capability-admission.v6"'
	jq_ok '.proof.allowed_execution_modes==["interactive","durable"]'
	jq_ok '.proof.observed_at=="2026-12-02T12:00:00Z" and .proof.fresh_until=="2026-12-02T12:05:00Z"'
	jq_ok '.diagnostic_id|test("^nyx-[0-9a-f]{32}$")'
	want=$(python3 "$BATS_TEST_DIRNAME/helpers/lpdigest.py" \
		code-execution-capability.v1 us-1 chrono-sandbox cat-sandbox POST /execute)
	jq_ok ".route.contract_digest==\"$want\" and .proof.contract_digest==\"$want\""
	# inventory digest: the one joined route, WIRE 2.6 field order
	want=$(python3 "$BATS_TEST_DIRNAME/helpers/lpdigest.py" route us-1 \
		chrono-sandbox cat-sandbox true personal NULL NULL true true \
		"llm:proxy sandbox:execute proxy:*" false active NULL NULL)
	jq_ok ".proof.inventory_digest==\"$want\""
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
	[ -z "$stderr" ]
}

@test "reads /user-services then /keys, once each, with the bearer token" {
	reset_world "$R/compliant.yaml"
	run -0 inspect "$ALICE"
	run -0 requests
	[ "$(printf '%s\n' "$output" | jq -r .path | paste -sd,)" = "/api/v1/user-services,/api/v1/keys" ]
	printf '%s\n' "$output" | jq -e -s 'all(.principal=="u-alice" and .kind=="user")'
}

@test "no inventory route at all: MISSING with counts 0" {
	reset_world "$R/empty.yaml"
	run -3 --separate-stderr inspect "$ALICE"
	jq_ok '.status=="blocked" and .blocker.code=="CODE_EXECUTION_ROUTE_MISSING"'
	jq_ok '.blocker.runtime_code=="code_execution_route_missing"'
	jq_ok '.blocker.remediation=={"kind":"register_service","text":"Connect the platform code service"}'
	jq_ok '.counts=={"canonical":0,"accessible":0,"active":0,"eligible":0} and .observations==[] and .exit==3'
	[[ $stderr == *"error: CODE_EXECUTION_ROUTE_MISSING"* ]]
	[[ $stderr == *nyx-* ]]
}

@test "a custom same-slug route never counts, even when it is compliant" {
	reset_world "$R/custom-only.yaml"
	run -3 inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_MISSING"'
	reset_world "$R/custom-shadow.yaml"
	run -3 inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_POLICY_MISMATCH"'
	jq_ok '[.observations[].user_service_id]==["us-canon"] and .counts.canonical==1'
}

@test "another catalog's key or an unsupported slug is not canonical" {
	reset_world "$R/foreign-catalog.yaml"
	run -3 inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_MISSING" and .counts.canonical==0'
}

@test "an org viewer sees the route but may not use it: ACCESS_DENIED" {
	reset_world "$R/org-routes.yaml"
	run -3 inspect "$CAROL"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_ACCESS_DENIED"'
	jq_ok '.blocker.remediation.kind=="request_access" and .blocker.http_status==0'
	jq_ok '.counts=={"canonical":2,"accessible":0,"active":0,"eligible":0}'
}

@test "an org member is admitted on the member route, not the admin_only one" {
	reset_world "$R/org-routes.yaml"
	run -0 inspect "$BOB"
	jq_ok '.route.user_service_id=="us-acme" and .counts.accessible==1 and .counts.eligible==1'
	# the org admin sees both eligible; the shared slug wins
	run -0 inspect "$ALICE"
	jq_ok '.route.user_service_id=="us-acme" and .counts.eligible==2'
}

@test "an inactive route: INACTIVE" {
	reset_world "$R/inactive.yaml"
	run -3 inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_INACTIVE" and .blocker.remediation.text=="Reactivate the platform code service"'
	jq_ok '.counts=={"canonical":1,"accessible":1,"active":0,"eligible":0}'
}

@test "NOT_READY wins over a policy mismatch" {
	reset_world "$R/not-ready-and-drift.yaml"
	run -3 inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_NOT_READY"'
	jq_ok '.blocker.remediation.text=="Restore the platform code service credential or node"'
	jq_ok '.counts=={"canonical":1,"accessible":1,"active":1,"eligible":0} and .observations==[]'
}

@test "node routes are ready by node_status, not the credential status" {
	reset_world "$R/node.yaml"
	run -3 inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_NOT_READY"'
	sed 's/node_status: offline/node_status: online/' "$R/node.yaml" >"$BATS_TEST_TMPDIR/online.yaml"
	reset_world "$BATS_TEST_TMPDIR/online.yaml"
	run -0 inspect "$ALICE"
	jq_ok '.route.user_service_id=="us-node"'
}

@test "route and key owners that differ are not ready" {
	reset_world "$R/owner-mismatch.yaml"
	run -3 inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_NOT_READY"'
}

@test "policy mismatch: exact message, observations, values that disagree" {
	reset_world "$R/drift.yaml"
	run -3 --separate-stderr inspect "$ALICE"
	# the whole record, but for this run's diagnostic id and port
	diff -u "$R/drift.golden.json" <(last_line | jq -S 'del(.diagnostic_id, .base_url)')
	jq_ok '.base_url==env.NYX_TEST_BASE and (.diagnostic_id|test("^nyx-[0-9a-f]{32}$"))'
}

@test "policy mismatch names only the differing fields" {
	sed 's/forward_access_token: false/forward_access_token: true/; /id: us-b/,$d' \
		"$R/drift.yaml" >"$BATS_TEST_TMPDIR/one.yaml"
	reset_world "$BATS_TEST_TMPDIR/one.yaml"
	run -3 inspect "$ALICE"
	jq_ok '.blocker.message=="The canonical platform code execution route policy differs: delegation_token_scope: missing [sandbox:execute] -> contains [proxy:*, sandbox:execute]."'
}

@test "the shared route beats the personal alias" {
	reset_world "$R/shared-and-alias.yaml"
	run -0 inspect "$ALICE"
	jq_ok '.route.user_service_id=="us-shared" and .counts.eligible==2'
}

@test "two shared routes and an alias are ambiguous (eligible 3)" {
	reset_world "$R/two-shared-and-alias.yaml"
	run -3 inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_AMBIGUOUS" and .blocker.remediation.kind=="configure_connector"'
	jq_ok '.counts=={"canonical":3,"accessible":3,"active":3,"eligible":3}'
}

@test "an exact --user-service-id disambiguates, and the alias stays authoritative" {
	reset_world "$R/two-shared-and-alias.yaml"
	run -0 inspect "$ALICE" --user-service-id us-s2
	jq_ok '.route.user_service_id=="us-s2" and .counts.canonical==1'
	reset_world "$R/shared-and-alias.yaml"
	run -0 inspect "$ALICE" --user-service-id us-alias
	jq_ok '.route.user_service_id=="us-alias" and .route.slug=="chrono-sandbox-aevatar"'
	run -3 inspect "$ALICE" --user-service-id us-nope
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_MISSING"'
}

@test "--table shows each candidate's gates and the exact differences" {
	reset_world "$R/drift.yaml"
	run -3 --separate-stderr inspect "$ALICE" --table
	[[ $stderr == *"ROUTE"*"CANON"*"ACCESS"*"ACTIVE"*"READY"*"POLICY"*"WRITE"*"VERDICT"* ]]
	printf '%s\n' "$stderr" | grep -E '^us-a +chrono-sandbox +yes +yes +yes +yes +no +yes +policy differs$'
	printf '%s\n' "$stderr" | grep -E '^us-b +chrono-sandbox-aevatar +yes +yes +yes +yes +no +no +policy differs$'
	[[ $stderr == *"  forward_access_token: absent -> true"* ]]
	[[ $stderr == *"  delegation_token_scope: missing [proxy:*]"* ]]
	[[ $stderr == *"counts: canonical=2 accessible=2 active=2 eligible=0"* ]]
}

@test "--check: PASS 0, DRIFT 1, BLOCKED 3, ERROR for a failed read" {
	reset_world "$R/compliant.yaml"
	run -0 --separate-stderr inspect "$ALICE" --check
	[[ $stderr == "nyx-route-inspect: PASS: "* ]]
	run -0 --separate-stderr inspect "$ALICE" --check -q
	[ -z "$stderr" ]
	reset_world "$R/drift.yaml"
	run -1 --separate-stderr inspect "$ALICE" --check
	[[ $stderr == "nyx-route-inspect: DRIFT: CODE_EXECUTION_ROUTE_POLICY_MISMATCH: "* ]]
	[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
	# the same diagnostic id as the record
	[[ $stderr == *"($(last_line | jq -r .diagnostic_id))" ]]
	run -1 --separate-stderr inspect "$ALICE" --check -q
	[[ $stderr == *"DRIFT: "* ]]
	reset_world "$R/inactive.yaml"
	run -3 --separate-stderr inspect "$ALICE" --check
	[[ $stderr == "nyx-route-inspect: BLOCKED CODE_EXECUTION_ROUTE_INACTIVE: "* ]]
	# an outage or a refused token is an ERROR, never drift
	printf 'faults:\n  - {path: /api/v1/keys, status: 503, body: "{}"}\n' | put_faults
	run -75 --separate-stderr inspect "$ALICE" --check
	[[ $stderr == "nyx-route-inspect: ERROR CODE_EXECUTION_ROUTE_SOURCE_UNAVAILABLE: "* ]]
	run -77 --separate-stderr inspect "$SERVICE_ACCOUNT" --check
	[[ $stderr == "nyx-route-inspect: ERROR CODE_EXECUTION_SOURCE_CREDENTIAL_REQUIRED: "* ]]
}

# ---- typed route contracts per capability (PRODUCT 4, WIRE 2.4) ----

@test "--capability codex_managed: its own contract, digest and record field" {
	reset_world "$R/codex-managed.yaml"
	run -0 --separate-stderr inspect "$ALICE" --capability codex_managed
	jq_ok '.status=="admitted" and .capability=="codex_managed" and .route.user_service_id=="us-1"'
	want=$(python3 "$BATS_TEST_DIRNAME/helpers/lpdigest.py" \
		codex-managed-capability.v1 us-1 chrono-sandbox cat-sandbox POST /codex/execute)
	jq_ok ".route.contract_digest==\"$want\" and .proof.contract_digest==\"$want\""
	# the same route fails code_execute's contract, by its own fields
	run -3 --separate-stderr inspect "$ALICE"
	jq_ok '.capability=="code_execute" and .blocker.code=="CODE_EXECUTION_ROUTE_POLICY_MISMATCH"'
	jq_ok '.blocker.message=="The canonical platform code execution route policy differs: forward_access_token: false -> true; delegation_token_scope: missing [sandbox:execute] -> contains [proxy:*, sandbox:execute]."'
}

@test "--capability codex_managed: a mismatch names only its own fields" {
	reset_world "$FIX/nyx-route-converge/codex-drift.yaml"
	run -3 --separate-stderr inspect "$ALICE" --capability codex_managed --table
	jq_ok '.capability=="codex_managed" and .blocker.code=="CODE_EXECUTION_ROUTE_POLICY_MISMATCH"'
	jq_ok '.blocker.message=="The canonical platform managed Codex route policy differs: inject_delegation_token: false -> true; delegation_token_scope: missing [proxy:*] -> contains [proxy:*]."'
	jq_ok '.observations[0].missing_scopes==["proxy:*"]'
	[[ $stderr != *"forward_access_token: false -> true"* ]]
	[[ $stderr == *"delegation_token_scope: missing [proxy:*]"* ]]
	# a code_execute-compliant route satisfies codex_managed too
	reset_world "$R/compliant.yaml"
	run -0 inspect "$ALICE" --capability codex_managed
}

@test "--capability codex_managed reads inventory with a user token only" {
	reset_world "$R/codex-managed.yaml"
	run -77 --separate-stderr inspect "$ALICE_DELEG_READ" --capability codex_managed
	jq_ok '.capability=="codex_managed" and .blocker.code=="CODE_EXECUTION_SOURCE_CREDENTIAL_REQUIRED"'
	[[ $stderr == *"for codex_managed; only a user access token may"* ]]
	[ "$(request_count)" -eq 0 ]
	# the account:read delegation rule belongs to code_execute
	run -3 inspect "$ALICE_DELEG_READ"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_POLICY_MISMATCH"'
}

@test "--capability: an unknown one is a usage error" {
	run -64 --separate-stderr inspect "$ALICE" --capability codex
	[[ $stderr == *"--capability must be code_execute|codex_managed, not 'codex'"* ]]
}

# ---- inventory read failures (fault plans) ----

@test "both endpoints are read even when the first fails (503 -> 75)" {
	reset_world "$R/compliant.yaml"
	printf 'faults:\n  - {path: /api/v1/user-services, status: 503, body: "{}"}\n' | put_faults
	run -75 --separate-stderr inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_SOURCE_UNAVAILABLE" and .blocker.runtime_code=="code_execution_route_resolution_failed"'
	jq_ok '.blocker.remediation=={"kind":"refresh_source","text":"Restore platform code route"}'
	jq_ok '.blocker.http_status==503 and .exit==75 and .counts.canonical==0'
	run -0 requests
	[ "$(printf '%s\n' "$output" | jq -r .path | paste -sd,)" = "/api/v1/user-services,/api/v1/keys" ]
}

@test "401 or 403 on the inventory read: ACCESS_DENIED, exit 77" {
	reset_world "$R/compliant.yaml"
	printf 'faults:\n  - {path: /api/v1/keys, status: 401, json: {error: unauthorized, error_code: 1001, message: "x"}}\n' | put_faults
	run -77 inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_ACCESS_DENIED" and .blocker.http_status==401 and .exit==77'
	[ "$(request_count)" -eq 2 ]
	printf 'faults:\n  - {path: /api/v1/user-services, status: 403, body: "{}"}\n' | put_faults
	run -77 inspect "$ALICE"
	jq_ok '.blocker.http_status==403'
}

@test "the first failure wins when both reads fail" {
	reset_world "$R/compliant.yaml"
	printf 'faults:\n  - {path: /api/v1/user-services, status: 500, body: "{}"}\n  - {path: /api/v1/keys, status: 401, body: "{}"}\n' | put_faults
	run -75 inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_SOURCE_UNAVAILABLE" and .blocker.http_status==500'
}

@test "429 and 408 are transient (75); 404 and 400 are protocol (76)" {
	reset_world "$R/compliant.yaml"
	for st in 429 408; do
		printf 'faults:\n  - {path: /api/v1/keys, status: %s, body: "{}"}\n' "$st" | put_faults
		run -75 inspect "$ALICE"
		jq_ok ".blocker.http_status==$st"
	done
	for st in 404 400; do
		printf 'faults:\n  - {path: /api/v1/keys, status: %s, body: "{}"}\n' "$st" | put_faults
		run -76 inspect "$ALICE"
		jq_ok ".blocker.http_status==$st and .blocker.code==\"CODE_EXECUTION_ROUTE_SOURCE_UNAVAILABLE\""
	done
}

@test "a dropped connection is a transport failure (75), one request each" {
	reset_world "$R/compliant.yaml"
	printf 'faults:\n  - {path: /api/v1/user-services, drop: true}\n' | put_faults
	run -75 --separate-stderr inspect "$ALICE"
	jq_ok '.blocker.http_status==0'
	[[ $(last_line | jq -r .blocker.message) == *"failed in transport"* ]]
	run -0 requests
	[ "$(printf '%s\n' "$output" | jq -s 'map(select(.path=="/api/v1/user-services"))|length')" -eq 1 ]
}

@test "an exchange over --max-time is a transient timeout (75)" {
	reset_world "$R/compliant.yaml"
	printf 'faults:\n  - {path: /api/v1/keys, delay_ms: 2500}\n' | put_faults
	run -75 inspect "$ALICE" --max-time 1
	[[ $(last_line | jq -r .blocker.message) == *"GET $NYX_TEST_BASE/api/v1/keys timed out: "* ]]
	# the server answers the abandoned request later: let it land in the
	# request log now, not in the next test's
	for _ in $(seq 1 60); do
		[ "$(request_count)" -ge 2 ] && break
		sleep 0.1
	done
	[ "$(request_count)" -eq 2 ]
}

@test "a redirect is never followed (76), and its Location never requested" {
	reset_world "$R/compliant.yaml"
	printf 'faults:\n  - {path: /api/v1/keys, status: 302, headers: {Location: "%s/api/v1/users/me"}, body: ""}\n' "$NYX_TEST_BASE" | put_faults
	run -76 inspect "$ALICE"
	jq_ok '.blocker.http_status==302'
	[ "$(requests | jq -r .path | paste -sd,)" = "/api/v1/user-services,/api/v1/keys" ]
}

@test "a delay within the bound lets the request through" {
	reset_world "$R/compliant.yaml"
	printf 'faults:\n  - {path: /api/v1/keys, delay_ms: 300}\n' | put_faults
	run -0 inspect "$ALICE" --max-time 5
	jq_ok '.status=="admitted"'
}

# ---- hostile inventory bodies ----

malformed() {
	reset_world "$R/compliant.yaml"
	put_faults
	run -76 --separate-stderr inspect "$ALICE"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_SOURCE_UNAVAILABLE" and .exit==76'
}

@test "truncated JSON is malformed (76)" {
	malformed <<'EOF2'
faults:
  - {path: /api/v1/keys, status: 200, body: '{"keys":[{"id":"us-1"'}
EOF2
	[[ $(last_line | jq -r .blocker.message) == *"not JSON"* ]]
}

@test "two documents, trailing garbage or an empty body are not JSON (76)" {
	malformed <<'EOF2'
faults:
  - {path: /api/v1/keys, status: 200, body: '{"keys":[]}{"keys":[]}'}
EOF2
	[[ $(last_line | jq -r .blocker.message) == *"not JSON"* ]]
	malformed <<'EOF2'
faults:
  - {path: /api/v1/keys, status: 200, body: '{"keys":[]} x'}
EOF2
	malformed <<'EOF2'
faults:
  - {path: /api/v1/user-services, status: 200, body: ''}
EOF2
	[[ $(last_line | jq -r .blocker.message) == *"user-services answered with a body that is not JSON"* ]]
}

@test "strict JSON: a duplicate key, U+0000, depth > 256 in an answer are malformed (76)" {
	# a duplicate is_active must not flip a verdict (last one wins in libjq)
	malformed <<'EOF2'
faults:
  - {path: /api/v1/user-services, status: 200, body: '{"services":[{"id":"us-1","slug":"chrono-sandbox","is_active":false,"is_active":true,"catalog_service_id":"cat-sandbox","credential_source":{"type":"personal"},"forward_access_token":true,"inject_delegation_token":true,"delegation_token_scope":"proxy:* sandbox:execute"}]}'}
EOF2
	[[ $(last_line | jq -r .blocker.message) == *"not JSON"* ]]
	# a slug cut at a NUL is never admitted
	malformed <<'EOF2'
faults:
  - {path: /api/v1/keys, status: 200, body: '{"keys":[{"id":"us-1","slug":"chrono-sandbox\u0000x"}]}'}
EOF2
	deep=$(printf '%.0s[' $(seq 1 300))
	malformed <<EOF2
faults:
  - {path: /api/v1/keys, status: 200, body: '{"keys":$deep'}
EOF2
}

@test "strict JSON on stdin: a duplicate key, U+0000 or invalid UTF-8 in a record is 65" {
	reset_world "$R/compliant.yaml"
	inspect "$ALICE" >"$BATS_TEST_TMPDIR/adm"
	sed 's/"status":"admitted"/"status":"blocked","status":"admitted"/' "$BATS_TEST_TMPDIR/adm" >"$BATS_TEST_TMPDIR/dup"
	run -65 --separate-stderr code-exec --sync --base-url "$NYX_TEST_BASE" \
		--token-file "$(token_file "$ALICE")" -l bash -e 'echo x' <"$BATS_TEST_TMPDIR/dup"
	jq_ok '.code=="input_invalid_json" and (.message|contains("duplicate key"))'
	sed 's/"slug":"chrono-sandbox"/"slug":"chrono-sandbox\\u0000"/' "$BATS_TEST_TMPDIR/adm" >"$BATS_TEST_TMPDIR/nul"
	run -65 --separate-stderr code-exec --sync --base-url "$NYX_TEST_BASE" \
		--token-file "$(token_file "$ALICE")" -l bash -e 'echo x' <"$BATS_TEST_TMPDIR/nul"
	jq_ok '.code=="input_invalid_json" and (.message|contains("U+0000"))'
	# invalid UTF-8 (libjq would substitute U+FFFD); a fault plan is YAML,
	# which cannot carry it, so the unit tests cover server answers
	sed 's/"slug":"chrono-sandbox"/"slug":"chrono-sandbox\xff"/' "$BATS_TEST_TMPDIR/adm" >"$BATS_TEST_TMPDIR/u8"
	run -65 --separate-stderr code-exec --sync --base-url "$NYX_TEST_BASE" \
		--token-file "$(token_file "$ALICE")" -l bash -e 'echo x' <"$BATS_TEST_TMPDIR/u8"
	jq_ok '.code=="input_invalid_json" and (.message|contains("invalid UTF-8"))'
	[ "$(requests | jq -s 'map(select(.path|contains("/execute")))|length')" = 0 ]
}

@test "wrong kinds are malformed (76)" {
	malformed <<'EOF2'
faults:
  - path: /api/v1/user-services
    json: {services: [{id: us-1, slug: chrono-sandbox, is_active: "yes", credential_source: {type: personal}}]}
EOF2
	[[ $(last_line | jq -r .blocker.message) == *"services[0].is_active"* ]]
	malformed <<'EOF2'
faults:
  - {path: /api/v1/keys, json: {keys: {}}}
EOF2
	malformed <<'EOF2'
faults:
  - {path: /api/v1/keys, json: [1, 2]}
EOF2
	malformed <<'EOF2'
faults:
  - {path: /api/v1/user-services, json: {services: ["us-1"]}}
EOF2
}

@test "duplicate ids are malformed (76)" {
	malformed <<'EOF2'
faults:
  - path: /api/v1/keys
    json:
      keys:
        - {id: k, slug: s, is_active: true, connected: true, status: active, credential_source: {type: personal}}
        - {id: k, slug: s, is_active: true, connected: true, status: active, credential_source: {type: personal}}
EOF2
	[[ $(last_line | jq -r .blocker.message) == *"duplicate id"* ]]
}

@test "unknown enums, a missing credential_source, stray node_status are malformed" {
	malformed <<'EOF2'
faults:
  - path: /api/v1/keys
    json: {keys: [{id: k, slug: s, is_active: true, connected: true, status: sleeping, credential_source: {type: personal}}]}
EOF2
	malformed <<'EOF2'
faults:
  - path: /api/v1/user-services
    json: {services: [{id: us-1, slug: chrono-sandbox, is_active: true}]}
EOF2
	[[ $(last_line | jq -r .blocker.message) == *"credential_source"* ]]
	malformed <<'EOF2'
faults:
  - path: /api/v1/keys
    json: {keys: [{id: k, slug: s, is_active: true, connected: true, status: active, node_status: online, credential_source: {type: personal}}]}
EOF2
	malformed <<'EOF2'
faults:
  - path: /api/v1/keys
    json: {keys: [{id: k, slug: s, is_active: true, connected: true, status: active, credential_source: {type: org, org_id: o, role: owner, allowed: true}}]}
EOF2
}

@test "unknown extra fields are ignored" {
	reset_world "$R/compliant.yaml"
	cat <<'EOF2' | put_faults
faults:
  - path: /api/v1/keys
    json: {extra: 1, keys: [{id: us-1, slug: chrono-sandbox, is_active: true, connected: true, status: active, catalog_service_id: cat-sandbox, catalog_service_slug: chrono-sandbox, auto_connected: false, credential_source: {type: personal, future: x}, future_field: [1]}]}
EOF2
	run -0 inspect "$ALICE"
	jq_ok '.route.user_service_id=="us-1"'
}

@test "a body over the inventory cap is refused from Content-Length and while reading" {
	reset_world "$R/compliant.yaml"
	export NYX_MAX_INVENTORY_BYTES=1048576
	printf 'faults:\n  - {path: /api/v1/keys, body_bytes: 1048577}\n' | put_faults
	run -76 inspect "$ALICE"
	[[ $(last_line | jq -r .blocker.message) == *"over the size limit"* ]]
	printf 'faults:\n  - {path: /api/v1/keys, body_bytes: 1048577, chunked: true}\n' | put_faults
	run -76 inspect "$ALICE"
	[[ $(last_line | jq -r .blocker.message) == *"over the size limit"* ]]
	# exactly the cap is read in full (and then fails the schema, not the cap)
	printf 'faults:\n  - {path: /api/v1/keys, body_bytes: 1048576, chunked: true}\n' | put_faults
	run -76 inspect "$ALICE"
	[[ $(last_line | jq -r .blocker.message) == *"keys_response_malformed"* ]]
}

# WIRE 1 (rev 2): headers past the limit are a protocol error, not an
# outage: one 300 KB line (over libcurl's own line limit) or many lines
# over 64 KiB together.
@test "response headers over 64 KiB are refused (76), one line or many" {
	reset_world "$R/compliant.yaml"
	big=$(head -c 300000 /dev/zero | tr '\0' a)
	printf 'faults:\n  - {path: /api/v1/keys, status: 200, body: "[]", headers: {X-Big: "%s"}}\n' "$big" | put_faults
	run -76 inspect "$ALICE"
	[[ $(last_line | jq -r .blocker.message) == *"headers over the size limit"* ]]
	line=$(head -c 8000 /dev/zero | tr '\0' b)
	{
		printf 'faults:\n  - {path: /api/v1/keys, status: 200, body: "[]", headers: {'
		for i in $(seq 1 9); do printf 'X-H%d: "%s", ' "$i" "$line"; done
		printf 'X-End: "1"}}\n'
	} | put_faults
	run -76 inspect "$ALICE"
	[[ $(last_line | jq -r .blocker.message) == *"headers over the size limit"* ]]
	# below the limit, the headers are read and the body judged
	printf 'faults:\n  - {path: /api/v1/keys, status: 200, body: "[]", headers: {X-H: "%s"}}\n' "$line" | put_faults
	run -76 inspect "$ALICE"
	[[ $(last_line | jq -r .blocker.message) == *"keys_response_malformed"* ]]
}

@test "the default inventory cap is 64 MiB: a 3 MiB inventory is read (WIRE 4.1, rev 2)" {
	reset_world "$R/compliant.yaml"
	printf 'faults:\n  - {path: /api/v1/keys, body_bytes: 3145728}\n' | put_faults
	run -76 inspect "$ALICE"
	[[ $(last_line | jq -r .blocker.message) == *"keys_response_malformed"* ]]
}

@test "another inventory cap can be configured with NYX_MAX_INVENTORY_BYTES" {
	reset_world "$R/compliant.yaml"
	printf 'faults:\n  - {path: /api/v1/keys, body_bytes: 1048577}\n' | put_faults
	NYX_MAX_INVENTORY_BYTES=2097152 run -76 inspect "$ALICE"
	[[ $(last_line | jq -r .blocker.message) == *"keys_response_malformed"* ]]
	NYX_MAX_INVENTORY_BYTES=1048576 run -76 inspect "$ALICE"
	[[ $(last_line | jq -r .blocker.message) == *"over the size limit"* ]]
	NYX_MAX_INVENTORY_BYTES=12 run -78 inspect "$ALICE"
}

# ---- credentials ----

@test "no token: CREDENTIAL_REQUIRED with zero requests (77)" {
	reset_world "$R/compliant.yaml"
	run -77 --separate-stderr nyx-route-inspect --base-url "$NYX_TEST_BASE"
	jq_ok '.blocker.code=="CODE_EXECUTION_SOURCE_CREDENTIAL_REQUIRED" and .exit==77'
	[ "$(request_count)" -eq 0 ]
}

@test "an Agent Key, API key, service account or relay token makes zero requests (77)" {
	reset_world "$R/compliant.yaml"
	for t in "$ALICE_AGENT" "$ALICE_APIKEY" "$SERVICE_ACCOUNT" "$RELAY" "$ALICE_DELEG" opaque-token; do
		run -77 --separate-stderr inspect "$t"
		jq_ok '.blocker.code=="CODE_EXECUTION_SOURCE_CREDENTIAL_REQUIRED"'
	done
	[ "$(request_count)" -eq 0 ]
}

@test "a delegation token with account:read may read inventory" {
	reset_world "$R/compliant.yaml"
	run -0 inspect "$ALICE_DELEG_READ"
	jq_ok '.route.user_service_id=="us-1"'
}

@test "malformed credentials are refused before any request (77)" {
	reset_world "$R/compliant.yaml"
	for t in "Bearer $ALICE" "a b" ""; do
		run -77 --separate-stderr inspect "$t"
		jq_ok '.type=="error" and .code=="code_execution_credential_unavailable" and .class=="credential"'
	done
	[ "$(request_count)" -eq 0 ]
}

@test "a 401 from NyxID for an unknown token is ACCESS_DENIED" {
	reset_world "$R/compliant.yaml"
	run -77 inspect "$(mint_jwt '{"sub":"u-ghost","token_type":"access"}')"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_ACCESS_DENIED" and .blocker.http_status==401'
}

@test "token precedence: --token-file > NYX_TOKEN_FILE > NYX_TOKEN > profile" {
	reset_world "$R/org-routes.yaml"
	carol=$(token_file "$CAROL")
	bob=$(token_file "$BOB")
	# bob (member) is admitted, carol (viewer) denied: who was used shows
	NYX_TOKEN="$CAROL" NYX_TOKEN_FILE="$bob" run -0 nyx-route-inspect --base-url "$NYX_TEST_BASE"
	NYX_TOKEN="$BOB" run -0 nyx-route-inspect --base-url "$NYX_TEST_BASE"
	NYX_TOKEN_FILE="$carol" run -3 nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$carol"
	NYX_TOKEN_FILE="$carol" run -0 nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$bob"
}

@test "a group-writable token file is refused (78); a readable one warns" {
	reset_world "$R/compliant.yaml"
	f=$(token_file "$ALICE")
	chmod 620 "$f"
	run -78 --separate-stderr nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$f"
	jq_ok '.code=="file_permissions_unsafe"'
	[ "$(request_count)" -eq 0 ]
	chmod 644 "$f"
	run -0 --separate-stderr nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$f"
	[[ $stderr == *"warning: "*"readable by group or others"* ]]
	run -0 --separate-stderr nyx-route-inspect -q --base-url "$NYX_TEST_BASE" --token-file "$f"
	[ -z "$stderr" ]
}

@test "a missing token file is exit 66" {
	run -66 nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file /nonexistent/tok
	jq_ok '.type=="error" and .exit==66'
}

@test "no token ever reaches stdout or stderr, even at -vvv" {
	reset_world "$R/drift.yaml"
	run -3 --separate-stderr inspect "$ALICE" -vvv --table
	[[ $stderr == *"trace: http: GET /api/v1/keys -> 200"* ]]
	[[ $stderr == *"sent [Authorization, Accept]"* ]]
	[[ $stderr != *"$ALICE"* ]]
	[[ $output != *"$ALICE"* ]]
	[[ $stderr != *eyJ* ]]
	run -0 cat "$SANDBOXD_DIR/stderr"
	[[ $output != *"$ALICE"* ]]
	[[ $output != *eyJ* ]]
}

# ---- base URL and configuration ----

@test "no base URL is a configuration error (78)" {
	run -78 nyx-route-inspect --token-file "$(token_file "$ALICE")"
	jq_ok '.code=="base_url_missing" and .class=="config"'
}

@test "plain http to a non-loopback host is refused before any request (78)" {
	run -78 nyx-route-inspect --base-url http://nyx.example.com --token-file "$(token_file "$ALICE")"
	jq_ok '.code=="base_url_insecure"'
	run -78 nyx-route-inspect --base-url "https://user:pw@nyx.example.com" --token-file "$(token_file "$ALICE")"
	jq_ok '.code=="base_url_invalid"'
	run -78 nyx-route-inspect --base-url "not a url" --token-file "$(token_file "$ALICE")"
}

@test "a refused connection is transient (75)" {
	run -75 --separate-stderr nyx-route-inspect --base-url http://127.0.0.1:1 --token-file "$(token_file "$ALICE")"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_SOURCE_UNAVAILABLE"'
	# what failed and why, at default verbosity (PRODUCT 2, rev 2)
	jq_ok '.blocker.message|contains("GET http://127.0.0.1:1/api/v1/user-services") and contains("Connection refused")'
	[[ $stderr == *"http://127.0.0.1:1/api/v1/user-services"*"Connection refused"* ]]
}

@test "config profiles: profile < environment < flag" {
	reset_world "$R/org-routes.yaml"
	mkdir -p "$HOME/.config/nyx"
	bob=$(token_file "$BOB")
	carol=$(token_file "$CAROL")
	cat >"$HOME/.config/nyx/config.yaml" <<EOF2
default_profile: test
profiles:
  test:
    base_url: $NYX_TEST_BASE
    token_file: $bob
  viewer:
    base_url: $NYX_TEST_BASE
    token_file: $carol
EOF2
	run -0 nyx-route-inspect
	jq_ok '.route.user_service_id=="us-acme"'
	run -3 nyx-route-inspect -p viewer
	NYX_PROFILE=viewer run -3 nyx-route-inspect
	NYX_PROFILE=viewer run -0 nyx-route-inspect --token-file "$bob"
	NYX_BASE_URL=http://127.0.0.1:1 run -75 nyx-route-inspect
	run -78 nyx-route-inspect -p nosuch
	jq_ok '.code=="profile_unknown"'
	chmod 666 "$HOME/.config/nyx/config.yaml"
	run -78 nyx-route-inspect
	jq_ok '.code=="file_permissions_unsafe"'
}

@test "--config and NYX_CONFIG name the file; a missing or invalid one is 78" {
	printf 'profiles: [1, 2]\n' >"$BATS_TEST_TMPDIR/bad.yaml"
	run -78 nyx-route-inspect -c "$BATS_TEST_TMPDIR/bad.yaml"
	NYX_CONFIG=/nonexistent.yaml run -78 nyx-route-inspect
	printf 'profiles: {a: [unclosed\n' >"$BATS_TEST_TMPDIR/bad.yaml"
	run -78 nyx-route-inspect -c "$BATS_TEST_TMPDIR/bad.yaml"
	jq_ok '.code=="config_invalid"'
}

@test "NYX_NOW must be RFC 3339 or unix milliseconds" {
	NYX_NOW=yesterday run -64 nyx-route-inspect --inventory "$FIX/nyx-route-inspect/inventory.json"
	NYX_NOW=1767225600000 run -0 nyx-route-inspect --inventory "$FIX/nyx-route-inspect/inventory.json"
	jq_ok '.proof.observed_at=="2026-01-01T00:00:00Z"'
}

# ---- offline ----

@test "offline --inventory classifies a captured inventory with no network" {
	run -0 nyx-route-inspect --inventory "$FIX/nyx-route-inspect/inventory.json"
	jq_ok '.status=="admitted" and .route.user_service_id=="us-1" and (has("base_url")|not)'
}

@test "offline with two files matches the combined form, digest order-independent" {
	f=$FIX/nyx-route-inspect/inventory.json
	jq .user_services "$f" >"$BATS_TEST_TMPDIR/us.json"
	jq '.keys|.keys|=reverse' "$f" >"$BATS_TEST_TMPDIR/keys.json"
	run -0 nyx-route-inspect --inventory "$f"
	a=$(last_line | jq -c 'del(.diagnostic_id)')
	run -0 nyx-route-inspect --user-services "$BATS_TEST_TMPDIR/us.json" --keys "$BATS_TEST_TMPDIR/keys.json"
	b=$(last_line | jq -c 'del(.diagnostic_id)')
	[ "$a" = "$b" ]
}

@test "offline: missing file 66, not JSON 65, malformed inventory 65" {
	run -66 nyx-route-inspect --inventory /nonexistent.json
	printf '{"user_services":' >"$BATS_TEST_TMPDIR/t.json"
	run -65 nyx-route-inspect --inventory "$BATS_TEST_TMPDIR/t.json"
	printf '[]' >"$BATS_TEST_TMPDIR/t.json"
	run -65 nyx-route-inspect --inventory "$BATS_TEST_TMPDIR/t.json"
	printf '{"user_services":{"services":[]},"keys":{"keys":[{"id":1}]}}' >"$BATS_TEST_TMPDIR/t.json"
	run -65 --separate-stderr nyx-route-inspect --inventory "$BATS_TEST_TMPDIR/t.json"
	jq_ok '.code=="inventory_invalid" and .exit==65'
	[[ $stderr == *"keys[0].id"* ]]
}

@test "offline flags that do not fit together are misuse (64)" {
	run -64 nyx-route-inspect --inventory a --keys b
	run -64 nyx-route-inspect --user-services a
	run -64 nyx-route-inspect extra-arg
}

@test "--pretty indents the record" {
	run -0 nyx-route-inspect --pretty --inventory "$FIX/nyx-route-inspect/inventory.json"
	[ "$(printf '%s\n' "$output" | head -n 1)" = "{" ]
	printf '%s\n' "$output" | jq -e '.status=="admitted"'
}

# PRODUCT 4 (rev 2): what a fleet's Prometheus reads from each canary.
@test "--metrics-file writes node_exporter textfile metrics atomically" {
	local d="$BATS_TEST_TMPDIR/textfile" f
	mkdir -p "$d"
	f="$d/nyx_route.prom"
	reset_world "$R/compliant.yaml"
	run -0 inspect "$ALICE" --metrics-file "$f"
	run -0 check_exposition "$f"
	assert_line 'nyx_route_admitted{capability="code_execute"} 1'
	assert_line 'nyx_route_candidates{gate="eligible"} 1'
	refute_line --partial 'nyx_route_blocked{'
	grep -qE '^nyx_route_check_timestamp_seconds [0-9]{10}$' "$f"
	[ "$(stat -c %a "$f")" = 644 ]
	# blocked, and then the inventory unreadable: the file says which
	reset_world "$R/drift.yaml"
	run -3 inspect "$ALICE" --metrics-file "$f"
	run -0 check_exposition "$f"
	assert_line 'nyx_route_admitted{capability="code_execute"} 0'
	assert_line 'nyx_route_blocked{code="CODE_EXECUTION_ROUTE_POLICY_MISMATCH"} 1'
	printf 'faults:\n  - {path: /api/v1/keys, status: 503}\n' | put_faults
	run -75 inspect "$ALICE" --metrics-file "$f"
	run -0 check_exposition "$f"
	assert_line 'nyx_route_blocked{code="CODE_EXECUTION_ROUTE_SOURCE_UNAVAILABLE"} 1'
	# replaced by rename: no temporary file is left beside it
	[ "$(ls -A "$d")" = nyx_route.prom ]
	# a file that cannot be written is said on stderr; the check's own
	# verdict stays the exit status
	clear_faults
	reset_world "$R/compliant.yaml"
	run -0 --separate-stderr inspect "$ALICE" --metrics-file "$BATS_TEST_TMPDIR/no/such/dir/x.prom"
	[[ $stderr == *"metrics_failed: cannot write the metrics file"* ]]
}
