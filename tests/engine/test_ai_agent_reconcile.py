"""Reconciliation of non-idempotent tool calls cut short by a crash, on SQLite and PostgreSQL.

A worker SIGKILLed while a call of a tool with `idempotent: false` runs
(procs/agent_worker.py) leaves the step waiting for a person to say whether
the call took effect. The protocol's refusals (actor, expiry, single use,
sequence, kind) are checked on a journal left in the same state in process:
a `ToolStarted` without its `ToolFinished`, as the killed worker leaves it.
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
from agent_runs import finish_on_worker

from tidemill.agents.journal import ModelTurn, ToolFinished, ToolStarted, UserInput
from tidemill.cli import main as cli_main
from tidemill.engine import AsyncEngine
from tidemill.engine._journal import open_journal, thread_id
from tidemill.engine._models import ModelChoice
from tidemill.errors import ApprovalDecisionError, RunFailed
from tidemill.flows import Flow
from tidemill.llm import Model, ScriptedModel
from tidemill.store import ApprovalRow
from tidemill.types import Message, ModelResponse, ToolCall, ToolResult

pytestmark = pytest.mark.timeout(90)

PROCS = Path(__file__).parent / "procs"

EFFECT = (
    "import os, time\n"
    "def main(n: int, path: str):\n"
    "    line = '%s %s %s\\n' % (os.environ['TIDEMILL_IDEMPOTENCY_KEY'],\n"
    "                           os.environ['TIDEMILL_TOOL_ATTEMPT'], os.getpid())\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(line)\n"
    "    if n == 2 and os.environ.get('AGENT_TEST_HANG'):\n"
    "        time.sleep(60)\n"
    "    return {1: 'one', 2: 'two'}[n]\n"
)


def flow(effects: Path, *, idempotent: bool = False, **agent: Any) -> Flow:
    """`first` (idempotent) and `second` (not, unless `idempotent`), both writing to `effects`."""
    tools = [
        {"name": "first", "script": EFFECT, "inputs": {"path": str(effects)}},
        {"name": "second", "script": EFFECT, "inputs": {"path": str(effects)},
         "idempotent": idempotent, "approvers": ["alice"]},
    ]  # fmt: skip
    body = {"id": "agent", "ai_agent": {"model": "fake", "tools": tools, **agent},
            "inputs": {"user_message": "go"}}  # fmt: skip
    return Flow.model_validate({"steps": [body]})


def models(model: Model) -> Callable[[ModelChoice], Model]:
    def resolve(_choice: ModelChoice) -> Model:
        return model

    return resolve


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def tool_results(model: ScriptedModel) -> list[list[str]]:
    return [[m.content for m in r.messages if m.role == "tool"] for r in model.requests]


async def pending(engine: AsyncEngine, run_id: str) -> ApprovalRow:
    for _ in range(1500):
        rows = await engine.approvals(run_id)
        if rows:
            (row,) = rows
            return row
        await asyncio.sleep(0.02)
    raise AssertionError("no approval appeared")


# --- a real crash ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("happened", [True, False])
async def test_a_killed_non_idempotent_call_waits_for_a_person(
    engine: AsyncEngine,
    store_url: str,
    tmp_path: Path,
    worker_process: Callable[[str], subprocess.Popen[str]],
    happened: bool,
) -> None:
    sys.path.insert(0, str(PROCS))
    try:
        from agent_worker import logged
    finally:
        sys.path.remove(str(PROCS))
    effects = tmp_path / "effects.log"
    run_id = await engine.submit(flow(effects, approval_timeout=600))
    process = worker_process(store_url)
    assert process.stdout is not None
    assert (await asyncio.to_thread(process.stdout.readline)).startswith("ready")
    deadline = time.monotonic() + 60
    while len(lines(effects)) < 2:  # `first` finished, `second` is running
        assert time.monotonic() < deadline and process.poll() is None
        await asyncio.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    await asyncio.to_thread(process.wait, 30)

    model = logged(tmp_path / "requests.log")
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        row = await pending(engine, run_id)
        assert row.kind == "reconcile" and row.approvers == ["alice"]
        assert row.message.startswith("Did this call take effect? second")
        details = row.details or {}
        assert details["session"] == thread_id(run_id, "agent")
        assert (details["turn"], details["tool"], details["attempt"]) == (2, "second", 1)
        assert details["arguments"] == {"n": 2}
        assert details["question"] == "Did this call take effect?"
        assert isinstance(details["expected_seq"], int)
        assert (await engine.get(run_id)).status == "waiting"
        assert model.requests == []  # nothing asked, nothing run while waiting
        if happened:
            await engine.reconcile(row.id, True, actor="alice", result="two (confirmed)")
            assert await engine.wait(run_id, timeout=60) == "done: one two (confirmed)"
        else:
            await engine.reconcile(row.id, False, actor="alice")
            assert await engine.wait(run_id, timeout=60) == "done: one two"
    assert len(model.requests) == 1  # one more model call, with both results
    seconds = [line.split() for line in lines(effects)][1:]
    if happened:
        assert len(seconds) == 1  # the tool did not run again
    else:
        killed, again = seconds
        assert killed[0] == again[0] == f"{run_id}:agent:{details['request_id']}"
        assert (killed[1], again[1]) == ("1", "2")
    (decided,) = await engine.approvals(run_id, status=None)
    assert (decided.details or {})["decision"]["happened"] is happened
    (job,) = await engine.jobs(run_id)
    assert job.status == "succeeded"


# --- the protocol, on a journal left as a killed worker leaves it ----------------------------


async def crashed(engine: AsyncEngine, effects: Path, **agent: Any) -> tuple[str, ToolCall]:
    """A run whose agent's journal ends with `second` started (and once run), never finished."""
    run_id = await engine.submit(flow(effects, **agent))
    second = ToolCall(id="call_2", name="second", arguments={"n": 2})
    key = f"{run_id}:agent:{second.id}"
    await asyncio.to_thread(effects.write_text, f"{key} 1 0\n")
    turn = ModelTurn(response=ModelResponse(message=Message.assistant("", tool_calls=(second,))))
    async with open_journal(engine.url) as journal:
        await journal.append(
            thread_id(run_id, "agent"),
            [
                UserInput(messages=(Message.user("go"),), run_id="a1"),
                turn,
                ToolStarted(call=second),
            ],
            after=0,
        )
    return run_id, second


async def test_an_idempotent_call_runs_again_without_asking(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.log"
    run_id, _second = await crashed(engine, effects, idempotent=True)
    model = ScriptedModel(["Done."])
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        assert await engine.wait(run_id, timeout=60) == "Done."
    assert await engine.approvals(run_id, status=None) == []
    killed, again = [line.split() for line in lines(effects)]
    assert killed[0] == again[0] and again[1] == "2"
    assert tool_results(model) == [["two"]]


async def test_happened_records_the_confirmed_result_without_running(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.log"
    run_id, second = await crashed(engine, effects)
    model = ScriptedModel(["Done."])
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        row = await pending(engine, run_id)
        assert (row.details or {})["request_id"] == second.id
        with pytest.raises(ApprovalDecisionError) as refused:
            await engine.reconcile(row.id, False, actor="alice", result="no")
        assert refused.value.reason == "result"
        decided = await engine.reconcile(row.id, True, actor="alice")
        assert decided.status == "approved" and decided.decided_by == "alice"
        assert await engine.wait(run_id, timeout=60) == "Done."
    assert len(lines(effects)) == 1
    assert tool_results(model) == [["the call completed (confirmed by alice)"]]
    transcript = await engine.transcript(run_id, "agent")
    assert [m.content for m in transcript if m.role == "tool"] == [
        "the call completed (confirmed by alice)"
    ]


async def test_refusals_actor_kind_single_use_and_sequence(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.log"
    run_id, _second = await crashed(engine, effects)
    model = ScriptedModel(["Done."])
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        row = await pending(engine, run_id)
        with pytest.raises(ApprovalDecisionError) as wrong_actor:
            await engine.reconcile(row.id, True, actor="mallory")
        assert wrong_actor.value.reason == "actor"
        for decide in (engine.approve, engine.reject):
            with pytest.raises(ApprovalDecisionError) as wrong_kind:
                await decide(row.id, actor="alice")
            assert wrong_kind.value.reason == "kind" and "reconcile" in str(wrong_kind.value.hint)

        # The journal moved on since the question was asked: refused, nothing recorded.
        async with open_journal(engine.url) as journal:
            thread = thread_id(run_id, "agent")
            last = (await journal.read(thread))[-1].seq
            stray = ToolFinished(result=ToolResult(call_id="other", name="first", content="x"))
            await journal.append(thread, [stray], after=last)
        with pytest.raises(ApprovalDecisionError) as moved:
            await engine.reconcile(row.id, False, actor="alice")
        assert moved.value.reason == "mismatch"
        await engine.store.transact(
            lambda tx: tx.execute(
                "UPDATE tm_approvals SET details = ? WHERE id = ?",
                (json.dumps({**(row.details or {}), "expected_seq": last + 1}), row.id),
            )
        )
        await engine.reconcile(row.id, False, actor="alice")
        with pytest.raises(ApprovalDecisionError) as twice:
            await engine.reconcile(row.id, True, actor="alice")
        assert twice.value.reason == "decided"
        assert await engine.wait(run_id, timeout=60) == "Done."
    killed, again = [line.split() for line in lines(effects)]
    assert killed[0] == again[0] and again[1] == "2"  # re-run once, with the same key


async def test_reconcile_refuses_other_kinds(engine: AsyncEngine, tmp_path: Path) -> None:
    tool = {"name": "first", "script": EFFECT, "requires_approval": True,
            "inputs": {"path": str(tmp_path / "e.log")}}  # fmt: skip
    body = {"id": "agent", "ai_agent": {"model": "fake", "tools": [tool]},
            "inputs": {"user_message": "go"}}  # fmt: skip
    model = ScriptedModel(["", "Done."], tool_calls=[[ToolCall(name="first", arguments={"n": 1})]])
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(Flow.model_validate({"steps": [body]}))
        row = await pending(engine, run_id)
        assert row.kind == "tool_call"
        with pytest.raises(ApprovalDecisionError) as wrong_kind:
            await engine.reconcile(row.id, True)
        assert wrong_kind.value.reason == "kind"
        await engine.cancel(run_id)


async def test_an_expired_reconciliation_fails_the_step(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.log"
    run_id, _second = await crashed(engine, effects, approval_timeout=0.5)
    model = ScriptedModel(["Done."])
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        row = await pending(engine, run_id)
        assert row.expires_at is not None
        await asyncio.sleep(max(0.0, row.expires_at - time.time()) + 0.1)
        with pytest.raises(ApprovalDecisionError) as late:
            await engine.reconcile(row.id, True, actor="alice")
        assert late.value.reason == "expired"
        with pytest.raises(RunFailed) as failed:
            await engine.wait(run_id, timeout=60)
    assert failed.value.error["type"] == "ApprovalExpired"
    assert model.requests == [] and len(lines(effects)) == 1


def test_the_cli_lists_and_answers_reconciliations(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not store_url.startswith("sqlite"):
        pytest.skip("the CLI path is the same on both backends")
    effects = tmp_path / "effects.log"
    model = ScriptedModel(["Done."])

    async def until_waiting() -> tuple[str, str]:
        engine = AsyncEngine(store_url, migrate=True)
        try:
            run_id, _second = await crashed(engine, effects)
            async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
                return run_id, (await pending(engine, run_id)).id
        finally:
            await engine.close()

    run_id, approval_id = asyncio.run(until_waiting())
    assert cli_main(["approvals", "list", "--db", store_url]) == 0
    assert 'Did this call take effect? tool call second {"n": 2}' in capsys.readouterr().out
    assert cli_main(["approvals", "approve", approval_id, "--db", store_url]) != 0
    assert "reconcile" in capsys.readouterr().err
    code = cli_main(["approvals", "reconcile", approval_id, "--happened", "--result", "sent",
                     "--as", "alice", "--db", store_url])  # fmt: skip
    assert code == 0 and "took effect by alice" in capsys.readouterr().out

    assert finish_on_worker(store_url, model, run_id) == "Done."
    assert tool_results(model) == [["sent"]] and len(lines(effects)) == 1
