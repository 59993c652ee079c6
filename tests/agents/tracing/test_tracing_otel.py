"""OTelTracer against the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tidemill._sync import LoopThread
from tidemill.agents.tracing import OTelTracer
from tidemill.errors import MissingDependencyError
from tidemill.types import Message, ModelResponse, ToolCall, ToolResult, Usage


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.clear()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in exporter.get_finished_spans()}


async def test_names_links_kinds_and_attributes(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = OTelTracer(provider)

    async def execute(call: ToolCall) -> None:
        with tracer.tool_span(call, description="Add numbers.") as span:
            await asyncio.sleep(0)
            span.record_result(ToolResult(call_id=call.id, name=call.name, content="3"))

    with tracer.agent_span(
        "calc", thread_id="thread_9", model="claude-x", provider="anthropic"
    ) as run:
        with tracer.model_span(
            "claude-x", provider="anthropic", settings={"temperature": 0.0}
        ) as chat:
            chat.record_response(
                ModelResponse(
                    message=Message.assistant("", tool_calls=(ToolCall(id="a", name="add"),)),
                    usage=Usage(input_tokens=50, output_tokens=7),
                    finish_reason="tool_calls",
                    model="claude-x-20250101",
                )
            )
        calls = [ToolCall(id="a", name="add"), ToolCall(id="b", name="mul")]
        await asyncio.gather(*(execute(call) for call in calls))
        run.record_usage(Usage(input_tokens=50, output_tokens=7))

    spans = by_name(exporter)
    assert set(spans) == {
        "invoke_agent calc",
        "chat claude-x",
        "execute_tool add",
        "execute_tool mul",
    }
    root = spans["invoke_agent calc"]
    assert root.parent is None
    for name in ("chat claude-x", "execute_tool add", "execute_tool mul"):
        child = spans[name]
        assert child.parent is not None and child.parent.span_id == root.context.span_id
        assert child.context.trace_id == root.context.trace_id
    assert root.kind is SpanKind.INTERNAL
    assert spans["chat claude-x"].kind is SpanKind.CLIENT
    assert spans["execute_tool add"].kind is SpanKind.INTERNAL

    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system": "anthropic",
        "gen_ai.request.model": "claude-x",
        "gen_ai.conversation.id": "thread_9",
        "gen_ai.usage.input_tokens": 50,
        "gen_ai.usage.output_tokens": 7,
    }
    chat_attributes = dict(spans["chat claude-x"].attributes or {})
    assert chat_attributes["gen_ai.operation.name"] == "chat"
    assert chat_attributes["gen_ai.request.model"] == "claude-x"
    assert chat_attributes["gen_ai.response.model"] == "claude-x-20250101"
    assert chat_attributes["gen_ai.request.temperature"] == 0.0
    assert tuple(chat_attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)  # type: ignore[arg-type]
    assert chat_attributes["gen_ai.usage.input_tokens"] == 50
    assert chat_attributes["gen_ai.conversation.id"] == "thread_9"
    tool_attributes = dict(spans["execute_tool add"].attributes or {})
    assert tool_attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "a",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add numbers.",
    }
    assert all(span.status.status_code is StatusCode.UNSET for span in spans.values())


def test_the_sampling_attributes_are_there_at_start(provider: TracerProvider) -> None:
    started: list[dict[str, object]] = []

    class Recorder(SimpleSpanProcessor):
        def on_start(self, span: object, parent_context: object = None) -> None:
            started.append(dict(span.attributes))  # type: ignore[attr-defined]

    provider.add_span_processor(Recorder(InMemorySpanExporter()))
    with OTelTracer(provider).model_span("gpt-4o", provider="openai"):
        pass
    assert started[0] == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o",
    }


def test_failures_set_error_status_and_type(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = OTelTracer(provider)

    def run() -> None:
        with tracer.agent_span("bot"):
            with tracer.tool_span(ToolCall(id="x", name="slow")) as tool:
                failed = ToolResult(call_id="x", name="slow", content="no", is_error=True)
                tool.record_result(failed)
            with tracer.model_span("m", provider="openai"):
                raise TimeoutError("no answer in 30 s")

    with pytest.raises(TimeoutError):
        run()
    spans = by_name(exporter)
    tool_span, chat, run = spans["execute_tool slow"], spans["chat m"], spans["invoke_agent bot"]
    assert tool_span.status.status_code is StatusCode.ERROR
    assert (tool_span.attributes or {})["error.type"] == "tool_error"
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.status.description == "no answer in 30 s"
    assert (chat.attributes or {})["error.type"] == "TimeoutError"
    assert (run.attributes or {})["error.type"] == "TimeoutError"
    assert not chat.events  # no exception event: its stack may hold arguments


def test_runs_nest_under_the_callers_span_and_user_spans_nest_inside(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = OTelTracer(provider)
    app = provider.get_tracer("app")
    with app.start_as_current_span("POST /chat"):
        with (
            tracer.agent_span("bot"),
            tracer.tool_span(ToolCall(id="c", name="db")),
            app.start_as_current_span("SELECT orders"),
        ):
            pass
        assert trace.get_current_span().name == "POST /chat"  # type: ignore[attr-defined]
    spans = by_name(exporter)
    assert spans["invoke_agent bot"].parent.span_id == spans["POST /chat"].context.span_id  # type: ignore[union-attr]
    assert spans["SELECT orders"].parent.span_id == spans["execute_tool db"].context.span_id  # type: ignore[union-attr]


def test_spans_of_a_generator_stepped_from_a_thread_stay_linked(
    provider: TracerProvider, exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    tracer = OTelTracer(provider)

    async def drive() -> AsyncIterator[int]:
        with tracer.agent_span("bot") as run:
            for turn in range(2):
                with tracer.model_span("m", provider="openai", parent=run):
                    pass
                yield turn

    loop = LoopThread("otel-test")
    with caplog.at_level(logging.ERROR):
        try:
            assert list(loop.iterate(drive())) == [0, 1]
        finally:
            loop.close()
    assert not [r for r in caplog.records if "detach" in r.getMessage()]
    finished = exporter.get_finished_spans()
    run = next(span for span in finished if span.name == "invoke_agent bot")
    chats = [span for span in finished if span.name == "chat m"]
    assert len(chats) == 2
    assert all(
        chat.parent is not None and chat.parent.span_id == run.context.span_id for chat in chats
    )


def test_content_goes_on_spans_only_when_asked(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    for capture in (False, True):
        exporter.clear()
        tracer = OTelTracer(provider, capture_content=capture)
        with tracer.model_span("m", provider="openai", messages=[Message.user("my secret")]):
            pass
        (span,) = exporter.get_finished_spans()
        assert ("gen_ai.input.messages" in (span.attributes or {})) is capture


def test_without_opentelemetry_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(MissingDependencyError) as caught:
        OTelTracer()
    error = caught.value
    assert "pip install 'tidemill[otel]'" in str(error)
    assert (error.package, error.extra) == ("opentelemetry-api", "otel")
    assert isinstance(error.__cause__, ImportError)


def test_describe(provider: TracerProvider) -> None:
    assert OTelTracer(provider, capture_content=True).describe() == {
        "type": "OTelTracer",
        "capture_content": True,
    }
