"""The graph runtime's spans: a run, its model calls and its tool calls, nested."""

from __future__ import annotations

import pytest
from graph_agents import add, explode, graph_runtime, payer, payments

from tidemill import AgentInterrupt, agent
from tidemill.agents.checkpoint import MemoryCheckpointer
from tidemill.agents.graph import GraphRuntime
from tidemill.agents.tracing import MemoryTracer
from tidemill.llm import ScriptedModel
from tidemill.types import ToolCall


def calling(*calls: ToolCall) -> ScriptedModel:
    return ScriptedModel(["", "It is 5."], tool_calls=[list(calls), []], strict=True)


async def test_spans_nest_the_run_its_model_calls_and_tool_calls() -> None:
    tracer = MemoryTracer()
    runtime = GraphRuntime(
        model=calling(
            ToolCall(name="add", arguments={"a": 2, "b": 3}),
            ToolCall(name="explode", arguments={}),
        ),
        tools=[add, explode],
        tracer=tracer,
        name="calc",
    )
    response = await runtime.arun("2+3?", thread_id="t1")
    assert response.output == "It is 5."

    [(run_name, children)] = tracer.tree()
    assert run_name == "invoke_agent calc"
    names = [name for name, _ in children]
    assert names[0] == "chat scripted" and names[-1] == "chat scripted"
    assert sorted(names[1:-1]) == ["execute_tool add", "execute_tool explode"]
    run = tracer.find("invoke_agent calc")
    assert run.ended
    assert run.attributes["gen_ai.conversation.id"] == "t1"
    assert run.attributes["gen_ai.usage.input_tokens"] == response.usage.input_tokens
    assert tracer.find("execute_tool explode").error_type == "ValueError"
    assert tracer.find("execute_tool add").error_type is None
    assert all(span.ended for span in tracer.spans)


def test_observe_on_a_graph_agent_reaches_the_graph_runtime() -> None:
    tracer = MemoryTracer()
    bot = (
        agent()
        .llm(calling(ToolCall(name="add", arguments={"a": 2, "b": 3})))
        .tool(add)
        .graph()
        .observe(tracer)
    )
    assert bot.run("2+3?", thread_id="t").output == "It is 5."
    assert tracer.tree() == [
        (
            "invoke_agent agent",
            [("chat scripted", []), ("execute_tool add", []), ("chat scripted", [])],
        )
    ]
    bot.close()


async def test_a_pause_and_its_resume_are_traced_as_two_runs() -> None:
    payments.clear()
    tracer = MemoryTracer()
    call = ToolCall(id="c1", name="pay", arguments={"to": "bob", "amount": 5})
    runtime = graph_runtime(MemoryCheckpointer(), payer(call), tracer=tracer)
    with pytest.raises(AgentInterrupt):
        await runtime.arun("pay bob", thread_id="t")
    assert tracer.tree() == [("invoke_agent agent", [("chat scripted", [])])]
    assert tracer.find("invoke_agent agent").ended

    await runtime.aresume("t", approved=True)
    assert payments == [("bob", 5)]
    resumed = tracer.roots()[1]
    assert resumed.name == "invoke_agent agent"
    assert [child.name for child in tracer.children(resumed)] == [
        "execute_tool pay",
        "chat scripted",
    ]
    assert all(span.attributes["gen_ai.conversation.id"] == "t" for span in tracer.roots())
