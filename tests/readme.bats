#!/usr/bin/env bats
# The README is tested (issue 13, item 9): every shell block of the hands-on
# sections runs, in order, in one shell, as a newcomer would paste it, and
# the outputs the README promises appear.  Blocks that are not shell
# (crontab lines, metrics, alert rules) are recognised and left out.

load helpers/common

setup() {
	common_setup
	# a newcomer's machine: a fresh home, no state, no configuration
	export HOME="$BATS_TEST_TMPDIR/home"
	mkdir -p "$HOME"
	unset NYX_BASE_URL NYX_TOKEN_FILE NYX_STATE_DIR NYX_CONFIG NYX_EXEC_TOKEN_FILE
}

teardown() {
	[ -s "$BATS_TEST_TMPDIR/pids" ] && xargs -r kill <"$BATS_TEST_TMPDIR/pids" 2>/dev/null
	true
}

# blocks SECTION...: the indented blocks of those sections, in order, as
# one script; a block of crontab lines, metrics or YAML is not shell.
blocks() {
	python3 - "$NYX_ROOT/README.md" "$@" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
want = sys.argv[2:]
out = []
for sec in re.split(r'^## ', text, flags=re.M)[1:]:
    title, _, body = sec.partition('\n')
    if title.strip() not in want:
        continue
    for block in re.findall(r'(?:^    .*\n|^\n)+', body, flags=re.M):
        lines = [l[4:] for l in block.split('\n') if l.startswith('    ')]
        if not lines:
            continue
        code = '\n'.join(lines)
        if re.search(r'^[*0-9/]+ [*0-9/]+ \* \* \* |^groups:|^nyx_[a-z_]+[{ ]|:PORT$', code, re.M):
            continue
        out.append(code)
print('\n'.join(out))
PY
}

@test "the README's hands-on sections run as written, in order, with the outputs it shows" {
	cd "$NYX_ROOT"
	blocks "Try it by hand" "Durable runs, and a canary in cron" "Codex" "Repairing a route" \
		"Reproducing a production failure" \
		>"$BATS_TEST_TMPDIR/readme.sh"
	# every block is there (a section renamed or emptied fails here)
	[ "$(grep -c 'nyx-sandboxd --world examples/world.yaml' "$BATS_TEST_TMPDIR/readme.sh")" -eq 3 ]
	grep -q 'nyx-sandboxd --replay' "$BATS_TEST_TMPDIR/readme.sh"
	grep -q 'codex-exec approve' "$BATS_TEST_TMPDIR/readme.sh"
	grep -q 'nyx-route-converge --apply' "$BATS_TEST_TMPDIR/readme.sh"
	# the last server's pid, for teardown
	printf '\necho "$NYX_SANDBOXD_PID" >%q\n' "$BATS_TEST_TMPDIR/pids" >>"$BATS_TEST_TMPDIR/readme.sh"
	run -0 --separate-stderr timeout 300 bash "$BATS_TEST_TMPDIR/readme.sh"
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/out"
	# what the README says each command prints, in order
	python3 - "$BATS_TEST_TMPDIR/out" <<'PY'
import sys
out = open(sys.argv[1]).read().split('\n')
want = [
    lambda l: '"status":"admitted"' in l,           # inspect --table
    lambda l: l == 'us-alice',                        # .route.user_service_id
    lambda l: l == 'PASS',                            # --check
    lambda l: l == 'exit 75',                         # the outage
    lambda l: l == 'hi',                              # code-exec --sync
    lambda l: l == '42',                              # a durable run
    lambda l: l == 'exit 5',                          # --no-wait
    lambda l: l.startswith('h-') and 'succeeded' in l,  # --list
    lambda l: l == 'done',                            # --all --wait
    lambda l: '"type":"audit.verify"' in l and '"bad":0' in l,
    lambda l: 'Summarise the README' in l,            # managed Codex
    lambda l: l.startswith('tool-approval:v1:'),      # approvals
    lambda l: '"state":"approved"' in l,              # approve --yes
    lambda l: '"status":"succeeded"' in l and '"target":"private_ssh"' in l,
    lambda l: '"status":"succeeded"' in l and '"target":"managed_sandbox"' in l,
    lambda l: l == 'exit 3',                          # Bob may not write
    lambda l: l == 'exit 1',                          # planned
    lambda l: l == '"converged"',                     # --apply
    lambda l: l == '42',                              # Bob runs on Acme's
    lambda l: l == 'exit 3',                          # Alice: ambiguous
    lambda l: l == '42',                              # Alice names hers
    lambda l: '"exit_code":3' in l,                   # the failing run
    lambda l: l == 'exit 1',
    lambda l: '"exit_code":3' in l,                   # its replay
    lambda l: l == 'exit 1',
]
i = 0
for l in out:
    if i < len(want) and want[i](l):
        i += 1
if i < len(want):
    sys.exit(f'README output #{i + 1} not found in order')
PY
}

# examples PAGE: the commands of a man page's EXAMPLES, one per line (a
# "$ " transcript gives its commands only; a cron line, its command).
examples() {
	python3 - "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r'^\.Sh EXAMPLES\n(.*?)^\.Sh ', text, re.S | re.M)
if not m:
    sys.exit(0)
lines, out, lit = m.group(1).split('\n'), [], False
for l in lines:
    if l.startswith('.Bd -literal'):
        lit = True; block = []; continue
    if l.startswith('.Ed'):
        lit = False
        prompt = any(b.startswith('$ ') for b in block)
        cmd = ''
        for b in block:
            if prompt and not b.startswith('$ ') and not cmd:
                continue          # a transcript's output
            b = b[2:] if prompt and b.startswith('$ ') else b
            cmd = cmd + b
            if cmd.endswith('\\'):
                cmd = cmd[:-1] + ' '
                continue
            out.append(cmd); cmd = ''
        continue
    if lit:
        block.append(l.replace('\\e', '\\').replace('\\&', '')); continue
    if l.startswith('.Dl '):
        out.append(l[4:].replace('\\e', '\\').replace('\\&', ''))
for c in out:
    c = re.sub(r'^[*/0-9,]+ [*/0-9,]+ [*/0-9,]+ [*/0-9,]+ [*/0-9,]+ ', '', c)  # cron
    print(c)
PY
}

@test "every man page's EXAMPLES run as written (no usage, input or configuration error)" {
	local w="$BATS_TEST_TMPDIR/work" p bad=0
	mkdir -p "$w"
	cp -r "$NYX_ROOT/examples" "$w/"
	cd "$w"
	export PATH="$NYX_BIN:$PATH"
	eval "$(nyx-sandboxd --world examples/world.yaml --detach 2>/dev/null)"
	echo "$NYX_SANDBOXD_PID" >"$BATS_TEST_TMPDIR/pids"
	install -m 600 examples/alice.token "$BATS_TEST_TMPDIR/alice.token"
	export NYX_TOKEN_FILE=$BATS_TEST_TMPDIR/alice.token
	# the files the examples name: a job, a report, a check, a captured
	# inventory, and another host reached by ssh (this one)
	printf 'print("job")\n' >job.py
	printf 'print("report")\n' >report.py
	printf 'exit 0\n' >check.sh
	curl -s -H "Authorization: Bearer $(cat examples/alice.token)" "$NYX_BASE_URL/api/v1/user-services" >us.json
	curl -s -H "Authorization: Bearer $(cat examples/alice.token)" "$NYX_BASE_URL/api/v1/keys" >keys.json
	# people and routes in files of their own (nyx-sandboxd(8))
	sed '/^routes:/,$d' examples/world.yaml >people.yaml
	sed -n '/^routes:/,$p' examples/world.yaml >routes.yaml
	mkdir -p .local/state/nyx
	chmod 700 .local .local/state .local/state/nyx
	ssh() { shift; "$@"; }
	export -f ssh
	# each page's examples in order, in one shell; a command that fails
	# as misuse, bad input or configuration, or hangs, is reported
	for p in "$NYX_ROOT"/man/*.1 "$NYX_ROOT"/man/*.8; do
		examples "$p" | while IFS= read -r cmd; do
			[ -n "$cmd" ] || continue
			printf '%s\nrc=$?; case $rc in 64|65|66|78|124|126|127) printf "BAD %%s: %%s\\n" "$rc" %q >&3;; esac\n' "$cmd" "$cmd"
		done >"$BATS_TEST_TMPDIR/page.sh"
		timeout 300 bash "$BATS_TEST_TMPDIR/page.sh" </dev/null >"$BATS_TEST_TMPDIR/page.out" 2>"$BATS_TEST_TMPDIR/page.err" \
			3>"$BATS_TEST_TMPDIR/page.bad" || true
		if [ -s "$BATS_TEST_TMPDIR/page.bad" ]; then
			echo "$(basename "$p"):" >&2
			cat "$BATS_TEST_TMPDIR/page.bad" "$BATS_TEST_TMPDIR/page.err" >&2
			bad=1
		fi
	done
	# the servers the examples left running
	pkill -f -- "--world people.yaml --world routes.yaml" || true
	[ "$bad" = 0 ]
	# and they did what they say: the pipeline of nyx-route-converge's
	# worked example and code-exec's run printed 42 along the way
	run -0 bash -c "$(examples "$NYX_ROOT/man/code-exec.1" | head -n 1)"
	jq_ok '.output.stdout=="42\n"'
}
