"""A worker fires the schedules of every workspace in its store, not only the default one.

On SQLite and PostgreSQL: a schedule of a second workspace, written before
the worker starts, fires every second and its runs run as the schedule's
owner in that workspace; a workspace that comes to have schedules later is
found by the next look, and each workspace gets one scheduler however often
it is looked for.
"""

from __future__ import annotations

import asyncio

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine.triggers import WorkspaceSchedulers
from tidemill.workspace import AsyncWorkspace

pytestmark = pytest.mark.timeout(120)

TICK = {"steps": [{"id": "tick", "identity": {}, "inputs": {"n": 1}}]}


async def with_schedule(engine: AsyncEngine, workspace: str, user: str) -> AsyncWorkspace:
    ws = AsyncWorkspace(engine.store, workspace=workspace, user=user, migrate=True)
    await ws.add_folder("ops")
    await ws.write("f/ops/tick", "flow", TICK)
    await ws.write("f/ops/every", "schedule", {"cron": "* * * * * *", "target": "f/ops/tick"})
    return ws


async def test_a_worker_fires_another_workspaces_schedule(engine: AsyncEngine) -> None:
    acme = await with_schedule(engine, "acme", "zoe")
    async with engine.worker(poll=0.05):
        for _ in range(300):
            done = [f for f in await acme.schedule_fires("f/ops/every") if f.outcome]
            if len(done) >= 2:
                break
            await asyncio.sleep(0.05)
    assert len(done) >= 2, done
    assert {f.outcome for f in done} == {"succeeded"}
    run_id = done[0].run_id
    assert run_id is not None
    info = await engine.get(run_id)
    assert info.run_as == "zoe"
    assert info.source is not None and info.source["workspace"] == "acme"
    assert info.source["schedule"] == "f/ops/every"
    await acme.close()


async def test_a_workspace_with_schedules_later_is_found_by_the_next_look(
    engine: AsyncEngine,
) -> None:
    await engine.runs(limit=1)  # the store migrated, as a worker finds it
    schedulers = WorkspaceSchedulers(engine.store, engine.defs)
    assert await schedulers.look_once() == ["default"]  # the default one starts at once
    beta = await with_schedule(engine, "beta", "max")
    assert await schedulers.look_once() == ["beta"]
    assert await schedulers.look_once() == []  # one scheduler each, however often looked for
    assert schedulers.running["beta"].workspace_name == "beta"
    stop = asyncio.Event()
    stop.set()
    await schedulers.run(stop)  # stops the schedulers it started
    await beta.close()
