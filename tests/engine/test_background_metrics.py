"""A worker's background work in its metrics: schedule fires, woken waits, pruned runs.

On SQLite and PostgreSQL, one worker with a `Metrics`: a schedule firing
every second (`tidemill_schedule_fires_total{status="started"}`), a sleep
that ends (`tidemill_waits_woken_total`), and an old ended run its
retention deletes (`tidemill_runs_pruned_total`); a fire whose target is
gone is counted `failed`, and odd statuses fall into `other`.
"""

from __future__ import annotations

import asyncio

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine._metrics import Metrics
from tidemill.flows import Flow
from tidemill.store import Tx
from tidemill.workspace import AsyncWorkspace

pytestmark = pytest.mark.timeout(120)

DAY = 86400.0
TICK = {"steps": [{"id": "tick", "identity": {}, "inputs": {"n": 1}}]}
NAP = Flow.model_validate({"name": "nap", "steps": [{"id": "nap", "sleep": {"for": "0.2s"}}]})


def sample(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    return metrics.registry.get_sample_value(name, labels or {}) or 0.0


async def test_a_workers_fires_woken_waits_and_pruned_runs_are_counted(
    engine: AsyncEngine,
) -> None:
    ws = AsyncWorkspace(engine.store, user="ada", migrate=True)
    await ws.add_folder("ops")
    await ws.write("f/ops/tick", "flow", TICK)
    async with engine.worker(poll=0.05):
        old = await engine.submit(NAP)
        await engine.wait(old, timeout=60)
    await engine.store.transact(
        lambda tx: tx.execute(
            "UPDATE tm_runs SET created_at = created_at - ?, finished_at = finished_at - ?",
            (3 * DAY, 3 * DAY),
        )
    )
    await ws.write("f/ops/every", "schedule", {"cron": "* * * * * *", "target": "f/ops/tick"})
    metrics = Metrics()
    fires = ("tidemill_schedule_fires_total", {"status": "started"})
    async with engine.worker(poll=0.05, metrics=metrics, keep_runs=DAY):
        await engine.wait(await engine.submit(NAP), timeout=60)
        for _ in range(200):
            if sample(metrics, *fires) >= 2 and sample(metrics, "tidemill_runs_pruned_total"):
                break
            await asyncio.sleep(0.05)
        await ws.pause_schedule("f/ops/every")
    assert sample(metrics, *fires) >= 2
    assert sample(metrics, "tidemill_waits_woken_total") >= 1
    assert sample(metrics, "tidemill_runs_pruned_total") == 1

    def started(tx: Tx) -> int:
        row = tx.one("SELECT COUNT(*) FROM tm_schedule_fires WHERE status = 'started'")
        return int(row[0]) if row else 0

    # This worker was the only scheduler: it counted every fire that started.
    assert sample(metrics, *fires) == await engine.store.transact(started)
    await ws.close()


def test_fire_statuses_are_a_closed_set() -> None:
    metrics = Metrics()
    metrics.schedule_fires("failed")
    metrics.schedule_fires("skipped", 3)
    metrics.schedule_fires("exploded")
    metrics.schedule_fires("started", 0)
    metrics.waits_woken(0)
    metrics.runs_pruned(2)
    name = "tidemill_schedule_fires_total"
    assert sample(metrics, name, {"status": "failed"}) == 1
    assert sample(metrics, name, {"status": "skipped"}) == 3
    assert sample(metrics, name, {"status": "other"}) == 1
    assert sample(metrics, name, {"status": "started"}) == 0
    assert sample(metrics, "tidemill_waits_woken_total") == 0
    assert sample(metrics, "tidemill_runs_pruned_total") == 2
