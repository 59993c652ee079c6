"""Three `tidemill worker` and two `tidemill server` processes race for one schedule's fires.

Each process runs a scheduler of its own. A schedule firing every second for
a few seconds must start exactly one run per fire (no fire twice, no run
without its fire row), with no second skipped while they all run, on SQLite
and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

from tidemill.engine import AsyncEngine
from tidemill.store import Tx
from tidemill.workspace import AsyncWorkspace

pytestmark = pytest.mark.timeout(120)

TICK = {"steps": [{"id": "tick", "identity": {}, "inputs": {"at": {"expr": "flow_input.at"}}}]}
EVERY_SECOND = {"cron": "* * * * * *", "target": "f/ops/tick", "inputs": {"at": 1}}


def start(args: list[str], url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tidemill.cli", *args, "--db", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TIDEMILL_USER": "ada"},
        start_new_session=True,
    )


def fired(tx: Tx) -> tuple[list[tuple[float, str, str | None]], list[str]]:
    fires = tx.all(
        "SELECT fire_at, status, run_id FROM tm_schedule_fires WHERE path = 'f/ops/every' "
        "ORDER BY fire_at"
    )
    runs = [
        str(run_id)
        for run_id, source in tx.all("SELECT id, source FROM tm_runs WHERE parent_id IS NULL")
        if source and json.loads(source).get("schedule") == "f/ops/every"
    ]
    return [(float(a), str(s), r) for a, s, r in fires], runs


async def test_five_processes_start_each_fire_once(store_url: str) -> None:
    async with AsyncEngine(store_url, migrate=True) as engine:
        ada = AsyncWorkspace(engine.store, user="ada")
        await ada.add_folder("ops")
        await ada.write("f/ops/tick", "flow", TICK)
        processes = [start(["worker", "--concurrency", "2"], store_url) for _ in range(3)]
        processes += [start(["server", "--port", "0", "--no-worker"], store_url) for _ in range(2)]
        try:
            await asyncio.sleep(3)  # let every process start its scheduler before the first fire
            await ada.write("f/ops/every", "schedule", EVERY_SECOND)
            await asyncio.sleep(6)
            await ada.pause_schedule("f/ops/every")
            await asyncio.sleep(1.5)  # a fire being written when the pause landed
            assert all(p.poll() is None for p in processes), "a process died"
        finally:
            for process in processes:
                os.killpg(process.pid, signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=30)
        fires, runs = await engine.store.transact(fired)
    started = [run_id for _, status, run_id in fires if status == "started"]
    assert len(started) >= 4, fires
    assert {status for _, status, _ in fires} == {"started"}, fires
    # One run per fire, and no run that no fire row names.
    assert sorted(r for r in started if r) == sorted(runs)
    assert not [r for r, n in Counter(runs).items() if n > 1]
    times = [at for at, _, _ in fires]
    assert times == sorted(set(times))
    assert all(b - a == 1.0 for a, b in itertools.pairwise(times)), times
