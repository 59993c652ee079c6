"""A run's events on SQLite and PostgreSQL: in order, resumable, live, child runs under the root."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tidemill.engine import AsyncEngine, RunEvent
from tidemill.errors import RunNotFound
from tidemill.flows import Flow
from tidemill.llm import ScriptedModel
from tidemill.types import ToolCall

pytestmark = pytest.mark.timeout(90)

DOUBLE = "def main(x):\n    return x * 2\n"
SHOUT = "def main(x):\n    print('hello from shout')\n    return x + 1\n"
SLOW = "import time\ndef main():\n    time.sleep(0.3)\n    print('slept')\n    return 1\n"
LOOKUP = (
    "def main(order_id: str) -> dict:\n    return {'order_id': order_id, 'status': 'shipped'}\n"
)


def flow(steps: list[dict[str, Any]]) -> Flow:
    return Flow.model_validate({"steps": steps})


def two_scripts() -> Flow:
    return flow(
        [
            {"id": "double", "script": DOUBLE, "inputs": {"x": {"expr": "flow_input.x"}}},
            {"id": "shout", "script": SHOUT, "inputs": {"x": {"expr": "previous_result"}}},
        ]
    )


def kinds(events: list[RunEvent]) -> list[tuple[str, str | None]]:
    return [(e.kind, e.step_id) for e in events if e.kind != "log"]


async def run_to_end(engine: AsyncEngine, f: Flow, inputs: dict[str, Any] | None = None) -> str:
    async with engine.worker(concurrency=2, poll=0.1, pool_size=1):
        run_id = await engine.submit(f, inputs)
        await engine.wait(run_id, timeout=60)
    return run_id


async def test_two_script_steps_start_and_finish_in_order(engine: AsyncEngine) -> None:
    run_id = await run_to_end(engine, two_scripts(), {"x": 2})
    events = await engine.events(run_id)
    assert kinds(events) == [
        ("run_queued", None),
        ("step_started", "double"),
        ("step_finished", "double"),
        ("step_started", "shout"),
        ("step_finished", "shout"),
        ("run_finished", None),
    ]
    ids = [e.id for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(e.run_id == run_id for e in events)
    first = events[0]
    assert first.data == {"flow": "flow", "status": "running"}
    finished = [e for e in events if e.kind == "step_finished"]
    assert [e.data for e in finished] == [{"status": "succeeded", "attempt": 1}] * 2
    assert events[-1].data == {"status": "succeeded"}
    started = next(e for e in events if e.kind == "step_started")
    assert started.data["attempt"] == 1 and started.data["worker"]
    (log,) = [e for e in events if e.kind == "log"]
    assert (log.step_id, log.data["stream"], log.data["text"]) == (
        "shout",
        "stdout",
        "hello from shout\n",
    )
    (row,) = await engine.logs(run_id)
    assert log.data["log_id"] == row.id


async def test_after_resumes_exactly_after_an_event(engine: AsyncEngine) -> None:
    run_id = await run_to_end(engine, two_scripts(), {"x": 2})
    events = await engine.events(run_id)
    for cut in range(len(events) + 1):
        after = 0 if cut == 0 else events[cut - 1].id
        assert await engine.events(run_id, after=after) == events[cut:]
    paged: list[RunEvent] = []
    while page := await engine.events(run_id, after=paged[-1].id if paged else 0, limit=2):
        paged.extend(page)
    assert paged == events


async def test_events_of_a_run_that_does_not_exist(engine: AsyncEngine) -> None:
    with pytest.raises(RunNotFound):
        await engine.events("nope")
    with pytest.raises(RunNotFound):
        async for _ in engine.follow("nope"):
            pass


async def test_a_failed_step_and_its_retry(engine: AsyncEngine) -> None:
    broken = "def main():\n    raise ValueError('no')\n"
    f = flow([{"id": "bad", "script": broken, "retry": {"attempts": 1, "backoff": 0.05}}])
    async with engine.worker(concurrency=2, poll=0.1, pool_size=1):
        run_id = await engine.submit(f)
        with pytest.raises(Exception, match="no"):
            await engine.wait(run_id, timeout=60)
    events = await engine.events(run_id)
    assert kinds(events) == [
        ("run_queued", None),
        ("step_started", "bad"),
        ("step_finished", "bad"),
        ("step_retrying", "bad"),
        ("step_started", "bad"),
        ("step_finished", "bad"),
        ("run_finished", None),
    ]
    assert events[3].data["attempt"] == 2
    assert events[5].data["status"] == "failed" and events[5].data["attempt"] == 2
    assert events[5].data["error"]["type"] == "ValueError"
    assert events[-1].data["status"] == "failed"
    assert events[-1].data["error"]["type"] == "ValueError"


async def test_an_approval_wait_and_its_decision(engine: AsyncEngine) -> None:
    ask = {"id": "ask", "approval": {"message": "Ship it?", "approvers": ["alice"]}}
    f = flow([ask, {"id": "after", "identity": {}, "inputs": {"v": 1}}])
    async with engine.worker(concurrency=2, poll=0.1, pool_size=1):
        run_id = await engine.submit(f)
        for _ in range(500):
            if await engine.approvals(run_id):
                break
            await asyncio.sleep(0.02)
        (row,) = await engine.approvals(run_id)
        await engine.approve(row.id, actor="alice", comment="fine")
        await engine.wait(run_id, timeout=60)
    events = await engine.events(run_id)
    assert kinds(events) == [
        ("run_queued", None),
        ("step_started", "ask"),
        ("wait_requested", "ask"),
        ("wait_decided", "ask"),
        ("step_finished", "ask"),
        ("step_started", "after"),
        ("step_finished", "after"),
        ("run_finished", None),
    ]
    requested, decided = events[2], events[3]
    assert requested.data["approval_id"] == row.id and requested.data["kind"] == "step"
    assert requested.data["message"] == "Ship it?" and requested.data["approvers"] == ["alice"]
    assert decided.data == {
        "approval_id": row.id,
        "kind": "step",
        "status": "approved",
        "decided_by": "alice",
        "comment": "fine",
    }


async def test_a_sub_flow_s_events_appear_under_the_root(engine: AsyncEngine) -> None:
    child = {"steps": [{"id": "inc", "script": DOUBLE, "inputs": {"x": {"expr": "flow_input.n"}}}]}
    f = flow([{"id": "sub", "flow": {"flow": child}, "inputs": {"n": 4}}])
    run_id = await run_to_end(engine, f)
    events = await engine.events(run_id)
    assert kinds(events) == [
        ("run_queued", None),
        ("step_started", "sub"),
        ("run_started", None),
        ("step_started", "inc"),
        ("step_finished", "inc"),
        ("run_finished", None),
        ("step_finished", "sub"),
        ("run_finished", None),
    ]
    child_id = events[2].run_id
    assert child_id != run_id
    assert [e.run_id for e in events[2:6]] == [child_id] * 4
    assert events[2].data["parent_id"] == run_id
    assert events[2].data["scope"] == [["sub", "flow"]]
    assert [e.kind for e in await engine.events(child_id)] == [e.kind for e in events[2:6]]


async def test_follow_yields_a_running_run_s_events_and_ends_with_it(engine: AsyncEngine) -> None:
    f = flow([{"id": "slow", "script": SLOW}, {"id": "next", "identity": {}, "inputs": {"v": 1}}])
    run_id = await engine.submit(f)
    seen: list[RunEvent] = []

    async def follow() -> None:
        async for event in engine.follow(run_id):
            seen.append(event)

    follower = asyncio.create_task(follow())
    await asyncio.sleep(0.2)
    assert [e.kind for e in seen] == ["run_queued"]  # nothing runs it yet
    async with engine.worker(concurrency=2, poll=0.1, pool_size=1):
        await asyncio.wait_for(follower, 30)
    assert seen == await engine.events(run_id)
    assert seen[-1].kind == "run_finished" and seen[-1].run_id == run_id
    assert [e.kind for e in seen if e.kind == "log"] == ["log"]
    # A run that ended already: following it after its last event ends at once.
    assert [e async for e in engine.follow(run_id, after=seen[-1].id)] == []
    assert [e.id async for e in engine.follow(run_id, after=seen[2].id)] == [e.id for e in seen[3:]]


async def test_an_agent_step_records_its_model_turns_and_tool_results(
    engine: AsyncEngine,
) -> None:
    model = ScriptedModel(
        ["", "Order A1 has shipped."],
        tool_calls=[[ToolCall(id="c1", name="lookup", arguments={"order_id": "A1"})], []],
    )
    body = {
        "id": "agent",
        "ai_agent": {"model": "fake", "tools": [{"name": "lookup", "script": LOOKUP}]},
        "inputs": {"user_message": "Where is order A1?"},
    }
    f = flow([body])
    async with engine.worker(concurrency=2, poll=0.1, pool_size=1, models=lambda _c: model):
        run_id = await engine.submit(f)
        assert await engine.wait(run_id, timeout=60) == "Order A1 has shipped."
    events = await engine.events(run_id)
    shown = [e.kind for e in events if e.kind not in ("log", "usage", "text_delta")]
    assert shown == [
        "run_queued",
        "step_started",
        "agent_input",
        "model_turn",
        "tool_result",
        "model_turn",
        "step_finished",
        "run_finished",
    ]
    assert all(e.step_id == "agent" for e in events[1:-1])
    first, second = (e for e in events if e.kind == "model_turn")
    (called,) = first.data["response"]["message"]["tool_calls"]
    assert (called["id"], called["name"], called["arguments"]) == (
        "c1",
        "lookup",
        {"order_id": "A1"},
    )
    assert first.data["started"] == ["c1"]
    assert second.data["response"]["message"]["content"] == "Order A1 has shipped."
    (result,) = (e for e in events if e.kind == "tool_result")
    assert result.data["result"]["call_id"] == "c1"
    assert json.loads(result.data["result"]["content"]) == {"order_id": "A1", "status": "shipped"}
    seqs = [e.data["seq"] for e in events if "seq" in e.data]
    assert seqs == sorted(seqs)
    usage = [e for e in events if e.kind == "usage"]
    assert len(usage) == 2 and all(u.data["provider"] == "scripted" for u in usage)


async def test_a_job_queue_s_one_statement_path_records_the_same_events(
    engine: AsyncEngine,
) -> None:
    one = Flow.model_validate({"name": "one", "steps": [{"id": "only", "identity": {}}]})
    async with engine.worker(concurrency=1, poll=0.1, pool_size=1):
        run_ids = [await engine.submit(one, {"n": n}) for n in range(6)]
        for run_id in run_ids:
            await engine.wait(run_id, timeout=60)
    for run_id in run_ids:
        events = await engine.events(run_id)
        assert kinds(events) == [
            ("run_queued", None),
            ("step_started", "only"),
            ("step_finished", "only"),
            ("run_finished", None),
        ]
        assert events[2].data == {"status": "succeeded", "attempt": 1}
        assert events[3].data == {"status": "succeeded"}
        assert [e.id for e in events] == sorted(e.id for e in events)
