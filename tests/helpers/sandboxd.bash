# Start one real nyx-sandboxd per bats file (setup_file), drive it through
# its /_nyx/ control endpoints, stop it in teardown_file.
# shellcheck shell=bash

# sandboxd_start WORLD_FILE [extra flags...]
sandboxd_start() {
	local world=$1
	shift
	SANDBOXD_DIR="$BATS_FILE_TMPDIR/sandboxd"
	mkdir -p "$SANDBOXD_DIR"
	render "$world" >"$SANDBOXD_DIR/world.yaml"
	rm -f "$SANDBOXD_DIR/port"
	# the control plane's bearer (PRODUCT 11)
	SANDBOXD_CONTROL_TOKEN=ctl-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf '%s\n' "$SANDBOXD_CONTROL_TOKEN" >"$SANDBOXD_DIR/control.token"
	chmod 600 "$SANDBOXD_DIR/control.token"
	export SANDBOXD_CONTROL_TOKEN
	# 3>&- : bats waits for fd 3 to close before it finishes a file
	nyx-sandboxd --world "$SANDBOXD_DIR/world.yaml" --control \
		--control-token-file "$SANDBOXD_DIR/control.token" \
		--port-file "$SANDBOXD_DIR/port" "$@" \
		2>"$SANDBOXD_DIR/stderr" 3>&- &
	SANDBOXD_PID=$!
	for _ in $(seq 1 200); do
		[ -s "$SANDBOXD_DIR/port" ] && break
		kill -0 "$SANDBOXD_PID" 2>/dev/null || break
		sleep 0.05
	done
	[ -s "$SANDBOXD_DIR/port" ] || {
		cat "$SANDBOXD_DIR/stderr" >&2
		return 1
	}
	NYX_TEST_BASE="http://127.0.0.1:$(cat "$SANDBOXD_DIR/port")"
	export SANDBOXD_PID SANDBOXD_DIR NYX_TEST_BASE
}

# Stop the server; fail when a sanitizer or valgrind reported anything in
# it (a background process cannot fail a test through its exit code).
sandboxd_stop() {
	if [ -n "${SANDBOXD_PID:-}" ]; then
		kill "$SANDBOXD_PID" 2>/dev/null || true
		wait "$SANDBOXD_PID" 2>/dev/null || true
	fi
	if grep -Eq 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:|==[0-9]+== .*(Invalid|uninitialised|definitely lost)' \
		"$SANDBOXD_DIR/stderr" 2>/dev/null; then
		cat "$SANDBOXD_DIR/stderr" >&2
		return 1
	fi
}

# ctl ARGS...: curl the control plane with its bearer.
ctl() {
	curl -sf -H "Authorization: Bearer $SANDBOXD_CONTROL_TOKEN" "$@"
}

# put_world FILE...: principals + the given route files become the world.
put_world() {
	render "$FIX/worlds/principals.yaml" "$@" |
		ctl -X PUT --data-binary @- "$NYX_TEST_BASE/_nyx/world"
}

# put_faults: the fault plan on stdin (YAML); no input clears it.
put_faults() {
	ctl -X PUT --data-binary @- "$NYX_TEST_BASE/_nyx/faults"
}

clear_faults() {
	printf 'faults: []\n' | put_faults
}

clear_requests() {
	ctl -X DELETE "$NYX_TEST_BASE/_nyx/requests"
}

# The request log as NDJSON.
requests() {
	ctl "$NYX_TEST_BASE/_nyx/requests"
}

request_count() {
	requests | grep -c . || true
}

# A fresh test: given routes, no faults, an empty request log.
reset_world() {
	put_world "$@" && clear_faults && clear_requests
}

# The server's operations as NDJSON: operation_id, key_sha256, status,
# runs (how many times each program was started).
executions() {
	ctl "$NYX_TEST_BASE/_nyx/executions" | jq -c '.[]'
}
