"""Specialists: delegation as tools, bounded; broadcast and pipeline."""

from __future__ import annotations

import asyncio

import pytest

from tidemill import AgentRuntime, ConfigurationError, LimitExceeded, agent
from tidemill.agents import AgentTool, Delegation, UsageLimits
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.tools import ToolContext
from tidemill.types import Message, Role, ToolCall


def delegate(name: str, task: str) -> ToolCall:
    return ToolCall(name=name, arguments={"task": task})


def supervisor_model(*calls: ToolCall) -> ScriptedModel:
    """Delegates `calls` in one turn, then reports what came back."""

    def handler(request: ModelRequest) -> Message | str:
        if request.messages[-1].role == Role.USER:
            return Message.assistant("Delegating.", tool_calls=calls)
        results = [m.content for m in request.messages if m.role == Role.TOOL]
        return "Report: " + " | ".join(results)

    return ScriptedModel(handler=handler)


def test_a_supervisor_delegates_and_the_child_sees_only_its_task() -> None:
    child_model = ScriptedModel(handler=lambda r: f"found {r.messages[-1].content}")
    boss_model = supervisor_model(delegate("researcher", "tide tables for Brest"))
    boss = (
        agent()
        .llm(boss_model)
        .system("Be thorough.")
        .agent("researcher", agent().llm(child_model), "Finds source material.")
    )
    response = boss.run("When is high tide?", thread_id="boss")
    assert response.output == "Report: found tide tables for Brest"
    [child_request] = child_model.requests
    assert [m.content for m in child_request.messages] == ["tide tables for Brest"]
    system = boss_model.requests[0].messages[0].content
    assert system.startswith("Be thorough.")
    assert "- researcher: Finds source material." in system
    assert response.usage.requests == 3  # two for the supervisor, one for the child
    assert boss.describe()["specialists"] == ["researcher"]


async def test_a_delegation_runs_once_even_when_its_call_runs_again() -> None:
    child_model = ScriptedModel(handler=lambda r: "answer")
    tool = AgentTool(agent().llm(child_model), name="helper")
    context = ToolContext(thread_id="t", call_id="c1", tool_name="helper", attempt=2)
    first = await tool.acall({"task": "do it"}, context)
    again = await tool.acall({"task": "do it"}, context)
    assert len(child_model.requests) == 1
    assert first == again


def test_nesting_is_bounded() -> None:
    grandchild = ScriptedModel(handler=lambda r: "deep answer")
    middle = (
        agent()
        .llm(supervisor_model(delegate("deeper", "go deeper")))
        .agent("deeper", agent().llm(grandchild))
    )
    top = (
        agent()
        .llm(supervisor_model(delegate("middle", "ask around")))
        .agent("middle", middle)
        .delegation(max_depth=1)
    )
    response = top.run("start")
    assert grandchild.requests == []
    assert "may not nest any deeper" in str(response.output)


def test_fan_out_per_turn_is_bounded() -> None:
    worker_model = ScriptedModel(handler=lambda r: "ok")
    calls = [delegate("w", f"job {n}") for n in range(3)]
    boss = agent().llm(supervisor_model(*calls)).agent("w", agent().llm(worker_model))
    response = boss.delegation(max_fan_out=2).run("split the work")
    assert len(worker_model.requests) == 2
    results = response.steps[0].tool_results
    assert sorted(r.is_error for r in results) == [False, False, True]
    assert any("at most 2 delegation(s) per turn" in r.content for r in results)


def test_concurrency_is_bounded() -> None:
    running = 0
    peak = 0

    async def slow(request: ModelRequest) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return "done"

    calls = [delegate("w", f"job {n}") for n in range(4)]
    boss = (
        agent()
        .llm(supervisor_model(*calls))
        .agent("w", agent().llm(ScriptedModel(handler=slow)))
        .delegation(max_fan_out=4, max_concurrency=2)
    )
    boss.run("go")
    assert peak == 2


def lookup() -> str:
    """Look something up."""
    return "x"


def test_each_child_has_a_budget_and_its_spending_rolls_up() -> None:
    child = (
        agent()
        .llm(
            "fake",
            responses=["", "never"],
            tool_calls=[[ToolCall(name="lookup", arguments={})], []],
        )
        .tool(lookup)
    )
    boss = (
        agent()
        .llm(supervisor_model(delegate("w", "spend a lot")))
        .agent("w", child)
        .delegation(child_limits=UsageLimits(requests=1))
    )
    response = boss.run("go")
    [result] = response.steps[0].tool_results
    assert result.is_error
    assert "requests limit of 1" in result.content
    assert response.usage.requests == 3  # the child's one request is counted


def test_broadcast_keeps_every_answer_when_one_fails() -> None:
    boss = (
        agent()
        .llm("fake")
        .agent("a", agent().llm("fake", responses=["A"]))
        .agent("b", agent().llm("fake", responses=[], strict=True))
        .agent("c", agent().llm("fake", responses=["C"]))
    )
    results = boss.broadcast("go")
    assert results["a"].output == "A"
    assert results["c"].output == "C"
    assert results["b"].metadata["error"] == "ScriptExhausted"
    assert "b failed" in results["b"].output


def test_broadcast_and_pipeline_give_each_specialist_the_child_budget() -> None:
    def talker() -> AgentRuntime:
        return AgentRuntime(model=ScriptedModel(handler=lambda r: "x" * 400))  # ~100 tokens out

    boss = (
        agent()
        .llm("fake")
        .agent("a", talker())
        .agent("b", talker())
        .delegation(child_limits=UsageLimits(output_tokens=50))
    )
    results = boss.broadcast("go")
    assert {r.metadata.get("error") for r in results.values()} == {"LimitExceeded"}
    with pytest.raises(LimitExceeded) as info:
        boss.pipeline("go", ["a", "b"])
    assert info.value.limit == "output_tokens"
    unbounded = agent().llm("fake").agent("a", talker())
    assert unbounded.broadcast("go")["a"].output == "x" * 400


def test_pipeline_chains_specialists() -> None:
    boss = (
        agent()
        .llm("fake")
        .agent("draft", agent().llm(ScriptedModel(handler=lambda r: "a draft")))
        .agent(
            "edit", agent().llm(ScriptedModel(handler=lambda r: f"edited {r.messages[-1].content}"))
        )
    )
    response = boss.pipeline("write", ["draft", "edit"])
    assert response.output == "edited a draft"
    assert [s.note for s in response.steps] == ["draft", "edit"]
    assert response.usage.requests == 2
    with pytest.raises(ConfigurationError, match="Unknown specialist"):
        boss.pipeline("write", ["draft", "nobody"])


def test_specialists_are_required_for_team_methods() -> None:
    with pytest.raises(ConfigurationError, match="no specialists"):
        agent().llm("fake").broadcast("go")
    with pytest.raises(ConfigurationError, match="already named"):
        agent().llm("fake").agent("x", agent().llm("fake")).agent("x", agent().llm("fake"))


def test_delegation_bounds_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_depth must be at least 1"):
        Delegation(max_depth=0)


async def test_a_runtime_is_a_worker_too() -> None:
    child = AgentRuntime(model=ScriptedModel(handler=lambda r: "from a runtime"))
    boss = AgentRuntime(
        model=supervisor_model(delegate("rt", "hello")),
        specialists=[AgentTool(child, name="rt", description="A runtime.")],
    )
    assert (await boss.arun("go")).output == "Report: from a runtime"


def test_a_specialists_tool_calls_count_against_the_supervisors_limit() -> None:
    from tidemill import LimitExceeded, tool

    @tool
    def lookup(order: str) -> str:
        """Look up an order."""
        return f"{order}: shipped"

    looks = [ToolCall(id=f"k{i}", name="lookup", arguments={"order": "A1"}) for i in range(2)]
    child_model = ScriptedModel(["", "both shipped"], tool_calls=[looks, []])
    again = ToolCall(id="b1", name="lookup", arguments={"order": "B2"})
    boss_model = ScriptedModel(
        ["", "", "never"], tool_calls=[[delegate("checker", "check A1")], [again], []]
    )
    boss = (
        agent()
        .llm(boss_model)
        .tool(lookup)
        .limits(tool_calls=3)
        .agent("checker", agent().llm(child_model).tool(lookup), "Checks orders.")
    )
    with pytest.raises(LimitExceeded) as caught:
        boss.run("Check A1 then B2.", thread_id="boss")
    assert caught.value.limit == "tool_calls"
    # The delegation (1) and the checker's calls (2) used the 3: the boss's own call is refused.
    assert len(child_model.requests) == 2 and len(boss_model.requests) == 2
