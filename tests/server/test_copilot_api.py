"""The copilot's chat API: each turn a durable run, its memory the conversation, on both stores.

The server's models are scripted (`ServerConfig(models=...)`): one
`ScriptedModel` answering from the conversation it is sent, the way a real
model would, so a turn resumed after an approval picks up where it was. Its
behaviour is chosen by the turn's message: "build ..." searches the
workspace's flows and proposes a flow reusing the one found; "what ..."
answers from the recalled earlier turns; "test ..." asks for a test run
of the draft and reports what it got.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from tests.server.conftest import Live, ServerThread, build_team, sse_messages

from tidemill.engine import ModelChoice, default_models
from tidemill.engine._memory import RECALL_HEADER
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.server import ServerConfig, create_app
from tidemill.types import Message, ToolCall
from tidemill.workspace import MasterKey, Workspace

pytestmark = pytest.mark.timeout(120)

TARGET = "f/team/welcome"
PROPOSED = {
    "summary": "Welcome someone",
    "inputs": {"type": "object", "properties": {"name": {"type": "string"}}},
    "steps": [
        {"id": "greet", "flow": "f/team/flow", "inputs": {"name": {"expr": "flow_input.name"}}}
    ],
}
ENDED = ("succeeded", "failed", "cancelled")


def _call(messages: list[Message], name: str, **arguments: Any) -> Message:
    return Message.assistant(
        "", tool_calls=[ToolCall(id=f"c{len(messages)}", name=name, arguments=arguments)]
    )


def copilot(request: ModelRequest) -> Message:
    """The scripted copilot: decides from this turn's message and the tool results so far."""
    messages = list(request.messages)
    start = max(
        i
        for i, m in enumerate(messages)
        if m.role == "user" and not m.content.startswith(RECALL_HEADER)
    )
    asked = messages[start].content
    results = [m for m in messages[start + 1 :] if m.role == "tool"]
    if asked.startswith("build"):
        if not results:
            return _call(messages, "search_flows", query="greet")
        if len(results) == 1:
            found = json.loads(results[0].content)
            return (
                _call(messages, "set_flow", flow=yaml.safe_dump(PROPOSED, sort_keys=False))
                if (found)
                else Message.assistant("Nothing to reuse.")
            )
        return Message.assistant(f"Saved your draft of {TARGET}, reusing f/team/flow.")
    if asked.startswith("what"):
        recalled = [m.content for m in messages if m.content.startswith(RECALL_HEADER)]
        seen = (
            recalled
            and "build a welcome flow" in recalled[0]
            and "Saved your draft" in (recalled[0])
        )
        return Message.assistant("You asked me to build a welcome flow." if seen else "No idea.")
    if asked.startswith("test"):
        if not results:
            return _call(messages, "test_run_flow", inputs={"name": "Tess"})
        last = results[-1]
        if last.is_error:
            return Message.assistant(f"Not run: {last.content}")
        view = json.loads(last.content)
        return Message.assistant(f"Test run {view['run_id']} {view['status']}.")
    return Message.assistant("Hello.")


@contextlib.contextmanager
def chat_server(server_store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    """A server with the team whose copilot model ("fake") is the scripted copilot."""
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    if not server_store.startswith("sqlite"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    scripted = ScriptedModel(handler=copilot, record=False)

    def models(choice: ModelChoice) -> Model:
        return scripted if choice.step_id == "copilot" else default_models(choice)

    name = f"w{uuid.uuid4().hex[:12]}"
    ws = Workspace(server_store, workspace=name, user="ada", migrate=True)
    build_team(ws)
    tokens = {user: ws.acting_as(user).create_token("test").text for user in ("ada", "olga", "max")}
    config = ServerConfig(
        db=server_store, workspace=name, concurrency=4, models=models, copilot_model="fake"
    )
    thread = ServerThread(create_app(config))
    try:
        yield Live(thread.start(), server_store, name, ws, tokens)
    finally:
        thread.stop()
        ws.close()


@pytest.fixture
def chat(server_store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    with chat_server(server_store, monkeypatch) as running:
        yield running


def settled(client: httpx.Client, run_id: str, *, until: tuple[str, ...] = ENDED) -> dict[str, Any]:
    """The run once its status is one of `until`."""
    for _ in range(600):
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        if run["status"] in until:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} is still {run['status']}")


def ask(client: httpx.Client, text: str, path: str = TARGET) -> str:
    answer = client.post(f"/api/copilot/{path}/messages", json={"message": text})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["run_id"]
    return run_id


def answer_of(client: httpx.Client, run_id: str) -> Any:
    run = settled(client, run_id)
    assert run["status"] == "succeeded", (run["error"], run)
    return run["result"]


def test_a_turn_searches_then_proposes_a_draft_and_the_next_turn_continues(chat: Live) -> None:
    with chat.client("olga") as olga:
        first = ask(olga, "build a welcome flow")
        assert answer_of(olga, first) == f"Saved your draft of {TARGET}, reusing f/team/flow."
        draft = olga.get(f"/api/drafts/{TARGET}").json()
        assert draft["kind"] == "flow" and draft["value"]["steps"][0]["flow"] == "f/team/flow"
        assert olga.get(f"/api/items/{TARGET}").status_code == 404  # nothing deployed
        run = olga.get(f"/api/runs/{first}").json()
        assert run["run_as"] == "olga"

        second = ask(olga, "what did I ask you?")
        assert answer_of(olga, second) == "You asked me to build a welcome flow."

        talk = olga.get(f"/api/copilot/{TARGET}").json()
    assert talk["flow"] == TARGET and talk["runs"] == [first, second]
    assert talk["running"] is None and talk["pending_approvals"] == []
    shown = [(m["role"], m.get("content", ""), [c["name"] for c in m.get("tool_calls", [])])
             for m in talk["messages"]]  # fmt: skip
    assert shown[0] == ("user", "build a welcome flow", [])
    assert [calls for _, _, calls in shown if calls] == [["search_flows"], ["set_flow"]]
    assert shown[-2] == ("user", "what did I ask you?", [])
    assert shown[-1] == ("assistant", "You asked me to build a welcome flow.", [])
    assert not any(RECALL_HEADER in text for _, text, _ in shown)  # each turn shown once


def test_a_turns_events_show_its_tool_calls(chat: Live) -> None:
    with chat.client("olga") as olga:
        run_id = ask(olga, "build a welcome flow")
        answer_of(olga, run_id)
        with olga.stream("GET", f"/api/runs/{run_id}/events") as stream:
            events = sse_messages(stream.read().decode())
    kinds = [m["event"] for m in events]
    assert kinds[-1] == "run_finished"
    turns = [m["data"]["data"]["response"]["message"] for m in events if m["event"] == "model_turn"]
    assert [[c["name"] for c in t["tool_calls"]] for t in turns] == [
        ["search_flows"],
        ["set_flow"],
        [],
    ]
    results = [m["data"]["data"]["result"] for m in events if m["event"] == "tool_result"]
    assert [r["name"] for r in results] == ["search_flows", "set_flow"]
    assert "f/team/flow" in results[0]["content"] and not results[1]["is_error"]


def test_a_test_run_waits_for_an_ordinary_approval_and_runs_once_approved(chat: Live) -> None:
    with chat.client("olga") as olga:
        answer_of(olga, ask(olga, "build a welcome flow"))
        turn = ask(olga, "test it")
        settled(olga, turn, until=("waiting",))
        (approval,) = [a for a in olga.get("/api/approvals").json() if a["root_id"] == turn]
        assert approval["kind"] == "tool_call" and approval["step_id"] == "copilot"
        talk = olga.get(f"/api/copilot/{TARGET}").json()
        assert talk["running"] == turn and talk["pending_approvals"] == [approval["id"]]
        assert talk["runs"][-1] == turn
        busy = olga.post(f"/api/copilot/{TARGET}/messages", json={"message": "hello"})
        assert busy.status_code == 409, busy.text
        assert turn in busy.json()["message"]
        assert olga.delete(f"/api/copilot/{TARGET}").status_code == 409  # not while in flight
        assert _test_runs(olga) == []  # nothing ran before the approval

        decided = olga.post(f"/api/approvals/{approval['id']}/approve", json={})
        assert decided.status_code == 200, decided.text
        reply = answer_of(olga, turn)
        (test_run,) = _test_runs(olga)
        assert reply == f"Test run {test_run['id']} succeeded."
        assert test_run["run_as"] == "olga" and test_run["draft"] is True
        assert settled(olga, test_run["id"])["result"] == "hello Tess"


def test_a_rejected_test_run_does_not_run(chat: Live) -> None:
    with chat.client("olga") as olga:
        answer_of(olga, ask(olga, "build a welcome flow"))
        turn = ask(olga, "test it")
        settled(olga, turn, until=("waiting",))
        (approval,) = [a for a in olga.get("/api/approvals").json() if a["root_id"] == turn]
        decided = olga.post(f"/api/approvals/{approval['id']}/reject", json={"comment": "not now"})
        assert decided.status_code == 200, decided.text
        reply = answer_of(olga, turn)
        assert reply.startswith("Not run:") and "not now" in reply, reply
        assert _test_runs(olga) == []


def _test_runs(client: httpx.Client) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = client.get("/api/runs", params={"path": TARGET}).json()["runs"]
    return runs


def test_a_member_who_may_not_read_the_folder_is_refused(chat: Live) -> None:
    with chat.client("max") as max_:
        sent = max_.post(f"/api/copilot/{TARGET}/messages", json={"message": "build it"})
        assert sent.status_code == 404, sent.text
        assert max_.get(f"/api/copilot/{TARGET}").status_code == 404
        assert max_.delete(f"/api/copilot/{TARGET}").status_code == 404
        # In his own folder he may.
        assert max_.get("/api/copilot/u/max/idea").json()["messages"] == []


def test_another_users_conversation_is_invisible(chat: Live) -> None:
    with chat.client("olga") as olga, chat.client("ada") as ada:
        turn = ask(olga, "build a welcome flow")
        answer_of(olga, turn)
        mine = olga.get(f"/api/copilot/{TARGET}").json()
        theirs = ada.get(f"/api/copilot/{TARGET}").json()
    assert mine["runs"] == [turn]
    assert theirs["runs"] == [] and theirs["messages"] == []
    assert theirs["conversation"] != mine["conversation"]
    with chat.client("max") as max_:
        assert max_.get(f"/api/runs/{turn}").status_code == 404  # a turn is its user's run


def test_forgetting_starts_a_new_conversation(chat: Live) -> None:
    with chat.client("olga") as olga:
        answer_of(olga, ask(olga, "build a welcome flow"))
        assert olga.delete(f"/api/copilot/{TARGET}").status_code == 204
        assert olga.get(f"/api/copilot/{TARGET}").json()["messages"] == []
        later = ask(olga, "what did I ask you?")
        assert answer_of(olga, later) == "No idea."


def test_bad_requests_are_refused_with_a_4xx(chat: Live) -> None:
    with chat.client("olga") as olga:
        for body in ({}, {"message": ""}, {"message": 3}, {"message": "x", "model": ""}):
            answer = olga.post(f"/api/copilot/{TARGET}/messages", json=body)
            assert answer.status_code == 422, (body, answer.text)
        bad_path = olga.post("/api/copilot/nowhere/messages", json={"message": "x"})
        assert bad_path.status_code == 422, bad_path.text
        unknown = olga.post(
            f"/api/copilot/{TARGET}/messages", json={"message": "x", "model": "no-such:model"}
        )
        assert 400 <= unknown.status_code < 500, unknown.text
    narrow = chat.token("olga", "items:write:f/team/*", "runs:write:f/team/*")
    with httpx.Client(base_url=chat.url, headers={"Authorization": f"Bearer {narrow}"}) as client:
        refused = client.post(f"/api/copilot/{TARGET}/messages", json={"message": "build"})
    assert refused.status_code == 403, refused.text


def test_a_server_with_no_copilot_model_asks_for_one(live: Live) -> None:
    with live.client("olga") as olga:
        answer = olga.post(f"/api/copilot/{TARGET}/messages", json={"message": "build it"})
    assert answer.status_code == 422, answer.text
    assert "--copilot-model" in answer.json()["hint"]
