"""An agent worker SIGKILLed during a model call, or while its step waits for an approval.

(`test_ai_agent.py` kills one between a tool's start and finish; `test_ai_agent_children.py`
while a tool call's child run works.) procs/agent_worker.py's model calls `first`, then
`second`, then answers "done: one two"; each request it gets is logged with the number of
tool results it saw. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.flows import Flow
from tidemill.llm import ScriptedModel

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

PROCS = Path(__file__).parent / "procs"
EFFECT = (
    "import os\n"
    "def main(n: int, path: str):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write('%s %s\\n' % (os.environ['TIDEMILL_IDEMPOTENCY_KEY'], n))\n"
    "    return {1: 'one', 2: 'two'}[n]\n"
)


def agent_flow(effects: Path, *, approve_second: bool = False) -> Flow:
    tools = [
        {"name": name, "script": EFFECT, "inputs": {"path": str(effects)},
         "requires_approval": approve_second and name == "second"}
        for name in ("first", "second")
    ]  # fmt: skip
    step = {"id": "agent", "ai_agent": {"model": "fake", "tools": tools},
            "inputs": {"user_message": "go"}}  # fmt: skip
    return Flow.model_validate({"steps": [step]})


def logged_model(log: Path) -> ScriptedModel:
    sys.path.insert(0, str(PROCS))
    try:
        from agent_worker import logged
    finally:
        sys.path.remove(str(PROCS))
    model: ScriptedModel = logged(log)
    return model


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def requests(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines(path)]


async def start(
    worker_process: Callable[[str], subprocess.Popen[str]], url: str
) -> subprocess.Popen[str]:
    process = worker_process(url)
    assert process.stdout is not None
    assert (await asyncio.to_thread(process.stdout.readline)).startswith("ready")
    return process


async def kill(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    await asyncio.to_thread(process.wait, 30)


async def until(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline and process.poll() is None
        await asyncio.sleep(0.05)


async def test_killed_during_a_model_call_the_turn_is_asked_again_and_no_tool_reruns(
    engine: AsyncEngine,
    store_url: str,
    tmp_path: Path,
    worker_process: Callable[[str], subprocess.Popen[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    effects, log = tmp_path / "effects.log", tmp_path / "requests.log"
    monkeypatch.setenv("AGENT_TEST_HANG_MODEL", "1")  # the request after `first` finished
    run_id = await engine.submit(agent_flow(effects))
    process = await start(worker_process, store_url)
    await until(lambda: len(requests(log)) == 2, process)  # the second model call hangs
    await kill(process)
    assert len(lines(effects)) == 1  # `first` ran and finished before the kill

    model = logged_model(log)
    monkeypatch.delenv("AGENT_TEST_HANG_MODEL")
    async with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
        assert await engine.wait(run_id, timeout=60) == "done: one two"
    # The unanswered turn was asked again (it saw `first`'s result); `first` did not run again.
    assert [r["tool_results"] for r in requests(log)] == [0, 1, 1, 2]
    assert [line.split()[1] for line in lines(effects)] == ["1", "2"]
    # The killed worker's answered call (0 results) is recovered from the journal (latency 0);
    # its cut-off call left no turn and no record; the second worker recorded its own two.
    usage = await engine.usage(run_id)
    assert [(u["latency_ms"] == 0.0, u["error"]) for u in usage] == [
        (True, None), (False, None), (False, None)
    ]  # fmt: skip
    assert all(u["input_tokens"] > 0 and u["output_tokens"] > 0 for u in usage)


async def test_killed_while_waiting_for_approval_the_decision_resumes_it_elsewhere(
    engine: AsyncEngine,
    store_url: str,
    tmp_path: Path,
    worker_process: Callable[[str], subprocess.Popen[str]],
) -> None:
    effects, log = tmp_path / "effects.log", tmp_path / "requests.log"
    run_id = await engine.submit(agent_flow(effects, approve_second=True))
    process = await start(worker_process, store_url)
    pending: list[Any] = []

    async def wait_for_approval() -> None:
        for _ in range(1200):
            pending[:] = await engine.approvals(run_id)
            if pending:
                return
            assert process.poll() is None
            await asyncio.sleep(0.05)
        raise AssertionError("no approval appeared")

    await wait_for_approval()
    await kill(process)
    (approval,) = pending
    assert (approval.details or {})["tool"] == "second"
    await engine.approve(approval.id, actor="dana")

    model = logged_model(log)
    async with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
        assert await engine.wait(run_id, timeout=60) == "done: one two"
    assert [r["tool_results"] for r in requests(log)] == [0, 1, 2]  # no turn asked twice
    assert [line.split()[1] for line in lines(effects)] == ["1", "2"]  # each tool once
    assert len(await engine.usage(run_id)) == 3  # two stored at the pause, one after
