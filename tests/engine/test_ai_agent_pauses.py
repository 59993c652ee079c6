"""An agent's question to a person (`ask_person`), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from agent_runs import finish_on_worker

from tidemill.cli import main as cli_main
from tidemill.engine import AsyncEngine
from tidemill.engine._journal import thread_id
from tidemill.engine._models import ModelChoice
from tidemill.engine.ai._question import NO_ANSWER
from tidemill.errors import ApprovalDecisionError
from tidemill.flows import Flow
from tidemill.llm import Model, ScriptedModel
from tidemill.store import ApprovalRow
from tidemill.types import ToolCall

pytestmark = pytest.mark.timeout(90)


def flow(**agent: Any) -> Flow:
    questions = {"approvers": ["alice"]}
    body = {"id": "agent", "inputs": {"user_message": "go"},
            "ai_agent": {"model": "fake", "questions": questions, **agent}}  # fmt: skip
    return Flow.model_validate({"steps": [body]})


def asking() -> ScriptedModel:
    call = ToolCall(id="q1", name="ask_person", arguments={"question": "Which city?"})
    return ScriptedModel(["", "Shipping to it."], tool_calls=[[call], []])


def models(model: Model) -> Callable[[ModelChoice], Model]:
    def resolve(_choice: ModelChoice) -> Model:
        return model

    return resolve


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


def test_ask_person_is_a_reserved_tool_name() -> None:
    with pytest.raises(ValueError, match="reserved"):
        flow(tools=[{"name": "ask_person", "script": "def main(): ..."}])


async def test_a_question_parks_and_its_answer_is_the_call_result(engine: AsyncEngine) -> None:
    model = asking()
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow())
        row = await pending(engine, run_id)
        assert (row.kind, row.approvers, row.message) == ("question", ["alice"], "Which city?")
        details = row.details or {}
        assert details["session"] == thread_id(run_id, "agent")
        assert (details["turn"], details["request_id"], details["question"]) == (
            1,
            "q1",
            "Which city?",
        )
        assert isinstance(details["expected_seq"], int)
        assert (await engine.get(run_id)).status == "waiting"
        assert "ask_person" in [tool.name for tool in model.requests[0].tools]

        for decide in (engine.approve, engine.reject):
            with pytest.raises(ApprovalDecisionError) as wrong_kind:
                await decide(row.id, actor="alice")
            assert wrong_kind.value.reason == "kind" and "answer" in str(wrong_kind.value.hint)
        with pytest.raises(ApprovalDecisionError) as not_reconcile:
            await engine.reconcile(row.id, True, actor="alice")
        assert not_reconcile.value.reason == "kind"
        with pytest.raises(ApprovalDecisionError) as wrong_actor:
            await engine.answer(row.id, "Berlin", actor="mallory")
        assert wrong_actor.value.reason == "actor"

        answered = await engine.answer(row.id, "Berlin", actor="alice")
        assert (answered.status, answered.decided_by) == ("approved", "alice")
        with pytest.raises(ApprovalDecisionError) as twice:
            await engine.answer(row.id, "Paris", actor="alice")
        assert twice.value.reason == "decided"
        assert await engine.wait(run_id, timeout=60) == "Shipping to it."
    assert len(model.requests) == 2  # nothing asked again
    assert tool_results(model)[1] == ["Berlin"]


async def test_answer_refuses_a_tool_call_approval(engine: AsyncEngine) -> None:
    tool = {"name": "pay", "script": "def main(): return 1", "requires_approval": True}
    model = ScriptedModel(["", "Done."], tool_calls=[[ToolCall(name="pay", arguments={})], []])
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow(tools=[tool]))
        row = await pending(engine, run_id)
        assert row.kind == "tool_call"
        with pytest.raises(ApprovalDecisionError) as wrong_kind:
            await engine.answer(row.id, "yes")
        assert wrong_kind.value.reason == "kind"
        await engine.cancel(run_id)


async def test_an_expired_question_tells_the_model_no_answer_came(engine: AsyncEngine) -> None:
    model = asking()
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow(approval_timeout=0.5))
        row = await pending(engine, run_id)
        assert row.expires_at is not None
        await asyncio.sleep(max(0.0, row.expires_at - time.time()) + 0.1)
        with pytest.raises(ApprovalDecisionError) as late:
            await engine.answer(row.id, "Berlin", actor="alice")
        assert late.value.reason == "expired"
        assert await engine.wait(run_id, timeout=60) == "Shipping to it."
    assert tool_results(model)[1] == [NO_ANSWER]
    (expired,) = await engine.approvals(run_id, status=None)
    assert expired.status == "expired"


def test_the_cli_answers_a_question(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    if not store_url.startswith("sqlite"):
        pytest.skip("the CLI path is the same on both backends")
    model = asking()

    async def until_waiting() -> tuple[str, str]:
        engine = AsyncEngine(store_url, migrate=True)
        try:
            async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
                run_id = await engine.submit(flow())
                return run_id, (await pending(engine, run_id)).id
        finally:
            await engine.close()

    run_id, approval_id = asyncio.run(until_waiting())
    assert cli_main(["approvals", "list", "--db", store_url]) == 0
    assert "question: Which city?" in capsys.readouterr().out
    assert cli_main(["approvals", "approve", approval_id, "--db", store_url]) != 0
    assert "answer" in capsys.readouterr().err
    code = cli_main(["approvals", "answer", approval_id, "--text", "Berlin", "--as", "alice",
                     "--db", store_url])  # fmt: skip
    assert code == 0 and "answered by alice" in capsys.readouterr().out

    assert finish_on_worker(store_url, model, run_id) == "Shipping to it."
    assert tool_results(model)[1] == ["Berlin"]
