"""Decisions on a workspace run's waits are rows of that workspace's audit log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tidemill.engine import AsyncEngine
from tidemill.workspace import AsyncWorkspace

pytestmark = pytest.mark.timeout(120)

GATED = {
    "steps": [
        {"id": "gate", "approval": {"message": "Ship it?"}},
        {"id": "done", "identity": {}, "inputs": {"shipped": True}},
    ]
}


@pytest.fixture
async def engine(store_url: str) -> AsyncIterator[AsyncEngine]:
    engine = AsyncEngine(store_url, migrate=True)
    await engine._open()
    try:
        yield engine
    finally:
        await engine.close()


async def _pending(engine: AsyncEngine, run_id: str) -> str:
    for _ in range(600):
        approvals = await engine.approvals(run_id)
        if approvals:
            return approvals[0].id
        await asyncio.sleep(0.05)
    raise AssertionError("the run never asked for its approval")


async def test_approving_and_rejecting_a_workspace_run_are_audited(engine: AsyncEngine) -> None:
    ada = AsyncWorkspace(engine.store, user="ada")
    await ada.add_folder("ops")
    await ada.write("f/ops/ship", "flow", GATED)
    async with engine.worker():
        shipped = await engine.submit_path(ada, "f/ops/ship")
        await engine.approve(await _pending(engine, shipped), actor="ada", comment="go")
        assert await engine.wait(shipped, timeout=60) == {"shipped": True}
        stopped = await engine.submit_path(ada, "f/ops/ship")
        await engine.reject(await _pending(engine, stopped), actor="bob", comment="not today")
    rows = await ada.audit(path="f/ops/ship")
    decided = [(row.action, row.actor, row.details.get("run_id")) for row in rows]
    assert ("approval.approve", "ada", shipped) in decided
    assert ("approval.reject", "bob", stopped) in decided
    assert [r.action for r in rows].count("run.start") == 2


async def test_a_run_from_a_file_writes_no_workspace_audit_row(engine: AsyncEngine) -> None:
    from tidemill.flows import Flow

    ada = AsyncWorkspace(engine.store, user="ada")
    before = await ada.audit()
    async with engine.worker():
        run_id = await engine.submit(Flow.from_dict(GATED))
        await engine.approve(await _pending(engine, run_id), actor="ada")
        await engine.wait(run_id, timeout=60)
    assert await ada.audit(after=before[-1].id) == []
