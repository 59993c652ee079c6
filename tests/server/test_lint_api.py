"""`POST /api/lint/{path}`: a flow checked as saving the caller's draft would, storing nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.server.conftest import Live

from tidemill.server.routes._item_models import MAX_FILE_CHARS

GOOD = {"steps": [{"id": "one", "script": "def main():\n    return 1\n"}]}
GREET = {"id": "greet", "script": {"path": "f/team/script"}, "inputs": {"name": "x"}}
LINKED = {"id": "ask", "inputs": {"user_message": "hi"}, "ai_agent": {"agent": "f/team/agent"}}


def lint(live: Live, user: str, path: str, value: Any) -> dict[str, Any]:
    with live.client(user) as client:
        answer = client.post(f"/api/lint/{path}", json={"value": value})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert body["valid"] is (body["problems"] == [])
    return body


def where(body: dict[str, Any]) -> list[tuple[str | None, str]]:
    return [(p["step"], p["field"]) for p in body["problems"]]


def test_a_good_flow_is_valid_as_a_document_and_as_yaml(live: Live) -> None:
    assert lint(live, "olga", "f/team/new", GOOD) == {"valid": True, "problems": []}
    text = "steps:\n  - id: one\n    script: {path: f/team/script}\n    inputs: {name: x}\n"
    assert lint(live, "vic", "f/team/new", text)["valid"]  # a viewer may lint
    with live.client("olga") as client:
        assert client.get("/api/drafts").json() == []  # nothing was stored
        assert client.get("/api/items/f/team/new").status_code == 404


def test_each_problem_is_listed_with_its_step_and_field(live: Live) -> None:
    live.ws.write("f/team/agent", "resource", {"model": "fake"}, resource_type="ai_agent")
    need = {"steps": [{**GOOD["steps"][0], "needs": ["nope"]}]}
    assert where(lint(live, "olga", "f/team/new", need)) == [("one", "needs")]
    missing = {"steps": [{**GREET, "script": {"path": "f/team/nothing"}}]}
    body = lint(live, "olga", "f/team/new", missing)
    assert where(body) == [("greet", "script.path")]
    assert "f/team/nothing" in body["problems"][0]["message"]
    # max may read neither the script nor the agent his flow names.
    assert where(lint(live, "max", "u/max/new", {"steps": [GREET]})) == [("greet", "script.path")]
    body = lint(live, "max", "u/max/new", {"steps": [LINKED]})
    assert where(body) == [("ask", "ai_agent.agent")]
    assert "f/team/agent" in body["problems"][0]["message"]
    assert lint(live, "olga", "f/team/new", {"steps": [LINKED]})["valid"]  # olga may
    with live.client("max") as client:
        assert client.get("/api/drafts").json() == []


def test_text_that_is_no_flow_is_a_problem_not_an_error(live: Live) -> None:
    body = lint(live, "olga", "f/team/new", "steps:\n  - id: one\n   script: [\n")
    assert where(body) == [(None, "yaml")]
    assert body["problems"][0]["message"].startswith("invalid YAML at line 3")
    assert where(lint(live, "olga", "f/team/new", "- just a list\n")) == [(None, "value")]
    assert where(lint(live, "olga", "f/team/new", {"nope": 1})) == [
        (None, "steps"), (None, "nope")
    ]  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"value": 5},
        {"value": ["a", "list"]},
        {"value": None},
        {"value": "x" * (MAX_FILE_CHARS + 1)},
        {"value": {"steps": [], "description": "x" * MAX_FILE_CHARS}},
    ],
    ids=["no value", "a number", "a list", "null", "too long a text", "too big a document"],
)
def test_a_value_that_is_no_document_or_text_is_a_422(live: Live, body: dict[str, Any]) -> None:
    with live.client("olga") as client:
        answer = client.post("/api/lint/f/team/new", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["type"] == "InvalidRequest"


def test_a_caller_who_may_not_read_the_path_is_told_nothing_is_there(live: Live) -> None:
    with live.client("max") as client:
        refused = client.post("/api/lint/f/team/new", json={"value": GOOD})
        assert refused.status_code == 404 and refused.json()["type"] == "ItemNotFound"
        assert client.post("/api/lint/f/nowhere/new", json={"value": GOOD}).status_code == 404
        bad_path = client.post("/api/lint/not-a-path", json={"value": GOOD})
        assert bad_path.status_code == 422
    token = live.token("olga", "items:read:u/olga/*")  # a token whose scope stops at u/olga
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as client:
        scoped = client.post("/api/lint/f/team/new", json={"value": GOOD})
        assert scoped.status_code == 403 and scoped.json()["type"] == "PermissionDenied"
    with live.anonymous() as client:
        assert client.post("/api/lint/f/team/new", json={"value": GOOD}).status_code == 401
