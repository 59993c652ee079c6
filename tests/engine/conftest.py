"""Fixtures of the engine tests: an engine on each store backend, agent worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from tidemill.engine import AsyncEngine

PROCS = Path(__file__).parent / "procs"


@pytest.fixture
async def engine(store_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on the `store_url` backend, its schema migrated; closed afterwards."""
    engine = AsyncEngine(store_url, migrate=True)
    try:
        yield engine
    finally:
        await engine.close()


@pytest.fixture
def worker_process(tmp_path: Path) -> Iterator[Callable[[str], subprocess.Popen[str]]]:
    """Start procs/agent_worker.py (its own process group, killed at the end)."""
    started: list[subprocess.Popen[str]] = []

    def start(url: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(PROCS / "agent_worker.py"), url, str(tmp_path / "requests.log")],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "AGENT_TEST_HANG": "1"},
            start_new_session=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
