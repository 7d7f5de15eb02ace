#!/usr/bin/env bats
# nyx-sandboxd's own contract: start-up, NyxID's auth rules and envelopes,
# per-caller views with credential_source, fault plans, request logging.

load helpers/suite

setup() {
	suite_setup "$FIX/nyx-sandboxd/routes.yaml"
}

# get AS PATH: curl as a principal; prints "STATUS BODY".
get() {
	local who=$1 path=$2
	curl -s -w '\n%{http_code}' -H "Authorization: Bearer $who" "$NYX_TEST_BASE$path"
}


@test "writes its port to --port-file and answers on loopback" {
	[ -s "$SANDBOXD_DIR/port" ]
	grep -Eq '^[0-9]+$' "$SANDBOXD_DIR/port"
	run -0 grep -F "listening on http://127.0.0.1:" "$SANDBOXD_DIR/stderr"
}

@test "no credential: 401 with NyxID's envelope" {
	run -0 curl -s -w '\n%{http_code}' "$NYX_TEST_BASE/api/v1/keys"
	[ "$(status_of)" = 401 ]
	body_of | jq -e '.error=="unauthorized" and .error_code==1001 and (.message|type=="string")'
}

@test "an unknown token is 401" {
	run -0 get not-a-known-token /api/v1/user-services
	[ "$(status_of)" = 401 ]
}

@test "human-only: Agent Keys, API keys, service accounts, relays get 403" {
	for t in "$ALICE_AGENT" "$ALICE_APIKEY"; do
		run -0 get "$t" /api/v1/users/me
		[ "$(status_of)" = 403 ]
		body_of | jq -e '.error=="forbidden" and .error_code==1002 and .message=="Forbidden: API keys cannot access this endpoint"'
	done
	run -0 get "$SERVICE_ACCOUNT" /api/v1/keys
	[ "$(status_of)" = 403 ]
	body_of | jq -e '.message|test("Service accounts")'
	run -0 get "$RELAY" /api/v1/user-services
	[ "$(status_of)" = 403 ]
	# X-API-Key is accepted as a credential too, and still human-only
	run -0 curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $ALICE_AGENT" "$NYX_TEST_BASE/api/v1/keys"
	[ "$output" = 403 ]
}

@test "delegation tokens: GET only, and only with account:read" {
	run -0 get "$ALICE_DELEG" /api/v1/keys
	[ "$(status_of)" = 403 ]
	body_of | jq -e '.message=="Forbidden: Delegated tokens cannot access this endpoint"'
	run -0 get "$ALICE_DELEG_READ" /api/v1/users/me
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.id=="u-alice" and .email=="alice@example.com"'
	run -0 curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $ALICE_DELEG_READ" "$NYX_TEST_BASE/api/v1/keys"
	[ "$output" = 403 ]
}

@test "GET /api/v1/users/me for a user token" {
	run -0 get "$BOB" /api/v1/users/me
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.id=="u-bob" and .display_name=="Bob" and .is_active==true'
}

@test "/user-services: personal rows first, credential_source by role" {
	run -0 get "$ALICE" /api/v1/user-services
	[ "$(status_of)" = 200 ]
	body_of | jq -e '[.services[].id]==["us-mine","us-off","us-acme","us-acme-admin"]'
	body_of | jq -e '.services[0].credential_source=={"type":"personal"}'
	body_of | jq -e '.services[2].credential_source=={"type":"org","org_id":"org-acme","org_name":"Acme","avatar_url":null,"role":"admin","allowed":true}'
	body_of | jq -e '.services[0]|.forward_access_token==true and .catalog_service_id=="cat-sandbox" and (has("auto_connected")|not)'
	body_of | jq -e '.services[2]|(has("forward_access_token")|not) and (has("delegation_token_scope")|not)'
	run -0 get "$BOB" /api/v1/user-services
	body_of | jq -e '[.services[]|{id,allowed:.credential_source.allowed}]==[{"id":"us-node","allowed":null},{"id":"us-acme","allowed":true},{"id":"us-acme-admin","allowed":false}]'
	run -0 get "$CAROL" /api/v1/user-services
	body_of | jq -e '[.services[].credential_source|{role,allowed}]|unique==[{"role":"viewer","allowed":false}]'
}

@test "inactive routes are listed only when the world says so" {
	run -0 get "$ALICE" /api/v1/keys
	body_of | jq -e '[.keys[].id]|index("us-off")!=null'
	{ render "$FIX/worlds/principals.yaml" | sed 's/list_inactive_routes: true/list_inactive_routes: false/'
	  cat "$FIX/nyx-sandboxd/routes.yaml"; } |
		ctl -X PUT --data-binary @- "$NYX_TEST_BASE/_nyx/world"
	run -0 get "$ALICE" /api/v1/keys
	body_of | jq -e '[.keys[].id]|index("us-off")==null'
}

@test "/keys: key facts, node status, auto_connected omitted when null" {
	run -0 get "$BOB" /api/v1/keys
	body_of | jq -e '.keys[0]|.id=="us-node" and .node_id=="node-1" and .node_status=="draining" and (has("auto_connected")|not)'
	body_of | jq -e '.keys[1]|.auto_connected==false and .status=="active" and .connected==true and .catalog_service_slug=="chrono-sandbox"'
	body_of | jq -e '.keys[1].proxy_url_slug|endswith("/api/v1/proxy/s/chrono-sandbox/{path}")'
}

@test "/keys/{id-or-slug}: by id, then by slug, 404 when invisible or inactive" {
	run -0 get "$ALICE" /api/v1/keys/us-acme
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.id=="us-acme" and .credential_source.role=="admin"'
	run -0 get "$ALICE" /api/v1/keys/chrono-sandbox
	body_of | jq -e '.id=="us-mine"'
	run -0 get "$CAROL" /api/v1/keys/us-mine
	[ "$(status_of)" = 404 ]
	body_of | jq -e '.error=="not_found" and .error_code==1003'
	run -0 get "$ALICE" /api/v1/keys/us-off
	[ "$(status_of)" = 404 ]
}

@test "unknown paths are 404 and other methods on inventory are 405" {
	run -0 get "$ALICE" /api/v1/nothing
	[ "$(status_of)" = 404 ]
	run -0 curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $ALICE" "$NYX_TEST_BASE/api/v1/keys"
	[ "$output" = 405 ]
}

@test "fault plans: nth and count pick exactly which matches fire" {
	printf 'faults:\n  - {method: GET, path: /api/v1/keys, nth: 2, count: 2, status: 503, headers: {Retry-After: "7"}, body: "{}"}\n' | put_faults
	codes=""
	for i in 1 2 3 4; do
		codes="$codes $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ALICE" "$NYX_TEST_BASE/api/v1/keys")"
	done
	[ "$codes" = " 200 503 503 200" ]
	run -0 curl -s -D - -o /dev/null -H "Authorization: Bearer $ALICE" "$NYX_TEST_BASE/api/v1/user-services"
	[[ $output != *Retry-After* ]]
	run -0 requests
	printf '%s\n' "$output" | jq -s -e '[.[].fault]==[null,0,0,null,null]'
}

@test "fault plans: headers, exact-size and chunked bodies, glob paths" {
	printf 'faults:\n  - {path: "/api/v1/k*", status: 429, headers: {Retry-After: "3", ETag: "\\"e1\\""}, json: {error: rate_limited}}\n' | put_faults
	run -0 curl -s -D - -H "Authorization: Bearer $ALICE" "$NYX_TEST_BASE/api/v1/keys/us-mine"
	[[ $output == *"HTTP/1.1 429"* ]]
	[[ $output == *"Retry-After: 3"* ]]
	[[ $output == *'ETag: "e1"'* ]]
	[[ $output == *'{"error":"rate_limited"}'* ]]
	printf 'faults:\n  - {path: /api/v1/keys, body_bytes: 5000}\n' | put_faults
	run -0 curl -s -D "$BATS_TEST_TMPDIR/h" -o "$BATS_TEST_TMPDIR/b" "$NYX_TEST_BASE/api/v1/keys"
	[ "$(wc -c <"$BATS_TEST_TMPDIR/b")" -eq 5000 ]
	jq -e .pad "$BATS_TEST_TMPDIR/b" >/dev/null
	grep -qi '^content-length: 5000' "$BATS_TEST_TMPDIR/h"
	printf 'faults:\n  - {path: /api/v1/keys, body_bytes: 5000, chunked: true}\n' | put_faults
	run -0 curl -s -D "$BATS_TEST_TMPDIR/h" -o "$BATS_TEST_TMPDIR/b" "$NYX_TEST_BASE/api/v1/keys"
	[ "$(wc -c <"$BATS_TEST_TMPDIR/b")" -eq 5000 ]
	not grep -qi '^content-length' "$BATS_TEST_TMPDIR/h"
	grep -qi '^transfer-encoding: chunked' "$BATS_TEST_TMPDIR/h"
}

@test "fault plans: a dropped connection gets no answer at all" {
	printf 'faults:\n  - {path: /api/v1/users/me, drop: true}\n' | put_faults
	run curl -s -H "Authorization: Bearer $ALICE" "$NYX_TEST_BASE/api/v1/users/me"
	[ "$status" -eq 52 ] # curl: empty reply from server
	run -0 requests
	printf '%s\n' "$output" | jq -e 'select(.path=="/api/v1/users/me")|.dropped==true and .status==null and .principal=="u-alice"'
}

@test "fault plans: a delay holds one request, not the others" {
	printf 'faults:\n  - {path: /api/v1/users/me, delay_ms: 1500}\n' | put_faults
	curl -s -o /dev/null -H "Authorization: Bearer $ALICE" "$NYX_TEST_BASE/api/v1/users/me" &
	slow=$!
	sleep 0.2
	start=$(date +%s%N)
	run -0 curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ALICE" "$NYX_TEST_BASE/api/v1/keys"
	end=$(date +%s%N)
	[ "$output" = 200 ]
	[ $(((end - start) / 1000000)) -lt 1000 ]
	wait "$slow"
}

@test "an invalid fault plan or world is refused and the old one kept" {
	run -22 ctl -X PUT --data-binary 'faults: [{status: 500}]' "$NYX_TEST_BASE/_nyx/faults"
	run -22 ctl -X PUT --data-binary 'routes: [{id: x}]' "$NYX_TEST_BASE/_nyx/world"
	run -0 get "$ALICE" /api/v1/users/me
	[ "$(status_of)" = 200 ]
}

@test "one log line per request on stderr, with no token" {
	: >"$SANDBOXD_DIR/stderr.mark"
	before=$(wc -l <"$SANDBOXD_DIR/stderr")
	run -0 get "$ALICE" "/api/v1/keys?_nyxid_via=us-secret-route"
	after=$(wc -l <"$SANDBOXD_DIR/stderr")
	[ $((after - before)) -eq 1 ]
	line=$(tail -n 1 "$SANDBOXD_DIR/stderr")
	[[ $line == "nyx-sandboxd: GET /api/v1/keys?_nyxid_via=*** -> 200 u-alice/user "* ]]
	run -0 cat "$SANDBOXD_DIR/stderr"
	for t in "$ALICE" "$ALICE_AGENT" "$ALICE_DELEG_READ"; do
		[[ $output != *"$t"* ]]
	done
	run -0 requests
	[[ $output != *"$ALICE"* ]]
}

@test "the multi interface: 40 concurrent requests over at most 4 connections" {
	run -0 "$NYX_TESTBIN/test_http_multi" "$NYX_TEST_BASE" "$ALICE"
	refute_output --partial "not ok"
	assert_output --partial "ok 5 - at most 4 connections"
}

@test "SIGHUP reloads the world file from disk" {
	dir=$BATS_TEST_TMPDIR/hup
	mkdir -p "$dir"
	render "$FIX/worlds/principals.yaml" "$FIX/nyx-sandboxd/routes.yaml" >"$dir/w.yaml"
	nyx-sandboxd --world "$dir/w.yaml" --port-file "$dir/port" 2>"$dir/err" 3>&- &
	pid=$!
	for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
	base="http://127.0.0.1:$(cat "$dir/port")"
	n1=$(curl -s -H "Authorization: Bearer $ALICE" "$base/api/v1/keys" | jq '.keys|length')
	render "$FIX/worlds/principals.yaml" >"$dir/w.yaml"
	printf 'routes: []\n' >>"$dir/w.yaml"
	kill -HUP "$pid"
	for _ in $(seq 1 100); do grep -q reloaded "$dir/err" && break; sleep 0.05; done
	n2=$(curl -s -H "Authorization: Bearer $ALICE" "$base/api/v1/keys" | jq '.keys|length')
	kill "$pid"
	wait "$pid" || true
	[ "$n1" -eq 4 ]
	[ "$n2" -eq 0 ]
	grep -q "stopping on signal 15" "$dir/err"
}

@test "the control endpoints exist only with --control" {
	dir=$BATS_TEST_TMPDIR/nc
	mkdir -p "$dir"
	render "$FIX/worlds/principals.yaml" >"$dir/w.yaml"
	nyx-sandboxd --world "$dir/w.yaml" --port-file "$dir/port" -q 3>&- &
	pid=$!
	for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(cat "$dir/port")/_nyx/requests")
	kill "$pid"
	wait "$pid" || true
	[ "$code" = 404 ]
}

@test "start-up errors: missing world 66, bad world 65, bad --listen 64, no --world 64" {
	run -66 nyx-sandboxd --world /nonexistent.yaml
	printf 'routes: {a: 1}\n' >"$BATS_TEST_TMPDIR/w.yaml"
	run -65 --separate-stderr nyx-sandboxd --world "$BATS_TEST_TMPDIR/w.yaml"
	[[ $stderr == *"world_invalid"* ]]
	printf 'routes: []\n' >"$BATS_TEST_TMPDIR/w.yaml"
	run -64 nyx-sandboxd --world "$BATS_TEST_TMPDIR/w.yaml" --listen nowhere
	run -65 nyx-sandboxd --world "$BATS_TEST_TMPDIR/w.yaml" --faults "$BATS_TEST_TMPDIR/w.yaml"
	run -64 nyx-sandboxd
}

@test "the control plane needs its bearer (PRODUCT 11)" {
	local url=$NYX_TEST_BASE/_nyx/requests
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$url")" = 401 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ctl-wrong-token-0000' "$url")" = 401 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ALICE" "$url")" = 401 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $SANDBOXD_CONTROL_TOKEN" "$url")" = 200 ]
	# a refused control request changes nothing
	run -0 curl -s -X PUT --data-binary 'routes: []' "$NYX_TEST_BASE/_nyx/world"
	run -0 get "$ALICE" /api/v1/user-services
	body_of | jq -e '.services|length>0'
	printf 'routes: []\n' >"$BATS_TEST_TMPDIR/w.yaml"
	run -64 nyx-sandboxd --world "$BATS_TEST_TMPDIR/w.yaml" --control
	run -64 nyx-sandboxd --world "$BATS_TEST_TMPDIR/w.yaml" --control-token-file "$SANDBOXD_DIR/control.token"
	printf 'short\n' >"$BATS_TEST_TMPDIR/t"
	chmod 600 "$BATS_TEST_TMPDIR/t"
	run -78 nyx-sandboxd --world "$BATS_TEST_TMPDIR/w.yaml" --control --control-token-file "$BATS_TEST_TMPDIR/t"
}

@test "a non-loopback --listen needs --allow-remote" {
	printf 'routes: []\n' >"$BATS_TEST_TMPDIR/w.yaml"
	run -64 --separate-stderr nyx-sandboxd --world "$BATS_TEST_TMPDIR/w.yaml" --listen 0.0.0.0:0
	[[ $stderr == *listen_not_loopback* ]]
	run -64 nyx-sandboxd --world "$BATS_TEST_TMPDIR/w.yaml" --listen '[::]:0'
	dir=$BATS_TEST_TMPDIR/remote
	mkdir -p "$dir"
	nyx-sandboxd --world "$BATS_TEST_TMPDIR/w.yaml" --listen 0.0.0.0:0 --allow-remote \
		--port-file "$dir/port" -q 3>&- &
	pid=$!
	for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
	kill "$pid"
	wait "$pid" || true
	grep -Eq '^[0-9]+$' "$dir/port"
}

@test "the port file: a planted link is never followed" {
	dir=$BATS_TEST_TMPDIR/plant
	mkdir -p "$dir"
	printf 'precious\n' >"$dir/victim"
	printf 'routes: []\n' >"$dir/w.yaml"
	# exec keeps the pid: the link sits where a predictable temporary
	# name (PATH.PID.tmp) would be, and at the port file itself
	(
		ln -s "$dir/victim" "$dir/port.$BASHPID.tmp"
		exec nyx-sandboxd --world "$dir/w.yaml" --port-file "$dir/port" -q 3>&-
	) &
	pid=$!
	for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
	kill "$pid"
	wait "$pid" || true
	[ "$(cat "$dir/victim")" = precious ]
	[ -f "$dir/port" ] && [ ! -L "$dir/port" ]
	grep -Eq '^[0-9]+$' "$dir/port"
	[ "$(stat -c %a "$dir/port")" = 644 ]
}

@test "listens on IPv6 loopback too" {
	dir=$BATS_TEST_TMPDIR/v6
	mkdir -p "$dir"
	render "$FIX/worlds/principals.yaml" >"$dir/w.yaml"
	printf 'routes: []\n' >>"$dir/w.yaml"
	nyx-sandboxd --world "$dir/w.yaml" --listen '[::1]:0' --port-file "$dir/port" -q 3>&- &
	pid=$!
	for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
	if [ ! -s "$dir/port" ]; then
		kill "$pid" 2>/dev/null || true
		skip "no IPv6 loopback on this machine"
	fi
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ALICE" "http://[::1]:$(cat "$dir/port")/api/v1/keys")
	kill "$pid"
	wait "$pid" || true
	[ "$code" = 200 ]
}

# ---- the NyxID proxy and Chrono's /execute ----

# proxy AS PATH [curl args...]: POST a program through the proxy.
proxy() {
	local who=$1 path=$2
	shift 2
	curl -s -w '\n%{http_code}' -X POST -H "Authorization: Bearer $who" \
		-H 'Content-Type: application/json' "$NYX_TEST_BASE$path" "$@"
}

PY42='{"language":"python","script":"print(6*7)","timeout_secs":10}'

# The sandbox's waiting process is reaped when its result is freed, not
# when the run's pipes close: a long-lived server must still reap them
# all, whatever the run's end.
@test "runs leave no unreaped process behind: success, failure, timeout" {
	reset_world "$FIX/code-exec/routes.yaml"
	local u="/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1"
	for body in "$PY42" '{"language":"bash","script":"exit 3","timeout_secs":10}' \
		'{"language":"bash","script":"sleep 30","timeout_secs":1}' \
		'{"language":"bash","script":"kill -9 $$","timeout_secs":10}'; do
		run -0 proxy "$ALICE" "$u" -d "$body"
	done
	sleep 0.2
	zombies=$(ps -o stat=,pid= --ppid "$SANDBOXD_PID" | awk '$1 ~ /^Z/' | wc -l)
	children=$(ps -o pid= --ppid "$SANDBOXD_PID" | wc -l)
	[ "$zombies" -eq 0 ]
	[ "$children" -eq 0 ]
}

@test "proxy: _nyxid_via must exist, match the slug and be usable by the caller" {
	reset_world "$FIX/code-exec/routes.yaml"
	run -0 proxy "$ALICE" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" -d "$PY42"
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.success==true and .output.stdout=="42\n" and (.diagnostic_id|startswith("chrono-"))'
	run -0 proxy "$ALICE" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-none" -d "$PY42"
	[ "$(status_of)" = 404 ]
	body_of | jq -e '.error=="not_found" and .message=="Not found: UserService '"'"'us-none'"'"' not found"'
	run -0 proxy "$ALICE" "/api/v1/proxy/s/chrono-sandbox-aevatar/execute?_nyxid_via=us-1" -d "$PY42"
	[ "$(status_of)" = 400 ]
	body_of | jq -e '.error=="bad_request" and .error_code==1000 and (.message|contains("has slug '"'"'chrono-sandbox'"'"'"))'
	run -0 proxy "$ALICE" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-noforward" -d "$PY42"
	[ "$(status_of)" = 403 ]
	body_of | jq -e '.error=="org_role_insufficient" and .error_code==8103'
}

@test "proxy: org viewers and admin_only routes are refused; members pass" {
	reset_world "$FIX/nyx-route-inspect/org-routes.yaml"
	run -0 proxy "$CAROL" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-acme" -d "$PY42"
	[ "$(status_of)" = 403 ]
	run -0 proxy "$BOB" "/api/v1/proxy/s/chrono-sandbox-aevatar/execute?_nyxid_via=us-acme-admin" -d "$PY42"
	[ "$(status_of)" = 403 ]
	run -0 proxy "$BOB" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-acme" -d "$PY42"
	[ "$(status_of)" = 200 ]
	run -0 proxy "$ALICE" "/api/v1/proxy/s/chrono-sandbox-aevatar/execute?_nyxid_via=us-acme-admin" -d "$PY42"
	[ "$(status_of)" = 200 ]
}

@test "proxy: an Agent Key only reaches its allowlisted routes" {
	reset_world "$FIX/code-exec/routes.yaml" "$FIX/nyx-sandboxd/extra-agent-route.yaml"
	run -0 proxy "$ALICE_AGENT" "/api/v1/proxy/s/chrono-sandbox-aevatar/execute?_nyxid_via=us-alias" -d "$PY42"
	[ "$(status_of)" = 403 ]
	body_of | jq -e '.error=="api_key_scope_forbidden" and .error_code==9000'
	run -0 proxy "$ALICE_AGENT" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" -d "$PY42"
	[ "$(status_of)" = 200 ]
}

@test "proxy: tokens without a proxy scope are refused" {
	reset_world "$FIX/code-exec/routes.yaml"
	run -0 proxy "$ALICE_DELEG_READ" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" -d "$PY42"
	[ "$(status_of)" = 200 ] # account:read proxy:*
	run -0 curl -s -o /dev/null -w '%{http_code}' -X POST "$NYX_TEST_BASE/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" -d "$PY42"
	[ "$output" = 401 ]
	# a user token whose scope has neither proxy nor proxy:*
	narrow=$(mint_jwt '{"sub":"u-alice","token_type":"access","scope":"openid profile"}')
	{ render "$FIX/worlds/principals.yaml" |
		sed "s|^tokens:|tokens:\n  - {token: \"$narrow\", user: u-alice, kind: user, scope: \"openid profile\"}|"
	  cat "$FIX/code-exec/routes.yaml"; } |
		ctl -X PUT --data-binary @- "$NYX_TEST_BASE/_nyx/world"
	run -0 proxy "$narrow" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" -d "$PY42"
	[ "$(status_of)" = 403 ]
	body_of | jq -e '.error=="forbidden" and (.message|contains("Expected one of: proxy, proxy:*"))'
}

@test "proxy: without _nyxid_via the caller's own route with that slug is used" {
	reset_world "$FIX/code-exec/routes.yaml"
	run -0 proxy "$BOB" "/api/v1/proxy/s/chrono-sandbox/execute" -d "$PY42"
	[ "$(status_of)" = 200 ]
	run -0 requests
	printf '%s\n' "$output" | tail -n 1 | jq -e '.forwarded_authorization==false and .nyxid_via==null'
}

@test "forwarding follows the route policy; Chrono checks sandbox:execute" {
	reset_world "$FIX/code-exec/routes.yaml"
	# us-noscope: the delegation token lacks sandbox:execute
	run -0 proxy "$CAROL" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-noscope" -d "$PY42"
	[ "$(status_of)" = 403 ]
	body_of | jq -e '.error.code=="FORBIDDEN" and (.diagnostic_id|startswith("chrono-"))'
	# a route that injects no delegation token at all
	sed 's/inject_delegation_token: true/inject_delegation_token: false/' "$FIX/code-exec/routes.yaml" >"$BATS_TEST_TMPDIR/r.yaml"
	reset_world "$BATS_TEST_TMPDIR/r.yaml"
	run -0 proxy "$ALICE" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" -d "$PY42"
	[ "$(status_of)" = 401 ]
	body_of | jq -e '.error.code=="UNAUTHENTICATED"'
	run -0 requests
	printf '%s\n' "$output" | tail -n 1 | jq -e '.delegation_scope==null and .forwarded_authorization==true'
}

@test "Chrono: NYXID_API_KEY is the forwarded Agent Key and cannot be overridden" {
	reset_world "$FIX/code-exec/routes.yaml"
	body='{"language":"bash","script":"echo \"$NYXID_API_KEY|$NYXID_BASE_URL\"","timeout_secs":10}'
	run -0 proxy "$ALICE_AGENT" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" -d "$body"
	[ "$(body_of | jq -r .output.stdout)" = "$ALICE_AGENT|$NYX_TEST_BASE" ]
	# a user bearer is forwarded but never injected
	run -0 proxy "$ALICE" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" -d "$body"
	[ "$(body_of | jq -r .output.stdout)" = "|" ]
	# a caller's env cannot even name them: the request is refused
	run -0 proxy "$ALICE_AGENT" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" \
		-d '{"language":"bash","script":"echo x","env":{"NYXID_API_KEY":"evil"}}'
	[ "$(status_of)" = 400 ]
}

@test "Chrono: invalid requests are INVALID_REQUEST, unknown paths 404" {
	reset_world "$FIX/code-exec/routes.yaml"
	for b in 'not json' '{"language":"cobol","script":"x","timeout_secs":5}' \
		'{"language":"python","script":1}' '{"language":"python","script":"x","timeout_secs":0}' \
		'{"language":"python","script":"x","timeout_secs":2.5}' '{"language":"python","script":"x","files":[]}' \
		'{"language":"python","script":"x","env":{"A":"1"}}' '{"language":"python","script":"x","y":1}'; do
		run -0 proxy "$ALICE" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" -d "$b"
		[ "$(status_of)" = 400 ]
		body_of | jq -e '.error.code=="INVALID_REQUEST"'
	done
	run -0 proxy "$ALICE" "/api/v1/proxy/s/chrono-sandbox/nothing?_nyxid_via=us-1" -d '{}'
	[ "$(status_of)" = 404 ]
	run -0 proxy "$ALICE" "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1" -d '{"language":"python","script":"import sys; sys.exit(3)","timeout_secs":5}'
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.success==false and .error.code=="EXECUTION_FAILED" and .output.exit_code==3'
}

@test "proxy: a route of another service has no upstream here (500)" {
	reset_world "$FIX/nyx-sandboxd/routes.yaml"
	run -0 proxy "$ALICE" "/api/v1/proxy/s/old-route/x?_nyxid_via=us-off" -d '{}'
	[ "$(status_of)" = 404 ] # inactive
	run -0 proxy "$ALICE" "/api/v1/proxy/s/acme-admin-tool/x?_nyxid_via=us-acme-admin" -d '{}'
	[ "$(status_of)" = 500 ]
	body_of | jq -e '.error=="internal_error"'
}

# ---- route writes (PUT /user-services/{id}, POST /keys) ----

# write AS METHOD PATH BODY
write() {
	curl -s -w '\n%{http_code}' -X "$2" -H "Authorization: Bearer $1" \
		-H 'Content-Type: application/json' "$NYX_TEST_BASE$3" -d "$4"
}

@test "PUT updates the policy fields; the single-item answer says personal" {
	reset_world "$FIX/nyx-route-converge/org-drift.yaml"
	run -0 write "$ALICE" PUT /api/v1/user-services/us-acme '{"inject_delegation_token":true,"delegation_token_scope":"  proxy:*   sandbox:execute "}'
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.id=="us-acme" and .inject_delegation_token==true and .forward_access_token==true and .delegation_token_scope=="proxy:* sandbox:execute" and .credential_source=={"type":"personal"}'
	# the list still reports the org source; the update took
	run -0 get "$ALICE" /api/v1/user-services
	body_of | jq -e '.services[0].credential_source.type=="org" and .services[0].inject_delegation_token==true'
	# an empty scope becomes NyxID's default
	run -0 write "$ALICE" PUT /api/v1/user-services/us-acme '{"delegation_token_scope":" "}'
	body_of | jq -e '.delegation_token_scope=="llm:proxy"'
}

@test "PUT: unknown scopes 400, members and viewers 403, unseen routes 404" {
	reset_world "$FIX/nyx-route-converge/org-drift.yaml"
	run -0 write "$ALICE" PUT /api/v1/user-services/us-acme '{"delegation_token_scope":"proxy:* account:admin"}'
	[ "$(status_of)" = 400 ]
	body_of | jq -e '.error=="validation_error" and .error_code==1008 and (.message|contains("account:admin"))'
	for who in "$BOB" "$CAROL"; do
		run -0 write "$who" PUT /api/v1/user-services/us-acme '{"forward_access_token":true}'
		[ "$(status_of)" = 403 ]
		body_of | jq -e '.error=="org_role_insufficient" and .error_code==8103'
	done
	run -0 write "$ALICE" PUT /api/v1/user-services/us-nope '{"forward_access_token":true}'
	[ "$(status_of)" = 404 ]
	body_of | jq -e '.message=="Not found: User service not found"'
	reset_world "$FIX/nyx-route-converge/personal-drift.yaml"
	run -0 write "$BOB" PUT /api/v1/user-services/us-1 '{"forward_access_token":true}'
	[ "$(status_of)" = 404 ] # another user's route: existence is not leaked
	for t in "$ALICE_AGENT" "$ALICE_DELEG_READ"; do
		run -0 write "$t" PUT /api/v1/user-services/us-1 '{"forward_access_token":true}'
		[ "$(status_of)" = 403 ]
	done
}

@test "POST /keys creates a personal alias; the same slug again is 409" {
	reset_world "$FIX/nyx-route-converge/auto-connected.yaml"
	body='{"service_slug":"chrono-sandbox","slug":"chrono-sandbox-aevatar","label":"Aevatar Code Execution","forward_access_token":true,"inject_delegation_token":true,"delegation_token_scope":"proxy:* sandbox:execute","node_id":"node-9"}'
	run -0 write "$ALICE" POST /api/v1/keys "$body"
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.slug=="chrono-sandbox-aevatar" and .catalog_service_id=="cat-sandbox" and .catalog_service_slug=="chrono-sandbox" and .auto_connected==false and .node_id=="node-9" and (.id|startswith("us-"))'
	run -0 write "$ALICE" POST /api/v1/keys "$body"
	[ "$(status_of)" = 409 ]
	body_of | jq -e '.error=="conflict" and .error_code==1004 and .message=="Conflict: Service slug '"'"'chrono-sandbox-aevatar'"'"' is already in use"'
	run -0 write "$ALICE" POST /api/v1/keys '{"service_slug":"no-such-service","label":"x"}'
	[ "$(status_of)" = 404 ]
	run -0 write "$ALICE" POST /api/v1/keys '{"service_slug":"chrono-sandbox","slug":"other"}'
	[ "$(status_of)" = 400 ]
	run -0 write "$ALICE" POST /api/v1/keys 'not json'
	[ "$(status_of)" = 400 ]
}

@test "the request log keeps a write's body, never a proxy body" {
	reset_world "$FIX/nyx-route-converge/org-drift.yaml"
	run -0 write "$ALICE" PUT /api/v1/user-services/us-acme '{"forward_access_token":true}'
	run -0 requests
	printf '%s\n' "$output" | tail -n 1 | jq -e '.body=={"forward_access_token":true}'
}

# ---- Chrono's durable /executions ----

KEY="tool:v1:operation:0000000000000000000000000000000000000000000000000000000000000001"

# dx AS METHOD PATH [curl args...]: a durable call through the proxy.
dx() {
	local who=$1 m=$2 path=$3
	shift 3
	curl -s -D "$BATS_TEST_TMPDIR/h" -w '\n%{http_code}' -X "$m" -H "Authorization: Bearer $who" \
		"$NYX_TEST_BASE/api/v1/proxy/s/chrono-sandbox/executions$path?_nyxid_via=us-1" "$@"
}

hdr() {
	grep -i "^$1:" "$BATS_TEST_TMPDIR/h" | cut -d' ' -f2- | tr -d '\r'
}

# wait_status AS OP STATUS: poll until the operation has that status.
wait_status() {
	for _ in $(seq 1 100); do
		run -0 dx "$1" GET "/$2"
		[ "$(body_of | jq -r .status)" = "$3" ] && return 0
		sleep 0.1
	done
	return 1
}

@test "executions: submit needs an Idempotency-Key; same key and body converge, another body is 409" {
	reset_world "$FIX/code-exec/routes.yaml"
	b='{"language":"python","script":"print(6*7)","timeout_secs":10}'
	run -0 dx "$ALICE" POST "" -d "$b"
	[ "$(status_of)" = 400 ]
	body_of | jq -e '.error.code=="IDEMPOTENCY_KEY_MISSING"'
	run -0 dx "$ALICE" POST "" -H "Idempotency-Key: $KEY" -d "$b"
	[ "$(status_of)" = 202 ]
	body_of | jq -e '(.operation_id|test("^op_[A-Za-z0-9_-]{32}$")) and .status=="queued" and .version==1 and (.expires_at>=.created_at)'
	op=$(body_of | jq -r .operation_id)
	[ "$(hdr ETag)" = '"v1"' ]
	[ "$(hdr Location)" = "/api/v1/proxy/s/chrono-sandbox/executions/$op" ]
	run -0 dx "$ALICE" POST "" -H "Idempotency-Key: $KEY" -d "$b"
	[ "$(status_of)" = 202 ]
	[ "$(body_of | jq -r .operation_id)" = "$op" ]
	run -0 dx "$ALICE" POST "" -H "Idempotency-Key: $KEY" -d '{"language":"python","script":"print(1)"}'
	[ "$(status_of)" = 409 ]
	body_of | jq -e '.error.code=="IDEMPOTENCY_KEY_REUSE"'
	wait_status "$ALICE" "$op" succeeded
}

@test "executions: status with ETag and 304, result 409 until terminal, then retained" {
	reset_world "$FIX/code-exec/routes.yaml"
	# operations outlive world swaps: each test uses keys of its own
	run -0 dx "$ALICE" POST "" -H "Idempotency-Key: ${KEY%1}5" -d '{"language":"bash","script":"sleep 1; echo done","timeout_secs":10}'
	op=$(body_of | jq -r .operation_id)
	run -0 dx "$ALICE" GET "/$op/result"
	[ "$(status_of)" = 409 ]
	body_of | jq -e '.error.code=="OPERATION_NOT_TERMINAL"'
	[ "$(hdr Retry-After)" = 1 ]
	run -0 dx "$ALICE" GET "/$op"
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.operation_id=="'"$op"'" and (.status|IN("queued","provisioning","running")) and .cancel_requested==false'
	[[ $(hdr ETag) == '"v'*'"' ]]
	wait_status "$ALICE" "$op" succeeded
	body_of | jq -e '.result_available==true and .phase=="complete" and (.terminal_at|type)=="string"'
	[ -z "$(hdr Retry-After)" ]
	# terminal, the version no longer moves: the ETag answers 304
	etag=$(hdr ETag)
	run -0 dx "$ALICE" GET "/$op" -H "If-None-Match: $etag"
	[ "$(status_of)" = 304 ]
	[ "$(hdr ETag)" = "$etag" ]
	[ -z "$(body_of)" ]
	run -0 dx "$ALICE" GET "/$op" -H 'If-None-Match: "v0"'
	[ "$(status_of)" = 200 ]
	run -0 dx "$ALICE" GET "/$op/result"
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.success==true and .output.stdout=="done\n" and .output.exit_code==0'
	# another caller cannot reach it through this route
	run -0 dx "$BOB" GET "/$op"
	[ "$(status_of)" = 403 ] || [ "$(status_of)" = 404 ]
}

@test "executions: failures, timeouts and cancels keep Chrono's shapes" {
	reset_world "$FIX/code-exec/routes.yaml"
	run -0 dx "$ALICE" POST "" -H "Idempotency-Key: ${KEY%1}2" -d '{"language":"bash","script":"echo out; exit 3","timeout_secs":10}'
	op=$(body_of | jq -r .operation_id)
	wait_status "$ALICE" "$op" failed
	run -0 dx "$ALICE" GET "/$op/result"
	body_of | jq -e '.success==false and .output.exit_code==3 and .error.code=="EXECUTION_FAILED"'
	run -0 dx "$ALICE" POST "" -H "Idempotency-Key: ${KEY%1}3" -d '{"language":"bash","script":"sleep 30","timeout_secs":1}'
	op=$(body_of | jq -r .operation_id)
	wait_status "$ALICE" "$op" failed
	run -0 dx "$ALICE" GET "/$op/result"
	body_of | jq -e '.success==false and (has("output")|not) and .error.code=="SANDBOX_TIMEOUT"'
	run -0 dx "$ALICE" POST "" -H "Idempotency-Key: ${KEY%1}4" -d '{"language":"bash","script":"sleep 30","timeout_secs":60}'
	op=$(body_of | jq -r .operation_id)
	wait_status "$ALICE" "$op" running
	t0=$(date +%s%3N)
	run -0 dx "$ALICE" POST "/$op/cancel" -d '{}'
	[ "$(status_of)" = 202 ]
	body_of | jq -e '.cancel_requested==true'
	wait_status "$ALICE" "$op" cancelled
	[ $(($(date +%s%3N) - t0)) -lt 3000 ]
	run -0 dx "$ALICE" GET "/$op/result"
	body_of | jq -e '.success==false and .error.code=="EXECUTION_CANCELLED"'
	run -0 dx "$ALICE" POST "/$op/cancel" -d '{}'
	[ "$(status_of)" = 200 ]
	run -0 dx "$ALICE" GET "/op_nosuchoperation00000000000000000"
	[ "$(status_of)" = 404 ]
	body_of | jq -e '.error.code=="OPERATION_NOT_FOUND"'
}

# A private server with a store, for restarts.
store_server() {
	SDIR=$BATS_TEST_TMPDIR/store
	mkdir -p "$SDIR"
	{ render "$FIX/worlds/principals.yaml"; cat "$FIX/code-exec/routes.yaml"; } >"$SDIR/w.yaml"
	rm -f "$SDIR/port"
	nyx-sandboxd --world "$SDIR/w.yaml" --store "$SDIR/ops.db" --port-file "$SDIR/port" -q "$@" 3>&- &
	SPID=$!
	for _ in $(seq 1 200); do [ -s "$SDIR/port" ] && break; sleep 0.05; done
	SBASE="http://127.0.0.1:$(cat "$SDIR/port")/api/v1/proxy/s/chrono-sandbox/executions"
}

sx() {
	local m=$1 path=$2
	shift 2
	curl -s -w '\n%{http_code}' -X "$m" -H "Authorization: Bearer $ALICE" "$SBASE$path?_nyxid_via=us-1" "$@"
}

@test "--store: results survive a restart; a run cut by kill -9 is outcome_uncertain, never rerun" {
	store_server
	run -0 sx POST "" -H "Idempotency-Key: $KEY" -d '{"language":"bash","script":"echo kept","timeout_secs":10}'
	done_op=$(body_of | jq -r .operation_id)
	for _ in $(seq 1 50); do
		run -0 sx GET "/$done_op"
		[ "$(body_of | jq -r .status)" = succeeded ] && break
		sleep 0.1
	done
	run -0 sx POST "" -H "Idempotency-Key: ${KEY%1}9" -d '{"language":"bash","script":"sleep 30","timeout_secs":60}'
	cut_op=$(body_of | jq -r .operation_id)
	sleep 1
	kill -9 "$SPID"
	wait "$SPID" 2>/dev/null || true
	store_server
	run -0 sx GET "/$done_op/result"
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.output.stdout=="kept\n"'
	run -0 sx GET "/$cut_op"
	body_of | jq -e '.status=="outcome_uncertain" and .result_available==true'
	run -0 sx GET "/$cut_op/result"
	body_of | jq -e '.success==false and .error.code=="OUTCOME_UNCERTAIN"'
	# the same key converges on the same operation, which is not run again
	run -0 sx POST "" -H "Idempotency-Key: ${KEY%1}9" -d '{"language":"bash","script":"sleep 30","timeout_secs":60}'
	[ "$(body_of | jq -r .operation_id)" = "$cut_op" ]
	[ "$(body_of | jq -r .status)" = outcome_uncertain ]
	# the store holds programs: it and SQLite's -wal and -shm are the owner's alone
	[ -e "$SDIR/ops.db-wal" ]
	[ -e "$SDIR/ops.db-shm" ]
	[ "$(stat -c %a "$SDIR/ops.db" "$SDIR/ops.db-wal" "$SDIR/ops.db-shm" | sort -u)" = 600 ]
	kill "$SPID"
	wait "$SPID" 2>/dev/null || true
	[ "$(stat -c %a "$SDIR/ops.db")" = 600 ]
}

@test "--retention: an operation past its expiry is 410 OPERATION_EXPIRED" {
	store_server --retention 1
	run -0 sx POST "" -H "Idempotency-Key: $KEY" -d '{"language":"bash","script":"true","timeout_secs":5}'
	op=$(body_of | jq -r .operation_id)
	sleep 1.5
	run -0 sx GET "/$op"
	[ "$(status_of)" = 410 ]
	body_of | jq -e '.error.code=="OPERATION_EXPIRED"'
	kill "$SPID"
	wait "$SPID" 2>/dev/null || true
	run -64 nyx-sandboxd --world "$SDIR/w.yaml" --retention 0
}

@test "fault plans: a 202 dropped or delayed after the operation was created" {
	reset_world "$FIX/code-exec/routes.yaml"
	printf 'faults:\n  - {method: POST, path: "/api/v1/proxy/s/*/executions", nth: 1, drop_after: true}\n' | put_faults
	b='{"language":"bash","script":"echo once","timeout_secs":10}'
	run dx "$ALICE" POST "" -H "Idempotency-Key: ${KEY%1}6" -d "$b"
	[ "$status" -eq 52 ] # no answer at all
	# the operation exists: the same key finds it
	run -0 dx "$ALICE" POST "" -H "Idempotency-Key: ${KEY%1}6" -d "$b"
	[ "$(status_of)" = 202 ]
	op=$(body_of | jq -r .operation_id)
	wait_status "$ALICE" "$op" succeeded
	run -0 requests
	printf '%s\n' "$output" | jq -s -e 'map(select(.path|endswith("/executions")))|.[0].dropped==true and .[1].dropped==false'
	printf 'faults:\n  - {method: POST, path: "/api/v1/proxy/s/*/executions", delay_after_ms: 1200}\n' | put_faults
	t0=$(date +%s%3N)
	run -0 dx "$ALICE" POST "" -H "Idempotency-Key: ${KEY%1}7" -d "$b"
	[ "$(status_of)" = 202 ]
	[ $(($(date +%s%3N) - t0)) -ge 1200 ]
}

# PRODUCT 11 (rev 2): a server for people, ssh-agent style.
@test "--detach prints eval-able NYX_BASE_URL and NYX_SANDBOXD_PID once listening" {
	local w="$BATS_TEST_TMPDIR/world.yaml"
	render "$FIX/worlds/principals.yaml" "$FIX/nyx-sandboxd/routes.yaml" >"$w"
	run -0 --separate-stderr nyx-sandboxd --world "$w" --detach 3>&-
	[[ $output =~ ^NYX_BASE_URL=\'http://127\.0\.0\.1:[0-9]+\'\;\ export\ NYX_BASE_URL\; ]]
	eval "$output"
	# listening already: no wait, no port file, no race
	run -0 curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ALICE" "$NYX_BASE_URL/api/v1/keys"
	[ "$output" = 200 ]
	kill -0 "$NYX_SANDBOXD_PID"
	# its own session: it survives the shell that started it
	[ "$(ps -o sid= -p "$NYX_SANDBOXD_PID" | tr -d ' ')" = "$NYX_SANDBOXD_PID" ]
	kill "$NYX_SANDBOXD_PID"
	for _ in $(seq 1 50); do kill -0 "$NYX_SANDBOXD_PID" 2>/dev/null || break; sleep 0.1; done
	not kill -0 "$NYX_SANDBOXD_PID" 2>/dev/null
	# a server that cannot start says why, and the exit is its own
	run -66 --separate-stderr nyx-sandboxd --world "$BATS_TEST_TMPDIR/none.yaml" --detach
	[ -z "$output" ]
	[[ $stderr == *none.yaml* ]]
}

@test "several --world files merge: lists concatenate, later keys win" {
	local d="$BATS_TEST_TMPDIR/w" port
	mkdir -p "$d"
	render "$FIX/worlds/principals.yaml" >"$d/people.yaml"
	render "$FIX/nyx-sandboxd/routes.yaml" >"$d/routes.yaml"
	nyx-sandboxd --world "$d/people.yaml" --world "$d/routes.yaml" --port-file "$d/port" 2>"$d/stderr" 3>&- &
	pid=$!
	for _ in $(seq 1 100); do [ -s "$d/port" ] && break; sleep 0.05; done
	port=$(cat "$d/port")
	run -0 curl -s -H "Authorization: Bearer $ALICE" "http://127.0.0.1:$port/api/v1/user-services"
	# Alice (from the first file) sees the routes (from the second)
	[ "$(jq '.user_services // . | length' <<<"$output")" -ge 1 ]
	kill "$pid"
	wait "$pid" || true
}
