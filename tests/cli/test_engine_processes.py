"""`tidemill run` and `tidemill worker` as real processes: exit codes, signals, approvals."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from cli_support import DOUBLE, FAILING, SHIP, environment, running, tidemill, write_flow

from tidemill.engine import Engine

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def test_run_exits_0_with_the_result_and_1_on_failure(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    ok = subprocess.run(
        tidemill("run", write_flow(tmp_path, DOUBLE), "--db", db, "-i", "x=4", "-i", "tag=t"),
        capture_output=True, text=True, timeout=60, env=environment(), check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"value": 8, "tag": "t"}
    assert "succeeded  double" in ok.stderr
    assert "\033[" not in ok.stderr  # no colors when stderr is not a terminal
    failed = subprocess.run(
        tidemill("run", write_flow(tmp_path, FAILING, "f.yaml"), "--db", db),
        capture_output=True, text=True, timeout=60, env=environment(), check=False,
    )  # fmt: skip
    assert failed.returncode == 1
    assert failed.stdout == ""
    assert "ValueError: bad data" in failed.stderr and "about to fail" in failed.stderr


def test_a_detached_run_is_finished_by_tidemill_worker(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    path = write_flow(tmp_path, DOUBLE)
    submitted = subprocess.run(
        tidemill("run", path, "--db", db, "-i", "x=5", "-i", "tag=t", "--detach"),
        capture_output=True, text=True, timeout=60, env=environment(), check=False,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()
    with Engine(db) as engine:
        assert engine.run(run_id).status == "queued"
        with running("worker", "--db", db, "--poll", "0.2", "--concurrency", "2") as (
            worker,
            lines,
        ):
            assert engine.run(run_id).wait(timeout=60) == {"value": 10, "tag": "t"}
            lines.wait_for(rf"run {run_id}: show succeeded")
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0, lines.rest()
            log = lines.rest()
    assert "started on sqlite:///" in log
    assert f"run {run_id}: double started" in log
    assert f"run {run_id}: double succeeded in " in log
    assert "stopped after 2 step(s)" in log


def test_run_shows_how_to_approve_and_waits_for_the_decision(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    with running("run", write_flow(tmp_path, SHIP), "--db", db) as (process, lines):
        command = lines.wait_for(r"approve: tidemill approvals approve (\S+) --as alice --db (\S+)")
        approval_id, shown_db = command.group(1), command.group(2)
        assert shown_db == db
        with Engine(db) as engine:
            engine.approve(approval_id, actor="alice", comment="ship")
        assert process.stdout is not None
        out = process.stdout.read()  # until the process ends (the test's timeout guards it)
        assert process.wait(timeout=30) == 0, lines.rest()
        err = lines.rest()
    assert json.loads(out) == {"by": "alice"}
    assert f"approval {approval_id}: Ship it?" in err
    assert "succeeded  ask" in err and "(approved by alice)" in err
    assert "succeeded  after" in err


def test_ctrl_c_leaves_the_run_in_the_store(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    slow = {"steps": [{"id": "nap", "script": "import time\ndef main():\n    time.sleep(60)\n"}]}
    with running("run", write_flow(tmp_path, slow), "--db", db) as (process, lines):
        lines.wait_for(r"started\s+nap")
        process.send_signal(signal.SIGINT)
        lines.wait_for(r"Ctrl-C again to abandon them")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130, lines.rest()
        err = lines.rest()
    assert "stays in the store" in err and "tidemill worker --db" in err
    with Engine(db) as engine:
        [run] = engine.runs()
        assert run.status == "running"
