"""Specialists on the graph runtime: delegation as tools, bounded, usage rolled up."""

from __future__ import annotations

import pytest

from tidemill import ConfigurationError, agent
from tidemill.agents import AgentTool, Delegation
from tidemill.agents.graph import GraphRuntime
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, Role, TextDelta, ToolCall


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


def echoing() -> ScriptedModel:
    return ScriptedModel(handler=lambda r: f"found {r.messages[-1].content}")


async def test_a_graph_supervisor_delegates_and_rolls_up_what_the_child_spent() -> None:
    child_model = echoing()
    boss_model = supervisor_model(delegate("researcher", "tide tables for Brest"))
    boss = GraphRuntime(
        model=boss_model,
        system_prompt="Be thorough.",
        specialists=[
            AgentTool(agent().llm(child_model), name="researcher", description="Finds sources.")
        ],
    )
    response = await boss.arun("When is high tide?", thread_id="boss")
    assert response.output == "Report: found tide tables for Brest"
    [child_request] = child_model.requests
    assert [m.content for m in child_request.messages] == ["tide tables for Brest"]
    system = boss_model.requests[0].messages[0].content
    assert system.startswith("Be thorough.\n\nYou lead a team of specialists.")
    assert "- researcher: Finds sources." in system
    assert response.usage.requests == 3  # two for the supervisor, one for the child
    [call] = response.steps[0].tool_calls
    child = await boss.specialists["researcher"].worker.astate(f"boss:researcher:{call.id}")
    assert child is not None
    assert child.status == "finished"
    described = boss.describe()
    assert described["specialists"] == ["researcher"]
    assert described["delegation"] == Delegation().describe()


async def test_delegations_past_the_fan_out_are_refused_to_the_model() -> None:
    child_model = echoing()
    calls = [delegate("helper", f"job {n}") for n in range(3)]
    boss = GraphRuntime(
        model=supervisor_model(*calls),
        specialists=[AgentTool(agent().llm(child_model), name="helper", description="Helps.")],
        delegation=Delegation(max_fan_out=2),
    )
    response = await boss.arun("go")
    assert len(child_model.requests) == 2
    refused = [r for r in response.steps[0].tool_results if r.is_error]
    assert len(refused) == 1
    assert refused[0].content.startswith("Not run: at most 2 delegation(s) per turn.")


async def test_a_graph_specialist_under_a_graph_supervisor_keeps_to_its_own_thread() -> None:
    child = GraphRuntime(model=echoing(), name="child", system_prompt="Search well.")
    boss = GraphRuntime(
        model=supervisor_model(delegate("child", "the almanac")),
        specialists=[AgentTool(child, name="child")],
    )
    text = [e.delta async for e in boss.astream("go", thread_id="boss") if isinstance(e, TextDelta)]
    # Only the supervisor's own text is streamed, not the child's graph's.
    assert "".join(text) == "Delegating.Report: found the almanac"
    boss_history = await boss.ahistory("boss")
    assert {r.event.checkpoint_ns for r in boss_history if r.event.kind == "graph_checkpoint"} == {
        ""
    }
    state = await boss.astate("boss")
    assert state is not None
    [call_id] = [m.tool_call_id for m in state.messages if m.role == Role.TOOL]
    child_state = await child.astate(f"boss:child:{call_id}")
    assert child_state is not None
    assert (child_state.status, child_state.output) == ("finished", "found the almanac")
    assert state.usage.requests == 3
    # Its description is its system prompt's first line.
    assert boss.specialists["child"].description == "Search well."


async def test_nesting_deeper_than_allowed_is_refused() -> None:
    grandchild_model = echoing()
    middle = GraphRuntime(
        model=supervisor_model(delegate("leaf", "deep work")),
        specialists=[AgentTool(agent().llm(grandchild_model), name="leaf")],
    )
    boss = GraphRuntime(
        model=supervisor_model(delegate("middle", "work")),
        specialists=[AgentTool(middle, name="middle", delegation=Delegation(max_depth=1))],
        delegation=Delegation(max_depth=1),
    )
    response = await boss.arun("go")
    assert grandchild_model.requests == []
    assert "may not nest any deeper" in str(response.output)


async def test_broadcast_and_pipeline_run_the_specialists() -> None:
    boss = GraphRuntime(
        model=ScriptedModel(),
        specialists=[
            AgentTool(agent().llm("fake", responses=["A"]), name="a"),
            AgentTool(GraphRuntime(model=echoing()), name="b"),
        ],
    )
    answers = await boss.abroadcast("go")
    assert {name: r.output for name, r in answers.items()} == {"a": "A", "b": "found go"}
    chained = await boss.apipeline("go", ["a", "b"])
    assert chained.output == "found A"
    assert chained.thread_id.startswith("pipeline_")
    with pytest.raises(ConfigurationError, match="Unknown specialist"):
        await boss.apipeline("go", ["c"])
    with pytest.raises(ConfigurationError, match="no specialists"):
        await GraphRuntime(model=ScriptedModel()).abroadcast("go")
    assert boss.broadcast("again")["a"].output == "A"
    boss.close()
