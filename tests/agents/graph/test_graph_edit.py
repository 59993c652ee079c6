"""Editing the agent graph: `native_graph()`, your nodes, `recompile()`."""

from __future__ import annotations

import pytest
from graph_agents import add
from langgraph.graph import StateGraph
from langgraph.types import interrupt

from tidemill import ConfigurationError
from tidemill.agents.graph import GraphRuntime, GraphState
from tidemill.llm import ScriptedModel
from tidemill.types import Message, Role, ToolCall

NOTE = "Critic: check the units."


def critic(state: GraphState) -> dict[str, list[Message]]:
    """Appends a note after every batch of tool results."""
    assert state["messages"][-1].role == Role.TOOL
    return {"messages": [Message.user(NOTE)]}


def two_turns() -> ScriptedModel:
    call = ToolCall(name="add", arguments={"a": 2, "b": 3})
    return ScriptedModel(["", "It is 5 (units: none)."], tool_calls=[[call], []], strict=True)


def test_the_native_graph_is_a_state_graph_with_agent_and_tools() -> None:
    graph = GraphRuntime(model=ScriptedModel()).native_graph()
    assert isinstance(graph, StateGraph)
    assert set(graph.nodes) == {"agent", "tools"}
    assert ("tools", "agent") in graph.edges


async def test_a_critic_node_after_tools_is_visited_once_recompiled() -> None:
    model = two_turns()
    runtime = GraphRuntime(model=model, tools=[add])
    graph = runtime.native_graph()
    graph.add_node("critic", critic)
    graph.edges.discard(("tools", "agent"))
    graph.add_edge("tools", "critic")
    graph.add_edge("critic", "agent")

    runtime.recompile()
    response = await runtime.arun("2+3?", thread_id="t")

    assert response.output == "It is 5 (units: none)."
    assert [m.content for m in response.messages] == [
        "2+3?",
        "",
        "5",
        NOTE,
        "It is 5 (units: none).",
    ]
    # The model saw the note before its answer.
    assert model.requests[1].messages[-1] == Message.user(NOTE)
    assert runtime.describe()["nodes"] == ["agent", "critic", "tools"]
    # The journal's view has the turns and calls; the graph's state has the note too.
    state = await runtime.astate("t")
    assert state is not None
    assert NOTE not in [m.content for m in state.messages]
    assert Message.user(NOTE) in (await runtime.agraph_state("t")).values["messages"]


async def test_edits_apply_only_after_recompile() -> None:
    model = two_turns()
    runtime = GraphRuntime(model=model, tools=[add])
    graph = runtime.native_graph()
    graph.add_node("critic", critic)
    graph.edges.discard(("tools", "agent"))
    graph.add_edge("tools", "critic")
    graph.add_edge("critic", "agent")
    response = await runtime.arun("2+3?")
    assert NOTE not in [m.content for m in response.messages]


async def test_a_node_returning_something_else_than_messages_is_refused() -> None:
    runtime = GraphRuntime(model=ScriptedModel(["hi"]))
    graph = runtime.native_graph()
    graph.add_node("shout", lambda state: {"messages": ["HI"]})
    graph.edges.discard(("__start__", "agent"))
    graph.add_edge("__start__", "shout")
    graph.add_edge("shout", "agent")
    runtime.recompile()
    with pytest.raises(ConfigurationError, match=r"returned str in `messages`"):
        await runtime.arun("go")


async def test_interrupts_of_your_own_nodes_are_refused() -> None:
    runtime = GraphRuntime(model=ScriptedModel(["hi"]))
    graph = runtime.native_graph()

    def ask(state: GraphState) -> dict[str, list[Message]]:
        return {"messages": [Message.user(str(interrupt("sure?")))]}

    graph.add_node("ask", ask)
    graph.edges.discard(("__start__", "agent"))
    graph.add_edge("__start__", "ask")
    graph.add_edge("ask", "agent")
    runtime.recompile()
    with pytest.raises(ConfigurationError, match="pauses only for tool calls"):
        await runtime.arun("go", thread_id="t")
    state = await runtime.astate("t")
    assert state is not None
    assert state.status == "running"  # nothing was journaled as finished
