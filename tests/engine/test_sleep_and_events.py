"""`sleep` and `wait_for_event` steps, `send_event`, runs started later: SQLite and PostgreSQL.

A waiting step holds no worker: its job is `waiting` with a row in `tm_waits`
until a worker's sweep ends it (its time came) or an event is sent. Events
sent early are kept for the step that comes to wait; sent twice, they are two
events unless a `dedupe_id` says they are one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from tidemill.engine import AsyncEngine, Wait
from tidemill.errors import InvalidOption, RunFailed
from tidemill.flows import Flow
from tidemill.store import Tx
from tidemill.workspace import AsyncWorkspace

pytestmark = pytest.mark.timeout(120)

EVENT = {"id": "paid", "wait_for_event": {"name": "order_paid", "key": "flow_input.order"}}
ORDER_INPUT = {"type": "object", "properties": {"order": {"type": "string"}}}


def flow(*steps: dict[str, Any]) -> Flow:
    return Flow.model_validate({"inputs": ORDER_INPUT, "steps": list(steps)})


async def until_waits(engine: AsyncEngine, run_id: str, kind: str) -> Wait:
    """Poll until the run waits for `kind`; return that wait."""
    for _ in range(1500):
        found = [w for w in await engine.waits(run_id) if w.kind == kind]
        if found:
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {kind} wait in {await engine.waits(run_id)}")


async def shop(engine: AsyncEngine) -> AsyncWorkspace:
    """Ada's workspace on the engine's store (migrated first), with a folder `shop`."""
    await engine.runs(limit=1)  # opens the store: migrates it
    workspace = AsyncWorkspace(engine.store, user="ada")
    await workspace.add_folder("shop")
    return workspace


async def test_a_sleep_holds_no_worker_and_wakes_on_time(engine: AsyncEngine) -> None:
    nap = flow({"id": "nap", "sleep": {"for": "1s"}}, {"id": "after", "identity": {}})
    async with engine.worker(concurrency=1, poll=0.2):
        started = time.time()
        run_id = await engine.submit(nap)
        wait = await until_waits(engine, run_id, "sleep")
        info = await engine.get(run_id)
        assert info.status == "waiting"
        assert wait.until is not None and started + 0.9 < wait.until < started + 3
        assert "sleeping until" in wait.reason
        jobs = await engine.jobs(run_id)
        assert [(j.step_id, j.status, j.worker is None or j.lease_until is None) for j in jobs] == [
            ("nap", "waiting", True)
        ]
        # The one slot is free while it sleeps: another run goes through meanwhile.
        quick = await engine.submit(flow({"id": "hi", "identity": {}}))
        assert await engine.wait(quick, timeout=30) is None
        assert (await engine.get(run_id)).status == "waiting"
        result = await engine.wait(run_id, timeout=30)
    assert time.time() - started >= 1.0
    # The identity step passes on the sleep's result: the time it slept until.
    assert result["until"].endswith("Z") and result["until"] == wait.details["until"]


async def test_sleep_until_a_time_and_a_time_past(engine: AsyncEngine) -> None:
    nap = {"id": "nap", "sleep": {"until": "flow_input.at"}}
    until = Flow.model_validate({"inputs": {"type": "object"}, "steps": [nap]})
    async with engine.worker(poll=0.2):
        past = await engine.submit(until, {"at": "2020-01-01T00:00:00Z"})
        assert await engine.wait(past, timeout=30) == {"until": "2020-01-01T00:00:00Z"}
        soon = time.time() + 0.6
        later = await engine.submit(until, {"at": soon})
        assert (await engine.wait(later, timeout=30))["until"]
        assert time.time() >= soon
        bad = await engine.submit(until, {"at": "next tuesday"})
        with pytest.raises(RunFailed) as failed:
            await engine.wait(bad, timeout=30)
    assert failed.value.error["type"] == "ExpressionError"
    assert "not a time" in failed.value.error["message"]


async def test_an_event_sent_while_the_run_waits_ends_the_step(engine: AsyncEngine) -> None:
    async with engine.worker(poll=0.2):
        run_id = await engine.submit(flow(EVENT), {"order": "A-1"})
        wait = await until_waits(engine, run_id, "event")
        assert wait.details["name"] == "order_paid" and wait.details["key"] == "A-1"
        assert wait.commands == ("tidemill events send order_paid --key A-1",)
        assert (await engine.get(run_id)).status == "waiting"
        other = await engine.send_event("order_paid", "A-2", {"amount": 1})  # another key
        assert other.delivered_to == () and other.kept_until is not None
        sent = await engine.send_event("order_paid", "A-1", {"amount": 30})
        assert sent.delivered_to == (run_id,) and sent.kept_until is None
        assert await engine.wait(run_id, timeout=30) == {"amount": 30}


async def test_an_event_sent_early_is_kept_for_the_run(engine: AsyncEngine) -> None:
    early = await engine.send_event("order_paid", "B-1", {"amount": 7})
    assert early.kept_until is not None and early.kept_until > time.time() + 6 * 86400
    assert [e.key for e in await engine.kept_events()] == ["B-1"]
    async with engine.worker(poll=0.2):
        run_id = await engine.submit(flow(EVENT), {"order": "B-1"})
        assert await engine.wait(run_id, timeout=30) == {"amount": 7}
        assert await engine.kept_events() == []  # taken: the next run waits for its own
        second = await engine.submit(flow(EVENT), {"order": "B-1"})
        await until_waits(engine, second, "event")


async def test_an_event_sent_twice(engine: AsyncEngine) -> None:
    async with engine.worker(poll=0.2):
        first = await engine.submit(flow(EVENT), {"order": "C-1"})
        await until_waits(engine, first, "event")
        one = await engine.send_event("order_paid", "C-1", {"n": 1}, dedupe_id="evt_1")
        again = await engine.send_event("order_paid", "C-1", {"n": 1}, dedupe_id="evt_1")
        assert one.delivered_to == (first,)
        assert again.duplicate and again.event_id is None  # the resend did nothing
        assert await engine.wait(first, timeout=30) == {"n": 1}
        # Without a dedupe id a second send is a second event: kept for the next run.
        await engine.send_event("order_paid", "C-1", {"n": 2})
        second = await engine.submit(flow(EVENT), {"order": "C-1"})
        assert await engine.wait(second, timeout=30) == {"n": 2}


async def test_one_event_ends_every_step_waiting_for_it(engine: AsyncEngine) -> None:
    async with engine.worker(poll=0.2):
        runs = [await engine.submit(flow(EVENT), {"order": "D-1"}) for _ in range(3)]
        for run_id in runs:
            await until_waits(engine, run_id, "event")
        sent = await engine.send_event("order_paid", "D-1", "ok")
        assert sorted(sent.delivered_to) == sorted(runs)
        assert [await engine.wait(r, timeout=30) for r in runs] == ["ok", "ok", "ok"]


async def test_a_wait_times_out(engine: AsyncEngine) -> None:
    failing = flow({**EVENT, "wait_for_event": {**EVENT["wait_for_event"], "timeout": "300ms"}})
    going_on = flow(
        {**EVENT, "wait_for_event": {**EVENT["wait_for_event"], "timeout": 0.3,
                                     "on_timeout": "continue"}},
        {"id": "next", "identity": {}, "inputs": {"got": {"expr": "results.paid"}}},
    )  # fmt: skip
    async with engine.worker(poll=0.2):
        run_id = await engine.submit(failing, {"order": "E-1"})
        wait = await until_waits(engine, run_id, "event")
        assert wait.until is not None and "until" in wait.reason
        with pytest.raises(RunFailed) as failed:
            await engine.wait(run_id, timeout=30)
        assert failed.value.error["type"] == "EventTimeout"
        assert "'order_paid'" in failed.value.error["message"]
        assert await engine.wait(await engine.submit(going_on, {"order": "E-2"}), 30) == {
            "got": None
        }
    late = await engine.send_event("order_paid", "E-1", {})  # the step no longer waits
    assert late.delivered_to == ()


async def test_a_cancelled_run_leaves_the_event_for_others(engine: AsyncEngine) -> None:
    async with engine.worker(poll=0.2):
        run_id = await engine.submit(flow(EVENT), {"order": "F-1"})
        await until_waits(engine, run_id, "event")
        await engine.cancel(run_id)
        sent = await engine.send_event("order_paid", "F-1", {"x": 1})
        assert sent.delivered_to == ()
        assert [e.key for e in await engine.kept_events(name="order_paid")] == ["F-1"]
        assert (await engine.get(run_id)).status == "cancelled"


async def test_bad_events_are_refused(engine: AsyncEngine) -> None:
    with pytest.raises(InvalidOption, match="not an event name"):
        await engine.send_event("order paid!", "1")
    with pytest.raises(InvalidOption, match="payload must be JSON"):
        await engine.send_event("ok", "1", {"when": object()})
    with pytest.raises(InvalidOption, match="keep"):
        await engine.send_event("ok", "1", keep=0)
    with pytest.raises(InvalidOption, match="key"):
        await engine.send_event("ok", "k" * 600)
    assert await engine.kept_events() == []


async def test_a_key_that_is_not_a_string_fails_the_step(engine: AsyncEngine) -> None:
    keyed = Flow.model_validate(
        {"inputs": {"type": "object"}, "steps": [
            {"id": "w", "wait_for_event": {"name": "x", "key": "flow_input.key"}}]}
    )  # fmt: skip
    async with engine.worker(poll=0.2):
        with pytest.raises(RunFailed) as failed:
            await engine.wait(await engine.submit(keyed, {"key": {"a": 1}}), timeout=30)
        number = await engine.submit(keyed, {"key": 42})
        await until_waits(engine, number, "event")
        await engine.send_event("x", "42", "yes")
        assert await engine.wait(number, timeout=30) == "yes"
    assert "must be a string or a number" in failed.value.error["message"]


async def test_events_are_addressed_to_a_workspace_flow(engine: AsyncEngine) -> None:
    workspace = await shop(engine)
    await workspace.write("f/shop/checkout", "flow", {"inputs": ORDER_INPUT, "steps": [EVENT]})
    async with engine.worker(poll=0.2):
        run_id = await engine.submit_path(workspace, "f/shop/checkout", {"order": "G-1"})
        wait = await until_waits(engine, run_id, "event")
        command = "tidemill events send order_paid --key G-1 --path f/shop/checkout"
        assert wait.commands == (command,)
        plain = await engine.send_event("order_paid", "G-1", 1)  # no path: not for this run
        assert plain.delivered_to == ()
        sent = await engine.send_event(
            "order_paid", "G-1", 2, workspace=workspace.name, path="f/shop/checkout"
        )
        assert sent.delivered_to == (run_id,)
        assert await engine.wait(run_id, timeout=30) == 2


async def test_a_run_started_later(engine: AsyncEngine) -> None:
    at = time.time() + 2.0
    run_id = await engine.submit(flow({"id": "hi", "identity": {}}), start_at=at)
    info = await engine.get(run_id)
    assert info.status == "queued"
    (wait,) = await engine.waits(run_id)
    assert wait.kind == "start" and wait.until == pytest.approx(at)
    async with engine.worker(poll=0.2):
        assert await engine.wait(run_id, timeout=30) is None
    jobs = await engine.jobs(run_id)
    # Claimed once due by the database's clock (its `started_at` is the claimer's clock
    # before the claim's transaction): it ends after `at`, never before.
    assert jobs[0].finished_at is not None and jobs[0].finished_at >= at


async def test_a_webhook_key_starts_one_run(engine: AsyncEngine) -> None:
    workspace = await shop(engine)
    await workspace.write("f/shop/greet", "flow", {"steps": [{"id": "hi", "identity": {}}]})
    first = await engine.submit_path(workspace, "f/shop/greet", idempotency_key="k1")
    again = await engine.submit_path(workspace, "f/shop/greet", idempotency_key="k1")
    other = await engine.submit_path(workspace, "f/shop/greet", idempotency_key="k2")
    assert first == again != other
    racing = await asyncio.gather(
        *[engine.start_path(workspace, "f/shop/greet", idempotency_key="k3") for _ in range(4)]
    )
    assert len({run_id for run_id, _ in racing}) == 1
    assert sorted(created for _, created in racing) == [False, False, False, True]
    assert await engine.start_path(workspace, "f/shop/greet", idempotency_key="k1") == (
        first,
        False,
    )
    assert len(await engine.runs(limit=50)) == 3


async def test_sleeping_runs_survive_a_killed_worker(store_url: str, tmp_path: Any) -> None:
    """SIGKILL the worker process that parked the sleeps; another process wakes them."""
    async with AsyncEngine(store_url, migrate=True) as engine:
        nap = flow({"id": "nap", "sleep": {"for": "2s"}}, {"id": "after", "identity": {}})
        runs = [await engine.submit(nap) for _ in range(3)]
        first = _worker(store_url)
        try:
            for run_id in runs:
                await until_waits(engine, run_id, "sleep")
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
        second = _worker(store_url)
        try:
            results = [await engine.wait(run_id, timeout=60) for run_id in runs]
        finally:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait(timeout=30)
        assert all(set(result) == {"until"} for result in results)
        for run_id in runs:
            nap_jobs = [j for j in await engine.jobs(run_id) if j.step_id == "nap"]
            assert [(j.attempt, j.status) for j in nap_jobs] == [(1, "succeeded")]


def _worker(url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tidemill.cli", "worker", "--db", url, "--lease", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


async def test_three_workers_wake_each_sleep_once(store_url: str) -> None:
    engines = [AsyncEngine(store_url, migrate=True) for _ in range(3)]
    try:
        nap = flow({"id": "nap", "sleep": {"for": 0.3}}, {"id": "after", "identity": {}})
        async with (
            engines[0].worker(poll=0.1),
            engines[1].worker(poll=0.1),
            engines[2].worker(poll=0.1),
        ):
            runs = [await engines[i % 3].submit(nap) for i in range(30)]
            results = [await engines[0].wait(r, timeout=60) for r in runs]
        assert all(set(result) == {"until"} for result in results)
        for run_id in runs:
            jobs = await engines[0].jobs(run_id)
            assert sorted((j.step_id, j.status) for j in jobs) == [
                ("after", "succeeded"),
                ("nap", "succeeded"),
            ]
        assert await engines[0].store.transact(lambda tx: tx.count_waits()) == {}
    finally:
        for engine in engines:
            await engine.close()


async def test_steps_wait_inside_loops_and_sub_flows(engine: AsyncEngine) -> None:
    nested = Flow.model_validate(
        {"inputs": ORDER_INPUT, "steps": [
            {"id": "each", "for_each": {"items": [1, 2, 3], "parallelism": 3, "steps": [
                {"id": "nap", "sleep": {"for": 0.3}}]}},
            {"id": "sub", "flow": {"flow": {"inputs": ORDER_INPUT, "steps": [EVENT]}},
             "inputs": {"order": {"expr": "flow_input.order"}}},
        ]}
    )  # fmt: skip
    async with engine.worker(poll=0.2):
        run_id = await engine.submit(nested, {"order": "H-1"})
        for _ in range(500):
            found = [w for top in await engine.waits(run_id) for w in top.walk()]
            if any(w.kind == "event" for w in found):
                break
            await asyncio.sleep(0.02)
        (event,) = [w for w in found if w.kind == "event"]
        assert event.step == "sub/paid"
        assert (await engine.get(run_id)).status == "waiting"
        sent = await engine.send_event("order_paid", "H-1", {"ok": True})
        assert sent.delivered_to == (run_id,)  # the top-level run it woke
        assert await engine.wait(run_id, timeout=30) == {"ok": True}


async def test_events_racing_steps_that_start_to_wait_are_never_lost(store_url: str) -> None:
    """Send each run's event while its step may be starting to wait: every run gets its own."""
    sender, runner = AsyncEngine(store_url, migrate=True), AsyncEngine(store_url, migrate=True)
    try:
        async with runner.worker(concurrency=8, poll=0.1):
            runs = await runner.submit_many(flow(EVENT), [{"order": f"R-{i}"} for i in range(24)])

            async def send(i: int) -> None:
                await asyncio.sleep(0.005 * (i % 8))
                await sender.send_event("order_paid", f"R-{i}", i)

            await asyncio.gather(*(send(i) for i in range(24)))
            results = [await runner.wait(run_id, timeout=60) for run_id in runs]
        assert results == list(range(24))
        assert await sender.kept_events() == []
    finally:
        await sender.close()
        await runner.close()


async def test_a_worker_deletes_the_events_whose_keep_ran_out(engine: AsyncEngine) -> None:
    """No more sends need to come: a worker's sweep deletes expired events once a minute."""
    gone = await engine.send_event("order_paid", "Z-1", {"amount": 1}, keep=1.0)
    kept = await engine.send_event("order_paid", "Z-2", {"amount": 2})  # (a send prunes too)
    await asyncio.sleep(1.1)  # the first one's keep runs out

    def ids(tx: Tx) -> list[int]:
        return [int(i) for (i,) in tx.all("SELECT id FROM tm_signals ORDER BY id")]

    assert await engine.store.transact(ids) == [gone.event_id, kept.event_id]
    async with engine.worker(poll=0.05):
        for _ in range(200):
            if await engine.store.transact(ids) == [kept.event_id]:
                break
            await asyncio.sleep(0.05)
    assert await engine.store.transact(ids) == [kept.event_id]
