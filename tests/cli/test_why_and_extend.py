"""`tidemill runs why` and `tidemill approvals extend`, called in this process."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import FAILING, SHIP, cli, write_flow

from tidemill.engine import Engine
from tidemill.flows import Flow
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.store import ApprovalRow
from tidemill.types import Message, ToolCall

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/t.db"


@pytest.fixture
def engine(db: str) -> Iterator[Engine]:
    with Engine(db) as engine:
        yield engine


def pending(engine: Engine, run_id: str) -> ApprovalRow:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rows = engine.approvals(run_id)
        if rows:
            return rows[0]
        time.sleep(0.02)
    raise AssertionError("no approval appeared")


# --- tidemill runs why ------------------------------------------------------------------------


def test_why_names_the_approval_and_the_commands_that_decide_it(
    db: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = engine.submit(write_flow(tmp_path, SHIP))
    with engine.worker(poll=0.1):
        row = pending(engine, run.id)
    code, out, _ = cli(capsys, "runs", "why", run.id, "--db", db)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"run {run.id} (flow ship) is waiting; it waits for:"
    assert lines[1] == "- ask: approval: Ship it? (alice may decide)"
    assert lines[2].startswith("  since ")
    assert lines[3:] == [
        f"    tidemill approvals approve {row.id} --as alice --db {db}",
        f"    tidemill approvals reject {row.id} --as alice --db {db}",
    ]
    code, out, _ = cli(capsys, "runs", "why", run.id, "--db", db, "--json")
    document = json.loads(out)
    assert (code, document["status"]) == (0, "waiting")
    (wait,) = document["waits"]
    assert (wait["kind"], wait["step"], wait["approval_id"]) == ("approval", "ask", row.id)


def test_why_says_a_queued_step_needs_a_worker(
    db: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = engine.submit(write_flow(tmp_path, SHIP))
    assert [(w.step, w.kind) for w in run.waits()] == [("ask", "queued")]
    code, out, _ = cli(capsys, "runs", "why", run.id, "--db", db)
    assert code == 0
    assert "- ask: queued; no worker has claimed it yet" in out
    assert out.splitlines()[-1] == f"    tidemill worker --db {db}"


def test_why_a_child_loop_shows_each_unfinished_iteration(
    db: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    ask = {"id": "ok", "approval": {"message": "Item?"}}
    each = {"id": "each", "for_each": {"items": [1, 2], "steps": [ask]}}
    run = engine.submit(Flow.model_validate({"name": "loop", "steps": [each]}))
    with engine.worker(poll=0.1):
        pending(engine, run.id)
    code, out, _ = cli(capsys, "runs", "why", run.id, "--db", db)
    assert code == 0
    assert "- each: 1 of 1 child runs unfinished: each[0]; 1 more item to start" in out
    assert "  - each[0]/ok: approval: Item? (anyone may decide)" in out
    assert "      tidemill approvals approve " in out


def test_why_a_finished_run_says_how_it_ended(
    db: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok = engine.submit(Flow.model_validate({"steps": [{"id": "hi", "identity": {}}]}))
    failing = engine.submit(write_flow(tmp_path, FAILING))
    with engine.worker(poll=0.1):
        ok.wait(timeout=30)
        while not failing.info().done:
            time.sleep(0.02)
    code, out, _ = cli(capsys, "runs", "why", ok.id, "--db", db)
    assert code == 0
    assert out.startswith(f"run {ok.id} succeeded at ") and "it waits for nothing" in out
    code, out, _ = cli(capsys, "runs", "why", failing.id, "--db", db)
    assert code == 0
    assert "in step boom: ValueError: bad data" in out
    assert out.splitlines()[-1] == f"    tidemill runs retry {failing.id} --db {db}"
    code, out, _ = cli(capsys, "runs", "why", failing.id, "--db", db, "--json")
    assert json.loads(out)["waits"] == []


def test_why_an_unknown_run(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "db", "upgrade", "--db", db)[0] == 0  # a store with no runs
    code, _, err = cli(capsys, "runs", "why", "nope", "--db", db)
    assert code == 2
    assert err == (
        "tidemill runs: error: No run nope in this store. "
        "Hint: List runs with `tidemill runs list`.\n"
    )


# --- tidemill approvals extend ----------------------------------------------------------------

NOTE = {"name": "note", "script": "def main(x: int):\n    return x\n", "approvers": ["alice"]}


def noting(request: ModelRequest) -> Message:
    """Calls `note` twice (one call a turn), then answers: the same on every run."""
    done = sum(1 for message in request.messages if message.role == "tool")
    if done < 2:
        call = ToolCall(id=f"c{done}", name="note", arguments={"x": done})
        return Message.assistant("", tool_calls=(call,))
    return Message.assistant("Done.")


def budget_flow(**agent: Any) -> Flow:
    settings = {"model": "fake", "tools": [NOTE], "approval_timeout": 600,
                "limits": {"max_requests": 2, "on_exceeded": "ask"}, **agent}  # fmt: skip
    body = {"id": "agent", "inputs": {"user_message": "go"}, "ai_agent": settings}
    return Flow.model_validate({"name": "budget", "steps": [body]})


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel(handler=noting)


def test_extend_raises_the_bound_and_the_agent_goes_on(
    db: str, engine: Engine, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
        run = engine.submit(budget_flow())
        row = pending(engine, run.id)
        code, out, _ = cli(capsys, "runs", "why", run.id, "--db", db)
        assert "- agent: the agent used up its max_requests limit of 2 (2 used)" in out
        assert f"    tidemill approvals extend {row.id} --to 4 --as alice --db {db}" in out
        assert f"    tidemill approvals extend {row.id} --stop --as alice --db {db}" in out

        code, out, err = cli(capsys, "approvals", "extend", row.id, "--to", "2",
                             "--as", "alice", "--db", db)  # fmt: skip
        assert code == 2 and out == ""
        assert "must be larger than 2, not 2" in err and f"extend {row.id} --to N" in err
        code, _, err = cli(capsys, "approvals", "extend", row.id, "--to", "5", "--as", "bob",
                           "--db", db)  # fmt: skip
        assert code == 2 and "bob may not decide" in err

        code, out, _ = cli(capsys, "approvals", "extend", row.id, "--to", "5", "--as", "alice",
                           "--db", db)  # fmt: skip
        assert code == 0
        assert out == (
            f"approval {row.id}: max_requests extended to 5 by alice (run {run.id}, step agent)\n"
        )
        assert run.wait(timeout=30) == "Done."
        code, _, err = cli(capsys, "approvals", "extend", row.id, "--to", "6", "--as", "alice",
                           "--db", db)  # fmt: skip
        assert code == 2 and "already approved by alice" in err


def test_extend_stop_fails_the_step_with_limit_exceeded(
    db: str, engine: Engine, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
        run = engine.submit(budget_flow())
        row = pending(engine, run.id)
        code, out, _ = cli(capsys, "approvals", "extend", row.id, "--stop", "--db", db,
                           "--as", "alice")  # fmt: skip
        assert code == 0
        assert out == (
            f"approval {row.id}: stopped by alice: the step fails with LimitExceeded "
            f"(run {run.id}, step agent)\n"
        )
        while not run.info().done:
            time.sleep(0.02)
    info = run.info()
    assert info.status == "failed" and (info.error or {})["type"] == "LimitExceeded"


def test_extend_refuses_bad_input(
    db: str,
    engine: Engine,
    model: ScriptedModel,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ship = engine.submit(write_flow(tmp_path, SHIP))
    with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
        budget = engine.submit(budget_flow())
        step_row = pending(engine, ship.id)
        budget_row = pending(engine, budget.id)
    code, _, err = cli(capsys, "approvals", "extend", "nope", "--to", "5", "--db", db)
    assert code == 2 and "No approval nope" in err and "tidemill approvals list" in err
    code, _, err = cli(capsys, "approvals", "extend", step_row.id, "--to", "5", "--db", db)
    assert code == 2 and "not a budget" in err

    for argv, words in (
        (["--to", "0"], "at least 1"),
        ([], "one of the arguments --to --stop is required"),
        (["--to", "5", "--stop"], "not allowed with argument"),
    ):
        with pytest.raises(SystemExit) as exited:
            cli(capsys, "approvals", "extend", budget_row.id, *argv, "--db", db)
        assert exited.value.code == 2
        assert words in capsys.readouterr().err

    # Its time ran out, and no worker has resolved it yet.
    with contextlib.closing(sqlite3.connect(tmp_path / "t.db")) as connection, connection:
        connection.execute(
            "UPDATE tm_approvals SET expires_at = ? WHERE id = ?", (time.time() - 1, budget_row.id)
        )
    code, _, err = cli(capsys, "approvals", "extend", budget_row.id, "--to", "5",
                       "--as", "alice", "--db", db)  # fmt: skip
    assert code == 2 and f"Approval {budget_row.id} expired" in err
