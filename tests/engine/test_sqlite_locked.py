"""SQLite's `database is locked`: another connection holds the write lock past the busy timeout.

While a worker runs flows on one SQLite file, a separate connection (a
`sqlite3` shell, a backup) opens a write transaction and keeps it open
longer than the store waits (its busy timeout, then its retries). Then:

- the write that could not be made is a `StoreError` that says the file is
  locked and what to do, and nothing of it was written;
- the job is queued again and runs once the lock is released (its step runs
  again, since its outcome was lost, and is recorded once);
- a worker that could not confirm its lease while the file was locked
  starts nothing, and queues the job again instead of leaving it to a
  reclaim that no worker makes of its own job;
- a read-only command gives that error too, not a traceback (tests/cli/test_locked_store.py).

The store waits 0.2 s per statement and retries for 0.5 s here (30 s and 60 s
by default), so that each test takes seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import StoreError
from tidemill.flows import Flow
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.store import _store
from tidemill.types import Message, ModelResponse, ToolCall

pytestmark = pytest.mark.timeout(60)

GATED = (
    "import os, time\n"
    "def main(path: str, gate: str, i: int):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(os.environ['TIDEMILL_STEP_ID'] + '\\n')\n"
    "    while not os.path.exists(gate):\n"
    "        time.sleep(0.02)\n"
    "    return i\n"
)
"""A step that records that it started, then waits for the test to open its gate."""

TOOL = (
    "import os\n"
    "def main(path: str):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(os.environ['TIDEMILL_TOOL_CALL_ID'] + '\\n')\n"
    "    return 'ok'\n"
)


@pytest.fixture(autouse=True)
def impatient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores made from here on wait 0.2 s per statement and retry for 0.5 s."""
    monkeypatch.setattr(_store, "BUSY_TIMEOUT", 0.2)
    monkeypatch.setattr(_store, "RECONNECT_FOR", 0.5)


@contextlib.contextmanager
def locked(path: Path, how: str = "EXCLUSIVE") -> Iterator[sqlite3.Connection]:
    """Hold a write transaction on the file at `path` from a connection of its own."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute(f"BEGIN {how}")
        try:
            yield other
        finally:
            other.execute("ROLLBACK")
    finally:
        other.close()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def until(condition: Callable[[], bool], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def read(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of `sql`, read from a connection of its own (a reader, which the lock lets by)."""
    with contextlib.closing(sqlite3.connect(path)) as reader:
        return list(reader.execute(sql).fetchall())


async def test_a_lock_held_past_the_busy_timeout_is_waited_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db, effects, gate = tmp_path / "t.db", tmp_path / "effects", tmp_path / "gate"
    steps = [{"id": f"s{i}", "script": GATED,
              "inputs": {"path": str(effects), "gate": str(gate), "i": i}}
             for i in range(3)]  # fmt: skip
    engine = AsyncEngine(f"sqlite:///{db}", migrate=True)
    try:
        run_id = await engine.submit(Flow.model_validate({"name": "locked", "steps": steps}))
        with caplog.at_level(logging.INFO, logger="tidemill.worker"):
            async with engine.worker(concurrency=2, lease=1.0, poll=0.05, pool_size=1):
                await until(lambda: lines(effects) == ["s0"])
                with locked(db) as other:
                    gate.touch()  # s0 ends now, and its outcome cannot be written
                    await until(lambda: any(r.exc_info for r in caplog.records))
                    (refused, *_) = [r for r in caplog.records if r.exc_info]
                    assert refused.exc_info is not None
                    error = refused.exc_info[1]
                    assert isinstance(error, StoreError), error
                    assert f"The SQLite store {db} is locked" in str(error), error
                    assert error.hint is not None and "transaction open" in error.hint
                    assert error.context["error"] == "locked"
                    # Nothing half written, nothing failed: s0 is still running, unrecorded.
                    seen = other.execute("SELECT step_id, status FROM tm_jobs").fetchall()
                    assert seen == [("s0", "running")]
                    assert other.execute("SELECT COUNT(*) FROM tm_results").fetchone() == (0,)
                    await until(
                        lambda: "could not queue 1 job(s) again" in caplog.text, within=10
                    )  # its worker tries to queue it again, and waits too
                assert await engine.wait(run_id, timeout=30) == 2
        results = read(db, "SELECT step_id, COUNT(*) FROM tm_results GROUP BY step_id")
        assert sorted(results) == [("s0", 1), ("s1", 1), ("s2", 1)]
        statuses = read(db, "SELECT DISTINCT status FROM tm_jobs")
        assert statuses == [("succeeded",)]
        ran = lines(effects)
        # s0's outcome was lost to the lock: it ran again, and was recorded once.
        assert ran.count("s0") >= 2 and ran.count("s1") == ran.count("s2") == 1, ran
    finally:
        await engine.close()


class _Waiting(Model):
    """A model whose first answer waits until the test says so; then as `inner`."""

    def __init__(self, inner: ScriptedModel, go: asyncio.Event) -> None:
        self.inner, self.go = inner, go
        self.provider, self.model_name = inner.provider, inner.model_name
        self.supports_tools = True

    async def request(self, request: ModelRequest) -> ModelResponse:
        await self.go.wait()
        return await self.inner.request(request)


def calls_then_finishes(request: ModelRequest) -> Message:
    """Call the tool `effect` until its result is in the conversation; then answer."""
    if any(m.role == "tool" for m in request.messages):
        return Message.assistant("finished")
    return Message.assistant(tool_calls=(ToolCall(id="c1", name="effect", arguments={}),))


async def test_a_lease_unconfirmed_while_locked_starts_nothing_and_the_job_is_queued_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One worker; its agent step's lease runs out while the file is locked.

    The model's answer (a tool call) arrives then: the worker asks the store
    whether it still holds the job, gets no answer, and starts nothing. It
    queues the job again once the lock is released, and runs it: the tool
    runs once. Without that, the job stayed `running` under this worker's
    name, which no worker takes over (a worker never reclaims its own job).
    """
    db, effects = tmp_path / "t.db", tmp_path / "effects"
    tool = {"name": "effect", "script": TOOL, "inputs": {"path": str(effects)}}
    step = {"id": "agent", "inputs": {"user_message": "go"},
            "ai_agent": {"model": "fake", "tools": [tool]}}  # fmt: skip
    go = asyncio.Event()
    model = _Waiting(ScriptedModel(handler=calls_then_finishes), go)
    engine = AsyncEngine(f"sqlite:///{db}", migrate=True)
    try:
        run_id = await engine.submit(Flow.model_validate({"name": "agent", "steps": [step]}))
        with caplog.at_level(logging.INFO, logger="tidemill.worker"):
            async with engine.worker(
                concurrency=1, lease=1.0, poll=0.05, pool_size=1, models=lambda _c: model
            ) as worker:
                await until(lambda: bool(worker._leases._held))  # the step runs
                with locked(db):
                    (lease,) = worker._leases._held.values()
                    await until(lambda: lease.until < time.monotonic())  # no renewal went in
                    go.set()  # the tool call arrives, to a worker unsure of its lease
                    await until(lambda: "could not confirm its lease" in caplog.text)
                    await until(lambda: not worker._leases._held)  # it gave the step up
                    assert lines(effects) == []
                assert await engine.wait(run_id, timeout=30) == "finished"
        assert lines(effects) == ["c1"]
        assert read(db, "SELECT COUNT(*) FROM tm_results") == [(1,)]
    finally:
        await engine.close()
