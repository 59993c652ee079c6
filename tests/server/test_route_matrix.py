"""Every route of the OpenAPI document against every kind of principal and item location.

The route list is read from `/openapi.json`, so a new route is checked the
moment it exists: with no credentials it must answer 401 (unless it is one
of `PUBLIC`), and to a token whose only scope is of another domain it must
answer 403 before it reads or changes anything (unless it is one of
`ANY_SCOPE`). The read routes about one item path are then asked, for each
principal, about each location: one's own `u/`, another user's `u/`, a
folder with a grant and a folder without.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from tests.server.conftest import Live

PUBLIC = {("GET", "/health"), ("POST", "/api/auth/sign-in"), ("POST", "/api/auth/sign-out")}
"""Routes anyone may call."""

ANY_SCOPE = {("GET", "/api/auth/me"), ("POST", "/api/auth/sign-out")}
"""Routes any signed-in caller may call, whatever its token's scopes."""

PROXY_ONLY = "proxy:read"
"""The narrow token's one scope: of a domain no API route outside the proxy's is in."""


def fill(template: str) -> str:
    """A concrete URL for a route template: an item path for `{path}`, a name otherwise."""

    def value(match: re.Match[str]) -> str:
        name = match[1]
        return "f/team/script" if name.startswith("path") else "nothing-here"

    return re.sub(r"\{([^}:]+)(?::[^}]*)?\}", value, template)


def routes(live: Live) -> list[tuple[str, str]]:
    with live.anonymous() as client:
        document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    found = [
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
        if method in ("get", "post", "put", "patch", "delete")
    ]
    assert len(found) > 40, "the document lists the API's routes"
    return found


def call(client: httpx.Client, method: str, template: str) -> httpx.Response:
    body: Any = {} if method in ("POST", "PUT", "PATCH") else None
    return client.request(method, fill(template), json=body)


def test_every_route_refuses_an_anonymous_caller(live: Live) -> None:
    wrong = []
    with live.anonymous() as client:
        for method, template in routes(live):
            if (method, template) in PUBLIC:
                continue
            answer = call(client, method, template)
            if answer.status_code != 401 or answer.json().get("type") != "SignInFailed":
                wrong.append(f"{method} {template}: {answer.status_code}")
    assert not wrong, "routes that answer an anonymous caller:\n" + "\n".join(wrong)


def test_every_route_asks_the_token_scopes_before_anything(live: Live) -> None:
    token = live.token("ada", PROXY_ONLY)  # an admin: only the scope can refuse
    wrong = []
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as client:
        for method, template in routes(live):
            if (method, template) in PUBLIC | ANY_SCOPE or template.startswith("/api/proxy/"):
                continue
            answer = call(client, method, template)
            if answer.status_code != 403 or answer.json().get("type") != "PermissionDenied":
                wrong.append(f"{method} {template}: {answer.status_code} {answer.text[:120]}")
    assert not wrong, "routes that skip the scope check:\n" + "\n".join(wrong)


# Reads about one item, at each location, as each principal: "ok" or "refused" (403/404).
LOCATIONS = {
    "f/team/script": {"ada": "ok", "olga": "ok", "vic": "ok", "max": "refused"},
    "u/max/notes": {"ada": "ok", "olga": "refused", "vic": "refused", "max": "ok"},
    "f/lab/secret": {"ada": "ok", "olga": "refused", "vic": "refused", "max": "refused"},
}
ITEM_READS = ["/api/items/{path}", "/api/history/{path}"]


@pytest.mark.parametrize("template", ITEM_READS)
def test_item_reads_follow_the_permission_module(live: Live, template: str) -> None:
    live.ws.add_folder("lab")  # no grant for anyone but the admin
    live.ws.write("f/lab/secret", "variable", "lab only")
    for path, outcomes in LOCATIONS.items():
        for user, expected in outcomes.items():
            with live.client(user) as client:
                answer = client.get(template.replace("{path}", path))
            got = "ok" if answer.status_code == 200 else "refused"
            assert answer.status_code in (200, 403, 404), (user, path, answer.text)
            assert got == expected, (user, path, answer.status_code)
    # A token narrowed to one folder reads it and nothing else, even for the admin.
    token = live.token("ada", "items:read:f/team/*")
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.get(template.replace("{path}", "f/team/script")).status_code == 200
        assert client.get(template.replace("{path}", "u/max/notes")).status_code == 403
        assert client.get(template.replace("{path}", "f/lab/secret")).status_code == 403
