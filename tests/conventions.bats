#!/usr/bin/env bats
# The cross-tool contract (PRODUCT.md section 2): help, version, misuse,
# write errors, the error record, and drift between --help, the man
# pages and the completions.

load helpers/common

PROGS=(nyx-route-inspect nyx-route-converge code-exec exec-status audit-replay codex-exec nyx-sandboxd)

setup() {
	common_setup
}

man_of() {
	case $1 in
	nyx-sandboxd) printf '%s' "$NYX_ROOT/man/$1.8" ;;
	*) printf '%s' "$NYX_ROOT/man/$1.1" ;;
	esac
}

# The long options a program's --help lists.
long_opts() {
	"$1" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u
}

@test "--help prints usage on stdout and exits 0" {
	for p in "${PROGS[@]}"; do
		run -0 --separate-stderr "$p" --help
		[[ ${lines[0]} == "usage: $p "* ]]
		[ -z "$stderr" ]
		run -0 "$p" -h
	done
}

@test "--version prints the name and version" {
	for p in "${PROGS[@]}"; do
		run -0 "$p" --version
		[[ $output =~ ^$p\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
		run -0 "$p" -V
	done
}

@test "misuse prints PROG: usage and Try, exits 64" {
	for p in "${PROGS[@]}"; do
		run -64 --separate-stderr "$p" --no-such-flag
		[[ $stderr == "$p: usage: unknown option '--no-such-flag'"* ]]
		[[ $stderr == *"Try '$p --help'"* ]]
		[ -z "$output" ]
		run -64 --separate-stderr "$p" -Z
		run -64 --separate-stderr "$p" --config
		[[ $stderr == *"needs a value"* ]]
	done
}

@test "a write error on stdout exits 74" {
	# run captures stdout itself, so the redirect happens in a shell
	for p in "${PROGS[@]}"; do
		run -74 bash -c '"$0" --help >/dev/full' "$p"
	done
	run -74 --separate-stderr bash -c 'nyx-route-inspect --inventory "$0" >/dev/full' \
		"$FIX/nyx-route-inspect/inventory.json"
	[[ $stderr == "nyx-route-inspect: error: write error on stdout: "*"(nyx-"*")" ]]
}

@test "a reader that went away (EPIPE) exits 74 quietly" {
	run -0 python3 - "$FIX/nyx-route-inspect/inventory.json" <<'EOF2'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)  # the reader is gone before the writer starts
p = subprocess.run(["nyx-route-inspect", "--inventory", sys.argv[1]],
                   stdout=w, stderr=subprocess.PIPE)
os.close(w)
assert p.returncode == 74, p.returncode
assert p.stderr == b"", p.stderr
EOF2
}

@test "the error record has the fixed shape and is the last stdout line" {
	run -78 --separate-stderr nyx-route-inspect --base-url http://nyx.example.com
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
	jq_ok '.v==1 and .type=="error" and .tool=="nyx-route-inspect"'
	jq_ok '(.code|type)=="string" and .class=="config" and .exit==78 and .retryable==false'
	jq_ok '(.message|length)>0 and (.diagnostic_id|test("^nyx-[0-9a-f]{32}$"))'
	jq_ok 'keys==["class","code","diagnostic_id","exit","message","retryable","tool","type","v"]'
	diag=$(last_line | jq -r .diagnostic_id)
	[[ $stderr == "nyx-route-inspect: error: base_url_insecure: "*"($diag)" ]]
}

@test "each invocation gets a fresh diagnostic id" {
	run -0 nyx-route-inspect --inventory "$FIX/nyx-route-inspect/inventory.json"
	a=$(last_line | jq -r .diagnostic_id)
	run -0 nyx-route-inspect --inventory "$FIX/nyx-route-inspect/inventory.json"
	b=$(last_line | jq -r .diagnostic_id)
	[ "$a" != "$b" ]
}

@test "every program has a lint-clean man page named after it, and nyx(7)" {
	for p in "${PROGS[@]}"; do
		m=$(man_of "$p")
		[ -f "$m" ]
		run -0 mandoc -Tlint -Wwarning "$m"
		grep -q "^\.Nm $p$" "$m"
	done
	run -0 mandoc -Tlint -Wwarning "$NYX_ROOT/man/nyx.7"
}

@test "every long option in --help is in the man page and both completions" {
	for p in "${PROGS[@]}"; do
		m=$(man_of "$p")
		fn=_$(printf '%s' "$p" | tr '-' '_')
		fn=${fn/_nyx_sandboxd/_nyx_sandboxd}
		for o in $(long_opts "$p"); do
			grep -q -- "Fl ${o#-}" "$m" || grep -q -- "Fl -${o#--}" "$m" ||
				{ echo "$o missing from $m" >&2; return 1; }
			grep -q -- "$o" "$NYX_ROOT/completions/bash/nyx" ||
				{ echo "$o missing from bash completion" >&2; return 1; }
			grep -q -- "'$o\\|$o\\[\\|{.*$o" "$NYX_ROOT/completions/zsh/_nyx" ||
				grep -q -- "$o\[" "$NYX_ROOT/completions/zsh/_nyx" ||
				{ echo "$o missing from zsh completion" >&2; return 1; }
		done
		grep -q "complete -F .* $p\$" "$NYX_ROOT/completions/bash/nyx"
		grep -q "^$p)" "$NYX_ROOT/completions/zsh/_nyx"
		head -n 1 "$NYX_ROOT/completions/zsh/_nyx" | grep -q " $p"
	done
}

@test "the bash completion completes options and files for real" {
	run -0 bash -c '
		source "$NYX_ROOT/completions/bash/nyx"
		COMP_WORDS=(nyx-route-inspect --ta); COMP_CWORD=1
		_nyx_route_inspect; printf "%s\n" "${COMPREPLY[@]}"'
	[ "$output" = "--table" ]
	mkdir -p "$BATS_TEST_TMPDIR/d" && touch "$BATS_TEST_TMPDIR/d/inv.json"
	run -0 bash -c '
		source "$NYX_ROOT/completions/bash/nyx"
		COMP_WORDS=(nyx-route-inspect --inventory "$1/d/in"); COMP_CWORD=2
		_nyx_route_inspect; printf "%s\n" "${COMPREPLY[@]}"' _ "$BATS_TEST_TMPDIR"
	[ "$output" = "$BATS_TEST_TMPDIR/d/inv.json" ]
	# subcommands, and the pending approval ids after approve (read from
	# 'codex-exec approvals' in an empty state directory: none)
	run -0 bash -c '
		source "$NYX_ROOT/completions/bash/nyx"
		COMP_WORDS=(codex-exec appr); COMP_CWORD=1
		_nyx_codex_exec; printf "%s\n" "${COMPREPLY[@]}"'
	assert_output $'approvals\napprove'
	NYX_STATE_DIR=$BATS_TEST_TMPDIR/st run -0 bash -c '
		source "$NYX_ROOT/completions/bash/nyx"
		COMP_WORDS=(codex-exec approve ""); COMP_CWORD=2
		_nyx_codex_exec; printf "%s" "${COMPREPLY[@]}"'
	assert_output ""
}

@test "the zsh completion file loads" {
	command -v zsh >/dev/null || skip "zsh not installed"
	run -0 zsh -fc "autoload -Uz compinit; compinit -u -d $BATS_TEST_TMPDIR/zc; fpath=($NYX_ROOT/completions/zsh \$fpath); autoload -Uz _nyx; whence -w _nyx"
}

@test "no banned function in the sources" {
	run grep -nEw '(sprintf|vsprintf|strcpy|strcat|strncat|strncpy|gets|strtok|atoi|atol|atof|system|popen|signal)[[:space:]]*\(' \
		"$NYX_ROOT"/cmd/*.c "$NYX_ROOT"/lib/*.[ch]
	[ "$status" -eq 1 ]
}

@test "the README's demo runs: 42 locally, Alice admitted, Bob blocked, a sync run" {
	run -0 --separate-stderr "$NYX_ROOT/examples/demo.sh" "$NYX_BIN"
	[[ $output == *'"stdout": "42\n"'* ]]
	[[ $output == *'"status": "admitted"'* ]]
	[[ $output == *'"stdout":"hello from sandbox\n"'* ]]
	[[ $output == *'"code": "CODE_EXECUTION_ROUTE_POLICY_MISMATCH"'* ]]
	[[ $output == *"exit status: 3"* ]]
	[[ $stderr == *"us-alice"*"selected"* ]]
}

@test "make install and uninstall honour PREFIX and DESTDIR" {
	o=$(dirname "$NYX_BIN")
	[ -f "$o/libnyx.a" ] || skip "not a build directory: $NYX_BIN"
	d=$BATS_TEST_TMPDIR/dest
	run -0 env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$NYX_ROOT" O="$o" install DESTDIR="$d" PREFIX=/opt/nyx
	for p in "${PROGS[@]}"; do
		[ -x "$d/opt/nyx/bin/$p" ]
		[ -L "$d/opt/nyx/share/bash-completion/completions/$p" ]
	done
	[ -f "$d/opt/nyx/share/man/man7/nyx.7" ]
	[ -f "$d/opt/nyx/share/man/man8/nyx-sandboxd.8" ]
	[ -f "$d/opt/nyx/share/zsh/site-functions/_nyx" ]
	# nothing lands outside DESTDIR/PREFIX
	[ -z "$(find "$d" -mindepth 1 -maxdepth 1 ! -name opt)" ]
	run -0 env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$NYX_ROOT" O="$o" uninstall DESTDIR="$d" PREFIX=/opt/nyx
	[ -z "$(find "$d" -type f -o -type l)" ]
}

@test "--max-time takes whole seconds 1..3600 on every network tool (64)" {
	for t in 0 abc 3601 1.5; do
		run -64 nyx-route-inspect --max-time "$t" --base-url http://127.0.0.1:1
		jq_ok '.code=="max_time_invalid" and .exit==64'
		run -64 nyx-route-converge --max-time "$t" --base-url http://127.0.0.1:1 </dev/null
		jq_ok '.code=="max_time_invalid"'
		run -64 code-exec --sync --max-time "$t" --base-url http://127.0.0.1:1 -l bash -e x </dev/null
		jq_ok '.code=="max_time_invalid"'
	done
}

@test "a credential mistakenly given on argv is not echoed by a usage message" {
	key=nyxid_ag_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
	run -64 --separate-stderr nyx-route-inspect "$key"
	[[ $stderr == *"unexpected argument '[redacted]'"* ]]
	[[ $stderr != *"$key"* ]]
	jwt=eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1In0.c2ln
	run -64 --separate-stderr nyx-route-converge "--bogus=$jwt"
	[[ $stderr == *"unknown option '--bogus=[redacted]'"* ]]
	[[ $stderr != *"$jwt"* ]]
}

@test "the client programs link without libmicrohttpd; the server does" {
	local p bin
	for p in "${PROGS[@]}"; do
		bin=$NYX_BIN/$p
		# the valgrind run wraps each program in a script: nothing to ldd
		head -c 4 "$bin" | grep -q ELF || skip "not an ELF binary: $bin"
		run -0 ldd "$bin"
		if [ "$p" = nyx-sandboxd ]; then
			assert_output --partial libmicrohttpd
		else
			refute_output --partial libmicrohttpd
		fi
	done
}

@test "a base URL longer than 400 characters is refused (78) before any request" {
	local long
	long="http://127.0.0.1:9/$(printf 'a%.0s' $(seq 1 600))"
	tok=$(token_file "$(printf 'x.%s.y' "$(printf '{"sub":"u"}' | base64 -w0 | tr '+/' '-_' | tr -d '=')")")
	run -78 --separate-stderr nyx-route-inspect --base-url "$long" --token-file "$tok"
	jq_ok '.type=="error" and .exit==78 and (.message|contains("longer than 400"))'
	run -78 --separate-stderr code-exec --sync --base-url "$long" --token-file "$tok" -l bash -e 'echo x' </dev/null
	jq_ok '.exit==78'
}

# PRODUCT 2 (rev 2): options and operands in any order, as GNU getopt.
@test "options may follow operands; -- ends the options" {
	local h=h-0123456789abcdef01234567
	# a flag after the handle is still a flag: the state dir it names
	# is used (an empty one: the handle is unknown, 65)
	run -65 --separate-stderr exec-status "$h" --state-dir "$BATS_TEST_TMPDIR/st" -q
	jq_ok '.type=="error"'
	[ -d "$BATS_TEST_TMPDIR/st" ]
	# the verb, its operand and flags in any order
	run -65 --separate-stderr codex-exec approve tool-approval:v1:0123456789abcdef --yes --state-dir "$BATS_TEST_TMPDIR/st"
	run -65 --separate-stderr codex-exec --state-dir "$BATS_TEST_TMPDIR/st" approve --yes tool-approval:v1:0123456789abcdef
	# after --, a word that looks like an option is an operand
	run -64 --separate-stderr exec-status -- --wait
	[[ $stderr == *"'--wait' is not a handle"* ]]
	# a source file named after an option, after --
	printf 'print(6*7)\n' >"$BATS_TEST_TMPDIR/-e"
	cd "$BATS_TEST_TMPDIR"
	run -0 code-exec --backend local -l python -- -e
	jq_ok '.output.stdout=="42\n"'
}

@test "a near-miss long option gets a 'did you mean' (64)" {
	run -64 --separate-stderr exec-status --lsit
	[[ $stderr == *"unknown option '--lsit'; did you mean '--list'?"* ]]
	run -64 --separate-stderr code-exec --timout-secs 5
	[[ $stderr == *"did you mean '--timeout-secs'?"* ]]
	run -64 --separate-stderr nyx-route-inspect --base-ulr x
	[[ $stderr == *"did you mean '--base-url'?"* ]]
	# nothing near: no guess
	run -64 --separate-stderr exec-status --frobnicate
	[[ $stderr != *"did you mean"* ]]
}

# PRODUCT 2 (rev 2): a base URL the tools cannot use is 78 before any
# request, with what to write instead.
@test "base URL: no host, an empty or invalid port, a query, userinfo or /api/v1 are 78 with a hint" {
	tok=$(token_file "$(printf 'x.%s.y' "$(printf '{"sub":"u","token_type":"access"}' | base64 -w0 | tr '+/' '-_' | tr -d '=')")")
	for u in 'http://127.0.0.1:' 'http://127.0.0.1:99999' 'http://127.0.0.1:x1' 'http://' \
		'http://127.0.0.1:9/?a=1' 'http://127.0.0.1:9/#f' 'http://u:p@127.0.0.1:9'; do
		run -78 --separate-stderr nyx-route-inspect --base-url "$u" --token-file "$tok"
		jq_ok '.exit==78'
	done
	run -78 --separate-stderr nyx-route-inspect --base-url http://127.0.0.1:9/api/v1 --token-file "$tok"
	jq_ok '.exit==78 and (.message|contains("http://127.0.0.1:9"))'
	[[ $stderr == *"without /api/v1"* ]]
	run -78 --separate-stderr nyx-route-inspect --base-url http://127.0.0.1:9/api/v1/ --token-file "$tok"
	run -78 --separate-stderr code-exec --sync --base-url http://127.0.0.1: --token-file "$tok" -l bash -e x </dev/null
}

@test "--max-time bounds each exchange (PRODUCT 2, rev 2); --timeout is gone" {
	run -64 --separate-stderr nyx-route-inspect --max-time 0 --base-url http://127.0.0.1:1
	jq_ok '.code=="max_time_invalid"'
	run -64 --separate-stderr nyx-route-inspect --timeout 5 --base-url http://127.0.0.1:1
	[[ $stderr == *"unknown option '--timeout'; the bound on each exchange is now '--max-time'"* ]]
}

@test "-o json|pretty|table on every program that prints records; an error is a table too" {
	for p in nyx-route-inspect nyx-route-converge code-exec exec-status audit-replay codex-exec; do
		run -64 --separate-stderr "$p" -o xml
		[[ $stderr == *"--output must be json, pretty or table, not 'xml'"* ]]
	done
	run -64 --separate-stderr nyx-sandboxd -o table
	run -64 --separate-stderr code-exec --backend local -o table -l cobol -e x
	[[ ${lines[0]} =~ ^CODE\ +EXIT\ +MESSAGE$ ]]
	[[ ${lines[1]} =~ ^code_execution_request_invalid\ +64\ + ]]
}
