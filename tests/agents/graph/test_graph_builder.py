"""`.graph()` on the builder: the same agent, run on LangGraph."""

from __future__ import annotations

import pydantic
import pytest

from tidemill import ConfigurationError, ToolCall, agent, tool
from tidemill.agents.graph import GraphRuntime
from tidemill.llm import ScriptedModel


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_graph_builds_a_graph_runtime_that_runs_the_same_agent() -> None:
    bot = (
        agent()
        .llm(
            "fake",
            responses=["", "3"],
            tool_calls=[[ToolCall(name="add", arguments={"a": 1, "b": 2})], []],
        )
        .tool(add)
        .graph()
    )
    assert isinstance(bot.build(), GraphRuntime)
    response = bot.run("1 + 2?")
    assert response.output == "3"
    assert response.steps[0].tool_results[0].content == "3"
    assert bot.describe()["runtime"] == "langgraph"
    graph = bot.native_graph()
    assert {"agent", "tools"} <= set(graph.nodes)
    bot.recompile()


def test_output_memory_guardrails_and_specialists_build_and_work_on_the_graph() -> None:
    """Once refused at build, each now works through the builder as in the built-in loop."""

    class Out(pydantic.BaseModel):
        x: int

    typed = agent().llm("fake", responses=['{"x": "one"}', '{"x": 1}']).output(Out).graph()
    response = typed.run("x?")
    assert response.output == Out(x=1)
    assert typed.describe()["output_schema"] == Out.model_json_schema()

    model = ScriptedModel(["a1", "Mail ann@example.org"])
    guarded = agent().llm(model).memory("window", size=1).guardrails(on_violation="redact").graph()
    guarded.run("q1 from bob@example.org", thread_id="t")
    answer = guarded.run("q2", thread_id="t")
    assert answer.output == "Mail [EMAIL]"
    assert [m.content for m in model.requests[1].messages] == ["q2"]
    assert model.requests[0].messages[-1].content == "q1 from [EMAIL]"
    assert guarded.describe()["memory"] == {"kind": "window", "size": 1}

    helper = agent().llm("fake", responses=["helped"])
    boss = (
        agent()
        .llm(
            "fake",
            responses=["", "done"],
            tool_calls=[[ToolCall(name="helper", arguments={"task": "help"})], []],
        )
        .agent("helper", helper, "Helps.")
        .graph()
    )
    runtime = boss.build()
    assert isinstance(runtime, GraphRuntime)
    assert runtime.name == "supervisor"
    response = boss.run("go")
    assert response.output == "done"
    assert response.steps[0].tool_results[0].content == "helped"
    assert response.usage.requests == 3


def test_graph_only_methods_need_a_graph() -> None:
    with pytest.raises(ConfigurationError, match="has no graph"):
        agent().llm("fake").native_graph()
    # Specialists work on either runtime; without any, broadcast is refused on both.
    with pytest.raises(ConfigurationError, match="has no specialists"):
        agent().llm("fake").graph().broadcast("x")
    with pytest.raises(ConfigurationError, match="has no specialists"):
        agent().llm("fake").broadcast("x")


def test_the_builder_broadcasts_and_pipelines_on_a_graph_agent() -> None:
    team = (
        agent()
        .llm("fake")
        .graph()
        .agent("a", agent().llm("fake", responses=["from a"]))
        .agent("b", agent().llm("fake", handler=lambda r: f"b saw {r.messages[-1].content}"))
    )
    assert {n: r.output for n, r in team.broadcast("go").items()} == {
        "a": "from a",
        "b": "b saw go",
    }
    assert team.pipeline("go", ["a", "b"]).output == "b saw from a"
    team.close()
