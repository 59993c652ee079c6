"""`GET /api/runs/{run_id}/steps/{step_id}/journal`: an agent step's journal, replayed or live.

A server whose worker's model is scripted to call a tool that needs approval:
what the step journaled before the pause is `replayed` once the execution
after the approval read it back; for whoever may see the run, on both stores.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.server.conftest import TEAM, Live, ServerThread, build_team

from tidemill.engine import ModelChoice
from tidemill.llm import Model, ScriptedModel
from tidemill.server import ServerConfig, create_app
from tidemill.types import ToolCall
from tidemill.workspace import MasterKey, Workspace

PAY = {"name": "pay", "script": "def main(amount: int):\n    return f'paid {amount}'\n",
       "requires_approval": True}  # fmt: skip
FLOW = {
    "steps": [
        {
            "id": "agent",
            "inputs": {"user_message": "pay 5"},
            "ai_agent": {"model": "fake", "tools": [PAY]},
        }
    ]
}


def paying(_choice: ModelChoice) -> Model:
    call = ToolCall(id="c1", name="pay", arguments={"amount": 5})
    return ScriptedModel(["", "Paid."], tool_calls=[[call], []], record=False)


@pytest.fixture
def scripted(server_store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    """The folder's team on a server whose agent steps pay 5, then say `Paid.`."""
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    if not server_store.startswith("sqlite"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    name = f"w{uuid.uuid4().hex[:12]}"
    ws = Workspace(server_store, workspace=name, user="ada", migrate=True)
    build_team(ws)
    ws.write("f/team/pay", "flow", FLOW)
    tokens = {user: ws.acting_as(user).create_token("test").text for user in TEAM}
    thread = ServerThread(create_app(ServerConfig(db=server_store, workspace=name, models=paying)))
    try:
        yield Live(thread.start(), server_store, name, ws, tokens)
    finally:
        thread.stop()
        ws.close()


def until(client: httpx.Client, url: str, done: Any) -> Any:
    deadline = time.monotonic() + 60
    while True:
        body = client.get(url).json()
        if done(body):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.05)


def test_the_entries_before_a_pause_are_replayed_after_its_approval(scripted: Live) -> None:
    with scripted.client("olga") as client:
        answer = client.post("/api/runs", json={"path": "f/team/pay"})
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
        url = f"/api/runs/{run_id}/steps/agent/journal"
        approvals = until(client, f"/api/approvals?run_id={run_id}", bool)
        paused = client.get(url)
        assert paused.status_code == 200, paused.text
        assert [(e["kind"], e["replayed"]) for e in paused.json()] == [
            ("user_message", False), ("model_response", False), ("approval_requested", False)
        ]  # fmt: skip
        time.sleep(0.05)  # the claim after the decision starts later, on any clock
        decided = client.post(f"/api/approvals/{approvals[0]['id']}/approve", json={})
        assert decided.status_code == 200, decided.text
        until(client, f"/api/runs/{run_id}", lambda run: run["status"] == "succeeded")
        entries = client.get(url).json()
    assert [(e["seq"], e["kind"], e["replayed"]) for e in entries] == [
        (1, "user_message", True), (2, "model_response", True), (3, "approval_requested", True),
        (4, "approval_decided", False), (5, "tool_started", False), (6, "tool_finished", False),
        (7, "model_response", False), (8, "finished", False),
    ]  # fmt: skip
    assert all(isinstance(e["at"], float) and e["data"]["kind"] == e["kind"] for e in entries)
    assert entries[4]["data"]["call"]["arguments"] == {"amount": 5}
    assert entries[5]["data"]["result"]["content"] == "paid 5"
    assert entries[6]["data"]["response"]["message"]["content"] == "Paid."
    assert [e["at"] for e in entries] == sorted(e["at"] for e in entries)
    # Whoever may see the run reads it; a member who may not is told there is no such run.
    with scripted.client("vic") as client:
        assert client.get(url).json() == entries
        assert client.get(f"/api/runs/{run_id}/steps/nothing/journal").json() == []
    with scripted.client("max") as client:
        refused = client.get(url)
        assert refused.status_code == 404 and refused.json()["type"] == "RunNotFound"
    with scripted.client("olga") as client:
        unknown = client.get("/api/runs/no-such-run/steps/agent/journal")
        assert unknown.status_code == 404 and unknown.json()["type"] == "RunNotFound"
    with scripted.anonymous() as client:
        assert client.get(url).status_code == 401


def test_a_script_step_has_no_journal(live: Live) -> None:
    with live.client("olga") as client:
        run = client.post("/api/runs", json={"path": "f/team/flow", "inputs": {"name": "a"}})
        assert run.status_code == 201, run.text
        run_id = run.json()["id"]
        until(client, f"/api/runs/{run_id}", lambda body: body["status"] == "succeeded")
        answer = client.get(f"/api/runs/{run_id}/steps/greet/journal")
    assert answer.status_code == 200 and answer.json() == []
