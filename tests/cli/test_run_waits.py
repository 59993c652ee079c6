"""`tidemill run` while its run waits for people, and `tidemill runs wait`, in this process.

The way out of a wait is the command for its kind (as `runs why` prints it):
`approve`/`reject` for an approval, `extend` for a budget, `answer` for a
question; the line that ends the step says how it was decided.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import FAILING, SHIP, cli, write_flow

from tidemill.cli import main
from tidemill.engine import Engine
from tidemill.engine.workers import _worker
from tidemill.flows import Flow
from tidemill.llm import Model, ScriptedModel
from tidemill.store import ApprovalRow
from tidemill.types import ToolCall

pytestmark = pytest.mark.timeout(90)

_NOTE = {"name": "note", "script": "def main(x: int):\n    return x\n"}
BUDGET = {
    "name": "budget",
    "steps": [{"id": "agent", "inputs": {"user_message": "go"}, "ai_agent": {
        "model": "fake", "tools": [_NOTE], "limits": {"max_requests": 2, "on_exceeded": "ask"}}}],
}  # fmt: skip
QUESTION = {
    "name": "question",
    "steps": [{"id": "agent", "inputs": {"user_message": "go"}, "ai_agent": {
        "model": "fake", "questions": {"approvers": ["alice"]}}}],
}  # fmt: skip


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/t.db"


def use_model(monkeypatch: pytest.MonkeyPatch, model: Model) -> None:
    """Every AI step of an in-process worker gets `model` (instead of one from its spec)."""

    def resolve(_choice: Any, *, http_client: Any = None) -> Model:
        return model

    monkeypatch.setattr(_worker, "default_models", resolve)


@contextlib.contextmanager
def in_thread(*argv: str) -> Iterator[Callable[[], int]]:
    """Run `tidemill ARGV` on a thread for the block; the callable waits for its exit status."""
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(main(list(argv))), daemon=True)
    thread.start()

    def done() -> int:
        thread.join(60)
        assert codes, "the command did not end"
        return codes[0]

    try:
        yield done
    finally:
        thread.join(60)


def pending(db: str) -> ApprovalRow:
    with Engine(db) as engine:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = engine.approvals()
            if rows:
                return rows[0]
            time.sleep(0.02)
    raise AssertionError("no approval appeared")


# --- tidemill run: the way out of each kind of wait ------------------------------------------


def test_a_budget_request_shows_extend_and_ends_extended(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = [[ToolCall(id=f"c{i}", name="note", arguments={"x": i})] for i in range(2)]
    use_model(monkeypatch, ScriptedModel(["", "", "Done."], tool_calls=[*calls, []]))
    with in_thread("run", write_flow(tmp_path, BUDGET), "--db", db) as done:
        row = pending(db)
        assert row.kind == "budget"
        with Engine(db) as engine:
            engine.extend(row.id, 4)
        code = done()
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip() == '"Done."'
    assert f"budget {row.id}: the agent used up its max_requests limit of 2" in err
    assert f"extend: tidemill approvals extend {row.id} --to 4 --db {db}" in err
    assert f"extend: tidemill approvals extend {row.id} --stop --db {db}" in err
    assert "approvals approve" not in err
    assert "(extended to 4)" in err
    assert "(approved" not in err


def test_a_question_shows_answer_and_ends_answered(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    call = ToolCall(id="q1", name="ask_person", arguments={"question": "Which city?"})
    use_model(monkeypatch, ScriptedModel(["", "Shipping to Oslo."], tool_calls=[[call], []]))
    with in_thread("run", write_flow(tmp_path, QUESTION), "--db", db) as done:
        row = pending(db)
        with Engine(db) as engine:
            engine.answer(row.id, "Oslo", actor="alice")
        code = done()
    _, err = capsys.readouterr()
    assert code == 0, err
    assert f"question {row.id}: the agent asks: Which city? (alice may answer)" in err
    assert f'answer: tidemill approvals answer {row.id} --text "ANSWER" --as alice --db {db}' in err
    assert "approvals approve" not in err
    assert "(answered by alice)" in err


def test_an_approval_step_still_shows_approve_and_reject(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with in_thread("run", write_flow(tmp_path, SHIP), "--db", db) as done:
        row = pending(db)
        with Engine(db) as engine:
            engine.reject(row.id, actor="alice", comment="not today")
        code = done()
    _, err = capsys.readouterr()
    assert code == 1
    assert f"approval {row.id}: Ship it?" in err
    assert "approvers: alice" in err
    assert f"approve: tidemill approvals approve {row.id} --as alice --db {db}" in err
    assert f"reject:  tidemill approvals reject {row.id} --as alice --db {db}" in err
    assert "failed     ask" in err
    assert "ApprovalRejected: rejected by alice: not today" in err


# --- tidemill runs wait --------------------------------------------------------------------------


def test_wait_makes_no_worker_and_stops_at_its_timeout(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "run", write_flow(tmp_path, SHIP), "--db", db, "--detach")
    run_id = out.strip()
    code, out, err = cli(capsys, "runs", "wait", run_id, "--db", db, "--timeout", "0.3")
    assert code == 124
    assert out == ""
    assert f"run {run_id} is still queued after 0.30s; it goes on" in err
    with Engine(db) as engine:
        (job,) = engine.jobs(run_id)
        assert (job.status, job.worker, job.epoch) == ("queued", None, 0)


def test_wait_prints_the_result_of_a_run_a_worker_finishes(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    double = {"name": "double", "steps": [
        {"id": "double", "script": "def main(x):\n    return x * 2\n",
         "inputs": {"x": {"expr": "flow_input.x"}}}]}  # fmt: skip
    with Engine(db) as engine:
        run = engine.submit(Flow.model_validate(double), {"x": 21})
        with engine.worker(poll=0.05):
            code, out, err = cli(capsys, "runs", "wait", run.id, "--db", db)
    assert code == 0, err
    assert out.strip() == "42"
    assert f"run {run.id} succeeded in " in err


def test_wait_on_a_finished_run_reports_it_at_once(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Engine(db) as engine:
        run = engine.submit(write_flow(tmp_path, FAILING))
        with engine.worker(poll=0.05):
            while not run.info().done:
                time.sleep(0.02)
        cancelled = engine.submit(write_flow(tmp_path, SHIP))
        cancelled.cancel()
    code, out, err = cli(capsys, "runs", "wait", run.id, "--db", db)
    assert (code, out) == (1, "")
    assert f"run {run.id} failed at step 'boom': ValueError: bad data" in err
    assert "stdout | about to fail" in err
    code, out, err = cli(capsys, "runs", "wait", cancelled.id, "--db", db)
    assert (code, out) == (1, "")
    assert f"run {cancelled.id} was cancelled" in err


def test_wait_on_an_unknown_run_or_with_a_bad_timeout(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Engine(db) as engine:
        assert engine.runs() == []  # the store exists, without that run
    code, _, err = cli(capsys, "runs", "wait", "nope", "--db", db)
    assert code == 2
    assert "No run nope" in err
    with pytest.raises(SystemExit) as exited:
        main(["runs", "wait", "nope", "--timeout", "-1"])
    assert exited.value.code == 2
    assert "positive number of seconds" in capsys.readouterr().err
