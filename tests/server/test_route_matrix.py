"""Every route of the OpenAPI document against every kind of principal and item location.

The route list is read from `/openapi.json`, so a new route is checked the
moment it exists: with no credentials it must answer 401 (unless it is one
of `PUBLIC`), and to a token whose only scope is of another domain it must
answer 403 before it reads or changes anything (unless it is one of
`ANY_SCOPE`). The checks are functions of any served app
(`anonymous_problems`, `scope_problems`), and a test proves they report a
route that skips its permission check. The routes about one item path are
then asked, for each principal, about each location: one's own `u/`,
another user's `u/`, a folder with a grant and a folder without; the reads
of them and the writes (an item, a draft, a deploy, a delete, a grant).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import APIRouter
from tests.server.conftest import SCRIPT, Live, serving

from tidemill.errors import ItemNotFound
from tidemill.server._caller import SignedIn
from tidemill.workspace import Workspace

PUBLIC = {("GET", "/health"), ("POST", "/api/auth/sign-in"), ("POST", "/api/auth/sign-out")}
"""Routes anyone may call."""

ANY_SCOPE = {("GET", "/api/auth/me"), ("POST", "/api/auth/sign-out")}
"""Routes any signed-in caller may call, whatever its token's scopes."""

PROXY_ONLY = "proxy:read"
"""The narrow token's one scope: of a domain no API route outside the proxy's is in."""

Route = tuple[str, str]
"""A route of the document: its method and path template."""


def fill(template: str) -> str:
    """A concrete URL for a route template: an item path for `{path}`, a name otherwise."""

    def value(match: re.Match[str]) -> str:
        name = match[1]
        return "f/team/script" if name.startswith("path") else "nothing-here"

    return re.sub(r"\{([^}:]+)(?::[^}]*)?\}", value, template)


def document_routes(document: dict[str, Any]) -> list[Route]:
    """Every operation of an OpenAPI document, as (method, template)."""
    assert document["openapi"].startswith("3.1")
    return [
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
        if method in ("get", "post", "put", "patch", "delete")
    ]


def routes(live: Live) -> list[Route]:
    """The served app's routes, from its `/openapi.json`."""
    with live.anonymous() as client:
        found = document_routes(client.get("/openapi.json").json())
    assert len(found) > 40, "the document lists the API's routes"
    return found


def call(client: httpx.Client, method: str, template: str) -> httpx.Response:
    body: Any = {} if method in ("POST", "PUT", "PATCH") else None
    return client.request(method, fill(template), json=body)


def anonymous_problems(live: Live, found: list[Route]) -> list[str]:
    """The routes (not `PUBLIC`) that answer an anonymous caller anything but 401."""
    wrong = []
    with live.anonymous() as client:
        for method, template in found:
            if (method, template) in PUBLIC:
                continue
            answer = call(client, method, template)
            if answer.status_code != 401 or answer.json().get("type") != "SignInFailed":
                wrong.append(f"{method} {template}: {answer.status_code}")
    return wrong


def scope_problems(live: Live, found: list[Route]) -> list[str]:
    """The routes that answer the admin's token of another domain anything but 403."""
    token = live.token("ada", PROXY_ONLY)  # an admin: only the scope can refuse
    wrong = []
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as client:
        for method, template in found:
            if (method, template) in PUBLIC | ANY_SCOPE or template.startswith("/api/proxy/"):
                continue
            answer = call(client, method, template)
            if answer.status_code != 403 or answer.json().get("type") != "PermissionDenied":
                wrong.append(f"{method} {template}: {answer.status_code} {answer.text[:120]}")
    return wrong


def test_every_route_refuses_an_anonymous_caller(live: Live) -> None:
    wrong = anonymous_problems(live, routes(live))
    assert not wrong, "routes that answer an anonymous caller:\n" + "\n".join(wrong)


def test_every_route_asks_the_token_scopes_before_anything(live: Live) -> None:
    wrong = scope_problems(live, routes(live))
    assert not wrong, "routes that skip the scope check:\n" + "\n".join(wrong)


def test_the_checks_report_a_route_that_skips_its_permission_check(
    server_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rogue = APIRouter(prefix="/api/rogue")  # no `requires(...)`: what the checks must catch

    @rogue.get("/open/{path:path}")
    async def open_to_all(path: str) -> dict[str, str]:
        return {"path": path}

    @rogue.post("/signed-in")
    async def any_scope(who: SignedIn) -> dict[str, str | None]:
        return {"user": who.user}  # signed in, but no scope asked

    with serving(server_store, monkeypatch, routers=[rogue]) as served:
        found = routes(served)
        assert ("GET", "/api/rogue/open/{path}") in found
        assert ("POST", "/api/rogue/signed-in") in found
        anonymous = anonymous_problems(served, found)
        scoped = scope_problems(served, found)
    assert anonymous == ["GET /api/rogue/open/{path}: 200"]
    assert [line.split(":")[0] for line in scoped] == [
        "GET /api/rogue/open/{path}",
        "POST /api/rogue/signed-in",
    ]


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


def test_a_lint_reads_where_the_item_reads_do(live: Live) -> None:
    """`POST /api/lint/{path}` stores nothing: whoever may read a path may lint a flow there."""
    live.ws.add_folder("lab")
    live.ws.write("f/lab/secret", "variable", "lab only")
    flow = {"steps": [{"id": "one", "script": "def main():\n    return 1\n"}]}
    for path, outcomes in LOCATIONS.items():
        for user, expected in outcomes.items():
            with live.client(user) as client:
                answer = client.post(f"/api/lint/{path}", json={"value": flow})
            got = "ok" if answer.status_code == 200 else "refused"
            assert answer.status_code in (200, 403, 404), (user, path, answer.text)
            assert got == expected, (user, path, answer.status_code)
            assert answer.status_code != 200 or answer.json()["valid"]


# Writes about one item, at each location, as each principal: who may make them.
WRITERS = {
    "own": {"ada", "olga", "vic", "max"},  # everyone administers their own u/
    "other": {"ada"},  # another user's u/: only the workspace admin
    "f/team": {"ada", "olga"},  # olga is its admin, vic (g/readers) only a viewer, max nothing
    "f/lab": {"ada"},  # a folder with no grant for anyone
}
"""Who may change an item at each location: writing, drafting, deploying and deleting
need the writer role; granting needs the admin role, which each of them has there.
Anyone else is refused with 403 (`PermissionDenied`, as documented for a change the
caller may not make), whether or not they may read there, and nothing changes."""


def location(kind: str, user: str) -> str:
    """The folder or `u/` of a location, for `user`."""
    if kind == "own":
        return f"u/{user}"
    if kind == "other":
        return "u/olga" if user == "max" else "u/max"
    return kind


def exists(ws: Workspace, path: str) -> bool:
    """Whether the item is there, for `ws`'s user."""
    try:
        ws.get(path)
    except ItemNotFound:
        return False
    return True


def prepare_draft(live: Live, user: str, path: str) -> None:
    """`user`'s draft of `path`, saved while a workspace admin if it must be."""
    promoted = user != "ada"
    if promoted:
        live.ws.set_user(user, admin=True)
    live.ws.acting_as(user).save_draft(path, "script", SCRIPT)
    if promoted:
        live.ws.set_user(user, admin=False)


def prepare_item(live: Live, user: str, path: str) -> None:
    live.ws.write(path, "variable", "there")


def nothing(live: Live, user: str, path: str) -> None:
    return None


@dataclass(frozen=True)
class WriteRoute:
    """A write about one item: how to set it up (as ada), call it, and see it took effect."""

    name: str
    prepare: Callable[[Live, str, str], None]
    call: Callable[[httpx.Client, str], httpx.Response]
    happened: Callable[[Live, str, str], bool]


WRITES = [
    WriteRoute(
        "write",
        nothing,
        lambda c, p: c.put(f"/api/items/{p}", json={"kind": "variable", "value": "v"}),
        lambda live, user, p: exists(live.ws, p),
    ),
    WriteRoute(
        "draft",
        nothing,
        lambda c, p: c.put(f"/api/drafts/{p}", json={"kind": "script", "value": SCRIPT}),
        lambda live, user, p: p in [d.path for d in live.ws.acting_as(user).drafts()],
    ),
    WriteRoute(
        "deploy",
        prepare_draft,
        lambda c, p: c.post(f"/api/deploy/{p}", json={}),
        lambda live, user, p: exists(live.ws, p),
    ),
    WriteRoute(
        "delete",
        prepare_item,
        lambda c, p: c.delete(f"/api/items/{p}"),
        lambda live, user, p: not exists(live.ws, p),
    ),
    WriteRoute(
        "grant",
        prepare_item,
        lambda c, p: c.put("/api/grants", json={"target": p, "grantee": "zed", "role": "viewer"}),
        lambda live, user, p: exists(live.ws.acting_as("zed"), p),
    ),
]


@pytest.mark.parametrize("route", WRITES, ids=lambda r: r.name)
def test_item_writes_follow_the_permission_module(live: Live, route: WriteRoute) -> None:
    live.ws.add_folder("lab")  # no grant for anyone but the admin
    live.ws.add_user("zed")  # whom the grants are for: he reads nothing else
    wrong = []
    for kind, writers in WRITERS.items():
        for user in ("ada", "olga", "vic", "max"):
            path = f"{location(kind, user)}/{route.name}-{user}"
            route.prepare(live, user, path)
            with live.client(user) as client:
                answer = route.call(client, path)
            allowed = user in writers
            if allowed:
                ok = 200 <= answer.status_code < 300 and route.happened(live, user, path)
            else:
                refused = answer.status_code == 403 and answer.json()["type"] == "PermissionDenied"
                ok = refused and not route.happened(live, user, path)
            if not ok:
                wrong.append(f"{user} on {path} ({kind}): {answer.status_code} {answer.text[:100]}")
    assert not wrong, f"{route.name} does not follow the rules:\n" + "\n".join(wrong)
