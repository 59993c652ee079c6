"""A script step's output is stored as it prints, and kept however the step ends.

A worker writes what its running steps printed every `log_flush` seconds, in
one transaction for all of them; the rest goes with the step's outcome, or,
when the step is stopped (its run cancelled), by itself. On SQLite and
PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import RunFailed, RunStateError
from tidemill.flows import Flow

pytestmark = pytest.mark.timeout(90)

GATED = """
import pathlib, time
def main(gate):
    print("first", flush=True)
    while not pathlib.Path(gate).exists():
        time.sleep(0.01)
    print("second")
    return "done"
"""

PRINT_THEN_HANG = """
import pathlib, time
def main(mark):
    for n in range(5):
        print("line", n, flush=True)
    pathlib.Path(mark).write_text("printed")
    time.sleep(60)
"""


def script_flow(code: str, **inputs: str) -> Flow:
    step = {"id": "talk", "script": code, "inputs": inputs}
    return Flow.model_validate({"name": "talk", "steps": [step]})


async def until(check: Callable[[], Awaitable[bool]], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "gave up waiting"
        await asyncio.sleep(0.02)


async def printed(engine: AsyncEngine, run_id: str) -> str:
    return "".join(log.body for log in await engine.logs(run_id) if log.stream == "stdout")


async def test_a_running_steps_output_is_stored_while_it_runs(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    run_id = await engine.submit(script_flow(GATED, gate=str(gate)))
    async with engine.worker(poll=0.05, log_flush=0.05):

        async def shown() -> bool:
            return await printed(engine, run_id) == "first\n"

        await until(shown)
        (job,) = await engine.jobs(run_id)
        assert job.status == "running"
        gate.touch()
        assert await engine.wait(run_id, timeout=60) == "done"
    logs = await engine.logs(run_id)
    assert "".join(log.body for log in logs) == "first\nsecond\n"  # each piece once, in order
    assert [log.id for log in logs] == sorted(log.id for log in logs)
    later = await engine.logs(run_id, after=logs[0].id)
    assert [log.id for log in later] == [log.id for log in logs[1:]]


async def test_a_cancelled_steps_output_is_kept(engine: AsyncEngine, tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    run_id = await engine.submit(script_flow(PRINT_THEN_HANG, mark=str(mark)))
    async with engine.worker(poll=0.05, log_flush=600):  # nothing is written on the clock

        async def marked() -> bool:
            return mark.exists()

        await until(marked)
        await engine.cancel(run_id)
        with pytest.raises(RunStateError):
            await engine.wait(run_id, timeout=60)

        async def kept() -> bool:
            return bool(await engine.logs(run_id))

        await until(kept)  # the worker stops the step once its renewal finds it cancelled
    assert await printed(engine, run_id) == "".join(f"line {n}\n" for n in range(5))


async def test_a_timed_out_steps_output_is_kept_once(engine: AsyncEngine, tmp_path: Path) -> None:
    flow = Flow.model_validate(
        {"steps": [{"id": "talk", "script": PRINT_THEN_HANG, "timeout": 1,
                    "inputs": {"mark": str(tmp_path / "mark")}}]}
    )  # fmt: skip
    async with engine.worker(poll=0.05, log_flush=0.05):
        run_id = await engine.submit(flow)
        with pytest.raises(RunFailed):
            await engine.wait(run_id, timeout=60)
    assert await printed(engine, run_id) == "".join(f"line {n}\n" for n in range(5))


async def test_much_output_is_written_in_few_rows(engine: AsyncEngine) -> None:
    code = "import sys\ndef main():\n    for n in range(3000):\n        print(n, flush=True)\n"
    async with engine.worker(poll=0.05, log_flush=600):
        run_id = await engine.submit(script_flow(code))
        await engine.wait(run_id, timeout=60)
    logs = await engine.logs(run_id)
    assert len(logs) == 1  # every piece of a stream joined, with the step's outcome
    assert logs[0].body == "".join(f"{n}\n" for n in range(3000))
