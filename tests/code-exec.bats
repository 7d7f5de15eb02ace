#!/usr/bin/env bats
# code-exec: the local sandbox (real programs in bubblewrap) and the sync
# /execute path through a real nyx-sandboxd (WIRE 4 and 6).

load helpers/suite

setup() {
	suite_setup "$FIX/code-exec/routes.yaml"
	ALICE_TOK=$(token_file "$ALICE")
	AGENT_TOK=$(token_file "$ALICE_AGENT")
}

local_run() {
	code-exec --backend local "$@"
}

# An admission for us-1, as nyx-route-inspect prints it.
admission() {
	nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$ALICE_TOK"
}

sync_run() {
	code-exec --sync --base-url "$NYX_TEST_BASE" --token-file "$ALICE_TOK" "$@"
}

now_ms() { date +%s%3N; }

# ---- local sandbox ----

@test "local: an Agent Key is the program's NYXID_API_KEY, as in production (WIRE 6)" {
	prog='import os, hashlib; k = os.environ.get("NYXID_API_KEY", ""); print(hashlib.sha256(k.encode()).hexdigest(), os.environ.get("NYXID_BASE_URL"))'
	run -0 --separate-stderr local_run --exec-token-file "$AGENT_TOK" --base-url http://127.0.0.1:9 -l python -e "$prog"
	[ "$(last_line | jq -r .output.stdout)" = "$(printf '%s' "$ALICE_AGENT" | sha256sum | cut -c1-64) http://127.0.0.1:9" ]
	# a caller's own variable never reaches it, and a user token is never injected
	NYXID_API_KEY=caller-value run -0 local_run --exec-token-file "$ALICE_TOK" -l python -e 'import os; print(os.environ.get("NYXID_API_KEY"))'
	[ "$(last_line | jq -r .output.stdout)" = "None" ]
}

# libcurl and its 30 shared objects cost every process about 5 ms to map
# (bench/README.md): it is opened on the first HTTP exchange only.
@test "local: a local run never loads libcurl; a sync run opens it when it first speaks HTTP" {
	LD_DEBUG=files run -0 --separate-stderr local_run -l bash -e 'echo 1'
	jq_ok '.success==true and .output.stdout=="1\n"'
	[[ $stderr != *libcurl* ]]
	[[ $stderr == *libsqlite3* ]] # LD_DEBUG did list what was loaded
	LD_DEBUG=files run -0 --separate-stderr sync_run -l bash -e 'echo 1' </dev/null
	jq_ok '.success==true and .backend=="nyxid"'
	[[ $stderr == *"file=libcurl.so.4 [0];  dynamically loaded by"* ]]
	# no libcurl to be found: a clear error (71), no crash
	mkdir "$BATS_TEST_TMPDIR/lib"
	: >"$BATS_TEST_TMPDIR/lib/libcurl.so.4"
	LD_LIBRARY_PATH=$BATS_TEST_TMPDIR/lib run -71 --separate-stderr sync_run -l bash -e 'echo 1' </dev/null
	[[ $stderr == *"cannot start libcurl: "*"libcurl.so.4"* ]]
	# without HTTP, nothing needs it
	LD_LIBRARY_PATH=$BATS_TEST_TMPDIR/lib run -0 local_run -l bash -e 'echo 1'
}

# SQLite is opened with the first state file: a local run does that while
# bubblewrap sets up the sandbox (bench/README.md).
@test "local: SQLite is opened with the ledger, not at start-up; without it, a clear 71" {
	LD_DEBUG=files run -0 --separate-stderr local_run -l bash -e 'echo 1'
	jq_ok '.success==true and .output.stdout=="1\n"'
	[[ $stderr == *"file=libsqlite3.so.0 [0];  dynamically loaded by"* ]]
	[[ $stderr != *"file=libsqlite3.so.0 [0];  needed by"* ]]
	# no SQLite to be found: a clear error, no crash, and no program run
	mkdir "$BATS_TEST_TMPDIR/lib"
	: >"$BATS_TEST_TMPDIR/lib/libsqlite3.so.0"
	LD_LIBRARY_PATH=$BATS_TEST_TMPDIR/lib run -71 --separate-stderr local_run -l bash -e 'echo ran'
	jq_ok '.code=="sqlite_unavailable" and .exit==71'
	[[ $stderr == *"cannot start SQLite: "*"libsqlite3.so.0"* ]]
	[[ $output != *ran* ]]
	LD_LIBRARY_PATH=$BATS_TEST_TMPDIR/lib run -71 exec-status --list
}

@test "local: -f - reads the source from standard input" {
	run -0 --separate-stderr bash -c "printf 'print(6*7)\n' | code-exec --backend local -l python -f -"
	jq_ok '.success==true and .output.stdout=="42\n"'
}

@test "the main job: python prints 42 with no configuration at all" {
	run -0 --separate-stderr code-exec -l python -e 'print(6*7)'
	jq_ok '.type=="exec.result" and .v==1 and .backend=="local" and .success==true'
	jq_ok '.output.stdout=="42\n" and .output.stderr=="" and .output.exit_code==0'
	jq_ok '.output.stdout_truncated==false and .output.stderr_truncated==false'
	jq_ok '(.output.execution_time_ms|type)=="number" and (.diagnostic_id|test("^nyx-[0-9a-f]{32}$"))'
	[[ $stderr == *"notice: no NyxID base URL is configured"* ]]
	run -0 --separate-stderr code-exec -q -l python -e 'print(1)'
	# (valgrind 3.19 notes its own unknown syscalls, e.g. pidfd_open)
	[ -z "$(printf '%s' "$stderr" | grep -v '^--[0-9]*-- ')" ]
}

@test "javascript, bash and typescript run for real; languages are inferred" {
	run -0 local_run -l javascript -e 'console.log([1,2,3].map(x => x * 2).join(","))'
	jq_ok '.output.stdout=="2,4,6\n"'
	run -0 local_run -l bash -e 'echo "$((6 * 7))"; echo to-stderr >&2'
	jq_ok '.output.stdout=="42\n" and .output.stderr=="to-stderr\n"'
	printf 'const n: number = 6;\nconst f = (x: number): number => x * 7;\nconsole.log(f(n));\n' >"$BATS_TEST_TMPDIR/t.ts"
	run --separate-stderr local_run "$BATS_TEST_TMPDIR/t.ts"
	if [ "$status" -eq 71 ] && [[ $output == *LANGUAGE_UNAVAILABLE* ]]; then
		skip "no TypeScript here: $(last_line | jq -r .message)"
	fi
	[ "$status" -eq 0 ]
	jq_ok '.output.stdout=="42\n"'
	printf 'print("from a file")\n' >"$BATS_TEST_TMPDIR/p.py"
	run -0 local_run -f "$BATS_TEST_TMPDIR/p.py"
	jq_ok '.output.stdout=="from a file\n"'
	printf 'console.log("mjs")\n' >"$BATS_TEST_TMPDIR/m.mjs"
	run -0 local_run "$BATS_TEST_TMPDIR/m.mjs"
	jq_ok '.output.stdout=="mjs\n"'
	printf 'echo sh\n' >"$BATS_TEST_TMPDIR/s.sh"
	run -0 local_run "$BATS_TEST_TMPDIR/s.sh"
	jq_ok '.output.stdout=="sh\n"'
}

@test "a failing program keeps its output: exit 1, or its own code with --child-code" {
	run -1 --separate-stderr local_run -l bash -e 'echo partial; echo oops >&2; exit 7'
	jq_ok '.success==false and .output.exit_code==7 and .output.stdout=="partial\n" and .output.stderr=="oops\n"'
	jq_ok '.error=={"code":"EXECUTION_FAILED","kind":"execution_failed","message":"Code execution exited unsuccessfully."}'
	[[ $stderr == *"error: EXECUTION_FAILED"* ]]
	run -7 local_run --child-code -l bash -e 'exit 7'
	run -0 local_run --child-code -l bash -e 'exit 0'
	# killed by signal N: 128+N
	run -143 local_run --child-code -l bash -e 'kill -TERM $$'
	jq_ok '.output.exit_code==143'
	run -1 local_run -l python -e 'raise SystemExit("boom")'
	jq_ok '.output.exit_code==1 and (.output.stderr|contains("boom"))'
}

@test "an infinite loop is killed at the timeout (within timeout + 2 s)" {
	t0=$(now_ms)
	run -1 --separate-stderr local_run -l python --timeout-secs 2 -e 'while True: pass'
	t1=$(now_ms)
	# (valgrind itself adds seconds of start-up)
	[ $((t1 - t0)) -lt "$(slow 4000 15000)" ]
	[ $((t1 - t0)) -ge 1900 ]
	# a definitive failure: it ran and hit its limit (PRODUCT 3, rev 2)
	jq_ok '.success==false and .error.code=="SANDBOX_TIMEOUT" and .error.kind=="timed_out" and .exit==1'
}

@test "a fork bomb is contained and the whole group dies at the timeout" {
	# every process of the bomb carries this run's own name: other
	# suites run bash as nobody in their sandboxes at the same time
	local mark="nyx-bomb-$$-$RANDOM"
	t0=$(now_ms)
	run -1 local_run -l bash --timeout-secs 3 -e "exec -a $mark bash -c 'f(){ f | f & }; f 2>/dev/null; sleep 100'"
	t1=$(now_ms)
	# under valgrind the tool's own start and end compete with the bomb
	[ $((t1 - t0)) -lt "$(slow 5000 15000)" ]
	jq_ok '.error.code=="SANDBOX_TIMEOUT"'
	sleep 0.5
	# nothing of it is left on the host
	run -0 bash -c "ps -eo args | awk '\$1==\"$mark\"' | wc -l"
	[ "$output" -eq 0 ]
}

@test "5 MiB of output is capped at 1 MiB per stream, drained, memory bounded" {
	run -0 /usr/bin/time -f '%M' -o "$BATS_TEST_TMPDIR/rss" code-exec --backend local \
		-l python -e 'import sys; sys.stdout.write("x" * (5 << 20)); sys.stderr.write("e" * (5 << 20)); print("end", file=sys.stderr)'
	jq_ok '.output.stdout_truncated==true and .output.stderr_truncated==true'
	jq_ok '(.output.stdout|length)==1048576 and (.output.stderr|length)==1048576'
	jq_ok '.success==true'
	# two 1 MiB buffers and the record, not 10 MiB of output (valgrind
	# itself would dwarf the bound)
	if [ -z "${NYX_UNDER_VALGRIND:-}" ]; then
		[ "$(cat "$BATS_TEST_TMPDIR/rss")" -lt 60000 ]
	fi
}

# The run ends on bwrap's report of the program's end, not on the EOF of
# its pipes (bwrap's own exit comes later): what they hold then is
# drained, to the last byte.  The program widens its pipes to 1 MiB and
# fills them while code-exec is stopped, so that the output and the
# report are there together when it goes on.
@test "output written as the program ends is kept to the last byte" {
	local pid
	code-exec --backend local -l python -e "import fcntl, os, time
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ
fcntl.fcntl(2, 1031, 1 << 20)
time.sleep($(slow 1 8))
os.write(1, b'o' * 900000 + b'END')
os.write(2, b'e' * 900000 + b'END')
os._exit(0)" >"$BATS_TEST_TMPDIR/out" &
	pid=$!
	sleep "$(slow 0.5 6)"
	kill -STOP "$pid"
	sleep "$(slow 1.5 6)"
	kill -CONT "$pid"
	wait "$pid"
	output=$(cat "$BATS_TEST_TMPDIR/out")
	jq_ok '(.output.stdout|length)==900003 and (.output.stdout|endswith("oEND"))'
	jq_ok '(.output.stderr|length)==900003 and (.output.stderr|endswith("eEND"))'
	jq_ok '.output.stdout_truncated==false and .output.stderr_truncated==false'
}

@test "isolation: no network, no caller files, no host processes, clean env" {
	echo "host secret" >"$HOME/secret.txt"
	port=${NYX_TEST_BASE##*:}
	# a scratch TMPDIR of this test's own (reachable by nobody, whom the
	# sandbox runs as under root), so other suites' runs do not count
	scratch=$(mktemp -d /tmp/nyx-iso.XXXXXX)
	chmod 755 "$scratch"
	TMPDIR=$scratch HOST_PID=$$ NYXID_API_KEY=caller-supplied SOME_VAR=leak run -0 local_run -l python -e "
import os, socket
try:
    socket.create_connection(('127.0.0.1', $port), timeout=2); print('net: connected')
except OSError as e: print('net: refused')
print('home:', os.path.exists('$HOME/secret.txt'), os.path.exists('$HOME'))
print('host pid visible:', os.path.exists('/proc/$$'))
print('pids:', len([p for p in os.listdir('/proc') if p.isdigit()]))
print('env:', ' '.join(sorted(os.environ)))
print('cwd:', os.getcwd(), os.listdir('.'))
try:
    open('/usr/nyx-probe', 'w'); print('usr: writable')
except OSError: print('usr: read-only')
open('work.txt', 'w').write('ok'); print('work: writable')
"
	out=$(last_line | jq -r .output.stdout)
	[[ $out == *"net: refused"* ]]
	[[ $out == *"home: False False"* ]]
	[[ $out == *"host pid visible: False"* ]]
	[[ $out == *"pids: 2"* ]]
	[[ $out == *"env: HOME LANG PATH PWD TMPDIR"* ]]
	[[ $out == *"cwd: /sandbox []"* ]]
	[[ $out == *"usr: read-only"* && $out == *"work: writable"* ]]
	# the work directory does not outlive the run
	[ -z "$(ls -A "$scratch")" ]
	rmdir "$scratch"
}

@test "fails closed: no bwrap, or a bwrap that cannot isolate, is 71 and runs nothing" {
	NYX_BWRAP=/nonexistent/bwrap run -71 --separate-stderr local_run -l bash -e 'echo ran'
	jq_ok '.type=="error" and .code=="LOCAL_ISOLATION_UNAVAILABLE" and .exit==71'
	[[ $output != *ran* ]]
	# a bwrap that cannot set up namespaces (reachable by nobody, whom
	# the sandbox runs as under root)
	fake=$(mktemp -d /tmp/nyx-fake-bwrap.XXXXXX)
	chmod 755 "$fake"
	printf '#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 1\n' >"$fake/bwrap"
	chmod 755 "$fake/bwrap"
	NYX_BWRAP=$fake/bwrap run -71 local_run -l bash -e 'echo ran'
	rm -rf "$fake"
	jq_ok '.code=="LOCAL_ISOLATION_UNAVAILABLE" and (.message|contains("No permissions to create new namespace"))'
	[[ $output != *ran* ]]
}

# bwrap starts from a vfork()ed child of code-exec: an execve that fails
# there still says why, and runs nothing.
@test "fails closed: a bwrap that cannot be executed is 71 and says why" {
	fake=$(mktemp -d /tmp/nyx-fake-bwrap.XXXXXX)
	chmod 755 "$fake"
	# executable, but no binary format the kernel knows (no #!)
	printf '\177ELF-not-really\n' >"$fake/bwrap"
	chmod 755 "$fake/bwrap"
	NYX_BWRAP=$fake/bwrap run -71 --separate-stderr local_run -l bash -e 'echo ran'
	rm -rf "$fake"
	jq_ok '.code=="LOCAL_ISOLATION_UNAVAILABLE"'
	jq_ok '.message|contains("cannot execute /tmp/nyx-fake-bwrap.")'
	jq_ok '.message|contains("Exec format error")'
	[[ $output != *ran* ]]
}


# The ledger opens while the sandbox is being set up: a ledger that
# cannot be used stops the run before its program, as it did when it
# opened first.
@test "local: a ledger that cannot be opened is 73 and the program never starts" {
	export NYX_STATE_DIR=$BATS_TEST_TMPDIR/state
	mkdir -m 700 "$NYX_STATE_DIR"
	printf 'precious\n' >"$BATS_TEST_TMPDIR/victim"
	ln -s "$BATS_TEST_TMPDIR/victim" "$NYX_STATE_DIR/ledger.db"
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		run -73 --separate-stderr strace -f -qq -o "$BATS_TEST_TMPDIR/trace" -e trace=execve \
		"$NYX_BIN/code-exec" --backend local -l bash -e 'echo ran'
	jq_ok '.code=="ledger_failed" and .exit==73'
	[[ $output != *ran* ]]
	! grep 'execve("/usr/bin/bash"' "$BATS_TEST_TMPDIR/trace"
	[ "$(cat "$BATS_TEST_TMPDIR/victim")" = precious ]
	[ ! -e "$NYX_STATE_DIR/audit.jsonl" ] || [ ! -s "$NYX_STATE_DIR/audit.jsonl" ]
}
@test "usage is checked before anything runs (64), inputs 65/66" {
	for t in 0 601 abc 1.5 ""; do
		run -64 --separate-stderr local_run -l python -e 'print(1)' --timeout-secs "$t"
		jq_ok '.code=="code_execution_request_invalid" and .message=="'"'"'timeout_secs'"'"' must be an integer between 1 and 600." and .exit==64'
	done
	run -64 local_run -l cobol -e 'x'
	jq_ok '.code=="code_execution_request_invalid"'
	run -64 local_run -e 'print(1)'
	jq_ok '(.message|contains("cannot be inferred"))'
	run -64 --separate-stderr local_run -e 'x' -f y.py
	[[ $stderr == *"usage: give the source once"* ]]
	run -64 local_run
	run -64 local_run --backend elsewhere -e x -l bash
	run -66 local_run /nonexistent/job.py
	printf 'print("\xff")\n' >"$BATS_TEST_TMPDIR/bad.py"
	run -65 local_run "$BATS_TEST_TMPDIR/bad.py"
	jq_ok '.message=="The source is not valid UTF-8 text."'
	head -c 1048577 /dev/zero | tr '\0' '#' >"$BATS_TEST_TMPDIR/big.py"
	run -64 local_run "$BATS_TEST_TMPDIR/big.py"
	jq_ok '.message=="The source exceeds 1 MiB."'
}

# ---- sync /execute through nyx-sandboxd ----

@test "a piped admission pins the route: one POST /execute, no inventory read" {
	admission >"$BATS_TEST_TMPDIR/adm"
	clear_requests
	run -0 --separate-stderr sync_run -l python -e 'print(6*7)' <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.backend=="nyxid" and .mode=="sync" and .success==true and .output.stdout=="42\n"'
	jq_ok '(.upstream_diagnostic_id|test("^chrono-[0-9a-f]{32}$"))'
	run -0 requests
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
	printf '%s\n' "$output" | jq -e '.method=="POST" and .path=="/api/v1/proxy/s/chrono-sandbox/execute" and .nyxid_via=="us-1" and .status==200'
	printf '%s\n' "$output" | jq -e '.forwarded_authorization==true and .delegation_scope=="proxy:* sandbox:execute" and .principal=="u-alice"'
}

@test "nyx-route-inspect | code-exec --sync is the pipeline" {
	run -0 bash -c 'nyx-route-inspect --base-url "$1" --token-file "$2" | code-exec --sync --base-url "$1" --token-file "$2" -l bash -e "echo piped" | jq -r .output.stdout' _ "$NYX_TEST_BASE" "$ALICE_TOK"
	[ "$output" = piped ]
}

@test "without stdin code-exec resolves the route itself, read-only" {
	run -0 sync_run -l python -e 'print(1)' </dev/null
	run -0 requests
	[ "$(printf '%s\n' "$output" | jq -r '.method+" "+.path' | paste -sd,)" = "GET /api/v1/user-services,GET /api/v1/keys,POST /api/v1/proxy/s/chrono-sandbox/execute" ]
}

@test "a blocked admission or an error record passes through unchanged" {
	reset_world "$FIX/nyx-route-inspect/drift.yaml"
	admission >"$BATS_TEST_TMPDIR/blocked" || true
	clear_requests
	run -3 sync_run -l bash -e 'echo never' <"$BATS_TEST_TMPDIR/blocked"
	[ "$output" = "$(cat "$BATS_TEST_TMPDIR/blocked")" ]
	# blocked is 3 whatever its producer exited with (here 75)
	nyx-route-inspect --base-url http://127.0.0.1:1 --token-file "$ALICE_TOK" >"$BATS_TEST_TMPDIR/unavail" 2>/dev/null || true
	jq -e '.exit==75' "$BATS_TEST_TMPDIR/unavail" >/dev/null
	run -3 sync_run -l bash -e 'echo never' <"$BATS_TEST_TMPDIR/unavail"
	[ "$output" = "$(cat "$BATS_TEST_TMPDIR/unavail")" ]
	printf '{"v":1,"type":"error","tool":"x","code":"c","class":"transient","exit":75,"retryable":true,"message":"m","diagnostic_id":"nyx-00000000000000000000000000000000"}\n' >"$BATS_TEST_TMPDIR/err"
	run -75 sync_run -l bash -e 'echo never' <"$BATS_TEST_TMPDIR/err"
	# the same document (emitted in the canonical sorted, compact form)
	[ "$output" = "$(jq -cS . "$BATS_TEST_TMPDIR/err")" ]
	[ "$(request_count)" -eq 0 ]
}

@test "hostile stdin is refused with 65 and no request" {
	admission >"$BATS_TEST_TMPDIR/adm"
	clear_requests
	run -65 sync_run -l bash -e x <<<'not json'
	run -65 sync_run -l bash -e x <<<'{"v":1,"type":"exec.result"}'
	run -65 sync_run -l bash -e x <<<'{"v":1,"type":"route.admission","status":"admitted"}'
	# an admission is admitted or blocked: any other status is not run
	for st in '"pending"' null; do
		jq -c ".status=$st" "$BATS_TEST_TMPDIR/adm" >"$BATS_TEST_TMPDIR/odd"
		run -65 sync_run -l bash -e x <"$BATS_TEST_TMPDIR/odd"
		jq_ok '.code=="input_invalid"'
	done
	# a record made for another host never redirects the credential
	jq -c '.base_url="https://evil.example.com"' "$BATS_TEST_TMPDIR/adm" >"$BATS_TEST_TMPDIR/other"
	run -65 sync_run -l bash -e x <"$BATS_TEST_TMPDIR/other"
	jq_ok '.code=="admission_base_url_mismatch"'
	# a route swapped without its digest
	jq -c '.route.user_service_id="us-noforward"' "$BATS_TEST_TMPDIR/adm" >"$BATS_TEST_TMPDIR/swap"
	run -65 sync_run -l bash -e x <"$BATS_TEST_TMPDIR/swap"
	jq_ok '.code=="admission_invalid"'
	run -65 sync_run -l bash -e x < <(cat "$BATS_TEST_TMPDIR/adm" "$BATS_TEST_TMPDIR/adm")
	# a proof of another schema, an edited proof digest, another
	# capability: made by another version or edited (PRODUCT 4, rev 2)
	for edit in '.proof.schema="external-capability-admission.v5"' 'del(.proof.schema)' \
		'.proof.contract_digest=("0"*64)' '.capability="codex_managed"'; do
		jq -c "$edit" "$BATS_TEST_TMPDIR/adm" >"$BATS_TEST_TMPDIR/edited"
		run -65 --separate-stderr sync_run -l bash -e x <"$BATS_TEST_TMPDIR/edited"
		jq_ok '.code=="admission_invalid" and (.message|contains("rerun nyx-route-inspect"))'
	done
	# found by fuzzing: an RS byte made libjq reset mid-buffer and the
	# next read abort the tool; two values without ',' leaked
	{
		printf '{"a":1}\036{"b":"'
		head -c 70000 /dev/zero | tr '\0' x
		printf '"}\n'
	} >"$BATS_TEST_TMPDIR/rs"
	run -65 --separate-stderr sync_run -l bash -e x <"$BATS_TEST_TMPDIR/rs"
	jq_ok '.code=="input_invalid_json"'
	run -65 --separate-stderr sync_run -l bash -e x <<<'{"v":1,"type":"x" "y"}'
	jq_ok '.code=="input_invalid_json"'
	[ "$(request_count)" -eq 0 ]
}

@test "input: -n never reads stdin, --admission FILE|-, -f - takes the source (PRODUCT 6)" {
	admission >"$BATS_TEST_TMPDIR/adm"
	printf 'echo one\n' >"$BATS_TEST_TMPDIR/a.sh"
	printf 'echo two\n' >"$BATS_TEST_TMPDIR/b.sh"
	printf '%s\n' "$BATS_TEST_TMPDIR/a.sh" "$BATS_TEST_TMPDIR/b.sh" >"$BATS_TEST_TMPDIR/list"
	# the loop of the issue: every file runs, the list is not eaten
	while read -r f; do sync_run -n -f "$f"; done <"$BATS_TEST_TMPDIR/list" >"$BATS_TEST_TMPDIR/out"
	[ "$(jq -r '.output.stdout|rtrimstr("\n")' "$BATS_TEST_TMPDIR/out" | paste -sd,)" = "one,two" ]
	# an idle, open stdin never hangs a run given -n
	run -0 bash -c 'sleep 30 | timeout 20 code-exec --sync --base-url "$1" --token-file "$2" -n -l bash -e "echo idle"' _ "$NYX_TEST_BASE" "$ALICE_TOK"
	jq_ok '.output.stdout=="idle\n"'
	# --admission FILE pins the route: no inventory read
	clear_requests
	run -0 sync_run --admission "$BATS_TEST_TMPDIR/adm" -l bash -e 'echo pinned' </dev/null
	jq_ok '.output.stdout=="pinned\n"'
	[ "$(requests | jq -s 'map(select(.path=="/api/v1/user-services"))|length')" = 0 ]
	run -0 sync_run --admission - -l bash -e 'echo dash' <"$BATS_TEST_TMPDIR/adm"
	# -f - reads the source from stdin; the admission comes from a file
	run -0 sync_run -l bash -f - --admission "$BATS_TEST_TMPDIR/adm" <<<'echo from-stdin'
	jq_ok '.output.stdout=="from-stdin\n"'
	run -64 sync_run -l bash -f - --admission - <<<'echo x'
	run -64 sync_run -n --admission "$BATS_TEST_TMPDIR/adm" -l bash -e x
	run -66 sync_run --admission "$BATS_TEST_TMPDIR/missing" -l bash -e x
	jq_ok '.code=="input_unreadable"'
}

@test "a stale admission is re-resolved for its exact route" {
	admission >"$BATS_TEST_TMPDIR/adm"
	clear_requests
	NYX_NOW=$(($(date +%s) * 1000 + 600000)) run -0 sync_run -l bash -e 'echo fresh' <"$BATS_TEST_TMPDIR/adm"
	run -0 requests
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 3 ]
}

@test "the execution token goes on the call; an Agent Key reaches the program" {
	admission >"$BATS_TEST_TMPDIR/adm"
	clear_requests
	# the program has the key (its digest proves it), but the key it
	# prints is redacted before anything stores or prints it (PRODUCT 10)
	run -0 sync_run --exec-token-file "$AGENT_TOK" -l python \
		-e 'import os, hashlib; k = os.environ.get("NYXID_API_KEY"); print(k, hashlib.sha256(k.encode()).hexdigest(), os.environ.get("NYXID_BASE_URL"))' <"$BATS_TEST_TMPDIR/adm"
	[ "$(last_line | jq -r .output.stdout)" = "[REDACTED] $(printf '%s' "$ALICE_AGENT" | sha256sum | cut -c1-64) $NYX_TEST_BASE" ]
	[[ $output != *"$ALICE_AGENT"* ]]
	run -0 requests
	printf '%s\n' "$output" | jq -e '.kind=="agent_key"'
	# a user bearer is never injected into the program
	run -0 sync_run -l python -e 'import os; print(os.environ.get("NYXID_API_KEY"))' <"$BATS_TEST_TMPDIR/adm"
	[ "$(last_line | jq -r .output.stdout)" = "None" ]
}

@test "no execution credential: 77 before any request" {
	admission >"$BATS_TEST_TMPDIR/adm"
	clear_requests
	run -77 code-exec --sync --base-url "$NYX_TEST_BASE" -l bash -e x <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.code=="code_execution_credential_unavailable"'
	run -77 code-exec --sync --base-url "$NYX_TEST_BASE" --exec-token-file "$(token_file "Bearer $ALICE")" -l bash -e x <"$BATS_TEST_TMPDIR/adm"
	[ "$(request_count)" -eq 0 ]
}

@test "a real failure and a real timeout through the server" {
	admission >"$BATS_TEST_TMPDIR/adm"
	run -1 sync_run -l bash -e 'echo out; exit 4' <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.error.code=="EXECUTION_FAILED" and .output.exit_code==4 and .output.stdout=="out\n"'
	# it ran and hit its limit: a definitive failure (PRODUCT 3, rev 2)
	run -1 sync_run --timeout-secs 1 -l python -e 'while True: pass' <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.error.code=="SANDBOX_TIMEOUT" and .error.kind=="timed_out" and .error.message=="Code execution ran out of time upstream." and .http_status==504'
}

# exec_fault EXIT FAULT-YAML-RULE: one POST /execute answered by the rule.
exec_fault() {
	local want=$1 rule=$2
	admission >"$BATS_TEST_TMPDIR/adm"
	printf 'faults:\n  - %s\n' "$rule" | put_faults
	clear_requests
	run "-$want" --separate-stderr sync_run -l bash -e 'echo x' <"$BATS_TEST_TMPDIR/adm"
	[ "$(request_count)" -eq 1 ]
}

@test "upstream error codes win over the status (WIRE 4.4, first table)" {
	E='{path: "/api/v1/proxy/*"'
	exec_fault 77 "$E, status: 401, json: {error: {code: UNAUTHENTICATED, message: 'SECRET-UPSTREAM-TEXT'}}}"
	jq_ok '.error=={"code":"UNAUTHENTICATED","kind":"admission_denied","message":"The code execution credential was rejected upstream."} and .success==false and (has("output")|not)'
	[[ $output != *SECRET-UPSTREAM-TEXT* && $stderr != *SECRET-UPSTREAM-TEXT* ]]
	exec_fault 77 "$E, status: 403, json: {error: {code: FORBIDDEN}}}"
	jq_ok '.error.code=="FORBIDDEN"'
	exec_fault 76 "$E, status: 400, json: {error: {code: INVALID_REQUEST}}}"
	jq_ok '.error.code=="INVALID_REQUEST"'
	# WIRE 4.4, revision 2: ran out of time 1, did not start 75, may
	# have run 4 (the specific code as the cause)
	exec_fault 1 "$E, status: 504, json: {error: {code: SANDBOX_TIMEOUT}}}"
	jq_ok '.error.code=="SANDBOX_TIMEOUT" and .error.kind=="timed_out"'
	exec_fault 75 "$E, status: 503, json: {error: {code: SANDBOX_CREATION_FAILED}}}"
	jq_ok '.error.code=="SANDBOX_CREATION_FAILED" and (.error|has("cause")|not)'
	for c in SANDBOX_UNREACHABLE INTERNAL_ERROR; do
		exec_fault 4 "$E, status: 500, json: {error: {code: $c}}}"
		jq_ok --arg c "$c" '.error.code=="code_execution_outcome_uncertain" and .error.kind=="outcome_uncertain" and .error.cause==$c and (.error.message|contains("durable mode"))'
	done
	# one level into a NyxID-style envelope, as an object or a string
	exec_fault 4 "$E, status: 502, json: {error: true, status: 502, body: {error: {code: SANDBOX_UNREACHABLE}}}}"
	jq_ok '.error.cause=="SANDBOX_UNREACHABLE"'
	exec_fault 77 "$E, status: 401, json: {error: true, status: 401, body: '{\"error\":{\"code\":\"UNAUTHENTICATED\"}}'}}"
	jq_ok '.error.code=="UNAUTHENTICATED"'
}

@test "otherwise the status decides (WIRE 4.4, second table)" {
	E='{path: "/api/v1/proxy/*"'
	exec_fault 77 "$E, status: 401, body: '{}'}"
	jq_ok '.error.code=="NYXID_PROXY_UNAUTHORIZED" and .http_status==401'
	exec_fault 77 "$E, status: 403, json: {error: forbidden, error_code: 1002, message: x}}"
	jq_ok '.error.code=="NYXID_PROXY_FORBIDDEN"'
	exec_fault 76 "$E, status: 404, body: 'not found'}"
	jq_ok '.error.code=="NYXID_PROXY_HTTP_404" and .error.kind=="target_not_configured"'
	for st in 408 504; do
		exec_fault 4 "$E, status: $st, body: ''}"
		jq_ok '.error.code=="code_execution_outcome_uncertain" and .error.cause=="code_execution_timed_out"'
	done
	exec_fault 75 "$E, status: 429, body: ''}"
	jq_ok '.error.code=="NYXID_PROXY_HTTP_429"'
	for st in 500 502 503 524; do
		exec_fault 4 "$E, status: $st, body: '<html>edge timeout</html>'}"
		jq_ok --arg c "NYXID_PROXY_HTTP_$st" '.error.code=="code_execution_outcome_uncertain" and .error.cause==$c'
	done
	exec_fault 76 "$E, status: 418, body: ''}"
	jq_ok '.error.code=="NYXID_PROXY_HTTP_418"'
}

@test "NyxID's approval gate is a typed blocker with its approve URL (3)" {
	exec_fault 3 '{path: "/api/v1/proxy/*", status: 403, json: {error: approval_required, error_code: 7000, message: m, request_id: "apr_123", approve_url: "https://nyx.example.com/approvals/apr_123"}}'
	jq_ok '.error.code=="NYXID_APPROVAL_REQUIRED" and .error.request_id=="apr_123" and .error.approve_url=="https://nyx.example.com/approvals/apr_123" and .exit==3'
}

@test "a connection dropped after the request left may have run (4); one never made is 75; never retried" {
	exec_fault 4 '{path: "/api/v1/proxy/*", drop: true}'
	jq_ok '.error.code=="code_execution_outcome_uncertain" and .error.cause=="code_execution_transport_unavailable" and (has("http_status")|not)'
	# nothing listens on port 1: no byte of the request can have left
	admission | jq -c '.base_url="http://127.0.0.1:1"' >"$BATS_TEST_TMPDIR/adm1"
	run -75 --separate-stderr code-exec --sync --base-url http://127.0.0.1:1 --token-file "$ALICE_TOK" \
		-l bash -e 'echo x' <"$BATS_TEST_TMPDIR/adm1"
	jq_ok '.error.code=="code_execution_transport_unavailable" and (.error|has("cause")|not)'
}

@test "a body over 1 MiB is refused (76), with and without Content-Length" {
	exec_fault 76 '{path: "/api/v1/proxy/*", body_bytes: 1048577}'
	jq_ok '.error.code=="code_execution_response_too_large"'
	exec_fault 76 '{path: "/api/v1/proxy/*", body_bytes: 1048577, chunked: true}'
	jq_ok '.error.code=="code_execution_response_too_large"'
}

@test "headers over 64 KiB are refused (76), not taken for an outage" {
	big=$(head -c 300000 /dev/zero | tr '\0' a)
	exec_fault 76 "{path: \"/api/v1/proxy/*\", status: 200, body: \"{}\", headers: {X-Big: \"$big\"}}"
	jq_ok '.error.code=="code_execution_response_too_large" and .exit==76'
}

@test "malformed 2xx bodies are code_execution_response_invalid (76)" {
	E='{path: "/api/v1/proxy/*", status: 200'
	for body in \
		"body: 'not json'" \
		"json: [1]" \
		"json: {success: true, output: {stdout: '', stderr: '', exit_code: 3}}" \
		"json: {success: false, output: {stdout: '', stderr: '', exit_code: 3}}" \
		"json: {success: false, output: {stdout: '', stderr: '', exit_code: 0}, error: {code: X}}" \
		"json: {success: true, output: {stdout: '', stderr: '', exit_code: 0}, error: {code: X}}" \
		"json: {success: true, output: {stdout: 1, stderr: '', exit_code: 0}}" \
		"json: {success: true, output: {stdout: '', stderr: '', exit_code: 0.5}}" \
		"json: {success: true, output: {stdout: '', stderr: '', exit_code: 0, execution_time_ms: -1}}" \
		"json: {success: 'yes', output: {stdout: '', stderr: '', exit_code: 0}}" \
		"json: {success: true}"; do
		exec_fault 76 "$E, $body}"
		jq_ok '.error=={"code":"code_execution_response_invalid","kind":"malformed_output","message":"The code execution response was malformed."}'
	done
}

@test "completed failures keep the output and use fixed messages" {
	E='{path: "/api/v1/proxy/*", status: 200'
	exec_fault 1 "$E, json: {success: false, output: {stdout: o, stderr: e, exit_code: 2}, error: {code: DEPENDENCY_INSTALL_FAILED, message: 'SECRET-UPSTREAM-TEXT'}}}"
	jq_ok '.error.code=="DEPENDENCY_INSTALL_FAILED" and .error.message=="Code execution dependency preparation failed." and .output.stdout=="o"'
	[[ $output != *SECRET-UPSTREAM-TEXT* ]]
	exec_fault 1 "$E, json: {success: false, output: {stdout: '', stderr: '', exit_code: 9}, error: {code: WHATEVER}}}"
	jq_ok '.error.code=="code_execution_failed" and .error.message=="Code execution failed." and .output.exit_code==9'
	exec_fault 0 "$E, json: {success: true, output: {stdout: ok, stderr: '', exit_code: 0}, diagnostic_id: 'unsafe/diagnostic'}}"
	jq_ok '(has("upstream_diagnostic_id")|not)'
	exec_fault 0 "$E, json: {success: true, output: {stdout: ok, stderr: '', exit_code: 0}, diagnostic_id: 'd1'}}"
	jq_ok '.upstream_diagnostic_id=="d1" and (.output|has("execution_time_ms")|not)'
}

@test "the exact body and URL of WIRE 4 reach the server" {
	admission >"$BATS_TEST_TMPDIR/adm"
	printf 'faults:\n  - {path: "/api/v1/proxy/*", status: 200, json: {success: true, output: {stdout: "", stderr: "", exit_code: 0}}}\n' | put_faults
	clear_requests
	run -0 sync_run -l python --timeout-secs 42 -e 'print("a\"b")' <"$BATS_TEST_TMPDIR/adm"
	run -0 requests
	printf '%s\n' "$output" | jq -e '.path=="/api/v1/proxy/s/chrono-sandbox/execute" and .nyxid_via=="us-1"'
	# the server sees the body only through the sandbox; check the shape on the wire
	port=${NYX_TEST_BASE##*:}
	python3 - "$port" "$ALICE_TOK" "$BATS_TEST_TMPDIR/adm" <<'EOF2'
import http.server, json, subprocess, sys, threading
seen = {}
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        seen["path"] = self.path
        seen["body"] = self.rfile.read(int(self.headers["Content-Length"])).decode()
        seen["ctype"] = self.headers["Content-Type"]
        seen["auth"] = self.headers["Authorization"].startswith("Bearer ")
        out = json.dumps({"success": True, "output": {"stdout": "", "stderr": "", "exit_code": 0}}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=srv.handle_request, daemon=True).start()
base = "http://127.0.0.1:%d" % srv.server_port
adm = json.loads(open(sys.argv[3]).read()); adm["base_url"] = base
p = subprocess.run(["code-exec", "--sync", "--base-url", base, "--token-file", sys.argv[2],
    "-l", "python", "--timeout-secs", "42", "-e", 'print("a\\"b")'],
    input=json.dumps(adm).encode(), capture_output=True)
assert p.returncode == 0, p
assert seen["path"] == "/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1", seen
assert seen["body"] == '{"language":"python","script":"print(\\"a\\\\\\"b\\")","timeout_secs":42}', seen["body"]
assert seen["ctype"] == "application/json" and seen["auth"], seen
EOF2
}

@test "no credential, source or token ever reaches stderr, even at -vvv" {
	admission >"$BATS_TEST_TMPDIR/adm"
	run -0 --separate-stderr sync_run -vvv --exec-token-file "$AGENT_TOK" -l python -e 'print("SOURCE-MARKER")' <"$BATS_TEST_TMPDIR/adm"
	[[ $stderr == *"trace: http: POST /api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=***"* ]]
	[[ $stderr != *SOURCE-MARKER* && $stderr != *"$ALICE_AGENT"* && $stderr != *"$ALICE"* && $stderr != *us-1* ]]
	run -0 cat "$SANDBOXD_DIR/stderr"
	[[ $output != *SOURCE-MARKER* && $output != *"$ALICE_AGENT"* && $output != *"$ALICE"* ]]
}

@test "inside a sandboxed program: NYXID_BASE_URL and NYXID_API_KEY are the fallbacks" {
	admission >"$BATS_TEST_TMPDIR/adm"
	clear_requests
	# an Agent Key from NYXID_API_KEY is the execution credential
	NYXID_BASE_URL=$NYX_TEST_BASE NYXID_API_KEY=$ALICE_AGENT run -0 code-exec --sync -l bash -e 'echo via-env' <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.output.stdout=="via-env\n"'
	run -0 requests
	printf '%s\n' "$output" | jq -e '.kind=="agent_key"'
	# but it is not source-readable: no inventory read without an admission
	NYXID_BASE_URL=$NYX_TEST_BASE NYXID_API_KEY=$ALICE_AGENT run -77 code-exec --sync -l bash -e x </dev/null
	jq_ok '.blocker.code=="CODE_EXECUTION_SOURCE_CREDENTIAL_REQUIRED"'
	# NYX_BASE_URL wins over NYXID_BASE_URL
	NYX_BASE_URL=http://127.0.0.1:1 NYXID_BASE_URL=$NYX_TEST_BASE run -65 code-exec --sync --token-file "$ALICE_TOK" -l bash -e x <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.code=="admission_base_url_mismatch"'
}

@test "a program that prints a token never gets it stored or printed: sync, durable (PRODUCT 10)" {
	admission >"$BATS_TEST_TMPDIR/adm"
	prog='import os, sys; k = os.environ["NYXID_API_KEY"]; print("out", k); print("err", k, file=sys.stderr); sys.exit(3)'
	run -1 --separate-stderr sync_run --exec-token-file "$AGENT_TOK" -l python -e "$prog" <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.output.stdout=="out [REDACTED]\n" and .output.stderr=="err [REDACTED]\n"'
	[[ $output$stderr != *"$ALICE_AGENT"* ]]
	export NYX_STATE_DIR=$BATS_TEST_TMPDIR/state
	run -1 --separate-stderr code-exec --base-url "$NYX_TEST_BASE" --token-file "$ALICE_TOK" \
		--exec-token-file "$AGENT_TOK" -l python -e "$prog" </dev/null
	jq_ok '.mode=="durable" and .output.stdout=="out [REDACTED]\n" and .output.stderr=="err [REDACTED]\n"'
	[[ $output$stderr != *"$ALICE_AGENT"* ]]
	not grep -r -a -q -F "$ALICE_AGENT" "$NYX_STATE_DIR"
	# the stored result, re-issued, is the redacted one
	h=$(last_line | jq -r .handle)
	run -1 exec-status --base-url "$NYX_TEST_BASE" --exec-token-file "$AGENT_TOK" "$h"
	jq_ok '.output.stdout=="out [REDACTED]\n"'
}


@test "interrupts: a local run is killed whole (1); a sync call left may run on (4, cause interrupted)" {
	local out=$BATS_TEST_TMPDIR/int.out canary=INT-CANARY-$RANDOM$RANDOM
	code-exec --backend local -l bash -e "sleep 30; echo $canary" >"$out" 2>/dev/null 3>&- &
	pid=$!
	# once it runs (and catches the signal)
	sleep "$(slow 1 6)"
	t0=$(now_ms)
	kill -INT "$pid"
	wait "$pid" && rc=0 || rc=$?
	[ "$rc" = 1 ]
	[ $(($(now_ms) - t0)) -lt "$(slow 3000 10000)" ]
	tail -n 1 "$out" | jq -e '.error.code=="code_execution_cancelled" and .error.kind=="cancelled"'
	not pgrep -f "$canary"
	# sync: the request has left, the program may go on
	admission >"$BATS_TEST_TMPDIR/adm"
	code-exec --sync --base-url "$NYX_TEST_BASE" --token-file "$ALICE_TOK" -l bash -e "sleep $(slow 5 15)" \
		<"$BATS_TEST_TMPDIR/adm" >"$out" 2>/dev/null 3>&- &
	pid=$!
	# the program sleeps 5 s: at 1.5 s the call is in flight
	sleep "$(slow 1.5 8)"
	kill -INT "$pid"
	wait "$pid" && rc=0 || rc=$?
	[ "$rc" = 4 ]
	tail -n 1 "$out" | jq -e '.error.code=="code_execution_outcome_uncertain" and .error.cause=="interrupted"'
}

# PRODUCT 6 (rev 2): every result says which run it is and when it ran.
@test "results carry request_id, started_at, finished_at and elapsed_ms (local, sync)" {
	run -0 local_run --request-id canary-local -l bash -e 'sleep 0.3; echo x'
	jq_ok '.request_id=="canary-local" and (.started_at|endswith("Z")) and (.finished_at|endswith("Z"))'
	jq_ok '(.elapsed_ms|type)=="string" and (.elapsed_ms|tonumber)>=300 and .finished_at>=.started_at'
	admission >"$BATS_TEST_TMPDIR/adm"
	run -0 sync_run --request-id canary-sync -l bash -e 'echo y' <"$BATS_TEST_TMPDIR/adm"
	jq_ok '.request_id=="canary-sync" and (.elapsed_ms|test("^[0-9]+$")) and (.started_at|endswith("Z"))'
	# a run without --request-id gets a fresh one, reported
	run -0 local_run -l bash -e 'echo z'
	jq_ok '.request_id|test("^[0-9a-f]{32}$")'
}
