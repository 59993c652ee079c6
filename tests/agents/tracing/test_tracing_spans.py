"""Spans: names, nesting (tasks, threads, generators), attributes, errors, content capture."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from tidemill._sync import LoopThread
from tidemill.agents.tracing import (
    BaseTracer,
    ConsoleTracer,
    MemoryTracer,
    NullTracer,
    OTelTracer,
    Span,
    Tracer,
    current_span,
    provider_name,
    resolve_tracer,
)
from tidemill.errors import AgentInterrupt, ConfigurationError
from tidemill.types import Message, ModelResponse, ToolCall, ToolResult, Usage

SECRET = "my card is 4111 1111 1111 1111"
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


def response(text: str = "Done.", *, calls: tuple[ToolCall, ...] = ()) -> ModelResponse:
    return ModelResponse(
        message=Message.assistant(text, tool_calls=calls),
        usage=Usage(requests=1, input_tokens=120, output_tokens=31, cache_read_tokens=100),
        finish_reason="tool_calls" if calls else "stop",
        model="gpt-4o-mini-2024-07-18",
        response_id="chatcmpl-1",
    )


def run_once(tracer: Tracer, *, fail_tool: bool = False) -> Span:
    """One run: a model call asking for a tool, the tool, a final model call."""
    call = ToolCall(id="call_1", name="lookup", arguments={"q": SECRET})
    with tracer.agent_span(
        "support", thread_id="thread_1", run_id="run_1", model="gpt-4o-mini", provider="openai"
    ) as run:
        with tracer.model_span(
            "gpt-4o-mini",
            provider="openai",
            settings={"temperature": 0.2, "max_tokens": 256, "stop": ["END"]},
            messages=[Message.user(SECRET)],
        ) as chat:
            chat.record_response(response(calls=(call,)))
        with tracer.tool_span(call, description="Look up an order.") as tool:
            tool.record_result(
                ToolResult(call_id=call.id, name=call.name, content=SECRET, is_error=fail_tool)
            )
        with tracer.model_span("gpt-4o-mini", provider="openai") as chat:
            chat.record_response(response())
        run.record_usage(Usage(input_tokens=240, output_tokens=62))
        run.record_output("Done.")
    return run


def test_a_run_is_a_tree_of_model_and_tool_spans() -> None:
    tracer = MemoryTracer()
    run_once(tracer)
    assert tracer.tree() == [
        (
            "invoke_agent support",
            [("chat gpt-4o-mini", []), ("execute_tool lookup", []), ("chat gpt-4o-mini", [])],
        )
    ]
    assert [s.kind for s in tracer.spans] == ["agent", "model", "tool", "model"]
    assert all(s.ended and s.status == "ok" for s in tracer.finished)
    assert all(s.duration_ms is not None and s.duration_ms >= 0 for s in tracer.spans)
    assert len({s.span_id for s in tracer.spans}) == 4


def test_attributes_follow_the_genai_conventions() -> None:
    tracer = MemoryTracer()
    run = run_once(tracer)
    assert run.attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.conversation.id": "thread_1",
        "tidemill.run.id": "run_1",
        "gen_ai.usage.input_tokens": 240,
        "gen_ai.usage.output_tokens": 62,
    }
    chat = tracer.spans[1]
    assert chat.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.conversation.id": "thread_1",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 256,
        "gen_ai.request.stop_sequences": ("END",),
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 31,
        "gen_ai.usage.cache_read.input_tokens": 100,
    }
    tool = tracer.spans[2]
    assert tool.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Look up an order.",
    }


def test_no_content_is_recorded_by_default() -> None:
    tracer = MemoryTracer()
    run_once(tracer, fail_tool=True)
    for span in tracer.spans:
        assert not CONTENT_KEYS & set(span.attributes), span.name
        assert SECRET not in repr(span.attributes)
        assert SECRET not in (span.status_message or "")


def test_content_is_recorded_when_asked_for() -> None:
    tracer = MemoryTracer(capture_content=True)
    run = run_once(tracer)
    chat, tool = tracer.spans[1], tracer.spans[2]
    assert json.loads(str(chat.attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": SECRET}]}
    ]
    assert json.loads(str(chat.attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Done."},
                {"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": {"q": SECRET}},
            ],
            "finish_reason": "tool_calls",
        }
    ]
    assert json.loads(str(tool.attributes["gen_ai.tool.call.arguments"])) == {"q": SECRET}
    assert tool.attributes["gen_ai.tool.call.result"] == SECRET
    assert json.loads(str(run.attributes["gen_ai.output.messages"]))[0]["parts"] == [
        {"type": "text", "content": "Done."}
    ]


def test_tool_messages_are_shaped_as_tool_call_responses() -> None:
    tracer = MemoryTracer(capture_content=True)
    result = ToolResult(call_id="c1", name="add", content="3")
    with tracer.model_span("m", provider="openai", messages=[Message.tool(result)]) as chat:
        pass
    assert json.loads(str(chat.attributes["gen_ai.input.messages"])) == [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "result": "3"}]}
    ]


def test_a_failed_tool_result_marks_the_span_failed() -> None:
    tracer = MemoryTracer()
    run_once(tracer, fail_tool=True)
    tool = tracer.spans[2]
    assert (tool.status, tool.error_type) == ("error", "tool_error")
    assert tool.attributes["error.type"] == "tool_error"
    assert tool.status_message is None  # the result text is content


def test_an_exception_records_its_type_and_propagates() -> None:
    tracer = MemoryTracer()
    with (
        pytest.raises(ValueError, match="boom"),
        tracer.agent_span("bot") as run,
        tracer.model_span("m", provider="anthropic") as chat,
    ):
        raise ValueError("boom")
    assert (chat.status, chat.error_type, chat.status_message) == ("error", "ValueError", "boom")
    assert chat.attributes["error.type"] == "ValueError"
    assert (run.status, run.error_type) == ("error", "ValueError")
    assert current_span() is None


def test_an_exception_recorded_by_hand_is_kept_over_the_result() -> None:
    tracer = MemoryTracer()
    call = ToolCall(id="c", name="pay")
    with tracer.tool_span(call) as tool:
        tool.record_error(TimeoutError("slow"))
        tool.record_result(ToolResult(call_id="c", name="pay", content="x", is_error=True))
    assert tool.error_type == "TimeoutError"


def test_a_long_error_message_is_shortened() -> None:
    tracer = MemoryTracer()
    with tracer.agent_span("bot") as run:
        run.record_error("_OTHER", "x" * 2000)
    assert run.status_message is not None and len(run.status_message) == 500


def test_a_pause_for_approval_is_not_an_error() -> None:
    tracer = MemoryTracer()
    with pytest.raises(AgentInterrupt), tracer.agent_span("bot") as run:
        raise AgentInterrupt(thread_id="t", pending=[ToolCall(id="c", name="pay")])
    assert run.status == "ok" and "error.type" not in run.attributes


async def test_closing_a_generator_early_is_not_an_error() -> None:
    tracer = MemoryTracer()

    async def events() -> AsyncIterator[int]:
        with tracer.agent_span("bot"):
            yield 1
            yield 2

    stream = events()
    assert await anext(stream) == 1
    await stream.aclose()
    (run,) = tracer.spans
    assert run.ended and run.status == "ok"


async def test_parallel_tool_calls_in_tasks_nest_under_the_run() -> None:
    tracer = MemoryTracer()

    async def execute(index: int) -> None:
        with tracer.tool_span(ToolCall(id=f"c{index}", name=f"tool{index}")):
            await asyncio.sleep(0.001 * (3 - index))  # finish in reverse order

    with tracer.agent_span("bot") as run:
        tasks = [asyncio.ensure_future(execute(i)) for i in range(3)]
        await asyncio.gather(*tasks)
        with tracer.model_span("m", provider="openai") as chat:
            pass
    tools = [s for s in tracer.spans if s.kind == "tool"]
    assert len(tools) == 3
    assert all(tool.parent is run for tool in tools)  # siblings, never each other's child
    assert chat.parent is run


async def test_an_agent_called_from_a_tool_nests_under_the_tool() -> None:
    tracer = MemoryTracer()
    with tracer.agent_span("boss"), tracer.tool_span(ToolCall(id="c", name="ask_helper")):
        await asyncio.to_thread(lambda: tracer.agent_span("helper").__enter__().end())
    assert tracer.tree() == [
        ("invoke_agent boss", [("execute_tool ask_helper", [("invoke_agent helper", [])])])
    ]


def test_a_generator_stepped_from_a_thread_nests_with_explicit_parents() -> None:
    """`LoopThread.iterate` runs each step in a fresh task: contextvars do not carry over."""
    tracer = MemoryTracer()

    async def drive() -> AsyncIterator[str]:
        with tracer.agent_span("bot") as run:
            for turn in range(2):
                with tracer.model_span("m", provider="openai", parent=run):
                    pass
                yield f"turn {turn}"
                with tracer.tool_span(ToolCall(id=f"c{turn}", name="t"), parent=run):
                    pass

    loop = LoopThread("trace-test")
    try:
        assert list(loop.iterate(drive())) == ["turn 0", "turn 1"]
    finally:
        loop.close()
    run = tracer.spans[0]
    assert all(span.parent is run for span in tracer.spans[1:])
    assert all(span.ended for span in tracer.spans)


def test_a_parent_from_another_tracer_is_not_adopted() -> None:
    first, second = MemoryTracer(), MemoryTracer()
    with first.agent_span("a") as outer, second.agent_span("b", parent=outer) as inner:
        pass
    assert inner.parent is None
    assert second.roots() == [inner]


def test_model_spans_of_one_model_never_share_their_attributes() -> None:
    # A model's first attributes are made once and copied into every span.
    tracer = MemoryTracer()
    with tracer.agent_span("bot", thread_id="t1") as run:
        with tracer.model_span("m", provider="gemini") as first:
            first.record_response(response())
        with tracer.model_span("m", provider="gemini", parent=run) as second:
            pass
    with tracer.model_span("m", provider="gemini") as third:
        pass
    assert "gen_ai.response.finish_reasons" not in second.attributes
    assert second.attributes["gen_ai.conversation.id"] == "t1"
    assert "gen_ai.conversation.id" not in third.attributes
    assert (third.name, third.attributes["gen_ai.provider.name"]) == ("chat m", "gcp.gemini")
    assert first.attributes is not second.attributes


def test_ending_twice_and_setting_attributes() -> None:
    tracer = MemoryTracer()
    with tracer.agent_span("bot") as run:
        run.set_attribute("tidemill.run.outcome", "paused")
    duration = run.duration_ms
    run.end()
    assert run.duration_ms == duration
    assert run.attributes["tidemill.run.outcome"] == "paused"
    assert "invoke_agent bot" in repr(run)


def test_memory_tracer_lookups() -> None:
    tracer = MemoryTracer()
    run_once(tracer)
    assert tracer.find("execute_tool lookup").kind == "tool"
    with pytest.raises(LookupError, match="No span named 'nope'"):
        tracer.find("nope")
    assert tracer.children(tracer.roots()[0])[0].name == "chat gpt-4o-mini"
    tracer.clear()
    assert tracer.spans == []


def test_the_null_tracer_hands_out_one_span_that_does_nothing() -> None:
    tracer = NullTracer()
    assert isinstance(tracer, Tracer)
    call = ToolCall(id="c", name="t")
    spans = {
        id(tracer.agent_span("bot", thread_id="t")),
        id(tracer.model_span("m", provider="openai")),
        id(tracer.tool_span(call)),
    }
    assert len(spans) == 1
    with tracer.agent_span("bot") as span:
        assert current_span() is None
        span.set_attribute("k", "v")
        span.record_response(response())
        span.record_result(ToolResult(call_id="c", name="t", content="x", is_error=True))
        span.record_usage(Usage(input_tokens=1))
        span.record_output("x")
        span.record_error("boom")
        span.end()
    assert span.attributes == {} and span.status == "unset"
    assert tracer.describe() == {"type": "NullTracer"}
    with pytest.raises(KeyError), tracer.agent_span("bot"):
        raise KeyError("passes through")


def test_provider_names_map_to_the_conventions() -> None:
    assert provider_name("gemini") == "gcp.gemini"
    assert provider_name("vertex") == "gcp.vertex_ai"
    assert provider_name("bedrock") == "aws.bedrock"
    assert provider_name("mistral") == "mistral_ai"
    assert provider_name("anthropic") == "anthropic"
    tracer = MemoryTracer()
    with tracer.model_span("gemini-2.0-flash", provider="gemini") as chat:
        pass
    assert chat.attributes["gen_ai.provider.name"] == "gcp.gemini"


def test_a_custom_tracer_needs_only_two_hooks() -> None:
    class Names(BaseTracer):
        def __init__(self) -> None:
            super().__init__()
            self.events: list[str] = []

        def on_start(self, span: Span) -> None:
            self.events.append("start " + span.name)

        def on_end(self, span: Span) -> None:
            self.events.append("end " + span.name)

    tracer = Names()
    run_once(tracer)
    assert tracer.events[:2] == ["start invoke_agent support", "start chat gpt-4o-mini"]
    assert tracer.events[-1] == "end invoke_agent support"
    assert tracer.describe() == {"type": "Names", "capture_content": False}


def test_resolve_tracer_by_name_or_object() -> None:
    assert isinstance(resolve_tracer(), ConsoleTracer)
    assert isinstance(resolve_tracer("memory"), MemoryTracer)
    assert resolve_tracer("memory", capture_content=True).capture_content  # type: ignore[attr-defined]
    assert isinstance(resolve_tracer("none"), NullTracer)
    assert isinstance(resolve_tracer("otel"), OTelTracer)
    tracer = MemoryTracer()
    assert resolve_tracer(tracer) is tracer


def test_resolve_tracer_refuses_what_it_cannot_use() -> None:
    with pytest.raises(ConfigurationError, match="Did you mean 'console'"):
        resolve_tracer("consle")
    with pytest.raises(ConfigurationError, match="Bad option for the 'memory' tracer"):
        resolve_tracer("memory", colour=True)
    with pytest.raises(ConfigurationError, match="Options were given"):
        resolve_tracer(MemoryTracer(), capture_content=True)
    with pytest.raises(ConfigurationError, match="Cannot use list"):
        resolve_tracer(["console"])  # type: ignore[arg-type]
