#!/usr/bin/env bats
# End-to-end pipes across the tools: admission flows into repair flows into
# execution; blocked and error records flow through unchanged.

load helpers/suite

setup() {
	suite_setup
	TOK=$(token_file "$ALICE")
	export TOK
}

@test "inspect | converge --apply admits after the repair" {
	reset_world "$FIX/nyx-route-converge/personal-drift.yaml"
	PIPE='nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$TOK" |
		nyx-route-converge --apply --base-url "$NYX_TEST_BASE" --token-file "$TOK"'
	# inspect exits 3 (drift), converge repairs: without pipefail the
	# pipeline reports converge's 0
	run -0 bash -c "$PIPE"
	jq_ok '.status=="admitted" and .convergence.outcome=="converged"'
	run -0 requests
	[ "$(printf '%s\n' "$output" | jq -s 'map(select(.method=="PUT"))|length')" -eq 1 ]
}

@test "inspect | converge --apply | code-exec --sync runs the program" {
	reset_world "$FIX/nyx-route-converge/personal-drift.yaml"
	run -0 bash -c 'nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$TOK" |
		nyx-route-converge --apply --base-url "$NYX_TEST_BASE" --token-file "$TOK" |
		code-exec --sync --base-url "$NYX_TEST_BASE" --token-file "$TOK" -l python -e "print(6*7)"'
	jq_ok '.type=="exec.result" and .output.stdout=="42\n"'
	# the converge output is fresh and pinned: code-exec read no inventory
	run -0 requests
	[ "$(printf '%s\n' "$output" | jq -r '.method+" "+.path' | tail -n 1)" = "POST /api/v1/proxy/s/chrono-sandbox/execute" ]
	[ "$(printf '%s\n' "$output" | jq -r .path | grep -c 'api/v1/keys')" -eq 3 ]
}

@test "a blocked admission flows through converge and code-exec unchanged" {
	reset_world "$FIX/nyx-route-inspect/inactive.yaml"
	nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$TOK" >"$BATS_TEST_TMPDIR/blocked" || true
	run -3 bash -c 'nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$TOK" 2>/dev/null |
		nyx-route-converge --apply --base-url "$NYX_TEST_BASE" --token-file "$TOK" |
		code-exec --sync --base-url "$NYX_TEST_BASE" --token-file "$TOK" -l bash -e "echo never"'
	[ "$(last_line | jq -cS 'del(.diagnostic_id)')" = "$(jq -cS 'del(.diagnostic_id)' "$BATS_TEST_TMPDIR/blocked")" ]
	run -0 requests
	[ "$(printf '%s\n' "$output" | jq -s 'map(select(.method!="GET"))|length')" -eq 0 ]
}

@test "a read failure flows through as blocked (3); the record and PIPESTATUS keep the reader's 75" {
	pipe='nyx-route-inspect --base-url http://127.0.0.1:1 --token-file "$TOK" 2>/dev/null |
		nyx-route-converge --base-url http://127.0.0.1:1 --token-file "$TOK" |
		code-exec --sync --base-url http://127.0.0.1:1 --token-file "$TOK" -l bash -e x'
	run -3 bash -c "$pipe"
	jq_ok '.blocker.code=="CODE_EXECUTION_ROUTE_SOURCE_UNAVAILABLE" and .exit==75'
	run -0 bash -c "$pipe"' >/dev/null; echo "${PIPESTATUS[*]}"'
	[ "$output" = "75 3 3" ]
}

@test "an error record passes through and keeps its exit code" {
	run -78 bash -c 'nyx-route-converge --base-url http://nyx.example.com --token-file "$TOK" </dev/null |
		code-exec --sync --base-url "$NYX_TEST_BASE" --token-file "$TOK" -l bash -e x'
	jq_ok '.type=="error" and .tool=="nyx-route-converge" and .code=="base_url_insecure" and .exit==78'
}
