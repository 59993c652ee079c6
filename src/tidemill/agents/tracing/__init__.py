"""Tracing: where an agent's runs, model calls and tool calls are timed and recorded.

Each run is an `invoke_agent {agent}` span with a `chat {model}` span per
model call and an `execute_tool {tool}` span per tool call, attributed with
OpenTelemetry's GenAI semantic conventions. `ConsoleTracer` prints them,
`MemoryTracer` keeps them for tests, `OTelTracer` sends them to
OpenTelemetry (the `otel` extra), `OTLPTracer` posts them over OTLP/HTTP,
`LangfuseTracer` and `LangSmithTracer` to those vendors (the `otlp`,
`langfuse` and `langsmith` extras), and `NullTracer` does nothing at almost
no cost.

Message content is recorded only with `capture_content=True`.

Examples:
    >>> import io
    >>> from tidemill.agents.tracing import ConsoleTracer
    >>> out = io.StringIO()
    >>> tracer = ConsoleTracer(out)
    >>> with tracer.agent_span("bot", thread_id="t1"):
    ...     pass
    >>> print(out.getvalue().splitlines()[0])
    invoke_agent bot  thread=t1
"""

from tidemill.agents.tracing._base import (
    AttributeValue,
    BaseTracer,
    NullTracer,
    Span,
    SpanKind,
    Tracer,
    current_span,
    provider_name,
)
from tidemill.agents.tracing._console import ConsoleTracer
from tidemill.agents.tracing._langfuse import LangfuseTracer
from tidemill.agents.tracing._langsmith import LangSmithTracer
from tidemill.agents.tracing._memory import MemoryTracer, SpanTree
from tidemill.agents.tracing._otel import OTelTracer
from tidemill.agents.tracing._otlp import OTLPTracer
from tidemill.agents.tracing._resolve import resolve_tracer

__all__ = [
    "AttributeValue",
    "BaseTracer",
    "ConsoleTracer",
    "LangSmithTracer",
    "LangfuseTracer",
    "MemoryTracer",
    "NullTracer",
    "OTLPTracer",
    "OTelTracer",
    "Span",
    "SpanKind",
    "SpanTree",
    "Tracer",
    "current_span",
    "provider_name",
    "resolve_tracer",
]
