"""Bounded delegation of an `ai_agent` step to its specialists, on SQLite and PostgreSQL.

Results in the declared order however tasks finish; a child sees only its
task; its tools are the exact intersection; every admission failure stops
the whole call before any child starts; output schemas, the concurrency
ceiling, usage that counts against the parent, a crash-resumed delegation
that does not run finished children again, and the load-time checks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine._journal import open_journal
from tidemill.engine._models import ModelChoice
from tidemill.errors import FlowValidationError, RunFailed
from tidemill.flows import Flow
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.store import StoreURL
from tidemill.types import Message, ToolCall

pytestmark = pytest.mark.timeout(90)

ECHO = (
    "import os\n"
    "def main(**arguments):\n"
    "    return {'arguments': arguments, 'key': os.environ['TIDEMILL_IDEMPOTENCY_KEY']}\n"
)
LOOKUP = "def main(order_id: str):\n    return {'order_id': order_id}\n"
QUESTION = "Research order A1 for the customer."


class Tracker:
    """What the specialists' fake models saw happen: who finished when, how many at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.finished: list[str] = []

    def model(
        self, name: str, delay: float = 0.0, answer: Callable[[ModelRequest], str] | None = None
    ) -> ScriptedModel:
        async def handler(request: ModelRequest) -> Message:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                await asyncio.sleep(delay)
            finally:
                self.in_flight -= 1
            self.finished.append(name)
            text = answer(request) if answer else f"{name} did: {request.messages[-1].content}"
            return Message.assistant(text)

        return ScriptedModel(handler=handler)


def task(task_id: str, specialist: str, prompt: str = "") -> dict[str, str]:
    return {"id": task_id, "specialist": specialist, "prompt": prompt or f"work on {task_id}"}


def delegating(*tasks: dict[str, Any], answer: str = "done") -> ScriptedModel:
    """A parent that delegates once (call `c1`), then answers."""
    calls = [ToolCall(id="c1", name="delegate", arguments={"tasks": list(tasks)})]
    return ScriptedModel(["", answer], tool_calls=[calls, []])


def specialist(name: str, **settings: Any) -> dict[str, Any]:
    return {"name": name, "description": f"the {name}", **settings}


def flow(agent: dict[str, Any], **step: Any) -> Flow:
    body = {
        "id": "agent",
        "ai_agent": {"model": "fake", **agent},
        "inputs": {"user_message": QUESTION},
        **step,
    }
    return Flow.model_validate({"steps": [body]})


def team(parent: Model, **specialists: Model) -> Callable[[ModelChoice], Model]:
    def resolve(choice: ModelChoice) -> Model:
        assert choice.step_id == "agent"
        return specialists[choice.agent] if choice.agent else parent

    return resolve


def delegate_result(parent: ScriptedModel) -> tuple[Any, bool]:
    """What the parent model was told its `delegate` call gave, and whether it was an error."""
    (message,) = [m for m in parent.requests[1].messages if m.role == "tool"]
    content = message.content
    try:
        return json.loads(content), message.is_error
    except json.JSONDecodeError:
        return content, message.is_error


async def run(
    engine: AsyncEngine, the_flow: Flow, resolve: Callable[[ModelChoice], Model]
) -> tuple[str, Any]:
    async with engine.worker(concurrency=2, poll=0.05, pool_size=1, models=resolve):
        run_id = await engine.submit(the_flow)
        return run_id, await engine.wait(run_id, timeout=60)


# --- the happy path --------------------------------------------------------------------------


async def test_results_join_in_declared_order_and_children_see_only_their_task(
    engine: AsyncEngine, store_url: str
) -> None:
    tracker = Tracker()
    slow, fast = tracker.model("slow", delay=0.4), tracker.model("fast", delay=0.01)
    parent = delegating(task("t1", "slow", "Find the carrier."), task("t2", "fast", "Find ETA."))
    the_flow = flow(
        {"system": "You lead.", "specialists": [
            specialist("slow", system="You find carriers."), specialist("fast")]}
    )  # fmt: skip
    run_id, result = await run(engine, the_flow, team(parent, slow=slow, fast=fast))

    assert result == "done"
    assert tracker.finished == ["fast", "slow"]  # out of order...
    entries, is_error = delegate_result(parent)
    assert not is_error
    assert entries == [  # ...joined in the declared order
        {"id": "t1", "specialist": "slow", "ok": True, "result": "slow did: Find the carrier."},
        {"id": "t2", "specialist": "fast", "ok": True, "result": "fast did: Find ETA."},
    ]
    # A child gets its prompt, and its lineage in its system prompt: nothing of the parent's.
    (request,) = slow.requests
    system, user = request.messages
    assert system.role == "system" and system.content.startswith("You find carriers.")
    assert "lineage: agent/t1" in system.content
    assert user == Message.user("Find the carrier.")
    for child in (slow, fast):
        text = json.dumps([m.model_dump(mode="json") for m in child.requests[0].messages])
        assert QUESTION not in text and "You lead." not in text
        assert child.requests[0].tools == []  # no tools listed, none given
    (parent_definition,) = parent.requests[0].tools
    assert parent_definition.name == "delegate"
    assert "- slow: the slow" in parent_definition.description
    # Each task has a journal thread of its own; the usage names the specialists.
    async with open_journal(StoreURL.parse(store_url)) as journal:
        threads = await journal.threads()
    assert {f"tidemill:{run_id}:agent:c1:t1", f"tidemill:{run_id}:agent:c1:t2"} <= set(threads)
    models = sorted(u["model"] for u in await engine.usage(run_id))
    assert models == [
        "scripted",
        "scripted",
        "scripted (specialist fast)",
        "scripted (specialist slow)",
    ]


async def test_a_childs_tools_are_the_exact_intersection(engine: AsyncEngine) -> None:
    child = ScriptedModel(
        ["", "checked"],
        tool_calls=[
            [ToolCall(id="k1", name="echo", arguments={"x": 1}),
             ToolCall(id="k2", name="lookup", arguments={"order_id": "A1"})],
            [],
        ],
    )  # fmt: skip
    parent = delegating(task("t1", "checker"))
    tools = [
        {"name": "echo", "script": ECHO},
        {"name": "lookup", "script": LOOKUP},
        {"name": "other", "script": LOOKUP},
    ]
    the_flow = flow(
        {
            "tools": tools,
            "delegation": {"allow": ["echo", "lookup"]},
            # `lookup` is allowed but not listed; `other` is listed but not allowed.
            "specialists": [specialist("checker", tools=["echo", "other"])],
        }
    )
    run_id, _ = await run(engine, the_flow, team(parent, checker=child))

    assert [tool.name for tool in child.requests[0].tools] == ["echo"]
    assert sorted(t.name for t in parent.requests[0].tools) == [
        "delegate",
        "echo",
        "lookup",
        "other",
    ]
    results = {m.name: m for m in child.requests[1].messages if m.role == "tool"}
    assert json.loads(results["echo"].content) == {
        "arguments": {"x": 1},
        "key": f"{run_id}:agent:c1:t1:k1",
    }
    assert results["lookup"].is_error and "no tool named 'lookup'" in results["lookup"].content


# --- admission ----------------------------------------------------------------------------------

TWO = [specialist("a"), specialist("b")]


@pytest.mark.parametrize(
    ("agent", "tasks", "problem"),
    [
        ({"specialists": TWO}, [task("t1", "a"), task("t2", "nobody")],
         "'nobody' is not a declared specialist (declared: a, b)"),
        ({"specialists": TWO}, [task("t1", "a"), task("t1", "b")],
         "the task id 't1' is used more than once"),
        ({"specialists": TWO, "delegation": {"max_fanout": 2}},
         [task("t1", "a"), task("t2", "b"), task("t3", "a")],
         "3 tasks, more than max_fanout 2"),
        ({"limits": {"max_requests": 5},
          "specialists": [specialist("a", budget={"max_requests": 3}),
                          specialist("b", budget={"max_requests": 1})]},
         [task("t1", "a"), task("t2", "a")],
         "the tasks' budgets need 6 max_requests together, but 4 remain"),
    ],
    ids=["undeclared", "duplicate-ids", "fan-out", "budget-escape"],
)  # fmt: skip
async def test_an_inadmissible_delegation_starts_no_child(
    engine: AsyncEngine, agent: dict[str, Any], tasks: list[dict[str, Any]], problem: str
) -> None:
    a, b = ScriptedModel(["never"]), ScriptedModel(["never"])
    parent = delegating(*tasks, answer="gave up")
    _, result = await run(engine, flow(agent), team(parent, a=a, b=b))
    assert result == "gave up"
    message, is_error = delegate_result(parent)
    assert is_error and message.startswith("Not delegated, no task was started: ")
    assert problem in message
    assert a.requests == [] and b.requests == []


async def test_arguments_other_than_tasks_are_refused(engine: AsyncEngine) -> None:
    a = ScriptedModel(["never"])
    parent = delegating({**task("t1", "a"), "model": "openai:gpt-4o"}, answer="gave up")
    _, result = await run(engine, flow({"specialists": [specialist("a")]}), team(parent, a=a))
    assert result == "gave up"
    message, is_error = delegate_result(parent)
    assert is_error and "Additional properties are not allowed ('model'" in message
    assert a.requests == []


@pytest.mark.parametrize("max_depth", [1, 2])
async def test_nesting_is_bounded_by_max_depth(engine: AsyncEngine, max_depth: int) -> None:
    helper = Tracker().model("helper")
    lead = ScriptedModel(
        ["", "lead done"],
        tool_calls=[[ToolCall(id="d1", name="delegate",
                              arguments={"tasks": [task("h1", "helper")]})], []],
    )  # fmt: skip
    parent = delegating(task("t1", "lead"))
    nested = specialist("lead", specialists=[specialist("helper")])
    the_flow = flow({"specialists": [nested], "delegation": {"max_depth": max_depth}})
    run_id, _ = await run(engine, the_flow, team(parent, lead=lead, helper=helper))

    (told,) = [m for m in lead.requests[1].messages if m.role == "tool"]
    if max_depth == 1:
        assert told.is_error
        assert "would nest 2 deep, beyond max_depth 1" in told.content
        assert helper.requests == []
    else:
        assert json.loads(told.content) == [
            {"id": "h1", "specialist": "helper", "ok": True, "result": "helper did: work on h1"}
        ]
        assert "lineage: agent/t1/h1" in helper.requests[0].messages[0].content
        usage = [u["model"] for u in await engine.usage(run_id)]
        assert "scripted (specialist helper)" in usage


# --- running -------------------------------------------------------------------------------------


async def test_a_schema_failure_is_that_tasks_error(engine: AsyncEngine) -> None:
    tracker = Tracker()
    scorer = tracker.model("scorer", answer=lambda _: "not json")
    writer = tracker.model("writer")
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    parent = delegating(task("t1", "scorer"), task("t2", "writer"))
    the_flow = flow(
        {"specialists": [specialist("scorer", output_schema=schema), specialist("writer")]}
    )
    await run(engine, the_flow, team(parent, scorer=scorer, writer=writer))

    (failed, written), is_error = delegate_result(parent)
    assert not is_error
    assert failed["ok"] is False and failed["error"]["type"] == "OutputValidationError"
    assert written == {"id": "t2", "specialist": "writer", "ok": True,
                       "result": "writer did: work on t2"}  # fmt: skip
    assert len(scorer.requests) == 3  # told twice, then failed


async def test_a_child_crossing_its_budget_fails_only_its_task(engine: AsyncEngine) -> None:
    looping = ScriptedModel(
        handler=lambda _: Message.assistant("", tool_calls=(ToolCall(name="lookup"),))
    )
    parent = delegating(task("t1", "looper"))
    the_flow = flow(
        {
            "tools": [{"name": "lookup", "script": LOOKUP}],
            "delegation": {"allow": ["lookup"]},
            "specialists": [specialist("looper", tools=["lookup"], budget={"max_iterations": 2})],
        }
    )
    await run(engine, the_flow, team(parent, looper=looping))
    ((entry,), _) = delegate_result(parent)
    assert entry["ok"] is False
    assert (entry["error"]["type"], entry["error"]["limit"]) == ("LimitExceeded", "max_iterations")


async def test_concurrency_is_bounded(engine: AsyncEngine) -> None:
    tracker = Tracker()
    worker = tracker.model("w", delay=0.1)
    parent = delegating(*(task(f"t{i}", "w") for i in range(5)))
    the_flow = flow(
        {"specialists": [specialist("w")],
         "delegation": {"max_fanout": 5, "max_concurrency": 2}}
    )  # fmt: skip
    await run(engine, the_flow, team(parent, w=worker))
    entries, _ = delegate_result(parent)
    assert [entry["id"] for entry in entries] == [f"t{i}" for i in range(5)]
    assert tracker.peak == 2


async def test_children_spend_from_the_parents_bounds(engine: AsyncEngine) -> None:
    child = ScriptedModel(["child answer"])
    parent = delegating(task("t1", "a"))
    the_flow = flow(
        {"limits": {"max_requests": 2},
         "specialists": [specialist("a", budget={"max_requests": 1})]}
    )  # fmt: skip
    with pytest.raises(RunFailed) as caught:
        await run(engine, the_flow, team(parent, a=child))
    error = caught.value.error
    assert (error["type"], error["limit"], error["value"]) == ("LimitExceeded", "max_requests", 2)
    assert len(parent.requests) == 1 and len(child.requests) == 1  # 1 + 1: no room for a third


async def test_childrens_tool_calls_count_against_the_parents_max_tool_calls(
    engine: AsyncEngine,
) -> None:
    child = ScriptedModel(
        ["", "looked up"],
        tool_calls=[[ToolCall(id=f"k{i}", name="lookup", arguments={"order_id": "A1"})
                     for i in range(2)], []],
    )  # fmt: skip
    two = [ToolCall(id=f"p{i}", name="lookup", arguments={"order_id": "B2"}) for i in range(2)]
    delegate = ToolCall(id="c1", name="delegate", arguments={"tasks": [task("t1", "a")]})
    parent = ScriptedModel(["", "", "never"], tool_calls=[[delegate], two, []])
    the_flow = flow(
        {"tools": [{"name": "lookup", "script": LOOKUP}],
         "delegation": {"allow": ["lookup"]},
         "limits": {"max_tool_calls": 4},
         "specialists": [specialist("a", tools=["lookup"], budget={"max_tool_calls": 2})]}
    )  # fmt: skip
    with pytest.raises(RunFailed) as caught:
        await run(engine, the_flow, team(parent, a=child))
    error = caught.value.error
    assert (error["type"], error["limit"], error["value"]) == ("LimitExceeded", "max_tool_calls", 4)
    # 1 delegate call + the child's 2 = 3 used: the parent's batch of 2 would make 5.
    assert len(child.requests) == 2 and len(parent.requests) == 2


async def test_a_resumed_delegation_does_not_run_finished_children_again(
    engine: AsyncEngine,
) -> None:
    fast_tracker = Tracker()
    fast = fast_tracker.model("fast")
    slow_calls: list[int] = []

    async def slow_answer(request: ModelRequest) -> Message:
        slow_calls.append(1)
        if len(slow_calls) == 1:
            await asyncio.sleep(30)  # cut off by the step's timeout
        return Message.assistant("slow answer")

    slow = ScriptedModel(handler=slow_answer)
    parent = delegating(task("t1", "fast"), task("t2", "slow"))
    the_flow = flow(
        {"specialists": [specialist("fast"), specialist("slow")]},
        timeout=1.5,
        retry={"attempts": 1, "backoff": 0.1},
    )
    run_id, result = await run(engine, the_flow, team(parent, fast=fast, slow=slow))

    assert result == "done"
    assert len(fast.requests) == 1 and len(slow_calls) == 2
    jobs = await engine.jobs(run_id)
    assert [job.attempt for job in jobs] == [1, 2]  # the first attempt timed out mid-delegation
    entries, _ = delegate_result(parent)
    assert [(e["id"], e["ok"], e["result"]) for e in entries] == [
        ("t1", True, "fast did: work on t1"),
        ("t2", True, "slow answer"),
    ]
    assert len(parent.requests) == 2  # the parent's delegating turn was not asked again


# --- load time -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "problem"),
    [
        ({"specialists": [specialist("a", tools=["missing"])]},
         "specialist 'a' names the tool 'missing', which the step's agent does not have"),
        ({"specialists": [specialist("a"), specialist("a")]},
         "specialist names of the step's agent must be unique; repeated: a"),
        ({"tools": [{"name": "pay", "script": LOOKUP, "requires_approval": True}],
          "specialists": [specialist("a", tools=["pay"])]},
         "specialists run unattended"),
        ({"specialists": [specialist("a", tools=["lookup"],
                                     specialists=[specialist("b", tools=["echo"])])]},
         "specialist 'b' names the tool 'echo', which specialist 'a' does not have"),
        ({"limits": {"max_total_tokens": 100}, "specialists": [specialist("a")]},
         "specialist 'a' needs budget.max_total_tokens: the step's agent is bounded to 100"),
        ({"limits": {"max_requests": 4},
          "specialists": [specialist("a", budget={"max_requests": 5})]},
         "specialist 'a' has budget.max_requests 5, more than the 4 of the step's agent"),
        ({"delegation": {"allow": ["nope"]}, "specialists": [specialist("a")]},
         "delegation.allow names unknown tools: nope"),
        ({"tools": [{"name": "delegate", "script": LOOKUP}], "specialists": [specialist("a")]},
         "a tool may not be named 'delegate'"),
    ],
    ids=["unknown-tool", "duplicate-names", "approval-tool", "nested-tool", "missing-budget",
         "larger-budget", "unknown-allow", "delegate-name"],
)  # fmt: skip
def test_load_time_problems(agent: dict[str, Any], problem: str) -> None:
    tools = [{"name": "lookup", "script": LOOKUP}, {"name": "echo", "script": ECHO}]
    settings = {"tools": tools, **agent}
    text = json.dumps(
        {"steps": [{"id": "agent", "ai_agent": {"model": "fake", **settings},
                    "inputs": {"user_message": "hi"}}]}
    )  # fmt: skip
    with pytest.raises(FlowValidationError) as caught:
        Flow.parse(text)
    assert problem in str(caught.value)
