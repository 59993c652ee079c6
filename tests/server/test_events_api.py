"""Events over HTTP: `POST /api/events` ends a waiting run, keeps one nobody waits for, refuses."""

from __future__ import annotations

import time
from datetime import datetime

import httpx
import pytest
from tests.server.conftest import Live, settled

from tidemill.server.routes import _signals as signal_routes

WAITING = {
    "inputs": {"type": "object", "properties": {"order": {"type": "string"}}},
    "steps": [{"id": "paid", "wait_for_event": {"name": "order_paid", "key": "flow_input.order"}}],
}


def _waiting_run(live: Live, client: httpx.Client) -> str:
    """A run of `f/team/wait` for order 42, once it waits for its event."""
    live.ws.write("f/team/wait", "flow", WAITING)
    answer = client.post("/api/runs", json={"path": "f/team/wait", "inputs": {"order": "42"}})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["id"]
    deadline = time.monotonic() + 60
    while True:
        waits = client.get(f"/api/runs/{run_id}/waits").json()
        if [w for w in waits if w["kind"] == "event"]:
            return run_id
        assert time.monotonic() < deadline, waits
        time.sleep(0.05)


def test_an_event_sent_over_http_ends_the_run_waiting_for_it(live: Live) -> None:
    with live.client("vic") as client:  # a viewer of f/team: may run the flow, so send to it
        run_id = _waiting_run(live, client)
        listed = client.get("/api/runs", params={"path": "f/team/wait", "status": "waiting"})
        assert [(r["id"], r["waiting_for"]) for r in listed.json()["runs"]] == [
            (run_id, "event 'order_paid' with key '42'")
        ]
        event = {"name": "order_paid", "key": "42", "payload": {"amount": 10}}
        answer = client.post("/api/events", json={**event, "path": "f/team/wait"})
        assert answer.status_code == 202, answer.text
        sent = answer.json()
        assert sent["delivered_to"] == [run_id]
        assert (sent["kept_until"], sent["duplicate"]) == (None, False)
        assert isinstance(sent["event_id"], int)
        done = settled(client, run_id)
        assert (done["status"], done["result"]) == ("succeeded", {"amount": 10})
        listed = client.get("/api/runs", params={"path": "f/team/wait"}).json()["runs"]
        assert [r["waiting_for"] for r in listed if r["id"] == run_id] == [None]
    audit = live.ws.audit(action="event.send")
    assert [(e.actor, e.path, e.details["key"]) for e in audit] == [("vic", "f/team/wait", "42")]
    assert audit[0].details["delivered_to"] == [run_id]


def test_an_event_nobody_waits_for_is_kept_listed_and_deduped(live: Live) -> None:
    live.ws.write("f/team/wait", "flow", WAITING)
    event = {"name": "order_paid", "key": "7", "path": "f/team/wait", "dedupe_id": "pay-7"}
    with live.client("olga") as olga:
        first = olga.post("/api/events", json={**event, "keep": "1d", "payload": [1]})
        assert first.status_code == 202, first.text
        kept = first.json()
        assert kept["delivered_to"] == [] and kept["kept_until"] is not None
        until = datetime.fromisoformat(kept["kept_until"]).timestamp()
        assert 86000 < until - time.time() <= 86400
        again = olga.post("/api/events", json=event).json()
        assert (again["duplicate"], again["event_id"]) == (True, None)
    with live.client("vic") as vic:
        listed = vic.get("/api/events/kept", params={"name": "order_paid"})
        assert listed.status_code == 200, listed.text
        [shown] = listed.json()
        assert (shown["path"], shown["key"], shown["payload"]) == ("f/team/wait", "7", [1])
        assert (shown["sent_by"], shown["dedupe_id"]) == ("olga", "pay-7")
    with live.client("max") as max_:  # no role on f/team: sees none of its events
        assert max_.get("/api/events/kept").json() == []
    with live.client("ada") as ada:  # an admin sends to runs of no path, and sees those too
        none = ada.post("/api/events", json={"name": "nightly", "payload": None})
        assert none.status_code == 202, none.text
        # (The store is shared by this folder's tests: events of no path are everyone's.)
        shown = [(e["name"], e["path"]) for e in ada.get("/api/events/kept").json()]
        assert {("order_paid", "f/team/wait"), ("nightly", None)} <= set(shown)
    with live.client("vic") as vic:
        assert [e["name"] for e in vic.get("/api/events/kept").json()] == ["order_paid"]
    # The duplicate did nothing, so only the first send is audited.
    assert len(live.ws.audit(action="event.send")) == 2


def test_a_caller_who_may_not_run_the_flow_is_refused(live: Live) -> None:
    live.ws.write("f/team/wait", "flow", WAITING)
    event = {"name": "order_paid", "key": "1"}
    with live.client("max") as max_:
        hidden = max_.post("/api/events", json={**event, "path": "f/team/wait"})
        assert (hidden.status_code, hidden.json()["type"]) == (404, "ItemNotFound")
        assert hidden.json()["hint"]
        no_path = max_.post("/api/events", json=event)
        assert (no_path.status_code, no_path.json()["type"]) == (403, "PermissionDenied")
        own = max_.post("/api/events", json={**event, "path": "u/max/notes"})  # not a flow
        assert own.status_code == 404
    with live.client("olga") as olga:
        script = olga.post("/api/events", json={**event, "path": "f/team/script"})
        assert script.status_code == 404
        assert olga.post("/api/events", json={**event, "path": "f/team/wait"}).status_code == 202
    elsewhere = live.token("olga", "runs:write:f/other/*")
    headers = {"Authorization": f"Bearer {elsewhere}"}
    with httpx.Client(base_url=live.url, headers=headers) as scoped:
        refused = scoped.post("/api/events", json={**event, "path": "f/team/wait"})
        assert (refused.status_code, refused.json()["type"]) == (403, "PermissionDenied")
    narrow = live.token("ada", "runs:write:f/team/*")  # a path scope: not for runs of no path
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {narrow}"}) as c:
        assert c.post("/api/events", json=event).status_code == 403
        assert c.post("/api/events", json={**event, "path": "f/team/wait"}).status_code == 202
    with live.anonymous() as anonymous:
        assert anonymous.post("/api/events", json=event).status_code == 401


def test_bad_events_are_refused_with_what_is_wrong(live: Live) -> None:
    live.ws.write("f/team/wait", "flow", WAITING)
    good = {"name": "order_paid", "path": "f/team/wait"}
    with live.client("ada") as client:
        for body in (
            {**good, "name": "has spaces"},  # the engine's check: InvalidOption
            {**good, "keep": "soon"},
            {**good, "keep": 0},
            {**good, "keep": "400d"},
            {**good, "keep": True},  # not one second
            {**good, "keep": 10**400},  # too large for a float
            {**good, "path": "F/Team"},
            {**good, "nmae": "typo"},
            {"path": "f/team/wait"},
            {**good, "key": 42},
        ):
            answer = client.post("/api/events", json=body)
            assert answer.status_code == 422, (body, answer.text)
            error = answer.json()
            assert error["message"] and (error.get("hint") or error.get("problems")), error
        assert client.post("/api/events", json={**good, "keep": 30}).status_code == 202


def test_kept_events_come_in_pages_and_one_whose_keep_ran_out_is_not_listed(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signal_routes, "_PAGE", 2)  # the route reads the store 2 at a time
    live.ws.write("f/team/wait", "flow", WAITING)
    live.ws.add_folder("vault")  # vic has no role on it
    live.ws.write("f/vault/wait", "flow", WAITING)
    with live.client("ada") as ada:

        def send(path: str, key: str, keep: float | None = None) -> int:
            event = {"name": "order_paid", "key": key, "path": path, "keep": keep}
            answer = ada.post("/api/events", json=event)
            assert answer.status_code == 202, answer.text
            return int(answer.json()["event_id"])

        hidden = [send("f/vault/wait", key) for key in ("1", "2", "3")]
        short = send("f/team/wait", "gone", keep=1)
        sent_at = time.monotonic()
        first, second = send("f/team/wait", "a"), send("f/team/wait", "b")
        while time.monotonic() < sent_at + 1.2:
            time.sleep(0.05)
        everything = ada.get("/api/events/kept", params={"name": "order_paid"}).json()
        assert [e["event_id"] for e in everything] == [*hidden, first, second]
        assert short not in [e["event_id"] for e in everything]
    with live.client("vic") as vic:
        # Three events vic may not see come before the first it may: pages are read on.
        listed = vic.get("/api/events/kept", params={"name": "order_paid"}).json()
        assert [e["key"] for e in listed] == ["a", "b"]
        page = vic.get("/api/events/kept", params={"limit": 1}).json()
        assert [e["event_id"] for e in page] == [first]
        page = vic.get("/api/events/kept", params={"limit": 1, "after": first}).json()
        assert [e["event_id"] for e in page] == [second]
        assert vic.get("/api/events/kept", params={"after": second}).json() == []
        assert vic.get("/api/events/kept", params={"after": -1}).status_code == 422
