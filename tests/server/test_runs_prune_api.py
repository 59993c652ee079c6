"""`POST /api/runs/prune`: a workspace admin deletes the workspace's ended runs by age.

Runs are aged by rewriting their times in the store. Old runs that
succeeded, failed or were cancelled go, with their jobs; a recent one, a
queued one and one waiting for an event stay, however old, and so do a run
of another workspace in the same store and one submitted from Python. A
dry run counts and deletes nothing. Only a workspace admin may prune, with
a token whose `runs:write` scope has no path; every bad `older_than` is a
422 that names it. Each prune is audited (`runs.prune`). On both stores.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
from tests.server.conftest import Live, settled

from tidemill import Engine, Flow
from tidemill.store import Store, StoreURL, Tx
from tidemill.workspace import Workspace

DAY = 86400.0
FAIL = {"steps": [{"id": "boom", "script": "def main():\n    raise ValueError('no')\n"}]}
ONE = {"steps": [{"id": "one", "script": "def main():\n    return 1\n"}]}
WAITING = {"steps": [{"id": "paid", "wait_for_event": {"name": "order_paid", "key": "'42'"}}]}


def submit(client: httpx.Client, path: str, **body: Any) -> str:
    answer = client.post("/api/runs", json={"path": path, **body})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["id"]
    return run_id


def waiting(client: httpx.Client, path: str) -> str:
    """A run of `path` once its step waits for its event."""
    run_id = submit(client, path)
    deadline = time.monotonic() + 60
    while not [w for w in client.get(f"/api/runs/{run_id}/waits").json() if w["kind"] == "event"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return run_id


def in_store(live: Live, fn: Any) -> Any:
    """`fn(tx)` in one transaction of the server's store."""

    async def go() -> Any:
        store = Store(StoreURL.parse(live.db))
        try:
            return await store.transact(fn)
        finally:
            await store.close()

    return asyncio.run(go())


def age(live: Live, run_ids: Sequence[str], days: float) -> None:
    """Make the runs (and the runs under them) as made, and ended, `days` ago."""
    then = time.time() - days * DAY

    def rewrite(tx: Tx) -> None:
        for run_id in run_ids:
            tx.execute("UPDATE tm_runs SET created_at = ? WHERE root_id = ?", (then, run_id))
            tx.execute(
                "UPDATE tm_runs SET finished_at = ? WHERE root_id = ? AND finished_at IS NOT NULL",
                (then + 1, run_id),
            )

    in_store(live, rewrite)


def stored(live: Live, run_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """For each run: its rows in tm_runs and its jobs."""

    def count(tx: Tx) -> dict[str, tuple[int, int]]:
        found = {}
        for run_id in run_ids:
            runs = tx.one("SELECT COUNT(*) FROM tm_runs WHERE root_id = ?", (run_id,))
            jobs = tx.one("SELECT COUNT(*) FROM tm_jobs WHERE run_id = ?", (run_id,))
            found[run_id] = (int(runs[0]) if runs else 0, int(jobs[0]) if jobs else 0)
        return found

    result: dict[str, tuple[int, int]] = in_store(live, count)
    return result


def prune(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/api/runs/prune", json=body)


def test_an_admin_prunes_old_ended_runs_and_only_those(live: Live) -> None:
    live.ws.write("f/team/fail", "flow", FAIL)
    live.ws.write("f/team/wait", "flow", WAITING)
    later = time.time() + DAY
    with live.client("olga") as olga:
        done = [submit(olga, "f/team/flow", inputs={"name": n}) for n in ("a", "b")]
        done.append(submit(olga, "f/team/fail"))
        cancelled = submit(olga, "f/team/flow", start_at=later)
        assert olga.post(f"/api/runs/{cancelled}/cancel").status_code == 200
        done.append(cancelled)
        assert [settled(olga, r)["status"] for r in done] == [
            "succeeded", "succeeded", "failed", "cancelled"
        ]  # fmt: skip
        recent = submit(olga, "f/team/flow", inputs={"name": "new"})
        assert settled(olga, recent)["status"] == "succeeded"
        queued = submit(olga, "f/team/flow", start_at=later)
        held = waiting(olga, "f/team/wait")
    # A run of another workspace of the same store, and one submitted from Python.
    other = Workspace(live.db, workspace=f"w{uuid.uuid4().hex[:12]}", user="ada")
    try:
        other.add_folder("team")
        other.write("f/team/one", "flow", ONE)
        with Engine(live.db) as engine:
            foreign = engine.submit_path(other, "f/team/one")
            loose = engine.submit(Flow.model_validate(ONE))
            assert (foreign.wait(timeout=60), loose.wait(timeout=60)) == (1, 1)
    finally:
        other.close()
    kept = [recent, queued, held, foreign.id, loose.id]
    age(live, [*done, queued, held, foreign.id, loose.id], days=40)
    assert all(jobs for _, jobs in stored(live, done).values())

    with live.client("ada") as ada:
        dry = prune(ada, older_than="30d", dry_run=True)
        assert dry.status_code == 200, dry.text
        assert dry.json() | {"before": 0} == {"runs": 4, "rows": {}, "before": 0, "dry_run": True}
        assert all(ada.get(f"/api/runs/{r}").status_code == 200 for r in done)
        asked = time.time()
        answer = prune(ada, older_than=30 * DAY)
        answered = time.time()
        assert answer.status_code == 200, answer.text
        pruned = answer.json()
        assert (pruned["runs"], pruned["dry_run"]) == (4, False)
        assert pruned["rows"]["tm_runs"] == 4 and pruned["rows"]["tm_jobs"] >= 3
        assert asked - 30 * DAY <= pruned["before"] <= answered - 30 * DAY
        assert [ada.get(f"/api/runs/{r}").status_code for r in done] == [404] * 4
        assert [ada.get(f"/api/runs/{r}").status_code for r in (recent, queued, held)] == [200] * 3
        assert ada.get(f"/api/runs/{held}").json()["status"] in ("running", "waiting")
        again = prune(ada, older_than="30d").json()
        assert (again["runs"], again["rows"]) == (0, {})
    assert stored(live, done) == dict.fromkeys(done, (0, 0))
    assert [runs for runs, _ in stored(live, kept).values()] == [1] * len(kept)
    audit = live.ws.audit(action="runs.prune")
    assert [(e.actor, e.path, e.details["runs"], e.details["dry_run"]) for e in audit] == [
        ("ada", None, 4, True),
        ("ada", None, 4, False),
        ("ada", None, 0, False),
    ]
    assert audit[1].details["before"] == pruned["before"]


def test_only_a_workspace_admin_with_a_token_for_every_path_may_prune(live: Live) -> None:
    with live.client("olga") as olga:
        old = submit(olga, "f/team/flow", inputs={"name": "old"})
        settled(olga, old)
    age(live, [old], days=40)
    for user in ("olga", "vic", "max"):  # a folder admin, a viewer, a plain member
        with live.client(user) as client:
            refused = prune(client, older_than="1d")
            assert refused.status_code == 403, (user, refused.text)
            assert refused.json()["type"] == "PermissionDenied"
            assert "workspace admin" in refused.json()["message"]
    for scopes in (["runs:write:f/team/*"], ["runs:read"], ["items:write"]):
        token = live.token("ada", *scopes)
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as c:
            refused = prune(c, older_than="1d")
            assert refused.status_code == 403, (scopes, refused.text)
    with live.anonymous() as anonymous:
        nobody = prune(anonymous, older_than="1d")
        assert nobody.status_code == 401 and nobody.json()["type"] == "SignInFailed"
    assert stored(live, [old])[old][0] == 1
    assert live.ws.audit(action="runs.prune") == []
    token = live.token("ada", "runs:write")  # no path: every run of the workspace
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as c:
        assert prune(c, older_than="1d").json()["runs"] == 1


BAD: list[tuple[Any, str]] = [
    ({"older_than": 0}, "greater than zero"),
    ({"older_than": -5}, "greater than zero"),
    ({"older_than": "0d"}, "greater than zero"),
    ({"older_than": "soon"}, "is not a duration"),
    ({"older_than": "-5d"}, "is not a duration"),
    ({"older_than": ""}, "is not a duration"),
    ({"older_than": True}, "is not a duration"),
    ({"older_than": None}, "is not a duration"),
    ({"older_than": [30]}, "is not a duration"),
    ({"older_than": "36526d"}, "at most 36525 days"),
    ({"older_than": 1e300}, "at most 36525 days"),
    ({"older_than": 10**400}, "finite and greater than zero"),
    ({"older_than": "30d", "force": True}, "force"),
    ({"older_than": "30d", "dry_run": "maybe"}, "dry_run"),
    ({"dry_run": True}, "older_than"),
    ({}, "older_than"),
    ([], "valid dictionary"),
    ("30d", "valid dictionary"),
]


def test_a_bad_body_is_a_422_that_says_what_is_wrong(live: Live) -> None:
    with live.client("olga") as olga:
        old = submit(olga, "f/team/flow", inputs={"name": "old"})
        settled(olga, old)
    age(live, [old], days=40)
    wrong = []
    with live.client("ada") as ada:
        for body, said in BAD:
            answer = ada.post("/api/runs/prune", json=body)
            error = answer.json()
            problems = " ".join(error.get("problems", []))
            if (answer.status_code, error["type"]) != (
                422,
                "InvalidRequest",
            ) or said not in problems:
                wrong.append(f"{body!r}: {answer.status_code} {answer.text[:300]}")
        for literal in ("Infinity", "-Infinity", "NaN"):  # JSON as Python's parser reads it
            answer = ada.post(
                "/api/runs/prune",
                content=f'{{"older_than": {literal}}}',
                headers={"Content-Type": "application/json"},
            )
            if answer.status_code != 422 or "finite" not in answer.text:
                wrong.append(f"{literal}: {answer.status_code} {answer.text[:300]}")
    assert not wrong, "\n".join(wrong)
    assert stored(live, [old])[old][0] == 1
    assert live.ws.audit(action="runs.prune") == []


def test_the_openapi_document_describes_the_route(live: Live) -> None:
    with live.anonymous() as anonymous:
        document = anonymous.get("/openapi.json").json()
    op = document["paths"]["/api/runs/prune"]["post"]
    assert {"200", "401", "403", "422"} <= set(op["responses"])
    answer = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/PrunedOut"}
    schemas = document["components"]["schemas"]
    assert set(schemas["PrunedOut"]["required"]) == {"runs", "rows", "before", "dry_run"}
    assert schemas["PruneIn"]["required"] == ["older_than"]
    assert schemas["PruneIn"]["additionalProperties"] is False
    kinds = {choice["type"] for choice in schemas["PruneIn"]["properties"]["older_than"]["anyOf"]}
    assert kinds == {"number", "string"}
