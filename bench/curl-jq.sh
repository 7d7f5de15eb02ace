#!/bin/sh
# The obvious alternative to nyx-route-inspect: two curls and a jq join.
# Usage: curl-jq.sh BASE_URL TOKEN_FILE WORKDIR
set -eu
base=$1 tokfile=$2 dir=$3
auth="Authorization: Bearer $(cat "$tokfile")"
curl -sf -H "$auth" "$base/api/v1/user-services" -o "$dir/us.json"
curl -sf -H "$auth" "$base/api/v1/keys" -o "$dir/keys.json"
jq -c -n --slurpfile us "$dir/us.json" --slurpfile keys "$dir/keys.json" \
	-f "$(dirname "$0")/classify.jq"
