#!/usr/bin/env bash
# (a) local sandbox overhead: code-exec --backend local -e 'pass' against
#     bare /usr/bin/python3 -c pass and a bubblewrap floor (the same
#     mounts, no code-exec), with where the difference goes: bwrap with
#     code-exec's hardening flags, the same behind a bare C wrapper
#     (bench/wrap.c) with and without code-exec's libraries, the run
#     with its state on tmpfs (no disk syncs), and code-exec's start-up;
# (b) sync round trip through nyx-sandboxd: code-exec --sync with the
#     admission piped in (one request) against curl posting the same
#     request.  One run; prints times and ratios.  See bench/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${NYX_BIN:-$root/build/bin}
make -C "$root" -s all build/bench/wrap build/bench/wrap-libs >/dev/null
wrap=$root/build/bench/wrap
tmp=$(mktemp -d)
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
runs=${RUNS:-31}

m() { python3 "$here/measure.py" "$runs" "$@" | cut -d' ' -f1; }

# (a) in one interleaved run (bench/interleave.py): every round runs each
# command once, so the machine's drift touches them all alike.
mkdir -p "$tmp/code" "$tmp/work" "$tmp/state-disk"
echo pass >"$tmp/code/main.py"
chmod -R a+rX "$tmp"
chmod 700 "$tmp/state-disk"
shm=$(mktemp -d /dev/shm/nyx-bench.XXXXXX)
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; fi; rm -rf "$tmp" "$shm"' EXIT
floor="bwrap --unshare-all --die-with-parent --ro-bind /usr /usr
	--symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin
	--proc /proc --dev /dev --tmpfs /tmp --ro-bind $tmp/code /code
	--bind $tmp/work /sandbox --chdir /sandbox /usr/bin/python3 -I /code/main.py"
# the flags code-exec passes (lib/nyx_sandbox.c), without its seccomp
# filter and task cap, as the invoking user
hardened="bwrap --unshare-all --unshare-user --disable-userns --die-with-parent
	--new-session --cap-drop ALL --hostname sandbox --ro-bind /usr /usr
	--symlink usr/bin /bin --symlink usr/sbin /sbin --symlink usr/lib /lib
	--symlink usr/lib64 /lib64 --ro-bind-try /etc/ld.so.cache /etc/ld.so.cache
	--ro-bind-try /etc/alternatives /etc/alternatives
	--ro-bind-try /etc/localtime /etc/localtime --proc /proc --dev /dev
	--size 67108864 --tmpfs /tmp --size 67108864 --tmpfs /sandbox
	--ro-bind $tmp/code/main.py /code/main.py --chdir /sandbox
	/usr/bin/python3 -I /code/main.py"
# the same bwrap behind the least a program in front of it can be
# (bench/wrap.c: vfork, execve, wait), bare and with code-exec's
# libraries: what any wrapper pays on this machine before it does work
bwrap=$(command -v bwrap)
wrapped="$wrap $bwrap ${hardened#bwrap }"
wrapped_libs="$wrap-libs $bwrap ${hardened#bwrap }"
# (the state directory goes in the environment without a wrapper: a
# shell in front would add its own start-up, about 0.8 ms, to the row)
local="$bin/code-exec -q --backend local -l python -e pass"
python3 "$here/interleave.py" "$runs" "py=/usr/bin/python3 -c pass" \
	"floor=$floor" "hardened=$hardened" "wrap=$wrapped" \
	"wraplibs=$wrapped_libs" \
	"local=NYX_STATE_DIR=$tmp/state-disk $local" \
	"shm=NYX_STATE_DIR=$shm $local" "version=$bin/code-exec --version" \
	"true=/bin/true" >"$tmp/a"
echo "(a) local sandbox, median of $runs, interleaved"
awk '{ m[$1] = $2 } END {
	printf "  python3 -c pass                 %8.2f ms\n", m["py"]
	printf "  bwrap + python3 (floor)         %8.2f ms\n", m["floor"]
	printf "  bwrap with code-exec'"'"'s flags     %8.2f ms   the hardening: %+.2f ms\n", m["hardened"], m["hardened"] - m["floor"]
	printf "    behind a bare C wrapper       %8.2f ms   a process in front: %+.2f ms\n", m["wrap"], m["wrap"] - m["hardened"]
	printf "    the wrapper with our libraries %7.2f ms   the libraries: %+.2f ms; the wrapper over the floor %+.2f ms\n", m["wraplibs"], m["wraplibs"] - m["wrap"], m["wraplibs"] - m["floor"]
	printf "  code-exec --backend local       %8.2f ms   over the floor %+.2f ms; its own part %+.2f ms; its work %+.2f ms\n", m["local"], m["local"] - m["floor"], m["local"] - m["hardened"], m["local"] - m["wraplibs"]
	printf "    the same, state on tmpfs      %8.2f ms   the audit trail'"'"'s syncs: %+.2f ms\n", m["shm"], m["local"] - m["shm"]
	printf "    code-exec --version           %8.2f ms   start-up over /bin/true: %+.2f ms\n", m["version"], m["version"] - m["true"] }' "$tmp/a"

# (b)
# shellcheck source=/dev/null
source "$root/tests/helpers/jwt.bash"
token=$(mint_jwt '{"sub":"u-alice","token_type":"access"}')
printf '%s\n' "$token" >"$tmp/token"
chmod 600 "$tmp/token"
sed "s|@ALICE@|$token|" >"$tmp/world.yaml" <<'YAML'
users: [{id: u-alice}]
tokens: [{token: "@ALICE@", user: u-alice, kind: user}]
routes:
  - {id: us-1, owner: u-alice, slug: chrono-sandbox, catalog_service_id: cat-1,
     catalog_service_slug: chrono-sandbox, forward_access_token: true,
     inject_delegation_token: true, delegation_token_scope: "proxy:* sandbox:execute"}
YAML
"$bin/nyx-sandboxd" --world "$tmp/world.yaml" --port-file "$tmp/port" -q &
pid=$!
for _ in $(seq 1 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
base="http://127.0.0.1:$(cat "$tmp/port")"
"$bin/nyx-route-inspect" --base-url "$base" --token-file "$tmp/token" >"$tmp/adm"
body='{"language":"python","script":"pass","timeout_secs":180}'
cat >"$tmp/ours.sh" <<OURS
#!/bin/sh
exec "$bin/code-exec" -q --sync --base-url "$base" --token-file "$tmp/token" -l python -e pass <"$tmp/adm"
OURS
cat >"$tmp/curl.sh" <<CURL
#!/bin/sh
exec curl -sf -X POST -H "Authorization: Bearer \$(cat "$tmp/token")" \
	-H 'Content-Type: application/json' --data-binary '$body' \
	"$base/api/v1/proxy/s/chrono-sandbox/execute?_nyxid_via=us-1"
CURL
chmod +x "$tmp/ours.sh" "$tmp/curl.sh"
"$tmp/curl.sh" | jq -e '.success' >/dev/null
"$tmp/ours.sh" | jq -e '.success' >/dev/null
ours=$(m "$tmp/ours.sh")
theirs=$(m "$tmp/curl.sh")
echo "(b) sync round trip through nyx-sandboxd (one request each), median of $runs"
awk -v o="$ours" -v c="$theirs" 'BEGIN {
	printf "  curl POST /execute         %8.2f ms\n", c
	printf "  code-exec --sync           %8.2f ms   ratio %.2fx of curl\n", o, o / c }'
