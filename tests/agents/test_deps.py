"""`deps=`: live objects a run hands its tools, never journaled."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tidemill import AgentInterrupt, ToolCall, agent, tool
from tidemill.agents.checkpoint import SQLiteCheckpointer
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.tools import ToolContext
from tidemill.types import Message, Role, ToolCallEnd


@dataclass
class Shop:
    """What the tools of one request need: a connection-like object and the user."""

    user: str
    secret: str = "sk-live-do-not-journal"
    orders: list[str] = field(default_factory=list)
    lock: object = field(default_factory=threading.Lock)
    """Not JSON, not picklable: a journal holding it would fail at once."""


@tool
def place_order(item: str, ctx: ToolContext[Shop]) -> str:
    """Order an item for the current user.

    Args:
        item: What to order.
    """
    ctx.deps.orders.append(item)
    return f"ordered {item} for {ctx.deps.user}"


@tool(requires_approval=True)
def refund(order: str, ctx: ToolContext[Shop]) -> str:
    """Refund an order.

    Args:
        order: The order to refund.
    """
    return f"refunded {order} by {ctx.deps.user}"


@tool
def who(ctx: ToolContext) -> str:
    """Who is asking; 'nobody' when the run has no deps."""
    return "nobody" if ctx.deps is None else str(ctx.deps.user)


def one_call(name: str, **arguments: str) -> ScriptedModel:
    return ScriptedModel(["", "done"], tool_calls=[[ToolCall(name=name, arguments=arguments)], []])


def test_the_tools_of_a_run_get_its_deps_and_the_model_never_sees_them() -> None:
    model = one_call("place_order", item="kettle")
    bot = agent().llm(model).tool(place_order)
    shop = Shop(user="ana")
    response = bot.run("Order a kettle.", deps=shop)
    assert shop.orders == ["kettle"]
    assert response.steps[0].tool_results[0].content == "ordered kettle for ana"
    # The schema the model is given has no trace of the context parameter.
    (definition,) = model.requests[0].tools
    properties = definition.parameters["properties"]
    assert isinstance(properties, dict) and list(properties) == ["item"]


def test_a_run_without_deps_gives_its_tools_none() -> None:
    response = agent().llm(one_call("who")).tool(who).run("Who?")
    assert response.steps[0].tool_results[0].content == "nobody"


async def test_deps_are_never_journaled(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    bot = agent().llm(one_call("place_order", item="kettle")).tool(place_order)
    bot.checkpoint("sqlite", path=path)
    shop = Shop(user="ana")
    await bot.arun("Order a kettle.", thread_id="t", deps=shop)
    await bot.aclose()
    with sqlite3.connect(path) as db:
        payloads = [row[0] for row in db.execute("SELECT payload FROM tidemill_journal")]
    assert payloads
    assert not any("sk-live" in p or "Shop(" in p for p in payloads)


async def test_a_resume_hands_the_tools_its_own_deps(tmp_path: Path) -> None:
    """After a pause (possibly in another process) the first run's objects are gone."""
    path = tmp_path / "journal.db"
    model = one_call("refund", order="A-1")
    bot = agent().llm(model).tool(refund).checkpoint(SQLiteCheckpointer(path))
    with pytest.raises(AgentInterrupt):
        await bot.arun("Refund A-1.", thread_id="t", deps=Shop(user="ana"))
    later = agent().llm(model).tool(refund).checkpoint(SQLiteCheckpointer(path))
    response = await later.aresume("t", approved=True, deps=Shop(user="bo"))
    assert response.steps[0].tool_results[0].content == "refunded A-1 by bo"
    await bot.aclose()
    await later.aclose()


def asks_who() -> ScriptedModel:
    """Calls `who`, then answers with what it returned."""

    def handler(request: ModelRequest) -> Message | str:
        last = request.messages[-1]
        if last.role == Role.TOOL:
            return f"it is {last.content}"
        return Message.assistant(tool_calls=(ToolCall(name="who"),))

    return ScriptedModel(handler=handler)


def test_streaming_runs_pass_deps_too() -> None:
    bot = agent().llm(one_call("who")).tool(who)
    events = list(bot.stream("Who?", deps=Shop(user="cy")))
    assert [e.result.content for e in events if isinstance(e, ToolCallEnd)] == ["cy"]
    text = "".join(agent().llm(asks_who()).tool(who).stream_text("Who?", deps=Shop("cy")))
    assert text == "it is cy"


def test_specialists_get_the_supervisors_deps() -> None:
    def boss(request: ModelRequest) -> Message | str:
        if request.messages[-1].role == Role.USER:
            call = ToolCall(name="clerk", arguments={"task": "who is asking?"})
            return Message.assistant(tool_calls=(call,))
        return "clerk says " + request.messages[-1].content

    clerk = agent().llm(asks_who()).tool(who)
    team = agent().llm(ScriptedModel(handler=boss)).agent("clerk", clerk, "Answers questions.")
    assert team.run("Ask the clerk.", deps=Shop(user="dee")).output == "clerk says it is dee"
    assert team.run("Ask the clerk.").output == "clerk says it is nobody"


def test_broadcast_and_pipeline_give_every_specialist_the_deps() -> None:
    team = (
        agent()
        .llm("fake")
        .agent("a", agent().llm(asks_who()).tool(who), "First.")
        .agent("b", agent().llm(asks_who()).tool(who), "Second.")
    )
    answers = team.broadcast("Who?", deps=Shop(user="eve"))
    assert {name: r.output for name, r in answers.items()} == {"a": "it is eve", "b": "it is eve"}
    chained = team.pipeline("Who?", ["a", "b"], deps=Shop(user="fay"))
    assert [step.thought for step in chained.steps] == ["it is fay", "it is fay"]


def test_the_graph_runtime_passes_deps_too() -> None:
    pytest.importorskip("langgraph")
    bot = agent().llm(one_call("place_order", item="mug")).tool(place_order).graph()
    shop = Shop(user="gil")
    response = bot.run("Order a mug.", deps=shop)
    assert shop.orders == ["mug"]
    assert response.steps[0].tool_results[0].content == "ordered mug for gil"


def test_a_tool_called_directly_takes_deps_in_its_context() -> None:
    shop = Shop(user="hal")
    context = ToolContext(thread_id="direct", call_id="c1", tool_name="place_order", deps=shop)
    assert place_order.run(context, item="lamp").content == "ordered lamp for hal"
    assert shop.orders == ["lamp"]
