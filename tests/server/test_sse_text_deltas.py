"""An agent step's answer appears over SSE as `text_delta` events while the model writes it."""

from __future__ import annotations

from tests.server.conftest import Live, sse_messages

MESSAGE = "Tell the whole team that the release ships on Thursday morning."
AGENT_FLOW = {
    "summary": "An agent that echoes",
    "inputs": {"type": "object", "properties": {"message": {"type": "string"}}},
    "steps": [
        {
            "id": "echo",
            "ai_agent": {"model": "fake", "system": "Repeat what you are told."},
            "inputs": {"user_message": {"expr": "flow_input.message"}},
        }
    ],
}


def test_an_agent_steps_text_arrives_as_deltas_before_its_turn(live: Live) -> None:
    live.ws.write("f/team/echo", "flow", AGENT_FLOW)
    with live.client("olga") as client:
        answer = client.post(
            "/api/runs", json={"path": "f/team/echo", "inputs": {"message": MESSAGE}}
        )
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
        with client.stream("GET", f"/api/runs/{run_id}/events") as stream:
            messages = sse_messages(stream.read().decode())
    kinds = [m["event"] for m in messages]
    assert kinds[-1] == "run_finished"
    assert messages[-1]["data"]["data"]["status"] == "succeeded"
    deltas = [m["data"] for m in messages if m["event"] == "text_delta"]
    # The offline model writes word by word: the first word at once, the rest with the turn.
    assert len(deltas) >= 2
    assert all(d["step_id"] == "echo" and d["data"]["turn"] == 0 for d in deltas)
    assert "".join(d["data"]["text"] for d in deltas) == MESSAGE
    turn = kinds.index("model_turn")
    assert max(i for i, kind in enumerate(kinds) if kind == "text_delta") < turn
    final = messages[turn]["data"]["data"]["response"]["message"]["content"]
    assert final == MESSAGE
