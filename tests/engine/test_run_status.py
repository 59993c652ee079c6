"""A run's status as `RunInfo` shows it: `queued` until a worker takes one of its steps.

The store keeps `running` for a run whose steps are queued; what is shown
(and filtered on) is read from its jobs: no job of its tree claimed yet is
`queued`, only people's decisions left is `waiting`. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import RunTimeout
from tidemill.flows import Flow
from tidemill.store import JobRow

pytestmark = pytest.mark.timeout(60)

ONE = Flow.model_validate({"name": "one", "steps": [{"id": "only", "identity": {}}]})
ASK = Flow.model_validate({"name": "ask", "steps": [{"id": "ok", "approval": {"message": "Go?"}}]})
GATED = Flow.model_validate(
    {"name": "gated", "concurrency": {"limit": 1}, "steps": [{"id": "ok", "approval": {}}]}
)


async def claim_one(engine: AsyncEngine, run_id: str) -> JobRow:
    """Claim the first step of `run_id` as a worker that stalls on it would."""
    now = time.time()
    (job,) = await engine.store.transact(
        lambda tx: tx.claim("stalled", 1, now=now, lease_until=now + 60, root_id=run_id)
    )
    assert isinstance(job, JobRow)
    return job


async def asked(engine: AsyncEngine, run_id: str) -> None:
    """Wait until the run's approval step asks."""
    for _ in range(3000):
        if await engine.approvals(run_id):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("no approval appeared")


async def test_a_run_no_worker_took_is_queued(engine: AsyncEngine) -> None:
    run_id = await engine.submit(ONE)
    assert (await engine.get(run_id)).status == "queued"
    with pytest.raises(RunTimeout, match="still queued"):
        await engine.wait(run_id, timeout=0.1)
    await claim_one(engine, run_id)
    assert (await engine.get(run_id)).status == "running"


async def test_filters_read_the_shown_status_before_the_limit(engine: AsyncEngine) -> None:
    taken = [await engine.submit(ONE) for _ in range(2)]
    for run_id in taken:
        await claim_one(engine, run_id)
    untaken = [await engine.submit(ONE) for _ in range(3)]
    older = await engine.submit(ONE)
    await claim_one(engine, older)

    queued = await engine.runs(status="queued", limit=2)
    assert [info.id for info in queued] == untaken[::-1][:2]
    assert {info.status for info in queued} == {"queued"}
    running = await engine.runs(status="running", limit=3)
    assert [info.id for info in running] == [older, *taken[::-1]]
    assert {info.id: info.status for info in await engine.runs()} == {
        **dict.fromkeys(untaken, "queued"),
        **dict.fromkeys([*taken, older], "running"),
    }


async def test_waiting_and_gated_runs(engine: AsyncEngine) -> None:
    first, second = await engine.submit_many(GATED, [{}, {}])
    asking = await engine.submit(ASK)
    assert [(await engine.get(r)).status for r in (first, second, asking)] == ["queued"] * 3
    async with engine.worker(poll=0.05):
        for run_id in (first, asking):
            await asked(engine, run_id)
    assert (await engine.get(first)).status == "waiting"
    assert (await engine.get(second)).status == "queued"  # behind the concurrency limit
    waiting = await engine.runs(status="waiting")
    assert sorted(info.id for info in waiting) == sorted([first, asking])
    assert [info.id for info in await engine.runs(status="queued")] == [second]
    for run_id in (first, second, asking):
        await engine.cancel(run_id)
    assert {info.status for info in await engine.runs()} == {"cancelled"}
