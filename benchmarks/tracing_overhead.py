"""What a span costs: the tracer calls the agent runtime makes on every iteration.

Times one model-call span (create, enter, `record_response`, exit) and one
tool-call span (create, enter, `record_result`, exit) inside a run span,
for each built-in tracer: Null, Memory, Console writing to /dev/null, and
OpenTelemetry with the SDK and an exporter that drops everything. Prints
microseconds per span (the best of 15 runs of 4,000 spans); never asserts.

    .venv/bin/python benchmarks/tracing_overhead.py
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from tidemill.agents.tracing import ConsoleTracer, MemoryTracer, NullTracer, OTelTracer, Tracer
from tidemill.types import Message, ModelResponse, ToolCall, ToolResult, Usage

RESPONSE = ModelResponse(
    message=Message.assistant("ok"),
    usage=Usage(requests=1, input_tokens=120, output_tokens=31),
    finish_reason="stop",
    model="gpt-4o-mini-2024-07-18",
)
CALL = ToolCall(id="call_1", name="lookup", arguments={"q": "x"})
RESULT = ToolResult(call_id="call_1", name="lookup", content="found")
SPANS_PER_ROUND = 100  # 50 model spans and 50 tool spans per run span


class _DropExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def one_round(tracer: Tracer) -> None:
    with tracer.agent_span("bench", thread_id="t", model="gpt-4o-mini", provider="openai") as run:
        for _ in range(SPANS_PER_ROUND // 2):
            with tracer.model_span("gpt-4o-mini", provider="openai", parent=run) as chat:
                chat.record_response(RESPONSE)
            with tracer.tool_span(CALL, parent=run) as tool:
                tool.record_result(RESULT)


def raw_otel_round(provider: TracerProvider) -> Callable[[], None]:
    """The same spans and attributes made with the OpenTelemetry SDK directly: the floor."""
    otel = provider.get_tracer("baseline")
    start_attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
    }
    end_attributes = {
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 31,
    }

    def one() -> None:
        with otel.start_as_current_span("invoke_agent bench"):
            for _ in range(SPANS_PER_ROUND):
                with otel.start_as_current_span(
                    "chat gpt-4o-mini", attributes=start_attributes
                ) as s:
                    s.set_attributes(end_attributes)

    return one


def per_span_us(
    tracer: Tracer | None, reset: Callable[[], None] = lambda: None, *, run: Callable[[], None]
) -> float:
    for _ in range(20):  # warm up
        run()
    samples = []
    for _ in range(15):
        reset()
        rounds = 40
        start = time.perf_counter()
        for _ in range(rounds):
            run()
        samples.append((time.perf_counter() - start) / (rounds * SPANS_PER_ROUND) * 1e6)
    return min(samples)  # the least disturbed run, as timeit advises


def measure(tracer: Tracer, reset: Callable[[], None] = lambda: None) -> float:
    return per_span_us(tracer, reset, run=lambda: one_round(tracer))


def main() -> None:
    memory = MemoryTracer()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_DropExporter()))
    with open(os.devnull, "w") as devnull:
        rows = [
            ("NullTracer", measure(NullTracer())),
            ("MemoryTracer", measure(memory, memory.clear)),
            ("ConsoleTracer -> /dev/null", measure(ConsoleTracer(devnull))),
            ("OTelTracer (SDK, dropping exporter)", measure(OTelTracer(provider))),
            (
                "  raw OTel SDK span, same attributes",
                per_span_us(None, run=raw_otel_round(provider)),
            ),
        ]
    print(f"{'tracer':<38}{'us per span':>12}")
    for name, cost in rows:
        print(f"{name:<38}{cost:>12.2f}")


if __name__ == "__main__":
    main()
