"""`tidemill runs logs RUN --follow`: what a run's steps print, as it is stored, until it ends."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cli_support import cli, running, write_flow

from tidemill.cli import main
from tidemill.engine import Engine
from tidemill.flows import Flow

pytestmark = pytest.mark.timeout(90)

GATED: dict[str, Any] = {
    "name": "gated",
    "steps": [{"id": "talk", "inputs": {"gate": "GATE"}, "script": (
        "import pathlib, sys, time\n"
        "def main(gate):\n"
        "    print('first', flush=True)\n"
        "    print('half a line', end='', flush=True)\n"
        "    while not pathlib.Path(gate).exists():\n"
        "        time.sleep(0.01)\n"
        "    print(' and the rest')\n"
        "    print('oops', file=sys.stderr)\n"
    )}],
}  # fmt: skip


def gated(gate: Path) -> Flow:
    body = {**GATED, "steps": [{**GATED["steps"][0], "inputs": {"gate": str(gate)}}]}
    return Flow.model_validate(body)


def test_follow_prints_a_running_steps_output_until_the_run_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, gate = f"sqlite:///{tmp_path}/t.db", tmp_path / "gate"
    codes: list[int] = []
    out = ""
    with Engine(db) as engine, engine.worker(poll=0.05, log_flush=0.05):
        run = engine.submit(gated(gate))
        follower = threading.Thread(
            target=lambda: codes.append(main(["runs", "logs", run.id, "--db", db, "--follow"]))
        )
        follower.start()
        deadline = time.monotonic() + 60
        while "first" not in out:
            assert time.monotonic() < deadline, out
            out += capsys.readouterr().out
            time.sleep(0.02)
        assert follower.is_alive()  # the step still runs: it waits for the gate
        gate.touch()
        follower.join(60)
    out += capsys.readouterr().out
    assert codes == [0]
    assert out == (
        "==> talk (stdout) <==\nfirst\nhalf a line and the rest\n==> talk (stderr) <==\noops\n"
    )


def test_follow_on_a_finished_run_prints_its_logs_and_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    flow = {"steps": [{"id": "hi", "script": "def main():\n    print('hello', end='')\n"}]}
    code, out, _ = cli(capsys, "run", write_flow(tmp_path, flow), "--db", db)
    assert code == 0
    with Engine(db) as engine:
        (info,) = engine.runs()
    code, out, _ = cli(capsys, "runs", "logs", info.id, "--db", db, "--follow")
    assert (code, out) == (0, "==> hi (stdout) <==\nhello\n")
    code, out, err = cli(capsys, "runs", "logs", info.id, "--db", db, "-f", "--step", "nope")
    assert code == 2
    assert "has no step 'nope'" in err


def test_ctrl_c_stops_following_cleanly(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    with Engine(db) as engine:
        run = engine.submit(gated(tmp_path / "gate"))  # no worker: it stays queued
    with running("runs", "logs", run.id, "--db", db, "--follow") as (process, lines):
        lines.wait_for(r"following the logs of run")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
        err = lines.rest()
    assert "Traceback" not in err
    with Engine(db) as engine:
        assert engine.run(run.id).status == "queued"
