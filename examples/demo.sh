#!/bin/sh
# The main job on the embedded default: start a local nyx-sandboxd with
# the example world, then diagnose its routes with nyx-route-inspect as
# two different callers.  Usage: examples/demo.sh [BINDIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/bin}
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM

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
