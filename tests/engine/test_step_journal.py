"""An agent step's journal entries, each marked replayed or live, on SQLite and PostgreSQL.

The entries an execution before a pause for approval wrote are replayed by
the execution after it; so are those of a failed attempt, by its retry.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tidemill import Engine
from tidemill.engine import AsyncEngine
from tidemill.errors import ProviderError, RunNotFound
from tidemill.flows import Flow
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall

pytestmark = pytest.mark.timeout(90)

PAY = {"name": "pay", "script": "def main(amount: int):\n    return f'paid {amount}'\n"}


def agent_flow(**step: Any) -> Flow:
    tools = step.pop("tools", [PAY])
    agent = {"model": "fake", "tools": tools}
    body = {"id": "agent", "inputs": {"user_message": "pay 5"}, "ai_agent": agent, **step}
    first = {"id": "first", "script": "def main():\n    return 1\n"}
    return Flow.model_validate({"steps": [first, {**body, "needs": ["first"]}]})


def kinds(entries: list[Any], *, replayed: bool) -> list[str]:
    return [entry.kind for entry in entries if entry.replayed is replayed]


async def test_entries_before_a_pause_are_replayed_after_it(engine: AsyncEngine) -> None:
    tool = {**PAY, "requires_approval": True}
    model = ScriptedModel(
        ["", "Paid."], tool_calls=[[ToolCall(id="c1", name="pay", arguments={"amount": 5})], []]
    )
    async with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
        run_id = await engine.submit(agent_flow(tools=[tool]))
        for _ in range(1500):
            if await engine.approvals(run_id):
                break
            await asyncio.sleep(0.02)
        (row,) = await engine.approvals(run_id)
        paused = await engine.journal(run_id, "agent")
        # While it waits, the execution that paused is the latest: nothing was replayed.
        assert [e.kind for e in paused] == ["user_message", "model_response", "approval_requested"]
        assert not any(e.replayed for e in paused)
        await asyncio.sleep(0.05)  # the claim after the decision starts later, on any clock
        await engine.approve(row.id, actor="alice")
        assert await engine.wait(run_id, timeout=60) == "Paid."
    entries = await engine.journal(run_id, "agent")
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    assert kinds(entries, replayed=True) == ["user_message", "model_response", "approval_requested"]
    assert kinds(entries, replayed=False) == [
        "approval_decided", "tool_started", "tool_finished", "model_response", "finished"
    ]  # fmt: skip
    assert [(e.seq, e.at) for e in entries[:3]] == [(e.seq, e.at) for e in paused]
    started = next(e for e in entries if e.kind == "tool_started")
    assert started.data["kind"] == "tool_started"
    assert started.data["call"]["arguments"] == {"amount": 5}
    finished = next(e for e in entries if e.kind == "tool_finished")
    assert finished.data["result"]["content"] == "paid 5"
    assert entries[-1].data["kind"] == "finished"
    # The step that is not an agent, and a step the flow does not have, have no journal.
    assert await engine.journal(run_id, "first") == []
    assert await engine.journal(run_id, "nothing") == []
    with pytest.raises(RunNotFound):
        await engine.journal("no-such-run", "agent")


async def test_a_failed_attempts_entries_are_replayed_by_its_retry(engine: AsyncEngine) -> None:
    answers = iter(["call", "fail", "answer"])

    def handler(request: ModelRequest) -> Message:
        step = next(answers)
        if step == "call":
            pay = ToolCall(id="c1", name="pay", arguments={"amount": 2})
            return Message.assistant("", tool_calls=(pay,))
        if step == "fail":
            raise ProviderError("overloaded", provider="scripted", status_code=503)
        return Message.assistant("done")

    model = ScriptedModel(handler=handler)
    async with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
        run_id = await engine.submit(agent_flow(retry={"attempts": 1, "backoff": 0.1}))
        assert await engine.wait(run_id, timeout=60) == "done"
    jobs = [job for job in await engine.jobs(run_id) if job.step_id == "agent"]
    assert [job.attempt for job in jobs] == [1, 2]
    entries = await engine.journal(run_id, "agent")
    # The first attempt asked, called the tool (started with the model's turn) and failed
    # at its second model call; the retry read all that back and only asked the model again.
    assert kinds(entries, replayed=True) == ["user_message", "model_response", "tool_finished"]
    assert entries[1].data["started"] == ["c1"]
    assert kinds(entries, replayed=False) == ["model_response", "finished"]
    start = jobs[-1].started_at
    assert start is not None
    assert all((e.at < start) is e.replayed for e in entries)


def test_the_blocking_engine_reads_the_journal_too(store_url: str) -> None:
    model = ScriptedModel(["Hi."])
    with Engine(store_url, migrate=True) as engine:
        with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
            run = engine.submit(agent_flow(tools=[]))
            assert run.wait(timeout=60) == "Hi."
        entries = engine.journal(run.id, "agent")
    assert [(e.kind, e.replayed) for e in entries] == [
        ("user_message", False), ("model_response", False), ("finished", False)
    ]  # fmt: skip
    assert entries[1].data["response"]["message"]["content"] == "Hi."
