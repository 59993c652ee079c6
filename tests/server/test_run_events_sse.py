"""A run's live events over SSE: in order, to the end, and resumed after a dropped connection."""

from __future__ import annotations

from typing import Any

import httpx
from tests.server.conftest import Live, sse_messages

THREE_STEPS = {
    "summary": "Three steps that print",
    "steps": [
        {"id": f"s{n}", "script": f"def main():\n    print('step {n}')\n    return {n}\n"}
        for n in range(3)
    ],
}


def submit(live: Live, client: httpx.Client) -> str:
    live.ws.write("f/team/three", "flow", THREE_STEPS)
    answer = client.post("/api/runs", json={"path": "f/team/three"})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def test_a_run_streams_its_events_to_the_end(live: Live) -> None:
    with live.client("olga") as client:
        run_id = submit(live, client)
        with client.stream("GET", f"/api/runs/{run_id}/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            messages = sse_messages(stream.read().decode())
    kinds = [m["event"] for m in messages]
    assert kinds[-1] == "run_finished"
    assert messages[-1]["data"]["data"]["status"] == "succeeded"
    assert kinds.count("step_finished") == 3
    logs = [m["data"]["data"]["text"] for m in messages if m["event"] == "log"]
    assert any("step 0" in text for text in logs)
    ids = [int(m["id"]) for m in messages]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_a_client_that_reconnects_with_last_event_id_misses_nothing(live: Live) -> None:
    with live.client("olga") as client:
        run_id = submit(live, client)
        with client.stream("GET", f"/api/runs/{run_id}/events") as stream:
            whole = sse_messages(stream.read().decode())
        # A client that saw the first three events, lost its connection, and came back.
        seen = whole[:3]
        with client.stream(
            "GET", f"/api/runs/{run_id}/events", headers={"Last-Event-ID": seen[-1]["id"]}
        ) as stream:
            rest = sse_messages(stream.read().decode())
    assert [m["id"] for m in seen + rest] == [m["id"] for m in whole]


def test_a_dropped_live_connection_resumes_where_it_stopped(live: Live) -> None:
    live.ws.write("f/team/approve", "flow", {
        "steps": [
            {"id": "first", "script": "def main():\n    return 1\n"},
            {"id": "ask", "approval": {"message": "Go on?"}},
            {"id": "last", "script": "def main():\n    return 2\n"},
        ]
    })  # fmt: skip
    with live.client("olga") as client:
        run_id = client.post("/api/runs", json={"path": "f/team/approve"}).json()["id"]
        seen: list[dict[str, Any]] = []
        with client.stream("GET", f"/api/runs/{run_id}/events") as stream:
            buffer = ""
            for chunk in stream.iter_text():
                buffer += chunk
                seen = sse_messages(buffer)
                if any(m["event"] == "wait_requested" for m in seen):
                    break  # the connection drops here, mid-run
        wait = next(m for m in seen if m["event"] == "wait_requested")
        approval = wait["data"]["data"]["approval_id"]
        assert client.post(f"/api/approvals/{approval}/approve", json={}).status_code == 200
        with client.stream(
            "GET", f"/api/runs/{run_id}/events", headers={"Last-Event-ID": seen[-1]["id"]}
        ) as stream:
            rest = sse_messages(stream.read().decode())
        whole = client.get(f"/api/runs/{run_id}/events/page").json()
    assert [int(m["id"]) for m in seen + rest] == [e["id"] for e in whole]
    assert rest[-1]["event"] == "run_finished"


def test_events_of_a_run_the_caller_may_not_see_are_not_found(live: Live) -> None:
    with live.client("olga") as client:
        run_id = submit(live, client)
    with live.client("max") as client:
        assert client.get(f"/api/runs/{run_id}/events").status_code == 404
        assert client.get(f"/api/runs/{run_id}/events/page").status_code == 404
        assert client.get("/api/runs/no-such-run/events").status_code == 404
    with live.anonymous() as client:
        assert client.get(f"/api/runs/{run_id}/events").status_code == 401
    token = live.token("olga", "items:read")
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.get(f"/api/runs/{run_id}/events").status_code == 403
