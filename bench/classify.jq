# The curl + jq alternative: join /user-services and /keys by id and
# classify the chrono-sandbox route the way WIRE.md 2 says.
# Input: jq -n --slurpfile us US.json --slurpfile keys KEYS.json -f classify.jq
($keys[0].keys | map({key: .id, value: .}) | from_entries) as $k
| [ $us[0].services[]
    | . as $r | $k[$r.id] as $key
    | select(($r.catalog_service_id // "") != ""
             and ($r.slug == "chrono-sandbox" or $r.slug == "chrono-sandbox-aevatar")
             and $key != null and $key.catalog_service_slug == "chrono-sandbox")
    | {id: $r.id, slug: $r.slug,
       accessible: ($r.credential_source.type == "personal" or $r.credential_source.allowed == true),
       active: $r.is_active,
       ready: ($r.is_active and $key.is_active and $key.connected
               and ($key.credential_source.type == "personal" or $key.credential_source.allowed == true)
               and $key.credential_source.type == $r.credential_source.type
               and $key.credential_source.org_id == $r.credential_source.org_id
               and $key.slug == $r.slug and $key.catalog_service_id == $r.catalog_service_id
               and (if $key.node_id == null then $key.status == "active" else $key.node_status == "online" end)),
       policy: ($r.forward_access_token == true and $r.inject_delegation_token == true
                and ((($r.delegation_token_scope // "") | [splits("\\s+")]) as $s
                     | ($s | index("proxy:*")) != null and ($s | index("sandbox:execute")) != null))} ]
| . as $c
| ($c | map(select(.accessible))) as $a
| ($a | map(select(.active))) as $act
| ($act | map(select(.ready))) as $ready
| ($ready | map(select(.policy))) as $el
| if ($c | length) == 0 then {status: "blocked", code: "CODE_EXECUTION_ROUTE_MISSING"}
  elif ($a | length) == 0 then {status: "blocked", code: "CODE_EXECUTION_ROUTE_ACCESS_DENIED"}
  elif ($act | length) == 0 then {status: "blocked", code: "CODE_EXECUTION_ROUTE_INACTIVE"}
  elif ($ready | length) == 0 then {status: "blocked", code: "CODE_EXECUTION_ROUTE_NOT_READY"}
  elif ($el | length) == 0 then {status: "blocked", code: "CODE_EXECUTION_ROUTE_POLICY_MISMATCH"}
  elif ($el | length) == 1 then {status: "admitted", id: $el[0].id}
  elif ($el | map(select(.slug == "chrono-sandbox")) | length) == 1
    then {status: "admitted", id: ($el | map(select(.slug == "chrono-sandbox")))[0].id}
  else {status: "blocked", code: "CODE_EXECUTION_ROUTE_AMBIGUOUS"} end
| . + {counts: {canonical: ($c|length), accessible: ($a|length), active: ($act|length), eligible: ($el|length)}}
