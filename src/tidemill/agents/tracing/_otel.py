"""`OTelTracer`: Tidemill spans as OpenTelemetry spans (the `otel` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import JsonValue

from tidemill._version import __version__
from tidemill.agents.tracing._base import AttributeValue, BaseTracer, Span
from tidemill.errors import MissingDependencyError

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry import trace
    from opentelemetry.context import Context

__all__ = ["OTelTracer"]


class OTelTracer(BaseTracer):
    """Sends spans to OpenTelemetry, with GenAI semantic-convention attributes.

    Needs `opentelemetry-api` (`pip install 'tidemill[otel]'`); where the
    spans go (OTLP, a console, a vendor) is the tracer provider's business,
    configured with `opentelemetry-sdk` as usual. Runs nest under the span
    current when they start (a web request, a flow step), and while a span
    is open it is OpenTelemetry's current span, so spans made inside it (an
    instrumented HTTP call, your own spans in a tool) nest under it.

    Model-call spans have kind `CLIENT`; run and tool spans, `INTERNAL`. A
    failed span gets status `ERROR` and an `error.type` attribute: the
    exception's class name, or `tool_error` for a tool call whose result is
    an error.

    Args:
        tracer_provider: Where spans go; the global provider by default.
        capture_content: Record prompts, answers, tool arguments and results
            (`gen_ai.input.messages`, ...). Off by default: they may hold secrets.

    Raises:
        MissingDependencyError: When `opentelemetry-api` is not installed.

    Examples:
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> tracer = OTelTracer(TracerProvider())
        >>> with tracer.agent_span("bot", provider="openai") as run:
        ...     pass
        >>> run.attributes["gen_ai.operation.name"]
        'invoke_agent'
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        capture_content: bool = False,
    ) -> None:
        try:
            from opentelemetry import context, trace
        except ImportError as exc:
            raise MissingDependencyError(
                "opentelemetry-api", extra="otel", feature="The OpenTelemetry tracer"
            ) from exc
        super().__init__(capture_content=capture_content)
        self._trace = trace
        self._context = context
        self._tracer = trace.get_tracer("tidemill", __version__, tracer_provider=tracer_provider)
        self._kinds = {
            "agent": trace.SpanKind.INTERNAL,
            "model": trace.SpanKind.CLIENT,
            "tool": trace.SpanKind.INTERNAL,
        }

    def on_start(self, span: Span) -> None:
        """Start the OpenTelemetry span, under the parent's, and make it current."""
        parent = span.parent.backend if span.parent is not None else None
        context: Context | None = None
        if isinstance(parent, _Handle):
            context = self._trace.set_span_in_context(parent.span)
        otel_span = self._tracer.start_span(
            span.name,
            context=context,
            kind=self._kinds[span.kind],
            attributes=span.attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        token = self._context.attach(self._trace.set_span_in_context(otel_span))
        span.backend = _Handle(otel_span, token, dict(span.attributes))

    def on_end(self, span: Span) -> None:
        """Copy the final attributes and status over, and end the OpenTelemetry span."""
        handle = span.backend
        if not isinstance(handle, _Handle):
            return
        otel_span = handle.span
        # Only what changed since the start: the SDK validates every value it is given.
        initial = handle.initial
        changed = {k: v for k, v in span.attributes.items() if initial.get(k, _MISSING) is not v}
        if changed:
            otel_span.set_attributes(changed)
        if span.status == "error":
            otel_span.set_status(
                self._trace.Status(self._trace.StatusCode.ERROR, span.status_message)
            )
        # Detach only in the context that attached: a span ended from another
        # task (an async generator stepped from a thread) never was current there.
        if self._trace.get_current_span() is otel_span:
            self._context.detach(handle.token)
        otel_span.end()

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description."""
        return {"type": "OTelTracer", "capture_content": self.capture_content}


_MISSING = object()


class _Handle:
    """The OpenTelemetry span behind a Tidemill span, its context token, its first attributes."""

    __slots__ = ("initial", "span", "token")

    def __init__(
        self, span: trace.Span, token: Token[Context], initial: dict[str, AttributeValue]
    ) -> None:
        self.span = span
        self.token = token
        self.initial = initial
