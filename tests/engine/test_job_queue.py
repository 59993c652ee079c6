"""The job queue's one-statement path: a run of one step ends and the next job is claimed.

`Tx.end_run_and_claim` records the last step of a run, ends the run and
claims the next queued job (one statement on PostgreSQL, run without
`BEGIN`/`COMMIT`, on the event loop: `Store.write_one`); the worker takes it
instead of `Transition.complete` plus a claim when the outcome only ends the
run. These tests hold it to the same results as the general path and to the
same fencing.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine._outcome import Outcome
from tidemill.engine.runs._scope import Definitions
from tidemill.engine.runs._transition import Transition
from tidemill.errors import StoreError
from tidemill.flows import Flow
from tidemill.store import JobRow, Store, StoreURL, Tx, upgrade
from tidemill.store._claims import Ending

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000.0
LEASE = 1.0
ONE_STEP = Flow.model_validate({"name": "one", "steps": [{"id": "only", "identity": {}}]})


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    store = Store(StoreURL.parse(store_url))
    try:
        await upgrade(store)
        yield store
    finally:
        await store.close()


async def start_runs(store: Store, count: int, flow: Flow = ONE_STEP) -> list[str]:
    defs = Definitions()
    digest, body = flow.digest(), flow.model_dump_json()

    def create(tx: Tx) -> list[str]:
        change = Transition(tx, defs, T0)
        return [change.create(flow, digest, body, {"n": n}).id for n in range(count)]

    ids: list[str] = await store.transact(create)
    return ids


async def claim(store: Store, worker: str, now: float) -> JobRow:
    (job,) = await store.transact(
        lambda tx: tx.claim(worker, 1, now=now, lease_until=now + LEASE, reclaim=True)
    )
    assert isinstance(job, JobRow)
    return job


async def end(
    store: Store, job: JobRow, result: Any, *, now: float, worker: str = "W", limit: int = 1
) -> Ending | None:
    """`end_run_and_claim` as a worker runs it: one statement of its own on PostgreSQL."""
    if store.dialect == "postgres":
        sql, params = Tx.end_run_and_claim_statement(
            job, result, now=now, worker=worker, limit=limit, lease_until=now + LEASE
        )
        return Tx.ending(await store.write_one(sql, params))
    ending: Ending | None = await store.transact(
        lambda tx: tx.end_run_and_claim(
            job, result, now=now, worker=worker, limit=limit, lease_until=now + LEASE
        )
    )
    return ending


async def state(store: Store, run_id: str) -> tuple[Any, ...]:
    """What a run's ending left: the run, its jobs, its results and its result payload."""

    def read(tx: Tx) -> tuple[Any, ...]:
        run = tx.run(run_id)
        assert run is not None
        jobs = [(j.status, j.epoch, j.finished_at, j.lease_until) for j in tx.run_jobs(run_id)]
        rows = tx.all("SELECT step_id, status, body FROM tm_results WHERE run_id = ?", (run_id,))
        return run.status, run.finished_at, jobs, rows, tx.payload(run_id, "result")

    result: tuple[Any, ...] = await store.transact(read)
    return result


async def test_it_leaves_what_transition_complete_leaves(store: Store) -> None:
    general, fast, third = await start_runs(store, 3)
    first = await claim(store, "W", T0)
    assert first.run_id == general
    await store.transact(
        lambda tx: Transition(tx, Definitions(), T0 + 0.5).complete(
            first, Outcome("succeeded", {"x": 1})
        )
    )
    second = await claim(store, "W", T0)
    assert second.run_id == fast
    ending = await end(store, second, {"x": 1}, now=T0 + 0.5)
    assert ending is not None
    recorded, ended, claimed = ending
    assert (recorded, ended) == (True, True)
    assert await state(store, fast) == await state(store, general)
    assert await state(store, fast) == (
        "succeeded",
        T0 + 0.5,
        [("succeeded", 1, T0 + 0.5, None)],
        [("only", "succeeded", '{"x":1}')],
        {"x": 1},
    )

    # The next job comes claimed, with its run and context, as claim_with_runs gives it.
    ((job, run, context),) = claimed
    assert (job.run_id, job.status, job.worker, job.epoch) == (third, "running", "W", 1)
    assert job.lease_until == T0 + 0.5 + LEASE
    assert (run.id, run.status) == (third, "running")
    assert context == {"flow_input": {"n": 2}}


async def test_with_no_queued_job_it_claims_nothing(store: Store) -> None:
    (only,) = await start_runs(store, 1)
    job = await claim(store, "W", T0)
    assert await end(store, job, 7, now=T0 + 0.1) == (True, True, [])
    assert (await state(store, only))[0] == "succeeded"


async def test_a_fenced_out_worker_writes_and_claims_nothing(store: Store) -> None:
    run_id, waiting = await start_runs(store, 2)
    a = await claim(store, "A", T0)
    b = await claim(store, "B", T0 + 5)  # A's lease ran out: B takes the job over
    assert (b.id, b.epoch) == (a.id, 2)
    before = await state(store, run_id)
    assert await end(store, a, "from A", now=T0 + 5.1, worker="A") == (False, False, [])
    assert await state(store, run_id) == before  # nothing recorded, the run goes on
    assert (await store.transact(lambda tx: tx.counts())) == {"queued": 1, "running": 1}

    ending = await end(store, b, "from B", now=T0 + 5.2, worker="B")
    assert ending is not None
    assert ending[:2] == (True, True)
    assert [job.run_id for job, _run, _ctx in ending[2]] == [waiting]
    status, _, jobs, results, payload = await state(store, run_id)
    assert (status, jobs[0][:2], results, payload) == (
        "succeeded",
        ("succeeded", 2),
        [("only", "succeeded", '"from B"')],
        "from B",
    )
    # A repeated write, from either worker, records nothing again.
    assert await end(store, b, "again", now=T0 + 6, worker="B") == (False, False, [])


async def test_a_cancelled_runs_job_is_lost_to_its_worker(store: Store) -> None:
    run_id, _other = await start_runs(store, 2)
    job = await claim(store, "A", T0)
    await store.transact(lambda tx: Transition(tx, Definitions(), T0 + 0.1).cancel(run_id))
    assert await end(store, job, "too late", now=T0 + 0.2, worker="A") == (False, False, [])
    status, _, jobs, results, payload = await state(store, run_id)
    assert (status, [j[0] for j in jobs], results) == ("cancelled", ["cancelled"], [])
    assert payload is None


async def test_a_run_that_is_gone_gives_none(store: Store) -> None:
    (run_id,) = await start_runs(store, 1)
    job = await claim(store, "A", T0)
    await store.transact(lambda tx: tx.execute("DELETE FROM tm_runs WHERE id = ?", (run_id,)))
    assert await end(store, job, 1, now=T0 + 0.1) is None
    assert (await store.transact(lambda tx: tx.counts())) == {"running": 1}


async def test_a_stopping_worker_claims_nothing_more(store: Store) -> None:
    await start_runs(store, 2)
    job = await claim(store, "A", T0)
    assert await end(store, job, 1, now=T0 + 0.1, limit=0) == (True, True, [])
    assert (await store.transact(lambda tx: tx.counts())) == {"queued": 1, "succeeded": 1}


async def test_workers_draining_the_queue_at_once_never_share_a_job(
    store: Store, store_url: str
) -> None:
    """Four stores (four connections on PostgreSQL) finish and claim in turn until none is left."""
    runs = await start_runs(store, 120)
    stores = [Store(StoreURL.parse(store_url)) for _ in range(4)]
    seen: Counter[int] = Counter()
    lock = threading.Lock()

    async def drain(name: str, mine: Store) -> None:
        jobs = await mine.transact(
            lambda tx: tx.claim(name, 1, now=T0, lease_until=T0 + 60, reclaim=False)
        )
        while jobs:
            (job,) = jobs
            with lock:
                seen[job.id] += 1
            ending = await end(mine, job, name, now=T0 + 1, worker=name)
            assert ending is not None and ending[:2] == (True, True)
            jobs = [claimed for claimed, _run, _ctx in ending[2]]

    try:
        await asyncio.gather(*(drain(f"W{i}", mine) for i, mine in enumerate(stores)))
    finally:
        for mine in stores:
            await mine.close()
    assert len(seen) == 120 and set(seen.values()) == {1}  # each job taken by one worker, once

    def check(tx: Tx) -> tuple[Any, ...]:
        return (
            tx.counts(),
            tx.all("SELECT status, COUNT(*) FROM tm_runs GROUP BY status"),
            tx.all("SELECT COUNT(*), COUNT(DISTINCT run_id) FROM tm_results"),
            tx.all("SELECT DISTINCT epoch FROM tm_jobs"),
        )

    counts, statuses, results, epochs = await store.transact(check)
    assert counts == {"succeeded": len(runs)}
    assert [tuple(row) for row in statuses] == [("succeeded", 120)]
    assert [tuple(row) for row in results] == [(120, 120)]
    assert [tuple(row) for row in epochs] == [(1,)]


ADD = Flow.model_validate(
    {
        "name": "add",
        "steps": [
            {
                "id": "add",
                "script": {"function": "stepfns:add", "in_process": True},
                "inputs": {"a": {"expr": "flow_input.a"}, "b": 1},
            }
        ],
    }
)
TWO_STEPS = Flow.model_validate(
    {"name": "two", "steps": [{"id": "a", "identity": {}}, {"id": "b", "identity": {}}]}
)


async def test_a_worker_ends_one_step_runs_in_one_statement(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tidemill.engine.workers._worker import Worker

    calls: Counter[str] = Counter()
    original = Worker._end_run

    async def counted(self: Worker, job: JobRow, *args: Any) -> Any:
        calls[job.step_id] += 1
        return await original(self, job, *args)

    monkeypatch.setattr(Worker, "_end_run", counted)
    ones = await engine.submit_many(ADD, [{"a": n} for n in range(20)])
    two = await engine.submit(TWO_STEPS, {})
    async with engine.worker(concurrency=2, poll=0.05):
        results = [await engine.wait(run_id, timeout=60) for run_id in ones]
        assert await engine.wait(two, timeout=60) is None
    assert results == [n + 1 for n in range(20)]
    assert calls == {"add": 20}  # the two-step run went the general way


async def test_a_claimed_job_that_needs_the_store_is_read_in_a_transaction(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the next job needs is read from caches first, from the store when that fails."""
    from tidemill.engine.workers._worker import Worker

    original = Worker._prepare
    failed: list[int] = []

    def flaky(self: Worker, tx: Tx, *, job: JobRow, **kwargs: Any) -> Any:
        if kwargs.get("run") is not None and not failed:  # a job claimed with its run
            failed.append(job.id)
            raise StoreError("This needs the database.")  # as `Tx.offline` says it
        return original(self, tx, job=job, **kwargs)

    monkeypatch.setattr(Worker, "_prepare", flaky)
    run_ids = await engine.submit_many(ADD, [{"a": n} for n in range(3)])
    async with engine.worker(concurrency=1, poll=0.05):
        results = [await engine.wait(run_id, timeout=60) for run_id in run_ids]
    assert results == [1, 2, 3]
    assert len(failed) == 1


async def test_a_claimed_job_that_cannot_be_prepared_is_queued_again(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim was committed with the previous job's record: the job is given back, not held."""
    from tidemill.engine.workers._worker import Worker

    original = Worker._prepare
    failed: list[int] = []

    def broken(self: Worker, tx: Tx, *, job: JobRow, **kwargs: Any) -> Any:
        if kwargs.get("run") is not None and not failed:
            failed.append(job.id)
            raise RuntimeError("cannot prepare it")  # neither from caches nor from the store
        return original(self, tx, job=job, **kwargs)

    monkeypatch.setattr(Worker, "_prepare", broken)
    run_ids = await engine.submit_many(ADD, [{"a": n} for n in range(3)])
    async with engine.worker(concurrency=1, poll=0.05):  # one worker: it must not wait for itself
        results = [await engine.wait(run_id, timeout=30) for run_id in run_ids]
    assert results == [1, 2, 3]
    assert len(failed) == 1


async def test_write_one_reconnects_when_its_connection_is_killed(store: Store) -> None:
    if store.dialect != "postgres":
        with pytest.raises(StoreError, match="PostgreSQL"):
            await store.write_one("SELECT 1")
        return
    (pid,) = (await store.write_one("SELECT pg_backend_pid()"))[0]
    killed = await store.transact(lambda tx: tx.all("SELECT pg_terminate_backend(?)", (pid,)))
    assert killed == [(True,)]
    (again,) = (await store.write_one("SELECT pg_backend_pid()"))[0]
    assert again != pid  # a new connection, after the dead one was dropped
    with pytest.raises(Exception, match="division by zero"):  # not a passing trouble
        await store.write_one("SELECT 1 / 0")
    assert (await store.write_one("SELECT %s::int", (7,))) == [(7,)]
