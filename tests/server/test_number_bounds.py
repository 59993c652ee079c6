"""Numbers past what the store holds are a 422 naming the parameter, never a 500."""

from __future__ import annotations

import pytest
from tests.server.conftest import Live

HUGE = 99999999999999999999  # past a 64-bit integer


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("GET", f"/api/audit?after={HUGE}", None),
        ("GET", f"/api/items/f/team/script?version={HUGE}", None),
        ("GET", f"/api/diff/f/team/script?old={HUGE}", None),
        ("GET", f"/api/diff/f/team/script?old=1&new={HUGE}", None),
        ("PUT", "/api/items/u/ada/n", {"kind": "variable", "value": "v", "base_version": HUGE}),
        ("POST", "/api/restore/f/team/script", {"version": HUGE}),
        ("GET", f"/api/runs/r1/logs?after={HUGE}", None),
        ("GET", f"/api/runs/r1/events/page?after={HUGE}", None),
    ],
)
def test_a_number_too_large_for_the_store_is_refused(
    live: Live, method: str, url: str, body: dict[str, object] | None
) -> None:
    with live.client("ada") as client:
        answer = client.request(method, url, json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["type"] == "InvalidRequest" or answer.json()["problems"]


def test_the_largest_number_the_store_holds_is_still_read(live: Live) -> None:
    with live.client("ada") as client:
        answer = client.get(f"/api/audit?after={2**63 - 1}")
    assert answer.status_code == 200 and answer.json() == []


def test_a_last_event_id_too_large_for_the_store_reads_as_the_end(live: Live) -> None:
    with live.client("ada") as client:
        run = client.post("/api/runs", json={"path": "f/team/flow", "inputs": {"name": "x"}})
        assert run.status_code == 201, run.text
        run_id = run.json()["id"]
        with client.stream(
            "GET", f"/api/runs/{run_id}/events", headers={"Last-Event-ID": str(HUGE)}
        ) as answer:
            assert answer.status_code == 200
            # After every event there is: the stream ends once the run has, sending nothing.
            assert [line for line in answer.iter_lines() if line.startswith("data:")] == []
        events = client.get(f"/api/runs/{run_id}/events/page?after={HUGE}")
        assert events.status_code == 422
