#!/usr/bin/env bash
# nyx-route-inspect against a curl + jq pipeline doing the same two reads,
# join and classification, on generated inventories of 100 and 10,000
# routes served by nyx-sandboxd, in one run.  Also the JSON parser's floor
# (libjq parsing the same bytes) and peak RSS.  See bench/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${NYX_BIN:-$root/build/bin}
make -C "$root" -s all >/dev/null
tmp=$(mktemp -d)
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/parse_floor" "$here/parse_floor.c" -ljq

# shellcheck source=/dev/null
source "$root/tests/helpers/jwt.bash"
token=$(mint_jwt '{"sub":"u-bench","token_type":"access"}')
printf '%s\n' "$token" >"$tmp/token"
chmod 600 "$tmp/token"
export NYX_MAX_INVENTORY_BYTES=268435456

printf '%-7s %9s %9s %9s %8s %9s %10s %8s %9s\n' routes bytes "ours ms" \
	"curl+jq" speedup "floor ms" ours/floor "rss KiB" rss/bytes
for n in 100 10000; do
	runs=31
	[ "$n" -gt 1000 ] && runs=11
	python3 "$here/gen_world.py" "$n" "$token" >"$tmp/world.json"
	rm -f "$tmp/port"
	"$bin/nyx-sandboxd" --world "$tmp/world.json" --port-file "$tmp/port" -q &
	pid=$!
	for _ in $(seq 1 200); do [ -s "$tmp/port" ] && break; sleep 0.05; done
	base="http://127.0.0.1:$(cat "$tmp/port")"

	# the same answer from both, before timing anything
	ours=$("$bin/nyx-route-inspect" --base-url "$base" --token-file "$tmp/token" |
		jq -cS '{status, id: .route.user_service_id, counts}') || true
	theirs=$("$here/curl-jq.sh" "$base" "$tmp/token" "$tmp" |
		jq -cS '{status, id, counts}')
	if [ "$ours" != "$theirs" ]; then
		echo "bench: the two disagree: $ours vs $theirs" >&2
		exit 1
	fi
	bytes=$(($(wc -c <"$tmp/us.json") + $(wc -c <"$tmp/keys.json")))

	read -r o_med _ o_rss < <(python3 "$here/measure.py" "$runs" \
		"$bin/nyx-route-inspect" --base-url "$base" --token-file "$tmp/token")
	read -r c_med _ _ < <(python3 "$here/measure.py" "$runs" \
		"$here/curl-jq.sh" "$base" "$tmp/token" "$tmp")
	floor=$("$tmp/parse_floor" "$tmp/us.json" "$tmp/keys.json" "$runs")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=

	awk -v n="$n" -v b="$bytes" -v o="$o_med" -v c="$c_med" -v f="$floor" \
		-v r="$o_rss" 'BEGIN {
		printf "%-7d %9d %9.2f %9.2f %7.1fx %9.2f %9.2fx %8d %8.2fx\n",
		    n, b, o, c, c / o, f, o / f, r, r * 1024 / b }'
done
echo "(${ours})"
