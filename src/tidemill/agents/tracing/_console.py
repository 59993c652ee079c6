"""`ConsoleTracer`: one readable line per span, with durations and token counts."""

from __future__ import annotations

import sys
from typing import TextIO

from tidemill.agents.tracing._base import (
    CONVERSATION_ID,
    FINISH_REASONS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    BaseTracer,
    Span,
)

__all__ = ["ConsoleTracer"]


class ConsoleTracer(BaseTracer):
    """Prints spans as they finish, indented under their run, to a stream.

    A run prints a line when it starts and one when it ends; model and tool
    calls print one line each when they end. Message content is never
    printed.

    Example output:

    ```text
    invoke_agent support  thread=thread_1
      chat gpt-4o-mini  412ms  tokens 120 in / 31 out  finish=tool_calls
      execute_tool lookup_order  3.1ms
      execute_tool refund  0.8ms  ERROR tool_error
      chat gpt-4o-mini  380ms  tokens 180 in / 22 out  finish=stop
    invoke_agent support done  801ms  tokens 300 in / 53 out
    ```

    Args:
        stream: Where to write; standard error (looked up at each write) by default.
        capture_content: Passed to `BaseTracer`; this tracer never prints content.
    """

    def __init__(self, stream: TextIO | None = None, *, capture_content: bool = False) -> None:
        super().__init__(capture_content=capture_content)
        self.stream = stream
        """Where it writes; None: standard error, looked up at each write."""

    def on_start(self, span: Span) -> None:
        """Announce a run; other spans are printed when they end."""
        if span.kind != "agent":
            return
        line = _indent(span) + span.name
        thread = span.attributes.get(CONVERSATION_ID)
        if thread is not None:
            line += f"  thread={thread}"
        self._write(line)

    def on_end(self, span: Span) -> None:
        """Print the span's line: name, duration, tokens, finish reason, error."""
        parts = [_indent(span) + span.name + (" done" if span.kind == "agent" else "")]
        parts.append(_duration(span.duration_ms or 0.0))
        attributes = span.attributes
        if INPUT_TOKENS in attributes or OUTPUT_TOKENS in attributes:
            parts.append(
                f"tokens {attributes.get(INPUT_TOKENS, 0)} in / "
                f"{attributes.get(OUTPUT_TOKENS, 0)} out"
            )
        reasons = attributes.get(FINISH_REASONS)
        if isinstance(reasons, tuple | list):
            parts.append("finish=" + ",".join(str(reason) for reason in reasons))
        if span.status == "error":
            parts.append(
                f"ERROR {span.error_type}"
                + (f": {span.status_message}" if span.status_message else "")
            )
        self._write("  ".join(parts))

    def _write(self, line: str) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        stream.write(line + "\n")
        stream.flush()


def _indent(span: Span) -> str:
    depth = 0
    parent = span.parent
    while parent is not None:
        depth += 1
        parent = parent.parent
    return "  " * depth


def _duration(ms: float) -> str:
    if ms < 10:
        return f"{ms:.1f}ms"
    if ms < 1000:
        return f"{ms:.0f}ms"
    return f"{ms / 1000:.2f}s"
