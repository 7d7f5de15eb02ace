#!/usr/bin/env python3
"""Generate a nyx-sandboxd world with N routes for bench/inspect.sh.

Half the routes are organization routes.  Most are unrelated services;
several canonical chrono-sandbox candidates fail different gates (custom
slug borrower, inactive, not ready, viewer-only org, policy drift), and
exactly one is compliant, so the classification does real work.
Usage: gen_world.py N TOKEN > world.json"""
import json
import sys

n = int(sys.argv[1])
token = sys.argv[2]
routes = []
for i in range(n):
    owner = "u-bench" if i % 2 == 0 else ("org-a" if i % 4 == 1 else "org-b")
    r = {
        "id": f"us-{i:06d}",
        "owner": owner,
        "slug": f"svc-{i:06d}",
        "catalog_service_id": f"cat-{i % 97}",
        "catalog_service_slug": f"service-{i % 97}",
        "forward_access_token": i % 3 == 0,
        "inject_delegation_token": i % 5 == 0,
        "delegation_token_scope": "llm:proxy",
        "label": f"Service number {i}",
    }
    routes.append(r)

def sandbox(idx, **kw):
    r = routes[idx]
    r.update(slug="chrono-sandbox", catalog_service_id="cat-sandbox",
             catalog_service_slug="chrono-sandbox", forward_access_token=True,
             inject_delegation_token=True,
             delegation_token_scope="proxy:* sandbox:execute")
    r.update(kw)

step = max(n // 8, 1)
sandbox(0)                                               # compliant, personal
sandbox(step * 1, catalog_service_id=None)               # custom borrower
sandbox(step * 2, is_active=False)                       # inactive
sandbox(step * 3, key={"status": "expired"})             # not ready
sandbox(step * 4 + (1 if (step * 4) % 2 == 0 else 0),
        forward_access_token=False)                      # org route, drift
sandbox(step * 5, slug="chrono-sandbox-aevatar",
        delegation_token_scope="proxy:*")                # alias, drift
for r in routes:
    if r.get("catalog_service_id") is None:
        r.pop("catalog_service_id", None)

world = {
    "users": [{"id": "u-bench", "email": "bench@example.com"}],
    "orgs": [
        {"id": "org-a", "name": "A", "members": [{"user": "u-bench", "role": "admin"}]},
        {"id": "org-b", "name": "B", "members": [{"user": "u-bench", "role": "viewer"}]},
    ],
    "tokens": [{"token": token, "user": "u-bench", "kind": "user"}],
    "list_inactive_routes": True,
    "routes": routes,
}
json.dump(world, sys.stdout)
