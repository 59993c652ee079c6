"""Budgets: an agent that uses up a bound asks for more (`on_exceeded: ask`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine._journal import thread_id
from tidemill.engine._models import ModelChoice
from tidemill.errors import ApprovalDecisionError
from tidemill.flows import Flow
from tidemill.llm import Model, ScriptedModel
from tidemill.store import ApprovalRow
from tidemill.types import ToolCall

pytestmark = pytest.mark.timeout(90)

_TOOL = {"name": "note", "script": "def main(x: int):\n    return x\n", "approvers": ["alice"]}


def flow() -> Flow:
    agent = {"model": "fake", "tools": [_TOOL],
             "limits": {"max_requests": 2, "on_exceeded": "ask"}}  # fmt: skip
    body = {"id": "agent", "inputs": {"user_message": "go"}, "ai_agent": agent}
    return Flow.model_validate({"steps": [body]})


def scripted() -> ScriptedModel:
    calls = [[ToolCall(id=f"c{i}", name="note", arguments={"x": i})] for i in range(2)]
    return ScriptedModel(["", "", "Done."], tool_calls=[*calls, []])


def models(model: Model) -> Callable[[ModelChoice], Model]:
    return lambda _choice: model


async def pending(engine: AsyncEngine, run_id: str) -> ApprovalRow:
    for _ in range(1500):
        rows = await engine.approvals(run_id)
        if rows:
            (row,) = rows
            return row
        await asyncio.sleep(0.02)
    raise AssertionError("no approval appeared")


async def finished(engine: AsyncEngine, run_id: str) -> Any:
    for _ in range(1500):
        run = await engine.get(run_id)
        if run.status in ("succeeded", "failed"):
            return run
        await asyncio.sleep(0.02)
    raise AssertionError("the run did not finish")


async def test_budget_parks_then_extend_continues(engine: AsyncEngine) -> None:
    model = scripted()
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow())
        row = await pending(engine, run_id)
        details = row.details or {}
        assert row.kind == "budget" and row.approvers == ["alice"]
        assert details["session"] == thread_id(run_id, "agent")
        assert (details["bound"], details["limit"], details["used"]) == ("max_requests", 2, 2)
        assert len(model.requests) == 2
        with pytest.raises(ApprovalDecisionError) as kind:
            await engine.approve(row.id, actor="alice")
        assert kind.value.reason == "kind"
        with pytest.raises(ApprovalDecisionError) as args:
            await engine.extend(row.id, 2, actor="alice")
        assert args.value.reason == "arguments"
        with pytest.raises(ApprovalDecisionError) as actor:
            await engine.extend(row.id, 5, actor="bob")
        assert actor.value.reason == "actor"
        await engine.extend(row.id, 5, actor="alice")
        with pytest.raises(ApprovalDecisionError) as twice:
            await engine.extend(row.id, 6, actor="alice")
        assert twice.value.reason == "decided"
        run = await finished(engine, run_id)
    assert run.status == "succeeded"
    assert len(model.requests) == 3  # answered turns were not asked again


async def test_budget_stop_fails_with_limit_exceeded(engine: AsyncEngine) -> None:
    model = scripted()
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow())
        row = await pending(engine, run_id)
        await engine.extend(row.id, None, actor="alice")
        run = await finished(engine, run_id)
    assert run.status == "failed"
    assert "LimitExceeded" in str(run.error)


async def test_a_retried_run_keeps_the_extensions_granted_before(engine: AsyncEngine) -> None:
    from tidemill.errors import ProviderError
    from tidemill.llm import ModelRequest
    from tidemill.types import Message

    asked: list[int] = []

    def answer(request: ModelRequest) -> Message:
        asked.append(1)
        results = sum(1 for m in request.messages if m.role == "tool")
        if results < 2:
            note = ToolCall(id=f"c{results}", name="note", arguments={"x": results})
            return Message.assistant("", tool_calls=(note,))
        if len(asked) == 3:  # the first request after the extension fails the step
            raise ProviderError("bad request", provider="scripted", status_code=400)
        return Message.assistant("Done.")

    model = ScriptedModel(handler=answer)
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow())
        row = await pending(engine, run_id)
        await engine.extend(row.id, 3, actor="alice")
        assert (await finished(engine, run_id)).status == "failed"
        await engine.retry(run_id)
        run = await finished(engine, run_id)
    assert run.status == "succeeded"  # not parked again at the original bound of 2
    budgets = await engine.approvals(run_id, status=None)
    assert [r.kind for r in budgets] == ["budget"]


async def test_max_duration_asks_for_more_time_and_the_cut_off_call_runs_again(
    engine: AsyncEngine,
) -> None:
    from tidemill.llm import ModelRequest
    from tidemill.types import Message

    slow = [True]

    async def answer(request: ModelRequest) -> Message:
        if slow[0]:
            slow[0] = False
            await asyncio.sleep(30)  # cut off at max_duration
        return Message.assistant("Done.")

    model = ScriptedModel(handler=answer)
    agent = {"model": "fake", "tools": [_TOOL],
             "limits": {"max_duration": 0.5, "on_exceeded": "ask"}}  # fmt: skip
    the_flow = Flow.model_validate(
        {"steps": [{"id": "agent", "inputs": {"user_message": "go"}, "ai_agent": agent}]}
    )
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(the_flow)
        row = await pending(engine, run_id)
        details = row.details or {}
        assert (details["bound"], details["limit"]) == ("max_duration", 0.5)
        assert details["used"] >= 0.5
        with pytest.raises(ApprovalDecisionError) as short:
            await engine.extend(row.id, details["used"], actor="alice")
        assert short.value.reason == "arguments"  # not more than the time already used
        await engine.extend(row.id, 60, actor="alice")
        run = await finished(engine, run_id)
    assert run.status == "succeeded"
    assert len(model.requests) == 2  # the cut-off request was made again


async def test_max_duration_stopped_fails_the_step_naming_the_bound(engine: AsyncEngine) -> None:
    from tidemill.llm import ModelRequest
    from tidemill.types import Message

    async def answer(request: ModelRequest) -> Message:
        await asyncio.sleep(30)
        return Message.assistant("never")

    agent = {"model": "fake", "limits": {"max_duration": 0.3, "on_exceeded": "ask"}}
    the_flow = Flow.model_validate(
        {"steps": [{"id": "agent", "inputs": {"user_message": "go"}, "ai_agent": agent}]}
    )
    async with engine.worker(poll=0.1, pool_size=1, models=models(ScriptedModel(handler=answer))):
        run_id = await engine.submit(the_flow)
        row = await pending(engine, run_id)
        await engine.extend(row.id, None, actor="anyone")
        run = await finished(engine, run_id)
    assert run.status == "failed"
    assert run.error["limit"] == "max_duration" and run.error["type"] == "LimitExceeded"
