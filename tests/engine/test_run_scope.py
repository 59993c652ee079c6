"""A worker limited to one run: it claims that run's jobs and its child runs', nothing else.

`Worker(run_id=...)` (what `tidemill run` starts) passes the run to the claim
queries, which take only jobs of runs whose `root_id` is that run: its
branches, loops, sub-flows and the child runs of its agent's tool calls
share it. A plain worker takes every job. These run on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine._outcome import Outcome
from tidemill.engine.runs._progress import Take
from tidemill.engine.runs._scope import Definitions
from tidemill.engine.runs._transition import Transition
from tidemill.flows import Flow
from tidemill.llm import ScriptedModel
from tidemill.store import JobRow, Store, StoreURL, Tx, upgrade
from tidemill.types import ToolCall

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000.0
LEASE = 1.0
ONE_STEP = Flow.model_validate({"name": "one", "steps": [{"id": "only", "identity": {}}]})
TWO_STEPS = Flow.model_validate(
    {"name": "two", "steps": [{"id": "a", "identity": {}}, {"id": "b", "identity": {}}]}
)
SUB = {"name": "sub", "steps": [{"id": "inner", "identity": {}, "inputs": {"v": 3}}]}
NESTED = Flow.model_validate(
    {
        "name": "nested",
        "steps": [
            {"id": "each", "for_each": {"items": [1, 2, 3], "parallelism": 2, "steps": [
                {"id": "x", "identity": {}, "inputs": {"v": {"expr": "iter.value"}}}]}},
            {"id": "both", "parallel": {"branches": [
                {"steps": [{"id": "left", "identity": {}, "inputs": {"v": "l"}}]},
                {"steps": [{"id": "right", "identity": {}, "inputs": {"v": "r"}}]}]}},
            {"id": "pick", "branch": {"branches": [{"when": "True", "steps": [
                {"id": "yes", "identity": {}, "inputs": {"v": "y"}}]}]}},
            {"id": "call", "flow": {"flow": SUB}},
        ],
    }
)  # fmt: skip
GATED = Flow.model_validate(
    {"name": "gated", "concurrency": {"limit": 1}, "steps": [{"id": "only", "identity": {}}]}
)


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    store = Store(StoreURL.parse(store_url))
    try:
        await upgrade(store)
        yield store
    finally:
        await store.close()


async def start(store: Store, flow: Flow, count: int = 1) -> list[str]:
    defs = Definitions()
    digest, body = flow.digest(), flow.model_dump_json()
    limit = None if flow.concurrency is None else flow.concurrency.limit
    key = None if limit is None else f"flow:{flow.name}"

    def create(tx: Tx) -> list[str]:
        change = Transition(tx, defs, T0)
        return [
            change.create(flow, digest, body, {}, concurrency_key=key, limit=limit).id
            for _ in range(count)
        ]

    ids: list[str] = await store.transact(create)
    return ids


async def jobs_of(store: Store, run_id: str) -> list[JobRow]:
    jobs: list[JobRow] = await store.transact(lambda tx: tx.tree_jobs(run_id))
    return jobs


# --- the claim queries ----------------------------------------------------------------------


async def test_a_scoped_claim_takes_only_its_runs_jobs(store: Store) -> None:
    other, mine = await start(store, ONE_STEP, 2)
    jobs = await store.transact(
        lambda tx: tx.claim("W", 5, now=T0, lease_until=T0 + LEASE, root_id=mine)
    )
    assert [job.run_id for job in jobs] == [mine]
    (waiting,) = await jobs_of(store, other)
    assert (waiting.status, waiting.worker, waiting.epoch) == ("queued", None, 0)
    # A plain claim still takes everything.
    (job,) = await store.transact(lambda tx: tx.claim("V", 5, now=T0, lease_until=T0 + LEASE))
    assert job.run_id == other


async def test_a_scoped_claim_takes_no_other_runs_expired_lease(store: Store) -> None:
    other, mine = await start(store, ONE_STEP, 2)
    await store.transact(lambda tx: tx.claim("dead", 2, now=T0, lease_until=T0 + LEASE))
    later = T0 + 5 * LEASE
    jobs = await store.transact(
        lambda tx: tx.claim("W", 5, now=later, lease_until=later + LEASE, root_id=mine)
    )
    assert [(job.run_id, job.worker, job.epoch) for job in jobs] == [(mine, "W", 2)]
    (held,) = await jobs_of(store, other)
    assert (held.worker, held.epoch) == ("dead", 1)


async def test_a_scoped_claim_with_runs_takes_only_its_runs_jobs(store: Store) -> None:
    (other,) = await start(store, ONE_STEP)
    (mine,) = await start(store, TWO_STEPS)
    claimed = await store.transact(
        lambda tx: tx.claim_with_runs(
            "W", 5, now=T0, lease_until=T0 + LEASE, reclaim=False, root_id=mine
        )
    )
    assert [(job.step_id, run.id) for job, run, _ in claimed] == [("a", mine)]
    assert (await jobs_of(store, other))[0].status == "queued"


async def end(
    store: Store, job: JobRow, *, root_id: str | None
) -> tuple[bool, bool, list[Any]] | None:
    """`end_run_and_claim` as a worker runs it (one statement of its own on PostgreSQL)."""
    options: dict[str, Any] = {
        "now": T0 + 0.5, "worker": "W", "limit": 1, "lease_until": T0 + 0.5 + LEASE,
        "root_id": root_id,
    }  # fmt: skip
    if store.dialect == "postgres":
        sql, params = Tx.end_run_and_claim_statement(job, 1, **options)
        return Tx.ending(await store.write_one(sql, params))
    ending: tuple[bool, bool, list[Any]] | None = await store.transact(
        lambda tx: tx.end_run_and_claim(job, 1, **options)
    )
    return ending


async def test_ending_a_run_claims_no_other_runs_job_when_scoped(store: Store) -> None:
    mine, other = await start(store, ONE_STEP, 2)
    (job,) = await store.transact(
        lambda tx: tx.claim("W", 1, now=T0, lease_until=T0 + LEASE, root_id=mine)
    )
    assert await end(store, job, root_id=mine) == (True, True, [])
    (waiting,) = await jobs_of(store, other)
    assert (waiting.status, waiting.worker) == ("queued", None)


async def test_ending_a_run_unscoped_still_claims_the_next_job(store: Store) -> None:
    mine, other = await start(store, ONE_STEP, 2)
    (job,) = await store.transact(
        lambda tx: tx.claim("W", 1, now=T0, lease_until=T0 + LEASE, root_id=mine)
    )
    ending = await end(store, job, root_id=None)
    assert ending is not None
    assert [claimed.run_id for claimed, _, _ in ending[2]] == [other]


async def test_a_scoped_take_leaves_the_next_gated_run_queued(store: Store) -> None:
    first, second = await start(store, GATED, 2)
    (job,) = await store.transact(
        lambda tx: tx.claim("W", 1, now=T0, lease_until=T0 + LEASE, root_id=first)
    )
    defs = Definitions()
    take = Take("W", T0 + LEASE, 1, root_id=first)
    taken = await store.transact(
        lambda tx: Transition(tx, defs, T0 + 0.5, take).complete(job, Outcome("succeeded", 1))
    )
    assert taken == []  # the gate let `second` through; its job is queued for any worker
    (queued,) = await jobs_of(store, second)
    assert (queued.status, queued.worker) == ("queued", None)


# --- the worker ------------------------------------------------------------------------------


async def test_a_worker_for_one_run_runs_its_nested_runs_and_nothing_else(
    engine: AsyncEngine,
) -> None:
    (other,) = await engine.submit_many(ONE_STEP, [{}])
    mine = await engine.submit(NESTED)
    async with engine.worker(concurrency=3, poll=0.05, run_id=mine):
        result = await engine.wait(mine, timeout=60)
    assert result == {"v": 3}
    statuses = {job.step_id: job.status for job in await engine.jobs(mine)}
    assert set(statuses.values()) == {"succeeded"}
    assert {"x", "left", "right", "yes", "inner"} <= set(statuses)
    (waiting,) = await engine.jobs(other)
    assert (waiting.status, waiting.worker, waiting.epoch) == ("queued", None, 0)


async def test_a_worker_for_one_run_runs_its_agents_tool_call_child_runs(
    engine: AsyncEngine,
) -> None:
    tool = {"name": "lookup", "flow": {"flow": SUB}}
    step = {
        "id": "agent",
        "ai_agent": {"model": "fake", "tools": [tool]},
        "inputs": {"user_message": "Look it up."},
    }
    flow = Flow.model_validate({"steps": [step]})
    call = ToolCall(id="c1", name="lookup", arguments={})
    model = ScriptedModel(["", "Found."], tool_calls=[[call], []])
    (other,) = await engine.submit_many(ONE_STEP, [{}])
    mine = await engine.submit(flow)
    async with engine.worker(poll=0.05, pool_size=1, models=lambda _: model, run_id=mine):
        assert await engine.wait(mine, timeout=60) == "Found."
    assert [job.step_id for job in await engine.jobs(mine)] == ["agent", "inner"]
    assert (await engine.jobs(other))[0].status == "queued"


async def test_a_plain_worker_takes_every_run(engine: AsyncEngine) -> None:
    first, second = await engine.submit_many(ONE_STEP, [{}, {}])
    async with engine.worker(poll=0.05):
        for run_id in (first, second):
            assert await engine.wait(run_id, timeout=60) is None
