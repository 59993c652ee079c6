"""Approvals over HTTP: who may list and decide them, self-approval, and bad decisions."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from tests.server.conftest import Live, settled

from tidemill import Engine
from tidemill.errors import ApprovalDecisionError
from tidemill.server.routes import _approvals as approval_routes

THEN = {"id": "done", "script": "def main():\n    return 'shipped'\n"}


def approval_flow(**approval: Any) -> dict[str, Any]:
    return {"steps": [{"id": "ask", "approval": {"message": "Ship it?", **approval}}, THEN]}


def start(client: httpx.Client, path: str) -> str:
    answer = client.post("/api/runs", json={"path": path})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["id"]
    return run_id


def pending(client: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    answer = client.get("/api/approvals", params={"run_id": run_id})
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()
    return found


def wait_for_approval(live: Live, run_id: str) -> dict[str, Any]:
    """The run's pending approval, once its step asks (read as ada, who sees every run)."""
    deadline = time.monotonic() + 60
    with live.client("ada") as ada:
        while True:
            waits = ada.get(f"/api/runs/{run_id}/waits").json()
            ids = [w["approval_id"] for w in waits if w["approval_id"]]
            if ids:
                approval: dict[str, Any] = ada.get(f"/api/approvals/{ids[0]}").json()
                return approval
            assert time.monotonic() < deadline, waits
            time.sleep(0.05)


def test_a_named_approver_decides_and_others_are_refused(live: Live) -> None:
    live.ws.write("f/team/ship", "flow", approval_flow(approvers=["olga"]))
    with live.client("vic") as vic, live.client("olga") as olga, live.client("max") as max_:
        run_id = start(vic, "f/team/ship")
        approval = wait_for_approval(live, run_id)
        assert (approval["kind"], approval["approvers"], approval["path"]) == (
            "step",
            ["olga"],
            "f/team/ship",
        )
        assert [a["id"] for a in pending(olga, run_id)] == [approval["id"]]
        assert pending(vic, run_id) == []  # vic sees the run, but may not decide it
        assert pending(max_, run_id) == []
        refused = vic.post(f"/api/approvals/{approval['id']}/approve", json={})
        assert refused.status_code == 403 and refused.json()["type"] == "PermissionDenied"
        assert max_.post(f"/api/approvals/{approval['id']}/approve", json={}).status_code == 404
        decided = olga.post(f"/api/approvals/{approval['id']}/approve", json={"comment": "ok"})
        assert decided.status_code == 200, decided.text
        body = decided.json()
        assert (body["status"], body["decided_by"], body["comment"]) == ("approved", "olga", "ok")
        assert settled(vic, run_id)["result"] == "shipped"
        again = olga.post(f"/api/approvals/{approval['id']}/reject", json={})
        assert again.status_code == 409 and again.json()["type"] == "ApprovalDecisionError"
        # Decided ones are listed on asking, to who sees the run.
        history = vic.get("/api/approvals", params={"status": "any", "run_id": run_id}).json()
        assert [a["status"] for a in history] == ["approved"]


def test_with_no_approvers_whoever_sees_the_run_decides_and_a_rejection_fails_it(
    live: Live,
) -> None:
    live.ws.write("f/team/open", "flow", approval_flow())
    with live.client("olga") as olga, live.client("vic") as vic, live.client("max") as max_:
        run_id = start(olga, "f/team/open")
        approval = wait_for_approval(live, run_id)
        assert [a["id"] for a in pending(vic, run_id)] == [approval["id"]]
        assert pending(max_, run_id) == []
        assert max_.post(f"/api/approvals/{approval['id']}/reject", json={}).status_code == 404
        # A read-only token may list, not decide.
        token = live.token("vic", "approvals:read", "runs:read")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=live.url, headers=headers) as scoped:
            assert [a["id"] for a in pending(scoped, run_id)] == [approval["id"]]
            denied = scoped.post(f"/api/approvals/{approval['id']}/reject", json={})
            assert denied.status_code == 403
        rejected = vic.post(f"/api/approvals/{approval['id']}/reject", json={"comment": "not yet"})
        assert rejected.status_code == 200, rejected.text
        run = settled(olga, run_id)
        assert run["status"] == "failed" and "not yet" in run["error"]["message"]


def test_a_step_may_forbid_self_approval(live: Live) -> None:
    live.ws.write("f/team/four-eyes", "flow", approval_flow(allow_self_approval=False))
    with live.client("olga") as olga, live.client("ada") as ada:
        run_id = start(olga, "f/team/four-eyes")
        approval = wait_for_approval(live, run_id)
        assert approval["allow_self_approval"] is False and approval["run_as"] == "olga"
        assert pending(olga, run_id) == []  # not hers to decide
        refused = olga.post(f"/api/approvals/{approval['id']}/approve", json={})
        assert refused.status_code == 403 and "self-approval" in refused.json()["message"]
        # The engine refuses too, so the CLI and Python are held to it.
        with Engine(live.db) as engine, pytest.raises(ApprovalDecisionError) as caught:
            engine.approve(approval["id"], actor="olga")
        assert caught.value.reason == "self"
        assert [a["id"] for a in pending(ada, run_id)] == [approval["id"]]
        assert ada.post(f"/api/approvals/{approval['id']}/approve", json={}).status_code == 200
        assert settled(olga, run_id)["status"] == "succeeded"


def test_decisions_of_the_wrong_kind_or_shape_are_4xx(live: Live) -> None:
    live.ws.write("f/team/ask", "flow", approval_flow())
    with live.client("olga") as olga:
        run_id = start(olga, "f/team/ask")
        approval_id = wait_for_approval(live, run_id)["id"]
        base = f"/api/approvals/{approval_id}"
        cases: list[tuple[str, Any, int]] = [
            ("answer", {"text": "yes"}, 409),
            ("extend", {"new_limit": 10}, 409),
            ("reconcile", {"happened": True}, 409),
            ("approve", {"edited_arguments": {"x": 1}}, 409),
            ("answer", {"text": ""}, 422),
            ("extend", {}, 422),
            ("extend", {"new_limit": 0}, 422),
            ("reconcile", {}, 422),
            ("approve", {"comment": 5}, 422),
            ("approve", "nope", 422),
            # A misspelt field is refused, not dropped (which would approve the model's own).
            ("approve", {"arguments": {"x": 1}}, 422),
            ("reject", {"comment": "no", "reason": "typo of comment"}, 422),
        ]
        for action, body, status in cases:
            answer = olga.post(f"{base}/{action}", json=body)
            assert answer.status_code == status, (action, body, answer.text)
            assert answer.json()["type"]
            if status == 422 and isinstance(body, dict) and {"arguments", "reason"} & set(body):
                assert any("Extra inputs" in p for p in answer.json()["problems"]), answer.text
        for url in ("/api/approvals/nope/approve", "/api/approvals/nope"):
            method = "POST" if url.endswith("approve") else "GET"
            assert olga.request(method, url, json={}).status_code == 404
        assert olga.get("/api/approvals", params={"status": "bogus"}).status_code == 422
        assert olga.get("/api/approvals", params={"limit": 0}).status_code == 422
        # Nothing refused changed it.
        assert olga.get(base).json()["status"] == "pending"
    with live.anonymous() as anonymous:
        assert anonymous.get("/api/approvals").status_code == 401


def test_a_group_approver_lets_its_members_decide_and_no_one_else(live: Live) -> None:
    live.ws.add_group("deciders")
    live.ws.set_member("deciders", "max")  # max does not see f/team's runs otherwise
    live.ws.write("f/team/group-ship", "flow", approval_flow(approvers=["g/deciders"]))
    with live.client("olga") as olga, live.client("vic") as vic, live.client("max") as max_:
        run_id = start(olga, "f/team/group-ship")
        approval = wait_for_approval(live, run_id)
        assert approval["approvers"] == ["g/deciders"]
        # A member lists and reads it, though the run is not his to see.
        assert [a["id"] for a in pending(max_, run_id)] == [approval["id"]]
        assert max_.get(f"/api/approvals/{approval['id']}").status_code == 200
        # Who sees the run but is not a member may not decide it (olga: f/team's admin).
        assert pending(olga, run_id) == [] and pending(vic, run_id) == []
        for client in (olga, vic):
            refused = client.post(f"/api/approvals/{approval['id']}/approve", json={})
            assert refused.status_code == 403, refused.text
            assert refused.json()["type"] == "PermissionDenied"
            assert "g/deciders" in refused.json()["message"]
        # The engine holds the CLI and Python to the same rule.
        with Engine(live.db) as engine, pytest.raises(ApprovalDecisionError) as caught:
            engine.approve(approval["id"], actor="olga")
        assert caught.value.reason == "actor"
        decided = max_.post(f"/api/approvals/{approval['id']}/approve", json={"comment": "go"})
        assert decided.status_code == 200, decided.text
        assert (decided.json()["status"], decided.json()["decided_by"]) == ("approved", "max")
        assert settled(olga, run_id)["result"] == "shipped"


def test_group_membership_is_read_when_deciding(live: Live) -> None:
    live.ws.write("f/team/mixed", "flow", approval_flow(approvers=["ada", "g/readers"]))
    with live.client("olga") as olga, live.client("vic") as vic:
        run_id = start(olga, "f/team/mixed")
        approval_id = wait_for_approval(live, run_id)["id"]
        live.ws.set_member("readers", "vic", member=False)
        live.ws.grant("f/team", "vic", "viewer")  # he still sees the run, as himself
        assert pending(vic, run_id) == []
        refused = vic.post(f"/api/approvals/{approval_id}/reject", json={})
        assert refused.status_code == 403, refused.text
        live.ws.set_member("readers", "vic")
        assert [a["id"] for a in pending(vic, run_id)] == [approval_id]
        rejected = vic.post(f"/api/approvals/{approval_id}/reject", json={"comment": "no"})
        assert rejected.status_code == 200, rejected.text
        assert rejected.json()["decided_by"] == "vic"
        assert settled(olga, run_id)["status"] == "failed"
    # A member decides from Python too (the engine reads the run's workspace's groups).
    live.ws.write("f/team/mixed-2", "flow", approval_flow(approvers=["g/readers"]))
    with live.client("olga") as olga:
        run_id = start(olga, "f/team/mixed-2")
        approval_id = wait_for_approval(live, run_id)["id"]
        with Engine(live.db) as engine:
            assert engine.approve(approval_id, actor="vic").decided_by == "vic"
        assert settled(olga, run_id)["result"] == "shipped"


def test_approvals_are_read_a_page_at_a_time_until_the_callers_are_found(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Approvals the caller may not see come first; the list reads on past them."""
    monkeypatch.setattr(approval_routes, "_PAGE", 2)
    live.ws.add_folder("vault")  # vic has no role on it
    live.ws.write("f/vault/ship", "flow", approval_flow())
    live.ws.write("f/team/ship", "flow", approval_flow())
    with live.client("ada") as ada:
        hidden = [start(ada, "f/vault/ship") for _ in range(3)]
        for run_id in hidden:
            wait_for_approval(live, run_id)
        seen = [start(ada, "f/team/ship") for _ in range(3)]
        for run_id in seen:
            wait_for_approval(live, run_id)
        everything = ada.get("/api/approvals").json()
        assert [a["run_id"] for a in everything] == [*hidden, *seen]  # oldest first
        assert [a["run_id"] for a in ada.get("/api/approvals", params={"limit": 4}).json()] == [
            *hidden,
            seen[0],
        ]
    with live.client("vic") as vic:
        listed = vic.get("/api/approvals").json()
        assert [a["run_id"] for a in listed] == seen
        two = vic.get("/api/approvals", params={"limit": 2}).json()
        assert [a["run_id"] for a in two] == seen[:2]
        for approval in listed:
            assert vic.post(f"/api/approvals/{approval['id']}/approve", json={}).status_code == 200
        for run_id in seen:
            assert settled(vic, run_id)["status"] == "succeeded"
        decided = vic.get("/api/approvals", params={"status": "approved"}).json()
        assert [a["run_id"] for a in decided] == seen
        assert vic.get("/api/approvals").json() == []
