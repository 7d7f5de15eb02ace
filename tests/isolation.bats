#!/usr/bin/env bats
# The sandbox against a hostile program or request (WIRE 6, PRODUCT 11):
# each test tries an escape and asserts it failed and the host is clean.

load helpers/suite

setup_file() {
	# a variable of the server's own environment must not reach a program
	NYX_ISOLATION_CANARY=leaked sandboxd_start "$BATS_TEST_DIRNAME/fixtures/worlds/principals.yaml"
	# a world-readable place the unprivileged sandbox user can reach
	EVIL_DIR=$(mktemp -d /tmp/nyx-isolation.XXXXXX)
	chmod 0755 "$EVIL_DIR"
	mkdir -m 1777 "$EVIL_DIR/out"
	MARKER="$EVIL_DIR/out/escaped"
	cc -shared -fPIC -O1 -DMARKER="\"$MARKER\"" \
		-o "$EVIL_DIR/evil.so" "$FIX/isolation/preload.c"
	chmod 0755 "$EVIL_DIR/evil.so"
	export EVIL_DIR MARKER
}

teardown_file() {
	sandboxd_stop
	rm -rf "$EVIL_DIR"
}

setup() {
	suite_setup "$FIX/code-exec/routes.yaml"
	rm -f "$MARKER"
}

# post AS PATH BODY: a proxied Chrono call; prints the body, then the status.
post() {
	curl -s -w '\n%{http_code}' -X POST -H "Authorization: Bearer $1" \
		-H 'Content-Type: application/json' \
		-H "Idempotency-Key: tool:v1:operation:$(printf '%s' "$3" | sha256sum | cut -c1-64)" \
		"$NYX_TEST_BASE/api/v1/proxy/s/chrono-sandbox/$2?_nyxid_via=us-1" -d "$3"
}


# The regression test of the review's escape: a request's env reached the
# environment bwrap starts with on the host, so LD_PRELOAD ran code there.
@test "escape: LD_PRELOAD, GCONV_PATH, GLIBC_TUNABLES in a request never reach the host" {
	local v body
	for v in "LD_PRELOAD:$EVIL_DIR/evil.so" "LD_LIBRARY_PATH:$EVIL_DIR" \
		"GCONV_PATH:$EVIL_DIR" "GLIBC_TUNABLES:glibc.malloc.check=3" \
		"LD_AUDIT:$EVIL_DIR/evil.so"; do
		body=$(jq -cn --arg k "${v%%:*}" --arg v "${v#*:}" \
			'{language:"bash",script:"echo ran",timeout_secs:10,env:{($k):$v}}')
		for path in execute executions; do
			run -0 post "$ALICE" "$path" "$body"
			[ "$(status_of)" = 400 ]
			body_of | jq -e '.error.code=="INVALID_REQUEST"'
		done
	done
	[ ! -e "$MARKER" ]
	run -0 requests
	not grep -q HOST-ESCAPE <<<"$output"
	# and the server is still serving programs
	run -0 post "$ALICE" execute '{"language":"bash","script":"echo ok","timeout_secs":10}'
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.output.stdout=="ok\n" and (.output.stderr|contains("HOST-ESCAPE")|not)'
	[ ! -e "$MARKER" ]
}

@test "escape: the program starts with the allow-listed environment only" {
	# nothing of the server's environment or the request: PATH HOME LANG
	# TMPDIR, and the PWD bwrap sets for --chdir
	run -0 post "$ALICE" execute '{"language":"python","script":"import os; print(sorted(os.environ))","timeout_secs":10}'
	[ "$(status_of)" = 200 ]
	body_of | jq -e '.output.stdout | test("^\\[(\u0027(HOME|LANG|PATH|PWD|TMPDIR)\u0027(, )?)+\\]\n$")'
}

@test "requests: unknown fields and files are INVALID_REQUEST" {
	for b in '{"language":"bash","script":"echo x","files":[]}' \
		'{"language":"bash","script":"echo x","env":{}}' \
		'{"language":"bash","script":"echo x","cwd":"/"}' \
		'{"language":"bash","script":"echo x","timeout_secs":5,"x":null}'; do
		for path in execute executions; do
			run -0 post "$ALICE" "$path" "$b"
			[ "$(status_of)" = 400 ]
			body_of | jq -e '.error.code=="INVALID_REQUEST"'
		done
	done
}

# PRODUCT 10: a tool holding a token cannot be read by another process of
# its own user (ptrace, /proc/PID/environ, mem) and never dumps core.
@test "secrets: a running tool is not dumpable and has no core limit" {
	[ "$(id -u)" = 0 ] || skip "runs the tool as nobody, which needs root"
	command -v setpriv >/dev/null || skip "no setpriv"
	local d pid
	d=$(mktemp -d /tmp/nyx-dump.XXXXXX)
	chmod 0755 "$d"
	printf '%s\n' "$ALICE" >"$d/tok"
	chmod 0644 "$d/tok"
	printf 'faults: [{path: /api/v1/user-services, delay_ms: 4000}]\n' | put_faults
	HOME=$d NYX_TOKEN_SECRET_CANARY=x setpriv --reuid=nobody --regid=nogroup --clear-groups \
		nyx-route-inspect --base-url "$NYX_TEST_BASE" --token-file "$d/tok" >"$d/out" 2>"$d/err" 3>&- &
	pid=$!
	# the read is held for 4 s: the tool is running, its token loaded
	sleep 1
	# another process of the same user may not read it
	run setpriv --reuid=nobody --regid=nogroup --clear-groups cat "/proc/$pid/environ"
	[ "$status" -ne 0 ]
	[[ $output != *NYX_TOKEN_SECRET_CANARY* ]]
	run -0 grep -E '^Max core file size +0 +0 ' "/proc/$pid/limits"
	wait "$pid" || true
	rm -rf "$d"
}

# Full RELRO: every symbol is bound at start-up and the GOT is read-only
# before main, so a memory bug cannot redirect a library call through it
# (and nothing is bound lazily on a local run's path).
@test "secrets: every program is linked with full RELRO (BIND_NOW)" {
	[ -z "${NYX_UNDER_VALGRIND:-}" ] || skip "the programs are valgrind wrappers"
	command -v readelf >/dev/null || skip "no readelf"
	local p
	for p in nyx-route-inspect nyx-route-converge code-exec codex-exec \
		exec-status audit-replay nyx-sandboxd; do
		run -0 readelf -lW "$NYX_BIN/$p"
		[[ $output == *GNU_RELRO* ]]
		run -0 readelf -dW "$NYX_BIN/$p"
		[[ $output == *"Flags: NOW"* ]] || { echo "$p: not BIND_NOW"; false; }
	done
}

# ---- the local sandbox (WIRE 6, revision 2) ----

@test "sandbox: no new user namespace inside (unshare -Ur fails)" {
	for b in local sandboxd; do
		run -0 out "$b" bash 'unshare -Ur true 2>/dev/null && echo ESCAPED || echo refused'
		jq -e '.stdout=="refused\n"' <<<"$output"
	done
}

# The per-process limits bwrap starts with reach the program, on both
# backends: address space 4 GiB, no core, files of 256 MiB (bash counts
# KiB), 256 open files.
@test "limits: the program runs with the sandbox's address-space, core, file and descriptor limits" {
	local b nofile
	# valgrind keeps the descriptor limit of the process it runs to
	# itself (it reserves the top descriptors), so a limit set before
	# execve under it is not the kernel's
	nofile=$(slow 256 '[0-9]+')
	for b in local sandboxd; do
		run out "$b" bash 'echo "as=$(ulimit -v) core=$(ulimit -c) fsize=$(ulimit -f) nofile=$(ulimit -n)"'
		echo "$b: $output"
		jq -e --arg re "^as=4194304 core=0 fsize=262144 nofile=$nofile\n$" '.stdout|test($re)' <<<"$output"
	done
}

@test "sandbox: /tmp and /sandbox are sized tmpfs (64 MiB, NYX_SANDBOX_TMPFS_MB)" {
	prog='for d in /tmp /sandbox; do dd if=/dev/zero of=$d/fill bs=1M count=80 2>/dev/null; echo "$d $(( $(stat -c %s $d/fill) / 1048576 ))"; done'
	NYX_SANDBOX_TMPFS_MB=16 run -0 code-exec --backend local -l bash -e "$prog"
	jq_ok '.output.stdout=="/tmp 16\n/sandbox 16\n"'
	for b in local sandboxd; do
		run -0 out "$b" bash "$prog"
		jq -e '.stdout=="/tmp 64\n/sandbox 64\n"' <<<"$output"
	done
}

@test "sandbox: nothing of a run is left on the host, even after kill -9 of the client" {
	local t="$BATS_TEST_TMPDIR/tmp" canary="SOURCE-CANARY-$RANDOM$RANDOM"
	mkdir -p "$t"
	TMPDIR=$t code-exec --backend local -l bash -e "echo $canary >/sandbox/x; sleep 30" >/dev/null 2>&1 3>&- &
	pid=$!
	sleep 1.5
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	sleep 0.5
	[ -z "$(ls -A "$t")" ]
	not grep -r -a -q -F "$canary" "$t"
	# and the program died with it (--die-with-parent)
	not pgrep -f "$canary"
}

# ---- each escape, from inside a program, on both backends (WIRE 6) ----

# out BACKEND LANG SOURCE [TIMEOUT]: run the program on the local backend
# or through nyx-sandboxd's /execute; prints the output object.
out() {
	local body
	case $1 in
	local)
		# the tool's stderr apart: under make valgrind-check it also
		# carries valgrind's own warnings
		code-exec --backend local -l "$2" --timeout-secs "${4:-10}" -e "$3" \
			2>>"$BATS_TEST_TMPDIR/out.stderr" 3>&- |
			tail -n 1 | jq -c .output
		;;
	sandboxd)
		body=$(jq -cn --arg l "$2" --arg s "$3" --argjson t "${4:-10}" \
			'{language:$l,script:$s,timeout_secs:$t}')
		post "$ALICE" execute "$body" | sed '$d' | jq -c .output
		;;
	esac
}

# Each call the filter denies, with the errno it would give without it
# (ENOSPC: no user namespace left; ENOTTY: /dev/null is no terminal;
# 0: allowed), so a pass proves the filter, not some other refusal.
SECCOMP_PROBE='
import ctypes, errno, fcntl, termios
libc = ctypes.CDLL(None, use_errno=True)
def sc(name, nr, *a):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *[ctypes.c_long(x) for x in a])
    print(name, errno.errorcode.get(ctypes.get_errno(), "OK") if r < 0 else "OK")
sc("unshare", 272, 0x10000000)
sc("clone_newuser", 56, 0x10000000 | 17, 0, 0, 0, 0)
sc("setns", 308, 0, 0)
sc("mount", 165, 0, 0, 0, 0, 0)
sc("ptrace", 101, 0, 0, 0, 0)
sc("bpf", 321, 0, 0, 0)
sc("perf_event_open", 298, 0, 0, -1, -1, 0)
sc("userfaultfd", 323, 0)
sc("keyctl", 250, 0, -1, 0, 0, 0)
sc("add_key", 248, 0, 0, 0, 0, 0)
sc("kexec_load", 246, 0, 0, 0, 0)
sc("init_module", 175, 0, 0, 0)
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x"); print("TIOCSTI OK")
except OSError as e: print("TIOCSTI", errno.errorcode[e.errno])
'

@test "seccomp: namespaces, mount, ptrace, bpf, keys, kexec, modules, TIOCSTI are EPERM" {
	for b in local sandboxd; do
		run -0 out "$b" python "$SECCOMP_PROBE"
		echo "$b: $output"
		stdout=$(jq -r .stdout <<<"$output")
		[ "$(grep -c ' EPERM$' <<<"$stdout")" -eq 13 ]
	done
}

@test "limits: a thread bomb stops at the sandbox's task cap, and the run completes" {
	prog='
import threading, time
n = 0
try:
    for i in range(2000):
        threading.Thread(target=time.sleep, args=(3,), daemon=True).start(); n += 1
except RuntimeError: pass
print(n)
print([l.split()[2] for l in open("/proc/self/limits") if l.startswith("Max processes")][0])'
	for b in local sandboxd; do
		run -0 out "$b" python "$prog"
		echo "$b: $output"
		n=$(jq -r .stdout <<<"$output" | head -1)
		# the cap is 64 tasks: the program, and 63 threads at most
		[ "$n" -ge 32 ] && [ "$n" -lt 64 ]
		[ "$(jq -r .stdout <<<"$output" | sed -n 2p)" = 64 ]
		jq -e '.exit_code==0 and (.limits=="rlimit" or .limits=="cgroup")' <<<"$output"
	done
}

# The cap is the sandbox's own: threads its user runs elsewhere on the host
# do not count (before, a busy host made runs fail with exit 71).
@test "limits: 400 threads of the sandbox user elsewhere on the host do not stop a run" {
	[ "$(id -u)" = 0 ] || skip "starts threads as nobody, which needs root"
	setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c '
import threading, time
for i in range(400): threading.Thread(target=time.sleep, args=(20,), daemon=True).start()
time.sleep(20)' 3>&- &
	local busy=$!
	sleep 1
	for b in local sandboxd; do
		run out "$b" bash 'echo ran'
		echo "$b: $output"
		jq -e '.stdout=="ran\n"' <<<"$output"
	done
	kill "$busy"
}

# The cap is set on the sandbox's first process while it waits, before the
# program: a cap that cannot be set stops the run there.
@test "limits: a task cap that cannot be set stops the run before the program starts (71)" {
	cc -shared -fPIC -O1 -o "$BATS_TEST_TMPDIR/noprlimit.so" "$FIX/isolation/noprlimit.c"
	# (under make asan, ASan lets a preload come before its runtime)
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		LD_PRELOAD=$BATS_TEST_TMPDIR/noprlimit.so NYX_STATE_DIR=$BATS_TEST_TMPDIR/state \
		run -71 --separate-stderr code-exec --backend local -l bash -e 'echo ran; sleep 31.7'
	jq_ok '.type=="error" and .code=="LOCAL_ISOLATION_UNAVAILABLE" and .exit==71'
	[[ $stderr == *"cannot set the sandbox's task limit (Operation not permitted)"* ]]
	[[ $output != *ran* ]]
	# the program never started
	! pgrep -f 'sleep 31.7' >/dev/null
}

@test "limits: several children cannot together exceed the sandbox's memory" {
	prog='
import os
kids = []
for i in range(5):
    pid = os.fork()
    if pid == 0:
        try:
            b = bytearray(400 << 20); b[::4096] = b"x" * len(b[::4096]); os._exit(0)
        except MemoryError: os._exit(3)
    kids.append(pid)
print(sum(1 for p in kids if os.waitpid(p, 0)[1] == 0))'
	for b in local sandboxd; do
		run -0 out "$b" python "$prog" 30
		echo "$b: $output"
		if [ "$(jq -r .limits <<<"$output")" != cgroup ]; then
			skip "no delegated cgroup v2 subtree here: memory is limited per process only"
		fi
		# at most one 400 MiB child fits the default 512 MiB
		[ "$(jq -r .stdout <<<"$output")" -le 1 ]
	done
}

@test "limits: NYX_CGROUP that is not a usable cgroup v2 subtree fails closed (71)" {
	NYX_CGROUP=/nonexistent run -71 --separate-stderr code-exec --backend local -l bash -e 'echo ran'
	jq_ok '.type=="error" and .code=="LOCAL_ISOLATION_UNAVAILABLE" and (.message|contains("NYX_CGROUP=/nonexistent"))'
	NYX_CGROUP=$BATS_TEST_TMPDIR run -71 code-exec --backend local -l bash -e 'echo ran'
}

@test "escape: setsid and a double fork do not outlive the timeout" {
	local canary
	for b in local sandboxd; do
		canary="outlive-$RANDOM$RANDOM"
		run out "$b" bash "setsid bash -c 'exec -a $canary sleep 60' & (bash -c 'exec -a $canary-2 sleep 60' &) ; sleep 60" 2
		echo "$b: $output"
		sleep 0.5
		not pgrep -f "$canary"
	done
}

@test "escape: host files, \$HOME, host processes and the network, through nyx-sandboxd" {
	echo "host secret" >"$HOME/secret.txt"
	port=${NYX_TEST_BASE##*:}
	run -0 out sandboxd python "
import os, socket
try:
    socket.create_connection(('127.0.0.1', $port), timeout=2); print('net: connected')
except OSError: print('net: refused')
print('home:', os.path.exists('$HOME/secret.txt'), os.path.exists('$HOME'))
print('host pid visible:', os.path.exists('/proc/$$'))
print('pids:', len([p for p in os.listdir('/proc') if p.isdigit()]))
print('etc:', sorted(os.listdir('/etc')))"
	out=$(jq -r .stdout <<<"$output")
	[[ $out == *"net: refused"* ]]
	[[ $out == *"home: False False"* ]]
	[[ $out == *"host pid visible: False"* ]]
	[[ $out == *"pids: 2"* ]]
	[[ $out != *passwd* && $out != *shadow* ]]
}

@test "escape: a program of nyx-sandboxd dies with the server, even after kill -9" {
	local d="$BATS_TEST_TMPDIR/srv" canary="srv-orphan-$RANDOM$RANDOM" pid port
	mkdir -p "$d"
	render "$FIX/worlds/principals.yaml" "$FIX/code-exec/routes.yaml" >"$d/world.yaml"
	nyx-sandboxd --world "$d/world.yaml" --port-file "$d/port" 2>"$d/stderr" 3>&- &
	pid=$!
	for _ in $(seq 1 100); do [ -s "$d/port" ] && break; sleep 0.05; done
	port=$(cat "$d/port")
	NYX_TEST_BASE=http://127.0.0.1:$port post "$ALICE" execute \
		"{\"language\":\"bash\",\"script\":\"exec -a $canary sleep 60\",\"timeout_secs\":60}" >/dev/null 3>&- &
	# the program itself (its argv[0]), not the curl whose body names it
	for _ in $(seq 1 150); do pgrep -f "^$canary" >/dev/null && break; sleep 0.1; done
	pgrep -f "^$canary"
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	# gone within moments (a loaded machine may take a little to reap)
	for _ in $(seq 1 50); do pgrep -f "^$canary" >/dev/null || break; sleep 0.1; done
	not pgrep -f "^$canary"
}
