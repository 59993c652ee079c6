"""`tidemill run` executes its own run (and what it spawns), never other runs of the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import DOUBLE, cli, write_flow

from tidemill.engine import Engine

pytestmark = pytest.mark.timeout(60)


def test_run_leaves_other_runs_of_the_store_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    slow = {"name": "slow", "steps": [{"id": "nap", "script": "def main():\n    return 1\n"}]}
    code, out, _ = cli(capsys, "run", write_flow(tmp_path, slow, "slow.yaml"), "--db", db,
                       "--detach")  # fmt: skip
    assert code == 0
    detached = out.strip()
    code, out, err = cli(capsys, "run", write_flow(tmp_path, DOUBLE), "--db", db, "-i", "x=2",
                       "-i", "tag=t")  # fmt: skip
    assert code == 0, err
    assert '"value": 4' in out
    assert "nap" not in err
    with Engine(db) as engine:
        (job,) = engine.jobs(detached)
        assert (job.status, job.worker, job.epoch) == ("queued", None, 0)


def test_runs_retry_wait_leaves_other_runs_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    gate = tmp_path / "gate"
    code_text = (
        "import pathlib\n"
        "def main(path):\n"
        "    if not pathlib.Path(path).exists():\n"
        "        raise RuntimeError('gate closed')\n"
        "    return 'open'\n"
    )
    gated = {"name": "gated", "steps": [{"id": "guard", "script": code_text,
                                         "inputs": {"path": str(gate)}}]}  # fmt: skip
    code, _, err = cli(capsys, "run", write_flow(tmp_path, gated, "gated.yaml"), "--db", db)
    assert code == 1, err
    with Engine(db) as engine:
        (failed,) = engine.runs()
    flow = write_flow(tmp_path, DOUBLE)
    code, out, _ = cli(capsys, "run", flow, "--db", db, "-i", "x=1", "-i", "tag=t", "--detach")
    detached = out.strip()
    gate.touch()
    code, out, err = cli(capsys, "runs", "retry", failed.id, "--db", db, "--wait")
    assert code == 0, err
    assert out.strip() == '"open"'
    with Engine(db) as engine:
        assert {job.status for job in engine.jobs(detached)} == {"queued"}


def test_a_run_no_worker_took_is_listed_and_shown_as_queued(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    flow = write_flow(tmp_path, DOUBLE)
    code, out, _ = cli(capsys, "run", flow, "--db", db, "-i", "x=1", "-i", "tag=t", "--detach")
    detached = out.strip()
    code, out, _ = cli(capsys, "run", flow, "--db", db, "-i", "x=2", "-i", "tag=t")
    assert code == 0
    code, out, _ = cli(capsys, "runs", "list", "--db", db, "--status", "queued", "--json")
    assert [run["id"] for run in json.loads(out)] == [detached]
    code, out, _ = cli(capsys, "runs", "list", "--db", db, "--status", "running", "--json")
    assert json.loads(out) == []
    code, out, _ = cli(capsys, "runs", "show", detached, "--db", db)
    assert "status    queued" in out.splitlines()
    code, out, _ = cli(capsys, "runs", "why", detached, "--db", db)
    assert out.startswith(f"run {detached} (flow double) is queued; it waits for:")
