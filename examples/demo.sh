#!/bin/sh
# The main job on the embedded default: run a program in the local sandbox
# with no configuration at all; then start a local nyx-sandboxd with the
# example world, diagnose its routes as two callers, and run the same
# program through Alice's admitted route.  Usage: examples/demo.sh [BINDIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/bin}
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM

echo "== code-exec on the local sandbox (no configuration at all)"
"$bin/code-exec" --backend local -l python -e 'print(6*7)' --pretty
echo

"$bin/nyx-sandboxd" --world "$here/world.yaml" --port-file "$tmp/port" \
	-q &
pid=$!
i=0
while [ ! -s "$tmp/port" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
base="http://127.0.0.1:$(cat "$tmp/port")"
# token files must not be readable by others
for who in alice bob; do
	cp "$here/$who.token" "$tmp/$who.token"
	chmod 600 "$tmp/$who.token"
done

echo "== nyx-sandboxd serving the example world on $base"
echo "== Alice: her personal route is compliant"
"$bin/nyx-route-inspect" --base-url "$base" --token-file "$tmp/alice.token" \
	--table --pretty || true
echo
echo "== Bob: only the drifted Acme route is his (exit 3, policy mismatch)"
rc=0
"$bin/nyx-route-inspect" --base-url "$base" --token-file "$tmp/bob.token" \
	--table --pretty || rc=$?
echo "exit status: $rc"
echo
echo "== Alice's admission piped into code-exec --sync (one POST /execute)"
# shellcheck disable=SC2016 # $(hostname) runs inside the sandbox
"$bin/nyx-route-inspect" --base-url "$base" --token-file "$tmp/alice.token" |
	"$bin/code-exec" --sync --base-url "$base" \
		--token-file "$tmp/alice.token" -l bash \
		-e 'echo "hello from $(hostname)"'
echo "exit status: $?"
