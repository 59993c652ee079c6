"""`MemoryTracer`: keeps spans in a list, for tests and debugging."""

from __future__ import annotations

from typing import TypeAlias

from tidemill.agents.tracing._base import BaseTracer, Span

__all__ = ["MemoryTracer", "SpanTree"]

SpanTree: TypeAlias = list[tuple[str, "SpanTree"]]
"""Span names nested as they ran: `[("invoke_agent bot", [("chat m", []), ...])]`."""


class MemoryTracer(BaseTracer):
    """Keeps every span in memory, in the order they started (`spans`).

    Examples:
        >>> from tidemill.types import ToolCall
        >>> tracer = MemoryTracer()
        >>> with tracer.agent_span("bot", thread_id="t1") as run:
        ...     with tracer.model_span("gpt-4o-mini", provider="openai"):
        ...         pass
        ...     with tracer.tool_span(ToolCall(id="c1", name="add")):
        ...         pass
        >>> tracer.tree()
        [('invoke_agent bot', [('chat gpt-4o-mini', []), ('execute_tool add', [])])]
        >>> tracer.find("chat gpt-4o-mini").attributes["gen_ai.conversation.id"]
        't1'
    """

    def __init__(self, *, capture_content: bool = False) -> None:
        super().__init__(capture_content=capture_content)
        self.spans: list[Span] = []
        """Every span, in the order they started."""

    def on_start(self, span: Span) -> None:
        """Keep the span."""
        self.spans.append(span)

    def on_end(self, span: Span) -> None:
        """Nothing to do: the span object is already kept."""

    @property
    def finished(self) -> list[Span]:
        """The spans that have ended, in start order."""
        return [span for span in self.spans if span.ended]

    def roots(self) -> list[Span]:
        """The spans without a parent."""
        return [span for span in self.spans if span.parent is None]

    def children(self, span: Span) -> list[Span]:
        """The spans whose parent is `span`, in start order."""
        return [child for child in self.spans if child.parent is span]

    def find(self, name: str) -> Span:
        """The first span called `name`.

        Raises:
            LookupError: When there is none; the message lists the names there are.
        """
        for span in self.spans:
            if span.name == name:
                return span
        raise LookupError(f"No span named {name!r}; spans: {[s.name for s in self.spans]}")

    def tree(self) -> SpanTree:
        """Span names, nested as they ran; children in start order."""

        def nest(span: Span) -> tuple[str, SpanTree]:
            return span.name, [nest(child) for child in self.children(span)]

        return [nest(root) for root in self.roots()]

    def clear(self) -> None:
        """Forget every span."""
        self.spans.clear()
