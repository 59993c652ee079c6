"""Guardrails and tracing, wired into runs: input, output, streams, spans."""

from __future__ import annotations

import pytest

from tidemill import AgentRuntime, GuardrailViolation, agent, tool
from tidemill.agents.checkpoint import MemoryCheckpointer
from tidemill.agents.guardrails import RuleGuardrail
from tidemill.agents.tracing import MemoryTracer
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, Role, StreamEvent, TextDelta, ToolCall

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def boom() -> int:
    """Always fails."""
    raise RuntimeError("kaboom")


def guarded(model: ScriptedModel, action: str, checkpointer: MemoryCheckpointer) -> AgentRuntime:
    return AgentRuntime(
        model=model,
        guardrail=RuleGuardrail(on_violation=action),  # type: ignore[arg-type]
        checkpointer=checkpointer,
    )


async def test_input_is_redacted_before_it_is_journaled_or_sent() -> None:
    model = ScriptedModel(["noted"])
    checkpointer = MemoryCheckpointer()
    await guarded(model, "redact", checkpointer).arun("Mail me at ann@example.org", thread_id="t")
    assert model.requests[0].messages[-1].content == "Mail me at [EMAIL]"
    [first] = [r.event for r in await checkpointer.read("t")][:1]
    assert first.kind == "user_message"
    assert first.messages[0].content == "Mail me at [EMAIL]"  # type: ignore[union-attr]


async def test_blocked_input_stores_nothing() -> None:
    model = ScriptedModel(["never"])
    checkpointer = MemoryCheckpointer()
    with pytest.raises(GuardrailViolation) as info:
        await guarded(model, "block", checkpointer).arun(f"my key is {SECRET}", thread_id="t")
    assert info.value.side == "input"
    assert SECRET not in str(info.value)
    assert model.requests == []
    assert await checkpointer.read("t") == []


async def test_output_is_redacted_in_the_answer_and_the_journal() -> None:
    checkpointer = MemoryCheckpointer()
    model = ScriptedModel(["Call +1 415 555 0100 or mail ann@example.org."])
    response = await guarded(model, "redact", checkpointer).arun("Contact?", thread_id="t")
    assert response.output == "Call [PHONE] or mail [EMAIL]."
    journal = [r.event for r in await checkpointer.read("t")]
    assert all("ann@example.org" not in e.model_dump_json() for e in journal)


async def test_blocked_output_fails_the_run_and_the_thread_goes_on() -> None:
    checkpointer = MemoryCheckpointer()
    model = ScriptedModel([f"Here: {SECRET}", "Sorry, I cannot share that."])
    runtime = guarded(model, "block", checkpointer)
    with pytest.raises(GuardrailViolation) as info:
        await runtime.arun("Key?", thread_id="t")
    assert info.value.side == "output"
    assert info.value.response is not None
    state = await runtime.astate("t")
    assert state is not None and state.status == "failed"
    assert all(SECRET not in r.event.model_dump_json() for r in await checkpointer.read("t"))
    assert (await runtime.arun("Then what?", thread_id="t")).output == (
        "Sorry, I cannot share that."
    )


async def test_a_stream_never_lets_the_raw_text_out() -> None:
    model = ScriptedModel(["Write to ann@example.org today or call +44 20 7946 0958 now."])
    runtime = guarded(model, "redact", MemoryCheckpointer())
    events = [e async for e in runtime.astream("Contact?")]
    text = "".join(e.delta for e in events if isinstance(e, TextDelta))
    assert text == "Write to [EMAIL] today or call [PHONE] now."
    assert events[-1].type == "done"
    assert events[-1].response.output == text  # type: ignore[union-attr]


async def test_a_blocked_stream_stops_before_the_secret() -> None:
    model = ScriptedModel([f"The key is {SECRET} so use it."])
    runtime = guarded(model, "block", MemoryCheckpointer())
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async for event in runtime.astream("Key?"):
            seen.append(event)

    with pytest.raises(GuardrailViolation):
        await consume()
    streamed = "".join(e.delta for e in seen if isinstance(e, TextDelta))
    assert SECRET[:12] not in streamed
    assert seen[-1].type == "stopped"


def calling(*calls: ToolCall) -> ScriptedModel:
    def handler(request: ModelRequest) -> Message | str:
        if request.messages[-1].role == Role.USER:
            return Message.assistant("", tool_calls=calls)
        return "done"

    return ScriptedModel(handler=handler)


async def test_spans_nest_run_model_and_tool_calls() -> None:
    tracer = MemoryTracer()
    model = calling(
        ToolCall(name="add", arguments={"a": 1, "b": 2}), ToolCall(name="boom", arguments={})
    )
    runtime = AgentRuntime(model=model, tools=[add, boom], tracer=tracer, name="calc")
    response = await runtime.arun("go", thread_id="t1")
    tree = tracer.tree()
    assert len(tree) == 1
    run_name, children = tree[0]
    assert run_name == "invoke_agent calc"
    names = [name for name, _ in children]
    assert names.count("chat scripted") == 2
    assert sorted(n for n in names if n.startswith("execute_tool")) == [
        "execute_tool add",
        "execute_tool boom",
    ]
    run = tracer.find("invoke_agent calc")
    assert run.attributes["gen_ai.conversation.id"] == "t1"
    assert run.attributes["gen_ai.usage.input_tokens"] == response.usage.input_tokens
    assert tracer.find("execute_tool boom").error_type == "RuntimeError"
    assert tracer.find("execute_tool add").error_type is None


def test_spans_nest_under_the_sync_stream_too() -> None:
    tracer = MemoryTracer()
    bot = (
        agent()
        .llm(calling(ToolCall(name="add", arguments={"a": 1, "b": 1})))
        .tool(add)
        .observe(tracer)
    )
    events = list(bot.stream("go"))
    assert events[-1].type == "done"
    [(run_name, children)] = tracer.tree()
    assert run_name == "invoke_agent agent"
    assert [name for name, _ in children] == [
        "chat scripted",
        "execute_tool add",
        "chat scripted",
    ]


def test_describe_names_the_guardrail_and_tracer() -> None:
    bot = agent().llm("fake").guardrails(on_violation="block").observe("memory")
    described = bot.describe()
    assert described["guardrail"] is not None
    assert described["tracer"] is not None
