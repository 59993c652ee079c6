"""A step that kills every worker holding it is failed after `max_claims`, not retried forever."""

from __future__ import annotations

import time

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import RunFailed
from tidemill.flows import Flow


async def test_a_job_claimed_too_often_fails_with_worker_lost(store_url: str) -> None:
    engine = AsyncEngine(store_url, migrate=True)
    try:
        flow = Flow.model_validate({"steps": [{"id": "doomed", "identity": {}}]})
        run_id = await engine.submit(flow)
        # Three workers "die" holding the job: claimed, never recorded, lease expired.
        for n in range(3):
            now = time.time()  # each ghost's lease has run out already
            claimed = await engine.store.transact(
                lambda tx, n=n, now=now: tx.claim(f"ghost{n}", 1, now=now, lease_until=now - 1)
            )
            assert [job.epoch for job in claimed] == [n + 1]
        async with engine.worker(poll=0.05, lease=0.5, max_claims=3):
            with pytest.raises(RunFailed, match="WorkerLost") as caught:
                await engine.wait(run_id, timeout=30)
        assert "claimed 4 times" in caught.value.error["message"]
    finally:
        await engine.close()
