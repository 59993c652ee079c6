"""Leases and epochs at the transaction level: fencing, racing reclaims, renewals, cancels.

Every clock here is an argument (`now=`), so leases expire without sleeping.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from tidemill.engine._outcome import Outcome, SpawnPlan
from tidemill.engine.runs._scope import Definitions
from tidemill.engine.runs._transition import Transition
from tidemill.errors import LeaseLost
from tidemill.flows import Flow
from tidemill.store import JobRow, LogRow, RunRow, Store, StoreURL, Tx, upgrade

pytestmark = pytest.mark.timeout(60)

T0 = 1_700_000_000.0
"""The clock the tests start from (any fixed value will do)."""
LEASE = 1.0

ONE_STEP = Flow.model_validate({"name": "one", "steps": [{"id": "only", "identity": {}}]})
RETRIED = Flow.model_validate(
    {"name": "retried", "steps": [{"id": "only", "identity": {}, "retry": {"attempts": 3}}]}
)
LOOP = Flow.model_validate(
    {
        "name": "loop",
        "steps": [
            {"id": "each", "for_each": {"items": [1, 2], "steps": [{"id": "x", "identity": {}}]}}
        ],
    }
)


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    store = Store(StoreURL.parse(store_url))
    try:
        await upgrade(store)
        yield store
    finally:
        await store.close()


@pytest.fixture
def defs() -> Definitions:
    return Definitions()


async def start_run(store: Store, defs: Definitions, flow: Flow = ONE_STEP) -> str:
    digest, body = flow.digest(), flow.model_dump_json()
    run: RunRow = await store.transact(
        lambda tx: Transition(tx, defs, T0).create(flow, digest, body, {})
    )
    return run.id


async def claim(store: Store, worker: str, now: float, limit: int = 1) -> list[JobRow]:
    jobs: list[JobRow] = await store.transact(
        lambda tx: tx.claim(worker, limit, now=now, lease_until=now + LEASE)
    )
    return jobs


async def complete(
    store: Store, defs: Definitions, job: JobRow, outcome: Outcome, now: float
) -> list[JobRow]:
    taken: list[JobRow] = await store.transact(
        lambda tx: Transition(tx, defs, now).complete(job, outcome)
    )
    return taken


@dataclass
class Snapshot:
    run: RunRow
    jobs: list[JobRow]
    results: dict[str, Any]
    result_rows: int
    logs: list[LogRow]
    runs_in_tree: int


async def snapshot(store: Store, run_id: str) -> Snapshot:
    def read(tx: Tx) -> Snapshot:
        run = tx.run(run_id)
        assert run is not None
        rows = tx.one("SELECT COUNT(*) FROM tm_results WHERE run_id = ?", (run_id,))
        assert rows is not None
        return Snapshot(
            run,
            tx.run_jobs(run_id),
            tx.results(run_id),
            int(rows[0]),
            tx.logs(run_id),
            len(tx.tree(run_id)),
        )

    result: Snapshot = await store.transact(read)
    return result


def succeeded(value: Any, log: str = "") -> Outcome:
    return Outcome("succeeded", value, logs=(("stdout", log),) if log else ())


# --- a late write from a fenced-out worker -------------------------------------------


async def test_a_late_write_from_a_fenced_out_worker_is_rejected(
    store: Store, defs: Definitions
) -> None:
    run_id = await start_run(store, defs)
    (a,) = await claim(store, "A", now=T0 + 0.1)
    assert (a.worker, a.epoch, a.status) == ("A", 1, "running")
    assert await claim(store, "B", now=T0 + 0.5) == []  # A's lease has not run out yet

    (b,) = await claim(store, "B", now=T0 + 5)  # it has now: B takes the job over
    assert (b.id, b.worker, b.epoch) == (a.id, "B", 2)

    with pytest.raises(LeaseLost, match="no longer held at epoch 1"):
        await complete(store, defs, a, succeeded("from A", "A was here"), now=T0 + 5.1)
    seen = await snapshot(store, run_id)
    assert seen.result_rows == 0
    assert seen.logs == []  # the logs written before the fence tripped were rolled back
    assert seen.run.status == "running"
    (job,) = seen.jobs
    assert (job.status, job.worker, job.epoch) == ("running", "B", 2)

    assert await complete(store, defs, b, succeeded("from B", "B was here"), now=T0 + 5.2) == []
    seen = await snapshot(store, run_id)
    assert seen.result_rows == 1
    assert seen.results == {"only": "from B"}
    assert [log.body for log in seen.logs] == ["B was here"]
    assert seen.run.status == "succeeded"
    assert [(j.status, j.epoch) for j in seen.jobs] == [("succeeded", 2)]

    for late in (a, b):  # neither the fenced worker nor a repeated write records it again
        with pytest.raises(LeaseLost):
            await complete(store, defs, late, succeeded("again"), now=T0 + 6)
    assert (await snapshot(store, run_id)).result_rows == 1


async def test_a_fenced_failure_schedules_no_retry(store: Store, defs: Definitions) -> None:
    run_id = await start_run(store, defs, RETRIED)
    (a,) = await claim(store, "A", now=T0)
    (b,) = await claim(store, "B", now=T0 + 5)
    failure = Outcome("failed", error={"type": "RuntimeError", "message": "late"})
    with pytest.raises(LeaseLost):
        await complete(store, defs, a, failure, now=T0 + 5.1)
    seen = await snapshot(store, run_id)
    assert [(j.attempt, j.status, j.worker) for j in seen.jobs] == [(1, "running", "B")]
    assert seen.run.status == "running"
    await complete(store, defs, b, succeeded(1), now=T0 + 5.2)
    assert (await snapshot(store, run_id)).run.status == "succeeded"


async def test_a_fenced_container_starts_no_children(store: Store, defs: Definitions) -> None:
    run_id = await start_run(store, defs, LOOP)
    (a,) = await claim(store, "A", now=T0)
    (b,) = await claim(store, "B", now=T0 + 5)
    ctx = {"flow_input": {}}
    plan = SpawnPlan(
        ["body", "body"],
        [{**ctx, "iter": {"value": v, "index": i}} for i, v in enumerate([1, 2])],
        items=[1, 2],
    )
    with pytest.raises(LeaseLost):
        await store.transact(lambda tx: Transition(tx, defs, T0 + 5.1).spawn(a, plan))
    seen = await snapshot(store, run_id)
    assert seen.runs_in_tree == 1
    assert [j.status for j in seen.jobs] == ["running"]
    await store.transact(lambda tx: Transition(tx, defs, T0 + 5.2).spawn(b, plan))
    seen = await snapshot(store, run_id)
    assert seen.runs_in_tree == 2  # parallelism 1: the first iteration only
    assert [j.status for j in seen.jobs] == ["waiting"]


# --- racing reclaims -----------------------------------------------------------------


def racer(name: str, now: float, barrier: threading.Barrier | None) -> Any:
    """A claim transaction that, given a barrier, claims only once both transactions are open."""

    def claim_now(tx: Tx) -> list[JobRow]:
        if barrier is not None:
            barrier.wait()
        jobs = tx.claim(name, 1, now=now, lease_until=now + LEASE)
        if barrier is not None:
            barrier.wait()
        return jobs

    return claim_now


@pytest.mark.parametrize("state", ["expired", "queued"])
async def test_two_workers_racing_for_one_job_one_wins(
    store: Store, store_url: str, defs: Definitions, state: str
) -> None:
    """Two transactions claim at once; on PostgreSQL both are open at the same time."""
    other = Store(StoreURL.parse(store_url))
    concurrent = store.dialect == "postgres"
    try:
        for round_ in range(5):
            run_id = await start_run(store, defs)
            if state == "expired":
                (held,) = await claim(store, "A", now=T0)
                assert held.run_id == run_id
            now = T0 + 10 * (round_ + 1)
            # Both claims run while both transactions are open: neither waits for the other,
            # which SKIP LOCKED allows (a blocking lock would break the second barrier).
            barrier = threading.Barrier(2, timeout=15) if concurrent else None
            got = await asyncio.gather(
                store.transact(racer("B", now, barrier)), other.transact(racer("C", now, barrier))
            )
            winners = [(name, jobs) for name, jobs in zip("BC", got, strict=True) if jobs]
            assert len(winners) == 1, f"round {round_}: {got}"
            name, (job,) = winners[0]
            assert job.run_id == run_id
            assert job.epoch == (2 if state == "expired" else 1)
            (stored,) = (await snapshot(store, run_id)).jobs
            assert (stored.worker, stored.epoch, stored.status) == (name, job.epoch, "running")
            await complete(store, defs, job, succeeded(name), now=now + 0.1)
            seen = await snapshot(store, run_id)
            assert (seen.result_rows, seen.run.status) == (1, "succeeded")
    finally:
        await other.close()


# --- renewals ------------------------------------------------------------------------


async def test_a_renewal_by_a_worker_that_lost_the_job_is_refused(
    store: Store, defs: Definitions
) -> None:
    run_id = await start_run(store, defs)
    (a,) = await claim(store, "A", now=T0)
    kept = await store.transact(lambda tx: tx.renew("A", {a.id: a.epoch}, T0 + 0.5 + LEASE))
    assert kept == {a.id}  # renewing in time keeps it ...
    assert await claim(store, "B", now=T0 + 1.2) == []  # ... past the first lease's end

    (b,) = await claim(store, "B", now=T0 + 5)
    kept = await store.transact(lambda tx: tx.renew("A", {a.id: a.epoch}, T0 + 5.1 + LEASE))
    assert kept == set()
    (job,) = (await snapshot(store, run_id)).jobs
    assert (job.worker, job.epoch, job.lease_until) == ("B", 2, T0 + 5 + LEASE)  # untouched

    # Also when A names the new epoch, or B's old one: only the holder at its epoch renews.
    assert await store.transact(lambda tx: tx.renew("A", {b.id: 2}, T0 + 9)) == set()
    assert await store.transact(lambda tx: tx.renew("B", {b.id: 1}, T0 + 9)) == set()
    assert await store.transact(lambda tx: tx.renew("B", {b.id: 2}, T0 + 9)) == {b.id}

    await complete(store, defs, b, succeeded(1), now=T0 + 6)
    assert await store.transact(lambda tx: tx.renew("B", {b.id: 2}, T0 + 9)) == set()


async def test_a_cancelled_runs_running_job_is_lost_to_its_worker(
    store: Store, defs: Definitions
) -> None:
    run_id = await start_run(store, defs)
    (a,) = await claim(store, "A", now=T0)
    await store.transact(lambda tx: Transition(tx, defs, T0 + 0.2).cancel(run_id))

    kept = await store.transact(lambda tx: tx.renew("A", {a.id: a.epoch}, T0 + 0.3 + LEASE))
    assert kept == set()
    with pytest.raises(LeaseLost):
        await complete(store, defs, a, succeeded("too late", "printed"), now=T0 + 0.4)
    seen = await snapshot(store, run_id)
    assert seen.run.status == "cancelled"
    assert [j.status for j in seen.jobs] == ["cancelled"]
    assert (seen.result_rows, seen.logs) == (0, [])
    assert await claim(store, "B", now=T0 + 10) == []  # nothing to reclaim
