"""Workspace items over HTTP: list, search, read, write, versions, drafts, linking, sync."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest
from tests.server.conftest import FLOW, SCRIPT, Live

SECRET = "sk-very-secret-value-4242"
ITEM_KEYS = {
    "path", "kind", "summary", "description", "version", "updated_by", "updated_at",
    "resource_type", "secret", "deleted",
}  # fmt: skip
INLINE: dict[str, Any] = {
    "model": "fake",
    "system": "You triage tickets.",
    "tools": [
        {
            "name": "lookup_order",
            "script": "def main(order_id: str, region: str): ...",
            "inputs": {"region": "eu", "order_id": {"expr": "flow_input.order"}},
        },
    ],
}
TRIAGE: dict[str, Any] = {
    "summary": "Triage",
    "steps": [
        {"id": "triage", "ai_agent": INLINE, "inputs": {"user_message": {"expr": "flow_input.t"}}}
    ],
}


def scoped(live: Live, user: str, *scopes: str) -> httpx.Client:
    """A client with a new token of `user` with `scopes`."""
    token = live.token(user, *scopes)
    return httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"})


def error(answer: httpx.Response, status: int, kind: str | None = None) -> dict[str, Any]:
    """The error body of `answer`, which must have `status` (and `kind`)."""
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert set(body) >= {"type", "message"}
    if kind is not None:
        assert body["type"] == kind, body
    return body


def test_list_answers_readable_items_without_values(live: Live) -> None:
    with live.client("ada") as ada, live.client("vic") as vic, live.client("max") as max_:
        listed = ada.get("/api/items", params={"prefix": "f/team/"})
        assert listed.status_code == 200
        items = listed.json()
        assert [i["path"] for i in items] == ["f/team/flow", "f/team/script"]
        assert all(set(i) == ITEM_KEYS for i in items)
        scripts = ada.get("/api/items", params={"kind": "script"}).json()
        assert [i["path"] for i in scripts] == ["f/team/script"]
        page = ada.get("/api/items", params={"limit": 1, "after": "f/team/flow"}).json()
        assert [i["path"] for i in page] == ["f/team/script"]
        assert [i["path"] for i in vic.get("/api/items").json()] == ["f/team/flow", "f/team/script"]
        assert [i["path"] for i in max_.get("/api/items").json()] == ["u/max/notes"]
        error(ada.get("/api/items", params={"limit": 0}), 422, "InvalidRequest")
        error(ada.get("/api/items", params={"kind": "nope"}), 422, "InvalidRequest")
    with live.anonymous() as anonymous:
        error(anonymous.get("/api/items"), 401)


def test_search_ranks_what_the_caller_may_read(live: Live) -> None:
    with live.client("vic") as vic, live.client("max") as max_:
        hits = vic.get("/api/search", params={"q": "greet"}).json()
        assert hits and hits[0]["path"] == "f/team/flow"
        assert set(hits[0]) == {"path", "kind", "summary", "score"}
        assert max_.get("/api/search", params={"q": "greet"}).json() == []
        only = vic.get("/api/search", params={"q": "", "kind": "script"}).json()
        assert [h["path"] for h in only] == ["f/team/script"]
        error(vic.get("/api/search", params={"limit": 1000}), 422)


def test_read_an_item_and_its_versions(live: Live) -> None:
    with live.client("vic") as vic:
        answer = vic.get("/api/items/f/team/script")
        assert answer.status_code == 200
        item = answer.json()
        assert set(item) == ITEM_KEYS | {"value", "input_schema"}
        assert (item["value"], item["version"], item["kind"]) == (SCRIPT, 1, "script")
        assert vic.get("/api/items/f/team/script", params={"version": 1}).json()["value"] == SCRIPT
        error(vic.get("/api/items/f/team/script", params={"version": 9}), 404, "ItemNotFound")
        error(vic.get("/api/items/f/team/script", params={"version": 0}), 422)
        error(vic.get("/api/items/f/team/nothing"), 404, "ItemNotFound")
        for bad in ("F/Team/x", "f/team", "x/y/z", "f/team/a%20b", "f/team/../script"):
            error(vic.get(f"/api/items/{bad}"), 422)
    with live.client("max") as max_:
        error(max_.get("/api/items/f/team/script"), 404, "ItemNotFound")


def test_an_item_says_what_running_it_takes(live: Live) -> None:
    live.ws.write("f/team/region", "variable", "eu")
    with live.client("ada") as ada:
        script = ada.get("/api/items/f/team/script").json()
        assert script["input_schema"]["required"] == ["name"]
        assert script["input_schema"]["properties"]["name"]["type"] == "string"
        assert ada.get("/api/items/f/team/flow").json()["input_schema"] == FLOW["inputs"]
        assert ada.get("/api/items/f/team/region").json()["input_schema"] is None


def test_write_with_optimistic_concurrency(live: Live) -> None:
    code = "'''Say bye.'''\ndef main(name: str):\n    return 'bye ' + name\n"
    with live.client("olga") as olga:
        made = olga.put("/api/items/f/team/bye", json={"kind": "script", "value": code})
        assert made.status_code == 200, made.text
        assert (made.json()["version"], made.json()["summary"]) == (1, "Say bye.")
        stale = olga.put(
            "/api/items/f/team/bye", json={"kind": "script", "value": code, "base_version": 0}
        )
        assert "version 1, not 0" in error(stale, 409, "VersionConflict")["message"]
        again = olga.put(
            "/api/items/f/team/bye",
            json={"kind": "script", "value": code + "\n", "base_version": 1, "message": "m"},
        )
        assert again.json()["version"] == 2
        for body in (
            {"kind": "nope", "value": 1},
            {"value": code},
            {"kind": "script"},
            {"kind": "script", "value": code, "base_version": -1},
            [1, 2],
        ):
            error(olga.put("/api/items/f/team/bye", json=body), 422, "InvalidRequest")
        broken = olga.put("/api/items/f/team/bad", json={"kind": "script", "value": "def ("})
        assert broken.status_code == 422
        missing = copy.deepcopy(FLOW)
        missing["steps"][0]["script"]["path"] = "f/team/missing"
        assert olga.put("/api/items/f/team/f2", json={"kind": "flow", "value": missing}).status_code
        assert olga.put("/api/items/f/team/x", content=b"{not json").status_code == 422
    assert live.ws.get("f/team/bye").version == 2


def test_a_viewer_reads_but_does_not_write(live: Live) -> None:
    with live.client("vic") as vic:
        refused = vic.put("/api/items/f/team/script", json={"kind": "script", "value": SCRIPT})
        error(refused, 403, "PermissionDenied")
        error(vic.delete("/api/items/f/team/script"), 403)
        error(vic.delete("/api/history/f/team/script"), 403)
        error(vic.post("/api/restore/f/team/script", json={"version": 1}), 403)
        error(vic.put("/api/drafts/f/team/script", json={"kind": "script", "value": SCRIPT}), 403)
    with live.client("max") as max_:
        error(max_.put("/api/items/f/team/y", json={"kind": "variable", "value": "v"}), 403)
        error(max_.get("/api/history/f/team/script"), 404)


def test_a_token_scoped_to_a_folder_reads_it_only(live: Live) -> None:
    with scoped(live, "ada", "items:read:f/team/*") as token:
        assert token.get("/api/items/f/team/script").status_code == 200
        assert token.get("/api/history/f/team/script").status_code == 200
        error(token.get("/api/items/u/max/notes"), 403, "PermissionDenied")
        error(token.put("/api/items/f/team/script", json={"kind": "script", "value": SCRIPT}), 403)
        error(token.delete("/api/items/f/team/script"), 403)
        listed = [i["path"] for i in token.get("/api/items").json()]
        assert listed == ["f/team/flow", "f/team/script"]
        assert "u/max/notes" not in [h["path"] for h in token.get("/api/search").json()]
        files = [f["path"] for f in token.get("/api/export").json()["files"]]
        assert "u/max/notes.variable.yaml" not in files and "f/team/script.py" in files
        error(token.get("/api/export/u/max/notes"), 403)
        error(token.get("/api/users"), 403)
    with scoped(live, "ada", "runs:read") as runs:
        error(runs.get("/api/items"), 403)


def test_a_secret_written_over_http_is_never_answered(live: Live) -> None:
    answers: list[httpx.Response] = []
    path = "/api/items/f/team/api-key"
    with live.client("olga") as olga:
        body = {"kind": "variable", "value": SECRET, "secret": True, "summary": "The key"}
        answers.append(olga.put(path, json=body))
        assert answers[-1].status_code == 200 and answers[-1].json()["value"] is None
        answers.append(olga.get(path))
        assert answers[-1].json()["secret"] is True and answers[-1].json()["value"] is None
        answers.append(olga.get(path, params={"reveal": "true"}))
        assert answers[-1].json()["value"] is None
        answers.append(olga.put(path, json={**body, "base_version": 7}))
        assert answers[-1].status_code == 409
        answers.append(olga.put(path, json={**body, "kind": "script"}))
        answers.append(olga.put("/api/drafts/f/team/api-key", json=body))
        assert answers[-1].status_code == 422
        for url in (
            "/api/items",
            "/api/search?q=key",
            "/api/history/f/team/api-key",
            "/api/diff/f/team/api-key?old=1",
            "/api/export",
            "/api/export/f/team/api-key",
            "/api/drafts",
        ):
            answers.append(olga.get(url))
            assert answers[-1].status_code < 500, url
        exported = olga.get("/api/export", params={"prefix": "f/team/"}).json()
        assert exported["secrets_without_value"] == ["f/team/api-key"]
        # Importing what was exported keeps the stored value.
        imported = olga.post("/api/import", json={"files": exported["files"]})
        assert imported.status_code == 200, imported.text
        answers.append(imported)
    with live.client("ada") as ada:
        answers.append(ada.get("/api/audit"))
    for answer in answers:
        assert SECRET not in answer.text, answer.request.url
    assert live.ws.get("f/team/api-key", reveal=True).value == SECRET


def test_delete_then_history_clear_and_restore(live: Live) -> None:
    with live.client("olga") as olga:
        for n in (1, 2):
            code = f"'''Version {n}.'''\ndef main():\n    return {n}\n"
            olga.put("/api/items/f/team/v", json={"kind": "script", "value": code})
        versions = olga.get("/api/history/f/team/v").json()
        assert [v["version"] for v in versions] == [2, 1]
        assert set(versions[0]) == {
            "path", "version", "kind", "summary", "description", "message", "created_by",
            "created_at", "resource_type",
        }  # fmt: skip
        diff = olga.get("/api/diff/f/team/v", params={"old": 1, "new": 2}).json()
        assert diff["path"] == "f/team/v" and "-    return 1" in diff["diff"]
        assert "+    return 2" in diff["diff"]
        assert olga.get("/api/diff/f/team/v", params={"old": 2}).json()["diff"] == ""
        error(olga.get("/api/diff/f/team/v"), 422)
        error(olga.get("/api/diff/f/team/v", params={"old": 5}), 404)
        restored = olga.post("/api/restore/f/team/v", json={"version": 1, "message": "back"})
        assert restored.status_code == 200
        assert (restored.json()["version"], restored.json()["summary"]) == (3, "Version 1.")
        error(olga.post("/api/restore/f/team/v", json={"version": 9}), 404)
        error(olga.post("/api/restore/f/team/v", json={}), 422)
        cleared = olga.delete("/api/history/f/team/v")
        assert cleared.json() == {"path": "f/team/v", "dropped": 2}
        assert [v["version"] for v in olga.get("/api/history/f/team/v").json()] == [3]
        assert olga.delete("/api/items/f/team/v").status_code == 204
        error(olga.get("/api/items/f/team/v"), 404)
        error(olga.delete("/api/items/f/team/v"), 404)
        gone = olga.get("/api/items", params={"prefix": "f/team/v", "deleted": True}).json()
        assert [(i["path"], i["deleted"]) for i in gone] == [("f/team/v", True)]
        assert olga.get("/api/history/f/team/v").status_code == 200
        error(olga.get("/api/history/f/team/none"), 404)


def test_drafts_then_deploy(live: Live) -> None:
    changed = SCRIPT.replace("hello", "hi")
    with live.client("olga") as olga:
        saved = olga.put("/api/drafts/f/team/script", json={"kind": "script", "value": changed})
        assert saved.status_code == 200, saved.text
        assert set(saved.json()) == {
            "path", "owner", "kind", "summary", "description", "updated_at", "resource_type",
            "value",
        }  # fmt: skip
        assert [d["path"] for d in olga.get("/api/drafts").json()] == ["f/team/script"]
        assert "value" not in olga.get("/api/drafts").json()[0]
        assert olga.get("/api/drafts/f/team/script").json()["value"] == changed
        assert olga.get("/api/items/f/team/script").json()["value"] == SCRIPT
        assert olga.get("/api/linked-drafts/f/team/flow").json() == {
            "path": "f/team/flow",
            "agents": [],
        }
        deployed = olga.post("/api/deploy/f/team/script", json={"message": "hi"})
        assert (deployed.json()["version"], deployed.json()["value"]) == (2, changed)
        error(olga.get("/api/drafts/f/team/script"), 404, "ItemNotFound")
        error(olga.post("/api/deploy/f/team/script", json={}), 404)
        olga.put("/api/drafts/f/team/script", json={"kind": "script", "value": SCRIPT})
        assert olga.delete("/api/drafts/f/team/script").status_code == 204
        error(olga.delete("/api/drafts/f/team/script"), 404)
        error(olga.put("/api/drafts/f/team/v", json={"kind": "variable", "value": "x"}), 422)
        error(olga.post("/api/deploy/f/team/script", json={"agents": "x"}), 422)
    with live.client("vic") as vic:
        assert vic.get("/api/drafts").json() == []


def test_save_a_step_as_an_agent_then_unlink_it(live: Live) -> None:
    with live.client("olga") as olga:
        olga.put("/api/items/f/team/triage", json={"kind": "flow", "value": TRIAGE})
        body = {"flow": "f/team/triage", "step_id": "triage", "agent_path": "f/team/agent"}
        saved = olga.post("/api/agents/save-step", json={**body, "message": "save"})
        assert saved.status_code == 200, saved.text
        assert (saved.json()["path"], saved.json()["resource_type"]) == ("f/team/agent", "ai_agent")
        flow = olga.get("/api/items/f/team/triage").json()
        assert flow["version"] == 2
        assert flow["value"]["steps"][0]["ai_agent"]["agent"] == "f/team/agent"
        error(olga.post("/api/agents/save-step", json=body), 422, "InvalidValue")
        error(olga.post("/api/agents/save-step", json={**body, "step_id": "nope"}), 422)
        error(olga.post("/api/agents/save-step", json={"flow": "f/team/triage"}), 422)
        # An agent's draft is deployed with the flow.
        agent = olga.get("/api/items/f/team/agent").json()["value"]
        agent["system"] = "You sort tickets."
        draft = {"kind": "resource", "value": agent, "resource_type": "ai_agent"}
        assert olga.put("/api/drafts/f/team/agent", json=draft).status_code == 200
        linked = olga.get("/api/linked-drafts/f/team/triage").json()
        assert linked == {"path": "f/team/triage", "agents": ["f/team/agent"]}
        deployed = olga.post("/api/deploy/f/team/triage", json={"agents": ["f/team/agent"]})
        error(deployed, 404)  # the flow itself has no draft
        unlink = {"flow": "f/team/triage", "step_id": "triage"}
        with scoped(live, "olga", "items:write:f/team/triage") as narrow:
            # The agent's configuration would land in the flow: the token must reach the agent.
            error(narrow.post("/api/agents/unlink-step", json=unlink), 403)
        unlinked = olga.post("/api/agents/unlink-step", json=unlink)
        assert unlinked.status_code == 200, unlinked.text
        assert unlinked.json()["value"]["steps"][0]["ai_agent"]["system"] == "You triage tickets."
        error(olga.post("/api/agents/unlink-step", json=unlink), 422, "InvalidValue")
        diff = olga.get("/api/diff/f/team/agent", params={"old": 1}).json()
        assert diff["diff"] == ""
    with live.client("vic") as vic:
        error(vic.post("/api/agents/save-step", json={**body, "step_id": "triage"}), 403)


def test_export_and_import_as_sync_files(live: Live) -> None:
    with live.client("ada") as ada:
        exported = ada.get("/api/export", params={"prefix": "f/team/"})
        assert exported.status_code == 200
        files = {f["path"]: f["text"] for f in exported.json()["files"]}
        assert set(files) == {
            "f/team/folder.meta.yaml",
            "f/team/flow.flow.yaml",
            "f/team/script.py",
        }
        assert files["f/team/script.py"] == SCRIPT
        closure = ada.get("/api/export/f/team/flow", params={"closure": True}).json()
        assert {f["path"] for f in closure["files"]} == set(files)
        one = ada.get("/api/export/f/team/script").json()
        assert {f["path"] for f in one["files"]} == {"f/team/folder.meta.yaml", "f/team/script.py"}
        error(ada.get("/api/export/f/team/none"), 404)
        error(ada.get("/api/export/f/team/script", params={"closure": True}), 404)
        changed = [
            {"path": "f/team/script.py", "text": SCRIPT.replace("hello", "hey")},
            {"path": "u/ada/new.variable.yaml", "text": "value: fresh\n"},
        ]
        plan = ada.post("/api/import", json={"files": changed, "dry_run": True})
        assert plan.status_code == 200, plan.text
        body = plan.json()
        assert (body["applied"], body["counts"]) == (
            False,
            {"create": 1, "update": 1, "unchanged": 0},
        )
        assert set(body) == {"applied", "message", "counts", "problem", "folders", "items"}
        assert live.ws.get("f/team/script").version == 1
        done = ada.post("/api/import", json={"files": changed, "message": "sync"}).json()
        assert done["applied"] is True
        assert live.ws.get("f/team/script").version == 2
        assert live.ws.get("u/ada/new").value == "fresh"
        for bad in (
            [{"path": "../x.py", "text": ""}],
            [{"path": "/etc/x.py", "text": ""}],
            [{"path": "f/team/.x.py", "text": ""}],
            [{"path": "f/team/a.py", "text": ""}, {"path": "f/team/a.py", "text": ""}],
            [{"path": "f/team/a.py", "text": ""}, {"path": "f/team/a.py/b.py", "text": ""}],
            [{"path": "f/team/b.flow.yaml", "text": "steps: [\n"}],
        ):
            error(ada.post("/api/import", json={"files": bad}), 422)
        error(ada.post("/api/import", json={"files": "nope"}), 422, "InvalidRequest")
    with live.client("vic") as vic:
        error(vic.post("/api/import", json={"files": changed}), 403)
        assert vic.post("/api/import", json={"files": changed, "dry_run": True}).status_code in (
            200,
            403,
        )
    with scoped(live, "olga", "items:write") as items_only:
        meta = {"path": "f/team/folder.meta.yaml", "text": "summary: Renamed\n"}
        error(items_only.post("/api/import", json={"files": [meta]}), 403, "PermissionDenied")


@pytest.mark.parametrize("user", ["ada", "vic"])
def test_bad_requests_are_never_a_server_error(live: Live, user: str) -> None:
    weird = ["", "f", "f/", "f/team/", "f//x", "f/team/x/", "u/max/notes", "f/TEAM/x", "%00", "é"]
    with live.client(user) as client:
        for path in weird:
            for method, prefix in (
                ("GET", "items"), ("PUT", "items"), ("DELETE", "items"), ("GET", "history"),
                ("DELETE", "history"), ("POST", "restore"), ("GET", "diff"), ("GET", "drafts"),
                ("PUT", "drafts"), ("POST", "deploy"), ("GET", "linked-drafts"), ("GET", "export"),
            ):  # fmt: skip
                answer = client.request(method, f"/api/{prefix}/{path}", json={})
                assert answer.status_code < 500, (method, prefix, path, answer.text)
                if answer.status_code >= 400:
                    assert "type" in answer.json()
