#!/usr/bin/env bash
# (a) local sandbox overhead: code-exec --backend local -e 'pass' against
#     bare /usr/bin/python3 -c pass, and a bubblewrap floor (the same
#     mounts, no code-exec);
# (b) sync round trip through nyx-sandboxd: code-exec --sync with the
#     admission piped in (one request) against curl posting the same
#     request.  One run; prints times and ratios.  See bench/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=${NYX_BIN:-$root/build/bin}
make -C "$root" -s all >/dev/null
tmp=$(mktemp -d)
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
runs=${RUNS:-31}

m() { python3 "$here/measure.py" "$runs" "$@" | cut -d' ' -f1; }

# (a)
py=$(m /usr/bin/python3 -c pass)
ce=$(m "$bin/code-exec" -q --backend local -l python -e pass)
mkdir -p "$tmp/code" "$tmp/work"
echo pass >"$tmp/code/main.py"
chmod -R a+rX "$tmp"
bw=$(m bwrap --unshare-all --die-with-parent --ro-bind /usr /usr \
	--symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin \
	--proc /proc --dev /dev --tmpfs /tmp --ro-bind "$tmp/code" /code \
	--bind "$tmp/work" /sandbox --chdir /sandbox /usr/bin/python3 -I /code/main.py)
echo "(a) local sandbox, median of $runs"
awk -v p="$py" -v c="$ce" -v b="$bw" 'BEGIN {
	printf "  python3 -c pass            %8.2f ms\n", p
	printf "  bwrap + python3 (floor)    %8.2f ms\n", b
	printf "  code-exec --backend local  %8.2f ms   overhead %+.2f ms (%.2fx); over the bwrap floor %+.2f ms\n", c, c - p, c / p, c - b }'

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
