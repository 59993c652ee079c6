"""Schedules over HTTP (list, show, pause, resume, fires), and runs started later."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from tests.server.conftest import Live

NIGHTLY = {"cron": "0 30 2 * * *", "timezone": "Europe/Paris", "target": "f/team/flow"}
GREET_INPUTS = {"name": "ann"}


def _iso(text: str) -> datetime:
    at = datetime.fromisoformat(text)
    assert at.tzinfo is not None, text
    return at


def test_schedules_are_listed_shown_paused_and_resumed(live: Live) -> None:
    live.ws.write("f/team/nightly", "schedule", {**NIGHTLY, "inputs": GREET_INPUTS})
    live.ws.write("f/team/weekly", "schedule", {**NIGHTLY, "cron": "0 9 * * 1", "enabled": False})
    with live.client("vic") as vic:
        listed = vic.get("/api/schedules", params={"under": "f/team/"})
        assert listed.status_code == 200, listed.text
        assert [s["path"] for s in listed.json()] == ["f/team/nightly", "f/team/weekly"]
        shown = vic.get("/api/schedules/f/team/nightly").json()
        assert (shown["cron"], shown["timezone"], shown["target"]) == (
            "0 30 2 * * *", "Europe/Paris", "f/team/flow"
        )  # fmt: skip
        assert (shown["inputs"], shown["enabled"], shown["catch_up"]) == (
            GREET_INPUTS, True, "latest"
        )  # fmt: skip
        assert (shown["owner"], shown["version"], shown["on_failure"]) == ("ada", 1, None)
        fires = [_iso(at) for at in shown["next_fires"]]
        assert len(fires) == 5 and fires == sorted(fires)
        assert all(at.astimezone(UTC).minute == 30 for at in fires)
        assert vic.get("/api/schedules/f/team/weekly").json()["next_fires"] == []
        # A viewer reads, but may not pause.
        refused = vic.post("/api/schedules/f/team/nightly/pause")
        assert (refused.status_code, refused.json()["type"]) == (403, "PermissionDenied")
        # The suffix routes are not taken for a schedule's path by the plain GET.
        assert vic.get("/api/schedules/f/team/nightly/fires").json() == []
    with live.client("olga") as olga:  # admin of f/team
        paused = olga.post("/api/schedules/f/team/nightly/pause")
        assert paused.status_code == 200, paused.text
        assert (paused.json()["enabled"], paused.json()["owner"]) == (False, "olga")
        assert paused.json()["next_fires"] == [] and paused.json()["version"] == 2
        resumed = olga.post("/api/schedules/f/team/nightly/resume").json()
        assert (resumed["enabled"], resumed["version"], len(resumed["next_fires"])) == (True, 3, 5)
    with live.client("max") as max_:  # no role on f/team
        assert max_.get("/api/schedules").json() == []
        hidden = max_.get("/api/schedules/f/team/nightly")
        assert (hidden.status_code, hidden.json()["type"]) == (404, "ItemNotFound")
        # A write is refused before anything is read (so it tells nothing either).
        assert max_.post("/api/schedules/f/team/nightly/resume").status_code == 403
        assert max_.get("/api/schedules/f/team/nightly/fires").status_code == 404
    items_elsewhere = live.token("olga", "items:write:f/other/*")
    headers = {"Authorization": f"Bearer {items_elsewhere}"}
    with httpx.Client(base_url=live.url, headers=headers) as scoped:
        assert scoped.get("/api/schedules").json() == []
        assert scoped.post("/api/schedules/f/team/nightly/pause").status_code == 403


def test_bad_schedule_requests_are_4xx(live: Live) -> None:
    live.ws.write("f/team/nightly", "schedule", NIGHTLY)
    with live.client("ada") as ada:
        assert ada.get("/api/schedules/F/Team/x").status_code == 422
        assert (
            ada.get("/api/schedules/f/team/nightly/fires", params={"limit": 0}).status_code == 422
        )
        assert ada.get("/api/schedules/f/team/flow").status_code == 404  # a flow, no schedule
        assert ada.post("/api/schedules/f/team/flow/pause").status_code == 404
        assert ada.post("/api/schedules/f/team/nothing/resume").status_code == 404
        assert ada.post("/api/schedules/f/team/nightly/pause", json={"x": 1}).status_code == 200


def test_a_schedule_fires_and_its_fires_are_listed(live: Live) -> None:
    every_second = {"cron": "* * * * * *", "target": "f/team/flow", "inputs": GREET_INPUTS}
    live.ws.write("f/team/often", "schedule", every_second)
    with live.client("olga") as olga:
        deadline = time.monotonic() + 60
        while True:
            fires = olga.get("/api/schedules/f/team/often/fires", params={"limit": 5}).json()
            if any(f["status"] == "started" for f in fires):
                break
            assert time.monotonic() < deadline, fires
            time.sleep(0.1)
        assert olga.post("/api/schedules/f/team/often/pause").json()["enabled"] is False
        started = next(f for f in fires if f["status"] == "started")
        assert started["run_id"] and _iso(started["fire_at"]).microsecond == 0
        run = olga.get(f"/api/runs/{started['run_id']}").json()
        assert (run["path"], run["run_as"]) == ("f/team/flow", "ada")
        assert set(started) == {"fire_at", "status", "run_id", "outcome", "handler_id", "error"}


def _submit(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/api/runs", json={"path": "f/team/flow", "inputs": GREET_INPUTS, **body})


def test_a_run_submitted_for_later_waits_until_then(live: Live) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    with live.client("vic") as vic:
        answer = _submit(vic, start_at=later.isoformat())
        assert answer.status_code == 201, answer.text
        run = answer.json()
        assert run["status"] == "queued"
        [job] = vic.get(f"/api/runs/{run['id']}/jobs").json()
        assert abs(job["run_at"] - later.timestamp()) < 1
        waits = vic.get(f"/api/runs/{run['id']}/waits").json()
        assert [w["kind"] for w in waits] == ["start"]
        assert vic.post(f"/api/runs/{run['id']}/cancel").json()["status"] == "cancelled"
        # A time past starts it now; epoch seconds are taken too.
        past = _submit(vic, start_at=time.time() - 3600).json()
        deadline = time.monotonic() + 60
        while vic.get(f"/api/runs/{past['id']}").json()["status"] != "succeeded":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for bad in ("tomorrow", "2030-01-01T09:00:00", -5, "1e400", True):
            refused = _submit(vic, start_at=bad)
            assert refused.status_code == 422, (bad, refused.text)
            assert refused.json()["problems"]
