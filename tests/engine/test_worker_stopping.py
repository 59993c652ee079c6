"""A worker told to stop finishes the steps in hand, and still obeys a cancel meanwhile."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tidemill.engine import AsyncEngine, Worker
from tidemill.flows import Flow

pytestmark = pytest.mark.timeout(60)

LONG = (
    "import time\n"
    "def main(path: str, seconds: float):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write('start\\n')\n"
    "    time.sleep(seconds)\n"
    "    with open(path, 'a') as f:\n"
    "        f.write('end\\n')\n"
    "    return seconds\n"
)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def long_flow(path: Path, seconds: float) -> Flow:
    step = {"id": "long", "script": LONG, "inputs": {"path": str(path), "seconds": seconds}}
    return Flow.model_validate({"steps": [step]})


async def started(path: Path) -> None:
    deadline = time.monotonic() + 30
    while "start" not in lines(path):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def stopping(engine: AsyncEngine, effects: Path, seconds: float) -> tuple[str, Any]:
    """Submit the long step, start a worker, and tell it to stop once the step started.

    Returns the run and the worker's task (still finishing the step in hand).
    """
    run_id = await engine.submit(long_flow(effects, seconds=seconds))
    worker = Worker(await engine._open(), concurrency=1, lease=0.6, poll=0.05, pool_size=1)
    stop = asyncio.Event()
    working = asyncio.create_task(worker.run(stop))
    await started(effects)
    stop.set()  # as SIGTERM does: no new claims, the running step may finish
    return run_id, working


async def test_a_step_cancelled_while_its_worker_stops_is_stopped(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    effects = tmp_path / "effects"
    run_id, working = await stopping(engine, effects, seconds=20)
    await asyncio.sleep(0.1)
    assert not working.done()
    await engine.cancel(run_id)
    await asyncio.wait_for(working, 15)  # the step was stopped, not left to its 20 s
    assert lines(effects) == ["start"]
    assert (await engine.get(run_id)).status == "cancelled"


async def test_a_step_in_hand_when_its_worker_stops_finishes(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    effects = tmp_path / "effects"
    run_id, working = await stopping(engine, effects, seconds=1)
    await asyncio.wait_for(working, 15)
    assert lines(effects) == ["start", "end"]
    assert await engine.wait(run_id, timeout=5) == 1
