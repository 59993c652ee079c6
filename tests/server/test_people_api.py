"""Users, groups, folders and grants over HTTP."""

from __future__ import annotations

from typing import Any

import httpx
from tests.server.conftest import PASSWORD, Live


def error(answer: httpx.Response, status: int, kind: str | None = None) -> dict[str, Any]:
    """The error body of `answer`, which must have `status` (and `kind`)."""
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert set(body) >= {"type", "message"}
    if kind is not None:
        assert body["type"] == kind, body
    return body


def test_users_are_listed_added_and_changed(live: Live) -> None:
    with live.client("max") as max_:
        users = max_.get("/api/users")
        assert users.status_code == 200
        assert [u["name"] for u in users.json()] == ["ada", "max", "olga", "vic"]
        assert set(users.json()[0]) == {"name", "is_admin", "disabled", "groups", "created_at"}
        vic = next(u for u in users.json() if u["name"] == "vic")
        assert vic["groups"] == ["readers"]
        error(max_.post("/api/users", json={"name": "zed"}), 403, "PermissionDenied")
        error(max_.patch("/api/users/vic", json={"disabled": True}), 403)
    with live.client("ada") as ada:
        made = ada.post("/api/users", json={"name": "zed", "admin": True})
        assert made.status_code == 201
        assert (made.json()["name"], made.json()["is_admin"]) == ("zed", True)
        error(ada.post("/api/users", json={"name": "zed"}), 409, "WorkspaceError")
        error(ada.post("/api/users", json={"name": "Not A Name"}), 422, "InvalidPath")
        for body in ({}, {"name": ""}, {"name": "x", "admin": "perhaps"}):
            error(ada.post("/api/users", json=body), 422, "InvalidRequest")
        changed = ada.patch("/api/users/zed", json={"admin": False, "disabled": True})
        assert (changed.json()["is_admin"], changed.json()["disabled"]) == (False, True)
        assert ada.patch("/api/users/zed", json={}).json()["disabled"] is True
        error(ada.patch("/api/users/nobody", json={"disabled": True}), 404, "ItemNotFound")
        error(ada.patch("/api/users/ada", json={"admin": False}), 409, "WorkspaceError")
        error(ada.patch("/api/users/zed", json={"disabled": "perhaps"}), 422)


def test_passwords_are_set_by_their_user_or_an_admin_and_never_answered(live: Live) -> None:
    with live.client("max") as max_:
        done = max_.put("/api/users/max/password", json={"password": PASSWORD})
        assert done.status_code == 204 and PASSWORD not in done.text
        error(max_.put("/api/users/olga/password", json={"password": PASSWORD}), 403)
        short = max_.put("/api/users/max/password", json={"password": "short"})
        assert PASSWORD not in error(short, 422, "InvalidValue")["message"]
        error(max_.put("/api/users/max/password", json={}), 422, "InvalidRequest")
    with live.client("ada") as ada:
        assert ada.put("/api/users/olga/password", json={"password": PASSWORD}).status_code == 204
        error(ada.put("/api/users/nobody/password", json={"password": PASSWORD}), 404)
    with live.anonymous() as anonymous:
        for user in ("max", "olga"):
            signed = anonymous.post("/api/auth/sign-in", json={"user": user, "password": PASSWORD})
            assert signed.status_code == 200, signed.text
            anonymous.cookies.clear()


def test_groups_and_their_members(live: Live) -> None:
    with live.client("vic") as vic:
        groups = vic.get("/api/groups").json()
        assert groups == [{"name": "readers", "summary": "", "members": ["vic"]}]
        error(vic.post("/api/groups", json={"name": "ops"}), 403)
        error(vic.put("/api/groups/readers/members/max"), 403)
    with live.client("ada") as ada:
        made = ada.post("/api/groups", json={"name": "ops", "summary": "Operations"})
        assert made.status_code == 201
        assert made.json() == {"name": "ops", "summary": "Operations", "members": []}
        error(ada.post("/api/groups", json={"name": "ops"}), 409)
        assert ada.put("/api/groups/ops/members/max").status_code == 204
        assert ada.put("/api/groups/ops/members/max").status_code == 204
        members = {g["name"]: g["members"] for g in ada.get("/api/groups").json()}
        assert members["ops"] == ["max"]
        error(ada.put("/api/groups/ops/members/nobody"), 404)
        error(ada.put("/api/groups/nothing/members/max"), 404)
        assert ada.delete("/api/groups/ops/members/max").status_code == 204
        assert ada.delete("/api/groups/ops").status_code == 204
        error(ada.delete("/api/groups/ops"), 404)
        error(ada.delete("/api/groups/Bad Name"), 422)


def test_folders_and_grants(live: Live) -> None:
    with live.client("vic") as vic, live.client("max") as max_:
        folders = vic.get("/api/folders").json()
        assert [f["name"] for f in folders] == ["team"]
        assert folders[0]["roles"] == {"olga": "admin", "g/readers": "viewer"}
        assert set(folders[0]) == {"name", "summary", "roles", "created_by", "created_at"}
        assert max_.get("/api/folders").json() == []
        error(vic.patch("/api/folders/team", json={"summary": "x"}), 403)
        grant = {"target": "f/team", "grantee": "max", "role": "viewer"}
        error(vic.put("/api/grants", json=grant), 403)
        error(max_.post("/api/folders", json={"name": "mine"}), 403)
    with live.client("olga") as olga:
        changed = olga.patch("/api/folders/team", json={"summary": "The team"})
        assert changed.json()["summary"] == "The team"
        grant = {"target": "f/team", "grantee": "max", "role": "viewer"}
        granted = olga.put("/api/grants", json=grant)
        assert granted.status_code == 200 and granted.json() == grant
        with live.client("max") as max_:
            assert max_.get("/api/items/f/team/script").status_code == 200
            revoked = olga.put("/api/grants", json={**grant, "role": None})
            assert revoked.json()["role"] is None
            error(max_.get("/api/items/f/team/script"), 404)
        error(olga.put("/api/grants", json={**grant, "role": "owner"}), 422, "InvalidRequest")
        error(olga.put("/api/grants", json={"target": "f/team", "grantee": "max"}), 422)
        error(olga.put("/api/grants", json={**grant, "grantee": "nobody"}), 404)
        error(olga.put("/api/grants", json={**grant, "target": "nowhere"}), 422)
        error(olga.patch("/api/folders/team", json={}), 422)
    with live.client("ada") as ada:
        made = ada.post("/api/folders", json={"name": "ops", "roles": {"g/readers": "writer"}})
        assert made.status_code == 201 and made.json()["roles"] == {"g/readers": "writer"}
        error(ada.post("/api/folders", json={"name": "ops"}), 409)
        error(ada.post("/api/folders", json={"name": "x", "roles": {"max": "boss"}}), 422)
        error(ada.patch("/api/folders/nothing", json={"summary": "x"}), 404)
        item = {"target": "u/max/notes", "grantee": "g/readers", "role": "viewer"}
        assert ada.put("/api/grants", json=item).status_code == 200
    with live.client("vic") as vic:
        assert vic.get("/api/items/u/max/notes").json()["value"] == "max's notes"


def test_people_routes_need_the_people_scope(live: Live) -> None:
    token = live.token("ada", "items:write")
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as items:
        error(items.get("/api/users"), 403, "PermissionDenied")
        error(items.post("/api/groups", json={"name": "ops"}), 403)
        revoke = {"target": "f/team", "grantee": "max", "role": None}
        error(items.put("/api/grants", json=revoke), 403)
    token = live.token("ada", "people:read")
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as reader:
        assert reader.get("/api/folders").status_code == 200
        error(reader.post("/api/users", json={"name": "zed"}), 403)
        error(reader.get("/api/items"), 403)
    with live.anonymous() as anonymous:
        error(anonymous.get("/api/users"), 401)
