"""Runs over HTTP: submit, a page at a time, who sees which, cancel and retry, and bad input."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from tests.server.conftest import Live

from tidemill import Engine, Flow

MAX_FLOW = {"steps": [{"id": "one", "script": "def main():\n    print('max ran')\n    return 1\n"}]}
FAILING = {"steps": [{"id": "boom", "script": "def main():\n    raise ValueError('no')\n"}]}
GREET = {
    "inputs": {"type": "object", "properties": {"name": {"type": "string"}}},
    "steps": [
        {
            "id": "greet",
            "script": {"path": "f/team/script"},
            "inputs": {"name": {"expr": "flow_input.name"}},
        }
    ],
}
PARKED = {"steps": [{"id": "ask", "approval": {"message": "Go on?"}}]}


def submit(client: httpx.Client, path: str, **body: Any) -> dict[str, Any]:
    answer = client.post("/api/runs", json={"path": path, **body})
    assert answer.status_code == 201, answer.text
    run: dict[str, Any] = answer.json()
    return run


def settled(client: httpx.Client, run_id: str, *statuses: str) -> dict[str, Any]:
    """The run once its status is one of `statuses` (default: finished)."""
    wanted = statuses or ("succeeded", "failed", "cancelled")
    deadline = time.monotonic() + 60
    while True:
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        if run["status"] in wanted:
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.05)


def every_id(client: httpx.Client, **params: Any) -> list[str]:
    """Every run id the caller sees, following the cursors."""
    ids: list[str] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        page = client.get("/api/runs", params=query)
        assert page.status_code == 200, page.text
        body = page.json()
        ids.extend(run["id"] for run in body["runs"])
        cursor = body["next_cursor"]
        if cursor is None:
            return ids


def test_a_submitted_run_runs_and_shows_what_it_did(live: Live) -> None:
    live.ws.write("f/team/greet", "flow", GREET)
    with live.client("olga") as client:
        run = submit(client, "f/team/greet", inputs={"name": "ann"})
        assert run["status"] in ("queued", "running") and run["run_as"] == "olga"
        assert run["path"] == "f/team/greet" and run["version"] == 1
        done = settled(client, run["id"])
        assert (done["status"], done["result"]) == ("succeeded", "hello ann")
        jobs = client.get(f"/api/runs/{run['id']}/jobs").json()
        assert [(j["step_id"], j["status"]) for j in jobs] == [("greet", "succeeded")]
        assert client.get(f"/api/runs/{run['id']}/usage").json() == []
        assert client.get(f"/api/runs/{run['id']}/agents").json() == []
        assert client.get(f"/api/runs/{run['id']}/waits").json() == []
        transcript = client.get(f"/api/runs/{run['id']}/steps/greet/transcript")
        assert transcript.status_code == 200 and transcript.json() == []


def test_logs_come_in_order_and_after_a_chunk(live: Live) -> None:
    live.ws.acting_as("max").write("u/max/flow", "flow", MAX_FLOW)
    with live.client("max") as client:
        run = submit(client, "u/max/flow")
        assert settled(client, run["id"])["status"] == "succeeded"
        logs = client.get(f"/api/runs/{run['id']}/logs").json()
        assert "max ran" in "".join(chunk["body"] for chunk in logs)
        last = logs[-1]["id"]
        assert client.get(f"/api/runs/{run['id']}/logs", params={"after": last}).json() == []


def test_the_list_pages_by_cursor_without_repeats_or_gaps(live: Live) -> None:
    live.ws.acting_as("max").write("u/max/flow", "flow", MAX_FLOW)
    with live.client("max") as client:
        made = [submit(client, "u/max/flow")["id"] for _ in range(30)]
        pages = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 10, "path": "u/max/flow"}
            if cursor:
                params["cursor"] = cursor
            body = client.get("/api/runs", params=params).json()
            pages.append([run["id"] for run in body["runs"]])
            cursor = body["next_cursor"]
            if cursor is None:
                break
        seen = [run_id for page in pages for run_id in page]
        assert [len(page) for page in pages[:3]] == [10, 10, 10]
        assert len(seen) == len(set(seen)) == 30
        assert seen == list(reversed(made)) or set(seen) == set(made)
        created = [client.get(f"/api/runs/{i}").json()["created_at"] for i in seen]
        assert created == sorted(created, reverse=True)
        # The filters: by flow name, and by status.
        assert set(every_id(client, flow="flow", limit=7)) >= set(made)
        for run_id in made:
            settled(client, run_id)
        assert set(every_id(client, status="succeeded", path="u/max/flow")) == set(made)
        assert every_id(client, status="failed", path="u/max/flow") == []


def test_each_principal_sees_the_runs_it_may(live: Live) -> None:
    live.ws.acting_as("max").write("u/max/flow", "flow", MAX_FLOW)
    with live.client("olga") as olga, live.client("max") as max_:
        team = submit(olga, "f/team/flow", inputs={"name": "x"})["id"]
        own = submit(max_, "u/max/flow")["id"]
    with Engine(live.db) as engine:
        loose = engine.submit(Flow.model_validate(MAX_FLOW)).id  # from Python: no workspace path

    def sees(client: httpx.Client) -> set[str]:
        return set(every_id(client)) & {team, own, loose}

    with live.client("ada") as ada, live.client("olga") as olga, live.client("vic") as vic:
        assert sees(ada) == {team, own, loose}
        assert sees(olga) == {team}
        assert sees(vic) == {team}
        assert ada.get(f"/api/runs/{loose}").json()["path"] is None
        assert olga.get(f"/api/runs/{own}").status_code == 404
        assert olga.get(f"/api/runs/{loose}").status_code == 404
    with live.client("max") as max_:
        assert sees(max_) == {own}
        assert max_.get(f"/api/runs/{team}").status_code == 404
    scoped = live.token("ada", "runs:read:u/max/*")
    headers = {"Authorization": f"Bearer {scoped}"}
    with httpx.Client(base_url=live.url, headers=headers) as client:
        assert sees(client) == {own}
        assert client.get(f"/api/runs/{team}").status_code == 404
        assert client.get(f"/api/runs/{loose}").status_code == 404
        assert client.get(f"/api/runs/{own}").status_code == 200
        # A read scope submits nothing.
        assert client.post("/api/runs", json={"path": "u/max/flow"}).status_code == 403


def test_cancel_and_retry_need_a_writer_or_the_run_s_own_user(live: Live) -> None:
    live.ws.write("f/team/parked", "flow", PARKED)
    live.ws.write("f/team/failing", "flow", FAILING)
    with live.client("vic") as vic, live.client("olga") as olga, live.client("max") as max_:
        parked = submit(olga, "f/team/parked")["id"]
        settled(olga, parked, "waiting")
        refused = vic.post(f"/api/runs/{parked}/cancel")
        assert refused.status_code == 403 and refused.json()["type"] == "PermissionDenied"
        assert max_.post(f"/api/runs/{parked}/cancel").status_code == 404
        assert olga.post(f"/api/runs/{parked}/cancel").json()["status"] == "cancelled"
        again = olga.post(f"/api/runs/{parked}/cancel")
        assert again.status_code < 500
        # vic may cancel a run of her own (she runs as herself), not retry olga's.
        own = submit(vic, "f/team/parked")["id"]
        assert vic.post(f"/api/runs/{own}/cancel").json()["status"] == "cancelled"
        failed = submit(olga, "f/team/failing")["id"]
        assert settled(olga, failed)["status"] == "failed"
        assert vic.post(f"/api/runs/{failed}/retry").status_code == 403
        retried = olga.post(f"/api/runs/{failed}/retry")
        assert retried.status_code == 200, retried.text
        assert settled(olga, failed)["status"] == "failed"
        attempts = [j["attempt"] for j in olga.get(f"/api/runs/{failed}/jobs").json()]
        assert sorted(attempts)[-1] >= 2
        # Retrying a run that did not fail is a conflict.
        done = submit(olga, "f/team/flow", inputs={"name": "y"})["id"]
        settled(olga, done)
        assert olga.post(f"/api/runs/{done}/retry").status_code == 409


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("GET", "/api/runs?cursor=garbage", None),
        ("GET", "/api/runs?cursor=WzEsMl0", None),  # [1,2]: no run id
        ("GET", "/api/runs?cursor=%00%01", None),
        ("GET", "/api/runs?limit=0", None),
        ("GET", "/api/runs?limit=100000", None),
        ("GET", "/api/runs?status=bogus", None),
        ("GET", "/api/runs/nope", None),
        ("GET", "/api/runs/nope/logs?after=-1", None),
        ("GET", "/api/runs/nope/steps/x/transcript", None),
        ("POST", "/api/runs/nope/cancel", None),
        ("POST", "/api/runs", {}),
        ("POST", "/api/runs", {"path": ""}),
        ("POST", "/api/runs", {"path": "../etc/passwd"}),
        ("POST", "/api/runs", {"path": "f/team/nothing"}),
        ("POST", "/api/runs", {"path": "f/team/script"}),
        ("POST", "/api/runs", {"path": "f/team/flow", "inputs": {"name": 5}}),
        ("POST", "/api/runs", {"path": "f/team/flow", "inputs": "no"}),
        ("POST", "/api/runs", {"path": "f/team/flow", "memory_id": ""}),
    ],
)
def test_bad_input_is_a_4xx_with_a_typed_error(
    live: Live, method: str, url: str, body: dict[str, Any] | None
) -> None:
    with live.client("olga") as client:
        answer = client.request(method, url, json=body)
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["type"] and answer.json()["message"]


def test_a_body_that_is_not_json_is_a_422_and_anonymous_callers_sign_in(live: Live) -> None:
    with live.client("olga") as client:
        answer = client.post(
            "/api/runs", content=b"{nope", headers={"content-type": "application/json"}
        )
    assert answer.status_code == 422
    with live.anonymous() as client:
        assert client.get("/api/runs").status_code == 401
        assert client.post("/api/runs", json={"path": "f/team/flow"}).status_code == 401
