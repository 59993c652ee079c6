"""ConsoleTracer: one readable line per span, indented, with durations and tokens."""

from __future__ import annotations

import io
import re

import pytest

from tidemill.agents.tracing import ConsoleTracer
from tidemill.agents.tracing._console import _duration
from tidemill.types import Message, ModelResponse, ToolCall, ToolResult, Usage

MS = r"[0-9]+(\.[0-9])?ms"


def traced(tracer: ConsoleTracer) -> None:
    with tracer.agent_span("support", thread_id="thread_1") as run:
        with tracer.model_span("gpt-4o-mini", provider="openai") as chat:
            chat.record_response(
                ModelResponse(
                    message=Message.assistant("secret plans"),
                    usage=Usage(input_tokens=120, output_tokens=31),
                    finish_reason="tool_calls",
                )
            )
        with tracer.tool_span(ToolCall(id="c1", name="lookup_order")) as tool:
            tool.record_result(ToolResult(call_id="c1", name="lookup_order", content="found"))
        with pytest.raises(ValueError), tracer.tool_span(ToolCall(id="c2", name="refund")):
            raise ValueError("card declined")
        run.record_usage(Usage(input_tokens=300, output_tokens=53))


def test_lines_show_nesting_durations_tokens_and_errors() -> None:
    out = io.StringIO()
    traced(ConsoleTracer(out))
    lines = out.getvalue().splitlines()
    patterns = [
        r"invoke_agent support  thread=thread_1",
        rf"  chat gpt-4o-mini  {MS}  tokens 120 in / 31 out  finish=tool_calls",
        rf"  execute_tool lookup_order  {MS}",
        rf"  execute_tool refund  {MS}  ERROR ValueError: card declined",
        rf"invoke_agent support done  {MS}  tokens 300 in / 53 out",
    ]
    assert len(lines) == len(patterns), lines
    for line, pattern in zip(lines, patterns, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)


def test_content_is_never_printed() -> None:
    out = io.StringIO()
    traced(ConsoleTracer(out, capture_content=True))
    assert "secret plans" not in out.getvalue()


def test_it_writes_to_standard_error_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    with ConsoleTracer().agent_span("bot"):
        pass
    assert capsys.readouterr().err.splitlines()[0] == "invoke_agent bot"


@pytest.mark.parametrize(
    ("ms", "shown"), [(0.84, "0.8ms"), (9.96, "10.0ms"), (412.3, "412ms"), (1234.5, "1.23s")]
)
def test_durations_are_short(ms: float, shown: str) -> None:
    assert _duration(ms) == shown
