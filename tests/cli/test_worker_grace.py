"""`tidemill worker --grace S`: a stop waits at most S seconds for the steps in hand."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_support import environment, running, tidemill, write_flow

pytestmark = pytest.mark.timeout(90)

LONG = (
    "import time\n"
    "def main(path: str):\n"
    "    open(path, 'a').write('start\\n')\n"
    "    time.sleep(60)\n"
    "    open(path, 'a').write('end\\n')\n"
)


def submit(tmp_path: Path, db: str) -> str:
    flow = {"name": "long", "steps": [
        {"id": "long", "script": LONG, "inputs": {"path": str(tmp_path / "effects")}}]}  # fmt: skip
    done = subprocess.run(
        tidemill("run", write_flow(tmp_path, flow), "--db", db, "--detach"),
        capture_output=True, text=True, timeout=60, env=environment(), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def started(effects: Path, worker: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while not (effects.exists() and "start" in effects.read_text()):
        assert time.monotonic() < deadline and worker.poll() is None
        time.sleep(0.05)


def test_a_stop_abandons_the_steps_still_running_when_the_grace_period_ends(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    submit(tmp_path, db)
    with running("worker", "--db", db, "--poll", "0.1", "--grace", "1") as (worker, lines):
        started(tmp_path / "effects", worker)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=20) == 0  # not the step's 60 s
        log = lines.rest()
    assert "still running after the 1s grace period" in log
    assert (tmp_path / "effects").read_text().split() == ["start"]


def test_without_a_grace_period_the_stop_waits_and_a_second_signal_abandons(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    submit(tmp_path, db)
    with running("worker", "--db", db, "--poll", "0.1") as (worker, lines):
        started(tmp_path / "effects", worker)
        worker.send_signal(signal.SIGTERM)
        lines.wait_for("finishing 1 running step")
        time.sleep(1.5)
        assert worker.poll() is None  # still finishing the step
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=20) == 0
        assert "abandoning the running steps" in lines.rest()


def test_the_grace_period_must_be_positive(tmp_path: Path) -> None:
    done = subprocess.run(
        tidemill("worker", "--db", f"sqlite:///{tmp_path}/t.db", "--grace", "0"),
        capture_output=True, text=True, timeout=60, env=environment(), check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "--grace" in done.stderr


def test_an_abandoned_step_is_taken_over_at_once_not_after_its_lease(tmp_path: Path) -> None:
    """Worker A abandons the step when its grace period ends; B starts it well within A's lease."""
    db = f"sqlite:///{tmp_path}/t.db"
    effects = tmp_path / "effects"
    submit(tmp_path, db)
    worker = ("worker", "--db", db, "--poll", "0.1", "--lease", "60")
    with running(*worker, "--grace", "0.5") as (first, _):
        started(effects, first)
        with running(*worker, "--grace", "0.5") as (second, _):
            first.send_signal(signal.SIGTERM)
            assert first.wait(timeout=20) == 0
            deadline = time.monotonic() + 20  # A's lease had about a minute left
            while effects.read_text().split() != ["start", "start"]:
                assert time.monotonic() < deadline, effects.read_text()
                time.sleep(0.05)
            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=20) == 0
