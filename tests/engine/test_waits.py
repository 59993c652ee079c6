"""Why a run waits (`engine.waits`), on SQLite and PostgreSQL: every kind of wait."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidemill.agents.journal import ModelTurn, ToolStarted, UserInput
from tidemill.engine import AsyncEngine, Wait
from tidemill.engine._journal import open_journal, thread_id
from tidemill.engine._models import ModelChoice
from tidemill.engine.runs._transition import Transition
from tidemill.errors import RunNotFound
from tidemill.flows import Flow
from tidemill.llm import Model, ScriptedModel
from tidemill.store import RunRow, Tx
from tidemill.types import Message, ModelResponse, ToolCall

pytestmark = pytest.mark.timeout(90)

NOTE = "def main(x: int):\n    return x\n"


def flow(*steps: dict[str, Any], **extra: Any) -> Flow:
    return Flow.model_validate({"steps": list(steps), **extra})


def agent(**settings: Any) -> dict[str, Any]:
    return {"id": "agent", "inputs": {"user_message": "go"},
            "ai_agent": {"model": "fake", **settings}}  # fmt: skip


def models(model: Model) -> Callable[[ModelChoice], Model]:
    return lambda _choice: model


async def waits_of(
    engine: AsyncEngine, run_id: str, kind: str, count: int = 1, *, nested: bool = False
) -> list[Wait]:
    """Poll until the run has `count` waits of `kind` (among child runs' too when `nested`)."""
    for _ in range(1500):
        waits = await engine.waits(run_id)
        found = [w for top in waits for w in (top.walk() if nested else [top]) if w.kind == kind]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {kind} wait appeared in {await engine.waits(run_id)}")


# --- a worker's part -------------------------------------------------------------------------


async def test_a_queued_step_waits_for_a_worker(engine: AsyncEngine) -> None:
    before = time.time()
    run_id = await engine.submit(flow({"id": "hi", "identity": {}}))
    (wait,) = await engine.waits(run_id)
    assert (wait.kind, wait.step, wait.run_id) == ("queued", "hi", run_id)
    assert wait.commands == ("tidemill worker",)
    assert wait.since is not None and before - 1 <= wait.since <= time.time()
    assert wait.approval_id is None and wait.until is None and wait.children == ()
    assert "no worker has claimed it" in wait.reason


async def test_a_failed_step_waits_for_its_retry(engine: AsyncEngine) -> None:
    boom = {"id": "boom", "script": "def main():\n    raise ValueError('bad data')\n",
            "retry": {"attempts": 2, "backoff": 3600}}  # fmt: skip
    async with engine.worker(poll=0.1, pool_size=1):
        run_id = await engine.submit(flow(boom))
        (wait,) = await waits_of(engine, run_id, "retry")
    assert wait.step == "boom" and wait.details["attempt"] == 2
    assert wait.until is not None and wait.until > time.time() + 200
    assert "ValueError: bad data" in wait.reason
    assert wait.details["previous_error"]["type"] == "ValueError"
    assert wait.commands == ()


async def test_a_claimed_step_names_its_worker_and_lease(engine: AsyncEngine) -> None:
    run_id = await engine.submit(flow({"id": "hi", "identity": {}}))
    now = time.time()
    await engine.store.transact(lambda tx: tx.claim("w-1", 1, now=now, lease_until=now + 30))
    (wait,) = await engine.waits(run_id)
    assert (wait.kind, wait.step) == ("running", "hi")
    assert wait.details["worker"] == "w-1" and "w-1" in wait.reason
    assert wait.until == pytest.approx(now + 30)
    assert wait.commands == ()


async def test_a_lost_lease_says_the_next_worker_takes_it_over(engine: AsyncEngine) -> None:
    run_id = await engine.submit(flow({"id": "hi", "identity": {}}))
    now = time.time()
    await engine.store.transact(lambda tx: tx.claim("dead", 1, now=now, lease_until=now - 5))
    (wait,) = await engine.waits(run_id)
    assert (wait.kind, wait.details["worker"]) == ("stalled", "dead")
    assert wait.commands == ("tidemill worker",)
    assert wait.until is not None and wait.until < time.time()


async def test_a_run_queued_behind_its_flows_concurrency_limit(engine: AsyncEngine) -> None:
    limited = flow({"id": "hi", "identity": {}}, name="limited",
                   concurrency={"limit": 1, "key": "flow_input.who"})  # fmt: skip
    first = await engine.submit(limited, {"who": "ada"})
    second = await engine.submit(limited, {"who": "ada"})
    third = await engine.submit(limited, {"who": "ada"})
    other = await engine.submit(limited, {"who": "bob"})
    assert [w.kind for w in await engine.waits(first)] == ["queued"]
    assert [w.kind for w in await engine.waits(other)] == ["queued"]
    (wait,) = await engine.waits(second)
    assert (wait.kind, wait.step, wait.run_id) == ("concurrency", None, second)
    assert wait.details == {"key": "flow:limited:ada", "limit": 1, "active": 1, "ahead": 0}
    assert "flow:limited:ada" in wait.reason
    (behind,) = await engine.waits(third)
    assert behind.details["ahead"] == 1


# --- a person's decision ---------------------------------------------------------------------


async def test_an_approval_step_names_who_decides_when_and_how(engine: AsyncEngine) -> None:
    ask = {"id": "ask", "approval": {"message": "Ship it?", "approvers": ["alice"],
                                     "timeout": 3600}}  # fmt: skip
    async with engine.worker(poll=0.1):
        run_id = await engine.submit(flow(ask, {"id": "after", "identity": {}}))
        (wait,) = await waits_of(engine, run_id, "approval")
    (row,) = await engine.approvals(run_id)
    assert (wait.step, wait.approval_id, wait.approvers) == ("ask", row.id, ("alice",))
    assert wait.commands == (
        f"tidemill approvals approve {row.id} --as alice",
        f"tidemill approvals reject {row.id} --as alice",
    )
    assert wait.until == row.expires_at and wait.then == "it expires, and the step fails"
    assert "Ship it?" in wait.reason and "alice may decide" in wait.reason
    assert wait.job_id == row.job_id and wait.since == row.created_at


async def test_an_agents_tool_call_question_and_budget(engine: AsyncEngine) -> None:
    tools = [
        {"name": "refund", "script": NOTE, "requires_approval": True, "approvers": ["ann", "bo"]},
    ]
    calls = [
        ToolCall(id="c1", name="refund", arguments={"x": 20}),
        ToolCall(id="q1", name="ask_person", arguments={"question": "Which city?"}),
    ]
    model = ScriptedModel(["", "Done."], tool_calls=[calls, []])
    step = agent(tools=tools, questions={"approvers": ["alice"]}, approval_timeout=600)
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow(step))
        waits = await engine.waits(run_id)
        while len(waits) < 2:
            await asyncio.sleep(0.02)
            waits = await engine.waits(run_id)
    call, question = sorted(waits, key=lambda w: w.kind != "tool_call")
    assert (call.kind, call.step, call.approvers) == ("tool_call", "agent", ("ann", "bo"))
    assert call.details == {"tool": "refund", "arguments": {"x": 20}}
    assert 'refund {"x": 20}' in call.reason and "ann or bo may decide" in call.reason
    assert call.commands == (
        f"tidemill approvals approve {call.approval_id} --as NAME",
        f"tidemill approvals reject {call.approval_id} --as NAME",
    )
    assert call.then is not None and "told the call was refused" in call.then
    assert question.kind == "question" and question.details == {"question": "Which city?"}
    assert question.commands == (
        f'tidemill approvals answer {question.approval_id} --text "ANSWER" --as alice',
    )


async def test_a_budget_request_says_how_to_extend_or_stop(engine: AsyncEngine) -> None:
    tool = {"name": "note", "script": NOTE, "approvers": ["alice"]}
    calls = [[ToolCall(id=f"c{i}", name="note", arguments={"x": i})] for i in range(2)]
    model = ScriptedModel(["", "", "Done."], tool_calls=[*calls, []])
    step = agent(tools=[tool], limits={"max_requests": 2, "on_exceeded": "ask"})
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow(step))
        (wait,) = await waits_of(engine, run_id, "budget")
    assert wait.details == {"bound": "max_requests", "limit": 2, "used": 2}
    assert "max_requests limit of 2" in wait.reason
    assert wait.commands == (
        f"tidemill approvals extend {wait.approval_id} --to 4 --as alice",
        f"tidemill approvals extend {wait.approval_id} --stop --as alice",
    )


async def test_a_budget_request_that_expires_fails_the_step(engine: AsyncEngine) -> None:
    tool = {"name": "note", "script": NOTE}
    calls = [[ToolCall(id=f"c{i}", name="note", arguments={"x": i})] for i in range(2)]
    model = ScriptedModel(["", "", "Done."], tool_calls=[*calls, []])
    step = agent(tools=[tool], approval_timeout=600,
                 limits={"max_requests": 2, "on_exceeded": "ask"})  # fmt: skip
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow(step))
        (wait,) = await waits_of(engine, run_id, "budget")
    assert wait.then == "it expires, and the step fails with LimitExceeded"
    assert wait.until is not None
    later = wait.until + 1

    def expire(tx: Tx) -> int:
        return Transition(tx, engine.defs, later).expire_approvals()

    assert await engine.store.transact(expire) == 1
    run = await engine.get(run_id)
    assert run.status == "failed" and run.error is not None
    assert (run.error["type"], run.error["limit"], run.error["value"]) == (
        "LimitExceeded",
        "max_requests",
        2,
    )
    (job,) = await engine.jobs(run_id)
    assert job.status == "failed" and (job.error or {})["type"] == "LimitExceeded"
    (row,) = await engine.approvals(run_id, status=None)
    assert row.status == "expired"
    assert await engine.waits(run_id) == []
    assert len(model.requests) == 2


async def test_a_reconciliation_names_the_call_cut_short(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    tool = {"name": "pay", "script": NOTE, "idempotent": False, "approvers": ["alice"]}
    run_id = await engine.submit(flow(agent(tools=[tool])))
    call = ToolCall(id="call_1", name="pay", arguments={"x": 2})
    turn = ModelTurn(response=ModelResponse(message=Message.assistant("", tool_calls=(call,))))
    async with open_journal(engine.url) as journal:  # as a worker killed mid-call leaves it
        events = [UserInput(messages=(Message.user("go"),), run_id="a1"), turn,
                  ToolStarted(call=call)]  # fmt: skip
        await journal.append(thread_id(run_id, "agent"), events, after=0)
    async with engine.worker(poll=0.1, pool_size=1, models=models(ScriptedModel(["Done."]))):
        (wait,) = await waits_of(engine, run_id, "reconcile")
    assert wait.details["tool"] == "pay" and wait.details["arguments"] == {"x": 2}
    assert 'pay {"x": 2}' in wait.reason
    assert wait.commands == (
        f"tidemill approvals reconcile {wait.approval_id} --happened --as alice",
        f"tidemill approvals reconcile {wait.approval_id} --not-happened --as alice",
    )


# --- child runs ------------------------------------------------------------------------------


async def test_a_loop_waits_for_its_unfinished_iterations(engine: AsyncEngine) -> None:
    ask = {"id": "ok", "approval": {"message": "Item?"}}
    each = {"id": "each", "for_each": {"items": [1, 2, 3], "parallelism": 2, "steps": [ask]}}
    async with engine.worker(poll=0.1):
        run_id = await engine.submit(flow(each, {"id": "after", "identity": {}}))
        await waits_of(engine, run_id, "approval", 2, nested=True)
        (loop,) = await engine.waits(run_id)
        assert (loop.kind, loop.step) == ("children", "each")
        assert loop.details["unfinished"] == ["each[0]", "each[1]"]
        assert (loop.details["items"], loop.details["started"]) == (3, 2)
        assert "1 more item to start" in loop.reason
        assert [(w.step, w.kind) for w in loop.children] == [
            ("each[0]/ok", "approval"),
            ("each[1]/ok", "approval"),
        ]
        assert [w.step for w in loop.walk()] == ["each", "each[0]/ok", "each[1]/ok"]
        await engine.approve(loop.children[0].approval_id or "")
        await waits_of(engine, run_id, "approval", 2, nested=True)
        for _ in range(1500):  # the third item starts once the first is approved
            (loop,) = await engine.waits(run_id)
            if loop.details["unfinished"] == ["each[1]", "each[2]"]:
                break
            await asyncio.sleep(0.02)
        assert loop.details["started"] == 3 and "more item" not in loop.reason


async def test_nested_containers_show_the_whole_path(engine: AsyncEngine) -> None:
    ask = {"id": "ok", "approval": {"message": "Go?"}}
    pick = {"id": "pick", "branch": {"branches": [{"when": "1 == 1", "steps": [ask]}]}}
    branches = [{"steps": [{"id": "a", "identity": {}}]}, {"steps": [pick]}]
    both = {"id": "both", "parallel": {"branches": branches}}
    async with engine.worker(poll=0.1):
        run_id = await engine.submit(flow(both))
        (found,) = await waits_of(engine, run_id, "approval", nested=True)
        (top,) = await engine.waits(run_id)
    assert found.step == "both[1]/pick/ok"
    assert top.details["unfinished"] == ["both[1]"]
    (inner,) = top.children
    assert (inner.kind, inner.step, inner.details["unfinished"]) == (
        "children",
        "both[1]/pick",
        ["both[1]/pick"],
    )


async def test_any_parked_step_with_child_runs_waits_for_them(engine: AsyncEngine) -> None:
    """An agent's tool calls may start child runs: a parked job's children are waited for."""
    ask = {"id": "ask", "approval": {"message": "Go?"}}
    async with engine.worker(poll=0.1):
        run_id = await engine.submit(flow(ask))
        await waits_of(engine, run_id, "approval")
    (job,) = await engine.jobs(run_id)
    now = time.time()

    def spawn(tx: Tx) -> None:
        parent = tx.run(run_id)
        assert parent is not None
        scope = '[["ask","tool:lookup:c1"]]'
        child = RunRow("child-1", run_id, run_id, job.id, None, scope, parent.flow_name,
                       parent.digest, "running", None, now, now, None, None)  # fmt: skip
        tx.insert_run(child)
        tx.insert_job(child.id, "inner", 1, now=now)

    await engine.store.transact(spawn)
    approval, children = await engine.waits(run_id)
    assert approval.kind == "approval"
    assert (children.kind, children.step, children.details["unfinished"]) == (
        "children",
        "ask",
        ["ask[tool:lookup:c1]"],
    )
    (inner,) = children.children
    assert (inner.kind, inner.step, inner.run_id) == (
        "queued",
        "ask[tool:lookup:c1]/inner",
        "child-1",
    )


# --- the run itself --------------------------------------------------------------------------


async def test_a_finished_run_waits_for_nothing(engine: AsyncEngine) -> None:
    async with engine.worker(poll=0.1):
        run_id = await engine.submit(flow({"id": "hi", "identity": {}}))
        await engine.wait(run_id, timeout=30)
    assert await engine.waits(run_id) == []


async def test_an_unknown_run_is_a_typed_error_with_a_hint(engine: AsyncEngine) -> None:
    with pytest.raises(RunNotFound) as missing:
        await engine.waits("nope")
    assert "No run nope" in str(missing.value)
    assert missing.value.hint is not None and "tidemill runs list" in missing.value.hint
