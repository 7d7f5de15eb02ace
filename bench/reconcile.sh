#!/usr/bin/env bash
# (a) N (default 1000) pending durable operations in the ledger, settled on
#     nyx-sandboxd: one `exec-status --all --now` (a status and a result
#     exchange per operation, concurrently over reused connections)
#     against a shell loop running one curl per request with the same
#     credential, in one run; prints both times, the ratio and the TCP
#     connections exec-status opened.
# (b) LONG=1 (the default): a program sleeping 130 s with
#     --timeout-secs 180 runs through short exchanges; prints the longest.
# (c) CRASH=N (default 0): the crash matrix (tests/crash.bats) N times;
#     prints the failures.  See bench/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${NYX_BIN:-$root/build/bin}
make -C "$root" -s all >/dev/null
tmp=$(mktemp -d)
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
n=${N:-1000}

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
export NYX_BASE_URL=$base NYX_TOKEN_FILE=$tmp/token NYX_STATE_DIR=$tmp/state

# (a) fill the ledger: N receipts (each program is `true`)
echo "(a) filling the ledger with $n pending operations..."
"$bin/nyx-route-inspect" >"$tmp/adm"
for i in $(seq 1 "$n"); do
	"$bin/code-exec" -q --no-wait --request-id "bench-$i" -l bash -e true \
		<"$tmp/adm" >/dev/null || [ $? -eq 5 ]
done
sleep 2 # every program has finished on the server
cp -a "$tmp/state" "$tmp/state.orig"

# the obvious alternative: one curl per exchange, the same two per operation
sqlite3 "$tmp/state/ledger.db" 'SELECT operation_id FROM operations' >"$tmp/ids"
p="$base/api/v1/proxy/s/chrono-sandbox/executions"
# the credential from a header file (curl -H @file), read once per curl
printf 'Authorization: Bearer %s\n' "$token" >"$tmp/auth.hdr"
chmod 600 "$tmp/auth.hdr"
cat >"$tmp/curl.sh" <<CURL
#!/bin/bash
while read -r id; do
	curl -sf -o /dev/null -H @"$tmp/auth.hdr" "$p/\$id?_nyxid_via=us-1"
	curl -sf -o /dev/null -H @"$tmp/auth.hdr" "$p/\$id/result?_nyxid_via=us-1"
done <"$tmp/ids"
CURL
chmod +x "$tmp/curl.sh"

t0=$(date +%s%N)
"$bin/exec-status" -v --all --now >"$tmp/out" 2>"$tmp/err" || [ $? -le 5 ]
t1=$(date +%s%N)
"$tmp/curl.sh"
t2=$(date +%s%N)
settled=$(jq -s 'map(select(.type=="exec.result" and .success))|length' "$tmp/out")
conns=$(sed -n 's/.* over \([0-9]*\) connection.*/\1/p' "$tmp/err" | tail -n 1)
awk -v a="$t0" -v b="$t1" -v c="$t2" -v n="$n" -v s="$settled" -v k="$conns" 'BEGIN {
	o = (b - a) / 1e6; q = (c - b) / 1e6
	printf "  exec-status --all --now   %9.1f ms  (%d of %d settled, %s TCP connections)\n", o, s, n, k
	printf "  curl loop, 2 per op       %9.1f ms\n", q
	printf "  ratio                     %9.2fx faster\n", q / o }'

# (b)
if [ "${LONG:-1}" = 1 ]; then
	echo "(b) a program sleeping 130 s, --timeout-secs 180..."
	"$bin/code-exec" -v --timeout-secs 180 -l bash -e 'sleep 130; echo woke' \
		<"$tmp/adm" >"$tmp/long" 2>"$tmp/long.err"
	jq -r '"  result: " + .output.stdout' "$tmp/long"
	sed -n 's/.*: \([0-9]*\) exchange(s), the longest \([0-9]*\) ms/  \1 exchanges, the longest \2 ms/p' "$tmp/long.err"
fi

# (c)
if [ "${CRASH:-0}" -gt 0 ]; then
	fails=0
	for i in $(seq 1 "$CRASH"); do
		bats "$root/tests/crash.bats" >"$tmp/crash.$i" 2>&1 || fails=$((fails + 1))
	done
	echo "(c) crash matrix: $fails failed of $CRASH runs"
fi
