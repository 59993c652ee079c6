"""Memory: which part of a thread the model sees, across runs, pauses and processes."""

from __future__ import annotations

import pytest

from tidemill import AgentInterrupt, AgentRuntime, ConfigurationError, agent, tool
from tidemill.agents.checkpoint import Checkpointer
from tidemill.agents.memory import (
    BufferMemory,
    NoMemory,
    SummaryMemory,
    WindowMemory,
    resolve_memory,
    start_of_turn,
)
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, ModelResponse, Role, ToolCall, Usage


@tool
def lookup(key: str) -> str:
    """Look something up."""
    return f"value of {key}"


@tool(requires_approval=True)
def write(key: str) -> str:
    """Write something, with approval."""
    return f"wrote {key}"


def contents(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if m.role != Role.SYSTEM]


async def run_three(runtime: AgentRuntime) -> None:
    for n in range(3):
        await runtime.arun(f"question {n}", thread_id="t")


async def test_the_default_sends_the_whole_thread() -> None:
    model = ScriptedModel(handler=lambda r: "ok")
    await run_three(AgentRuntime(model=model))
    assert contents(model.requests[2]) == ["question 0", "ok", "question 1", "ok", "question 2"]


async def test_off_sends_only_the_current_run() -> None:
    model = ScriptedModel(handler=lambda r: "ok")
    await run_three(AgentRuntime(model=model, memory=NoMemory()))
    assert contents(model.requests[2]) == ["question 2"]


async def test_window_keeps_recent_messages_starting_on_a_user_turn() -> None:
    model = ScriptedModel(handler=lambda r: "ok")
    await run_three(AgentRuntime(model=model, memory=WindowMemory(size=4)))
    # The last 4 are [ok, question 1, ok, question 2]; the window starts on a user turn.
    assert contents(model.requests[2]) == ["question 1", "ok", "question 2"]


async def test_window_never_splits_a_tool_call_from_its_result() -> None:
    def handler(request: ModelRequest) -> Message | str:
        if request.messages[-1].role == Role.USER:
            return Message.assistant(
                "", tool_calls=(ToolCall(name="lookup", arguments={"key": "k"}),)
            )
        return "done"

    model = ScriptedModel(handler=handler)
    runtime = AgentRuntime(model=model, tools=[lookup], memory=WindowMemory(size=2))
    await runtime.arun("first", thread_id="t")
    await runtime.arun("second", thread_id="t")
    for request in model.requests:
        sent = [m for m in request.messages if m.role != Role.SYSTEM]
        assert sent[0].role == Role.USER
        called = {c.id for m in sent for c in m.tool_calls}
        answered = {m.tool_call_id for m in sent if m.role == Role.TOOL}
        assert answered <= called
    # A run's own tool loop longer than the window still shows the model its task.
    assert contents(model.requests[-1])[0] == "second"


def test_start_of_turn() -> None:
    msgs = [Message.user("a"), Message.assistant("b"), Message.user("c"), Message.assistant("d")]
    assert start_of_turn(msgs, 1) == 2
    assert start_of_turn(msgs, 3) == 2  # no user turn after 3: back to the last one
    assert start_of_turn(msgs, -5) == 0


def summarising_model() -> ScriptedModel:
    def handler(request: ModelRequest) -> ModelResponse | str:
        system = request.messages[0].content if request.messages[0].role == Role.SYSTEM else ""
        if system.startswith("Summarise the conversation"):
            count = request.messages[-1].content.count("\n") + 1
            return ModelResponse(
                message=Message.assistant(f"SUMMARY of {count} lines"),
                usage=Usage(requests=1, input_tokens=50, output_tokens=5),
            )
        return "ok"

    return ScriptedModel(handler=handler)


async def test_summary_condenses_older_turns_once_and_keeps_it_in_the_journal(
    checkpointer: Checkpointer,
) -> None:
    model = summarising_model()
    memory = SummaryMemory(max_messages=4, keep_last=2)
    runtime = AgentRuntime(model=model, memory=memory, checkpointer=checkpointer)
    for n in range(3):
        await runtime.arun(f"question {n}", thread_id="t")
    # Before run 2 the thread held 5 messages (> 4): questions 0-1 were summarised.
    summary_calls = [r for r in model.requests if "Summarise" in r.messages[0].content]
    assert len(summary_calls) == 1
    assert "user: question 0" in summary_calls[0].messages[-1].content
    last = model.requests[-1]
    assert last.messages[0].role == Role.SYSTEM
    assert "SUMMARY of 4 lines" in last.messages[0].content
    assert contents(last) == ["question 2"]
    kinds = [r.event.kind for r in await runtime.ahistory("t")]
    assert kinds.count("memory_summarized") == 1
    # Another runtime on the same journal sends the same view, without summarising again.
    again = summarising_model()
    other = AgentRuntime(model=again, memory=memory, checkpointer=checkpointer)
    response = await other.arun("question 3", thread_id="t")
    assert not any("Summarise" in r.messages[0].content for r in again.requests)
    assert "SUMMARY of 4 lines" in again.requests[0].messages[0].content
    assert contents(again.requests[0]) == ["question 2", "ok", "question 3"]
    assert response.usage.requests == 1


async def test_the_summary_costs_usage_and_shows_as_a_step() -> None:
    model = summarising_model()
    runtime = AgentRuntime(model=model, memory=SummaryMemory(max_messages=2, keep_last=1))
    await runtime.arun("a", thread_id="t")
    response = await runtime.arun("b", thread_id="t")
    assert response.steps[0].note == "[memory] summarised 2 message(s)"
    assert response.usage.requests == 2
    assert response.usage.input_tokens >= 50


async def test_resuming_never_duplicates_history(checkpointer: Checkpointer) -> None:
    calls = (
        ToolCall(name="lookup", arguments={"key": "a"}),
        ToolCall(name="write", arguments={"key": "b"}),
    )
    model = ScriptedModel(["", "done"], tool_calls=[calls, []])
    runtime = AgentRuntime(model=model, tools=[lookup, write], checkpointer=checkpointer)
    with pytest.raises(AgentInterrupt):
        await runtime.arun("only once", thread_id="t")
    response = await runtime.aresume("t", approved=True)
    final = model.requests[-1].messages
    assert [m.content for m in final if m.role == Role.USER] == ["only once"]
    assert [len(m.tool_calls) for m in final if m.role == Role.ASSISTANT] == [2]
    assert sorted(m.tool_call_id or "" for m in final if m.role == Role.TOOL) == sorted(
        c.id for c in calls
    )
    assert [m.role for m in response.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.ASSISTANT,
    ]


def test_the_builder_names_memories() -> None:
    assert isinstance(agent().llm("fake").memory().build().memory, WindowMemory)
    assert agent().llm("fake").memory("window", size=3).describe()["memory"] == {
        "kind": "window",
        "size": 3,
    }
    assert isinstance(agent().llm("fake").build().memory, BufferMemory)
    assert isinstance(resolve_memory("off"), NoMemory)
    assert isinstance(resolve_memory("summary", max_messages=10, keep_last=3), SummaryMemory)


@pytest.mark.parametrize(
    ("spec", "config", "message"),
    [
        ("windw", {}, "Did you mean 'window'"),
        ("window", {"size": 0}, "at least 1 message"),
        ("window", {"length": 3}, "Bad option"),
        ("summary", {"max_messages": 3, "keep_last": 3}, "max_messages > keep_last"),
    ],
)
def test_bad_memories_are_refused(spec: str, config: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        agent().memory(spec, **config)
