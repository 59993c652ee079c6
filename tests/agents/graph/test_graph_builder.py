"""`.graph()` on the builder: the same agent, run on LangGraph."""

from __future__ import annotations

import pydantic
import pytest

from tidemill import ConfigurationError, ToolCall, agent, tool
from tidemill.agents.graph import GraphRuntime


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


def test_what_the_graph_runtime_cannot_do_is_refused_at_build() -> None:
    class Out(pydantic.BaseModel):
        x: int

    with pytest.raises(ConfigurationError, match=r"does not support output\(\)"):
        agent().llm("fake").output(Out).graph().build()
    with pytest.raises(ConfigurationError, match=r"memory\(\), guardrails\(\)"):
        agent().llm("fake").memory().guardrails().graph().build()


def test_graph_only_methods_need_a_graph() -> None:
    with pytest.raises(ConfigurationError, match="has no graph"):
        agent().llm("fake").native_graph()
    with pytest.raises(ConfigurationError, match="built-in loop"):
        agent().llm("fake").graph().broadcast("x")
    with pytest.raises(ConfigurationError, match=r"does not support agent\(\)"):
        agent().llm("fake").agent("w", agent().llm("fake")).graph().build()
