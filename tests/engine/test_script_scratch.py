"""Capture directories left by script processes killed with their worker are swept."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tidemill.engine.scripts._pool import ScriptPool
from tidemill.engine.scripts._scratch import PREFIX

pytestmark = pytest.mark.timeout(60)

POOL = """
import asyncio, sys
from tidemill.engine.scripts._pool import ScriptPool

async def main():
    pool = ScriptPool(size=2)
    await pool.start()
    print(*pool.pids, flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


def directories(root: Path) -> list[str]:
    return sorted(path.name for path in root.glob(f"{PREFIX}*"))


def test_a_pool_killed_with_its_children_leaves_directories_the_next_pool_sweeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    process = subprocess.Popen(
        [sys.executable, "-c", POOL], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout is not None
        children = [int(pid) for pid in process.stdout.readline().split()]
        assert len(children) == 2
        for pid in children:  # before their pool: none is left to remove its directory
            os.kill(pid, signal.SIGKILL)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        process.stdout.close()
    finally:
        if process.poll() is None:
            process.kill()
    left = directories(tmp_path)
    assert len(left) == 2 and all(name.startswith(f"{PREFIX}{process.pid}-") for name in left)

    foreign = tmp_path / f"{PREFIX}{os.getpid()}-live"  # a live pool's: kept
    foreign.mkdir()
    legacy_empty, legacy_used = tmp_path / f"{PREFIX}abc", tmp_path / f"{PREFIX}def"
    legacy_empty.mkdir()
    legacy_used.mkdir()
    (legacy_used / "stdout").write_text("x")  # an old-style name with files: not ours to judge

    async def start_a_pool() -> list[str]:
        async with ScriptPool(size=1):
            return directories(tmp_path)

    while_running = asyncio.run(start_a_pool())
    mine = [name for name in while_running if name not in (foreign.name, legacy_used.name)]
    assert len(mine) == 1 and mine[0].startswith(f"{PREFIX}{os.getpid()}-")
    assert directories(tmp_path) == sorted([foreign.name, legacy_used.name])
