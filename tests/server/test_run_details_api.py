"""What the web UI reads of runs over HTTP: costs and filters in the list, a run's flow
and inputs, and its events with their job and from the end."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
from tests.server.conftest import Live, settled, sse_messages

from tidemill import Engine, Flow
from tidemill.store import RunReach, Store, StoreURL, Tx, run_page, upgrade
from tidemill.store._run_pages import RunFilters, run_costs

MAX_FLOW = {"steps": [{"id": "one", "script": "def main():\n    return 1\n"}]}
ECHO = {
    "inputs": {"type": "object", "properties": {"name": {"type": "string"}}},
    "steps": [
        {
            "id": "echo",
            "script": "def main(name: str):\n    return len(name)\n",
            "inputs": {"name": {"expr": "flow_input.name"}},
        }
    ],
}


def submit(client: httpx.Client, path: str, **body: Any) -> dict[str, Any]:
    answer = client.post("/api/runs", json={"path": path, **body})
    assert answer.status_code == 201, answer.text
    run: dict[str, Any] = answer.json()
    return run


def every(client: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    """Every run the caller sees under `params`, a page of one at a time."""
    runs: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {"limit": 1, **params, **({"cursor": cursor} if cursor else {})}
        page = client.get("/api/runs", params=query)
        assert page.status_code == 200, page.text
        runs.extend(page.json()["runs"])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return runs


def ids(client: httpx.Client, **params: Any) -> list[str]:
    return [run["id"] for run in every(client, **params)]


def record_usage(live: Live, run_id: str, costs: list[float | None]) -> None:
    """Model calls of the run's first job, as an AI step records them."""

    async def write() -> None:
        store = Store(StoreURL.parse(live.db))
        try:

            def add(tx: Tx) -> None:
                run = tx.run(run_id)
                job = tx.tree_jobs(run_id)[0]
                for n, cost in enumerate(costs):
                    usage = {"model": f"m{n}", "provider": "test", "input_tokens": 3,
                             "output_tokens": 4, "cost_usd": cost, "latency_ms": 1.0}  # fmt: skip
                    tx.insert_usage(run, job, usage, time.time())

            await store.transact(add)
        finally:
            await store.close()

    asyncio.run(write())


def test_each_run_of_the_list_has_its_cost_as_its_usage_sums_it(live: Live) -> None:
    with live.client("olga") as olga:
        priced = settled(olga, submit(olga, "f/team/flow", inputs={"name": "a"})["id"])["id"]
        bare = settled(olga, submit(olga, "f/team/flow", inputs={"name": "b"})["id"])["id"]
        record_usage(live, priced, [0.25, 0.5, None])
        listed = {run["id"]: run for run in olga.get("/api/runs").json()["runs"]}
        usage = olga.get(f"/api/runs/{priced}/usage").json()
    assert listed[priced]["cost_usd"] == sum(u["cost_usd"] or 0 for u in usage) == 0.75
    assert (listed[priced]["model_calls"], listed[priced]["unpriced_calls"]) == (3, 1)
    assert (listed[bare]["cost_usd"], listed[bare]["model_calls"]) == (None, 0)


def test_the_list_filters_by_folder_time_and_who_started_it_page_by_page(live: Live) -> None:
    live.ws.acting_as("max").write("u/max/flow", "flow", MAX_FLOW)
    with live.client("olga") as olga, live.client("max") as max_:
        first = submit(olga, "f/team/flow", inputs={"name": "a"})
        mine = submit(max_, "u/max/flow")
        last = submit(olga, "f/team/flow", inputs={"name": "b"})
    with Engine(live.db) as engine:
        loose = engine.submit(Flow.model_validate(MAX_FLOW)).id  # from Python: no path, no user
    team = [last["id"], first["id"]]
    with live.client("ada") as ada, live.client("vic") as vic, live.client("max") as max_:
        assert ids(ada, started_by="olga") == team
        assert ids(ada, started_by="max") == [mine["id"]]
        assert ids(ada, path_prefix="f/team/") == team
        assert ids(ada, path_prefix="f/team") == team
        assert ids(ada, path_prefix="f/team/fl") == team
        assert ids(ada, path_prefix="f/team/x") == []
        assert ids(ada, path_prefix="u/max/", started_by="max") == [mine["id"]]
        assert loose in ids(ada) and loose not in ids(ada, started_by="olga")
        after = ids(ada, started_after=mine["created_at"])
        assert after[:3] == [loose, last["id"], mine["id"]]
        assert first["id"] not in after
        assert ids(ada, started_before=mine["created_at"], started_by="olga") == [first["id"]]
        assert ids(ada, started_after=first["created_at"], started_before=last["created_at"]) == [
            mine["id"],
            first["id"],
        ]
        # A viewer of f/team: olga's runs there, nothing of max's folder.
        assert ids(vic, started_by="olga") == team
        assert ids(vic, started_by="max") == []
        assert ids(vic, path_prefix="u/max/") == []
        # One's own runs, by one's own name.
        assert ids(max_, started_by="max") == [mine["id"]]
        assert ids(max_, path_prefix="f/team/") == []
        for bad in ({"path_prefix": "f"}, {"path_prefix": "/f/team"}, {"started_after": "x"}):
            assert ada.get("/api/runs", params=bad).status_code == 422
        for odd in ("nan", "inf", "1e400", "-1"):  # never a 500 from the store
            answer = ada.get("/api/runs", params={"started_before": odd, "started_after": odd})
            assert answer.status_code in (200, 422), answer.text


def test_a_run_s_flow_is_the_definition_it_runs_for_whoever_sees_the_run(live: Live) -> None:
    with live.client("olga") as olga:
        run = settled(olga, submit(olga, "f/team/flow", inputs={"name": "a"})["id"])
        changed = {"kind": "flow", "value": {**ECHO, "summary": "a draft"}}
        assert olga.put("/api/drafts/f/team/flow", json=changed).status_code < 300
        draft = submit(olga, "f/team/flow", inputs={"name": "b"}, draft=True)
    with Engine(live.db) as engine:
        loose = engine.submit(Flow.model_validate(MAX_FLOW)).id
    with live.client("vic") as vic, live.client("max") as max_, live.client("ada") as ada:
        shown = vic.get(f"/api/runs/{run['id']}/flow")
        assert shown.status_code == 200, shown.text
        flow = shown.json()
        assert (flow["run_id"], flow["path"], flow["draft"]) == (run["id"], "f/team/flow", False)
        assert [s["id"] for s in flow["definition"]["steps"]] == ["greet"]
        drafted = vic.get(f"/api/runs/{draft['id']}/flow").json()
        assert drafted["draft"] is True and drafted["version"] == 0
        assert [s["id"] for s in drafted["definition"]["steps"]] == ["echo"]
        assert max_.get(f"/api/runs/{run['id']}/flow").status_code == 404
        assert ada.get(f"/api/runs/{loose}/flow").json()["definition"]["steps"][0]["id"] == "one"
        assert vic.get(f"/api/runs/{loose}/flow").status_code == 404
        assert ada.get("/api/runs/nope/flow").status_code == 404
    # A token whose runs scope is elsewhere sees no run, so no flow either.
    scoped = live.token("vic", "runs:read:u/vic/*")
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {scoped}"}) as client:
        assert client.get(f"/api/runs/{run['id']}/flow").status_code == 404


def test_a_run_shows_its_inputs_with_references_unresolved(live: Live) -> None:
    live.ws.acting_as("max").write("u/max/echo", "flow", ECHO)
    with live.client("max") as max_, live.client("ada") as ada:
        run = submit(max_, "u/max/echo", inputs={"name": "$var:u/max/notes"})
        done = settled(max_, run["id"])
        assert done["status"] == "succeeded", done
        assert done["inputs"] == {"name": "$var:u/max/notes"}
        assert done["result"] == len("max's notes")  # the step saw the value, never stored
        assert "max's notes" not in max_.get(f"/api/runs/{run['id']}").text
        assert ada.get(f"/api/runs/{run['id']}").json()["inputs"] == done["inputs"]
        assert max_.get("/api/runs").json()["runs"][0]["inputs"] is None  # not read per row


def test_events_name_their_job_and_start_from_the_end_when_asked(live: Live) -> None:
    with live.client("olga") as olga:
        run_id = settled(olga, submit(olga, "f/team/flow", inputs={"name": "a"})["id"])["id"]
        whole = olga.get(f"/api/runs/{run_id}/events/page").json()
        jobs = olga.get(f"/api/runs/{run_id}/jobs").json()
        step_events = [e for e in whole if e["kind"] in ("step_started", "step_finished")]
        assert step_events and {e["job_id"] for e in step_events} == {jobs[0]["id"]}
        assert whole[0]["job_id"] is None  # the run's own events are about no job
        with olga.stream("GET", f"/api/runs/{run_id}/events", params={"tail": 2}) as stream:
            tail = sse_messages(stream.read().decode())
        assert [int(m["id"]) for m in tail] == [e["id"] for e in whole[-2:]]
        assert tail[-1]["event"] == "run_finished" and "job_id" in tail[-1]["data"]
        with olga.stream("GET", f"/api/runs/{run_id}/events", params={"tail": 0}) as stream:
            assert sse_messages(stream.read().decode()) == []  # it ended: nothing new comes
        with olga.stream(
            "GET",
            f"/api/runs/{run_id}/events",
            params={"tail": 0},
            headers={"Last-Event-ID": str(whole[-3]["id"])},
        ) as stream:  # a reconnect resumes where it stopped, whatever its tail
            assert [int(m["id"]) for m in sse_messages(stream.read().decode())] == [
                e["id"] for e in whole[-2:]
            ]
        assert olga.get(f"/api/runs/{run_id}/events", params={"tail": -1}).status_code == 422


def test_each_filter_walks_an_index_of_tm_runs(tmp_path: Path) -> None:
    """SQLite's plan for each filter: an index with `created_at`, never a scan of every run."""
    admin = RunReach("w", everything=True, unsourced=True)
    member = RunReach("w", run_as="max", folders=("u/max", "f/team"), paths=("f/ops/x",))
    cases = [
        (admin, RunFilters(started_by="olga"), "tm_runs_run_as"),
        (admin, RunFilters(path_prefix="f/team/sub/"), "tm_runs_folder"),
        (admin, RunFilters(started_after=1.0, started_before=5.0), "tm_runs_top"),
        (member, RunFilters(started_by="olga"), "tm_runs_run_as"),
        (member, RunFilters(started_by="max"), "tm_runs_run_as"),
        (member, RunFilters(path_prefix="f/team/"), "tm_runs_folder"),
    ]

    async def plans() -> list[tuple[str, list[str]]]:
        store = Store(StoreURL.parse(f"sqlite:///{tmp_path}/plan.db"))
        await upgrade(store)

        def explain(tx: Tx) -> list[tuple[str, list[str]]]:
            found: list[tuple[str, list[str]]] = []
            real = tx.all

            def spy(sql: str, params: Any = ()) -> list[Any]:
                steps = [str(row[-1]) for row in real(f"EXPLAIN QUERY PLAN {sql}", params)]
                found.append((sql, steps))
                return []

            tx.all = spy  # type: ignore[method-assign]
            for reach, filters, _ in cases:
                run_page(tx, reach, before=(3.0, "x"), filters=filters)
            run_costs(tx, ["a", "b"])
            return found

        try:
            return await store.transact(explain)
        finally:
            await store.close()

    found = asyncio.run(plans())
    for (_, filters, index), (_, steps) in zip(cases, found[:-1], strict=True):
        walks = [s for s in steps if s.startswith(("SCAN r", "SEARCH r "))]
        assert walks and all("tm_runs_1" in s or index in s for s in walks), (filters, steps)
    assert any("tm_usage_root" in s for s in found[-1][1]), found[-1]
