"""The `Tracer` protocol, `Span`, and the base every built-in tracer shares.

An agent run is one span (`invoke_agent {agent}`) with a child per model
call (`chat {model}`) and per tool call (`execute_tool {tool}`). Attribute
names follow OpenTelemetry's GenAI semantic conventions, so any backend that
understands those understands Tidemill's traces.

A span's parent is the one passed as `parent=`, or else the span current in
the calling context (a `contextvars` variable, so tool calls running in
parallel asyncio tasks nest under the run that started them). Pass `parent=`
explicitly where a span outlives a context switch, as in an async generator
driven step by step from another thread.

Message content (prompts, answers, tool arguments and results) is recorded
only with `capture_content=True`: prompts may hold secrets.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Literal, Protocol, Self, runtime_checkable

from pydantic import JsonValue

from tidemill.errors import AgentInterrupt
from tidemill.llm import ModelSettings
from tidemill.types import Message, ModelResponse, ToolCall, ToolResult, Usage

__all__ = [
    "AttributeValue",
    "BaseTracer",
    "NullTracer",
    "Span",
    "SpanKind",
    "Tracer",
    "current_span",
    "provider_name",
]

SpanKind = Literal["agent", "model", "tool"]
"""What a span times: an agent run, one model call, or one tool call."""

AttributeValue = str | bool | int | float | Sequence[str]
"""What a span attribute may hold (a subset of OpenTelemetry's attribute types)."""

# OpenTelemetry GenAI semantic conventions (https://opentelemetry.io/docs/specs/semconv/gen-ai/).
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"  # the name before `gen_ai.provider.name`, still read by many backends
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"  # opt-in: content
TOOL_RESULT = "gen_ai.tool.call.result"  # opt-in: content
INPUT_MESSAGES = "gen_ai.input.messages"  # opt-in: content
OUTPUT_MESSAGES = "gen_ai.output.messages"  # opt-in: content
ERROR_TYPE = "error.type"
RUN_ID = "tidemill.run.id"


# Tidemill provider names that the conventions spell differently.
_PROVIDERS = {
    "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "azure": "azure.ai.openai",
}

_MESSAGE_LIMIT = 500  # characters of an error message kept on a span

_ids = itertools.count(1)


def provider_name(provider: str) -> str:
    """The `gen_ai.provider.name` value for a Tidemill provider name.

    Examples:
        >>> provider_name("gemini"), provider_name("openai")
        ('gcp.gemini', 'openai')
    """
    return _PROVIDERS.get(provider, provider)


class Span:
    """One timed operation: an agent run, a model call or a tool call.

    Tracers hand spans out (`Tracer.agent_span` and friends); use each in a
    `with` block, which times it, makes it the current span, and records an
    exception escaping the block as the span's error. The `record_*` methods
    turn Tidemill objects into attributes.
    """

    __slots__ = (
        "_capture",
        "_token",
        "_tracer",
        "attributes",
        "backend",
        "end_ns",
        "error_type",
        "kind",
        "name",
        "parent",
        "span_id",
        "start_ns",
        "status",
        "status_message",
    )

    # Declared here (set in `__init__`) to document them at no cost per span.
    kind: SpanKind
    """`"agent"`, `"model"` or `"tool"`."""
    name: str
    """`invoke_agent {agent}`, `chat {model}` or `execute_tool {tool}`."""
    attributes: dict[str, AttributeValue]
    """GenAI semantic-convention attributes, set so far."""
    parent: Span | None
    """The enclosing span, if any."""
    span_id: int
    """Unique within the process."""
    start_ns: int
    """When the span started (`time.perf_counter_ns()`); 0 until it has."""
    end_ns: int
    """When the span ended (`time.perf_counter_ns()`); 0 until it has."""
    status: Literal["unset", "ok", "error"]
    """`"unset"` until the span ends, then `"ok"` or `"error"`."""
    error_type: str | None
    """The `error.type` of a failed span."""
    status_message: str | None
    """What went wrong, for a failed span."""
    backend: object
    """Where a tracer keeps its own handle (an OpenTelemetry span)."""

    def __init__(
        self,
        tracer: BaseTracer | None,
        kind: SpanKind,
        name: str,
        attributes: dict[str, AttributeValue],
        parent: Span | None = None,
    ) -> None:
        self._tracer = tracer
        self._capture = tracer is not None and tracer.capture_content
        self._token: Token[Span | None] | None = None
        self.kind: SpanKind = kind
        self.name = name
        self.attributes = attributes
        self.parent = parent
        self.span_id = next(_ids)
        self.start_ns = 0
        self.end_ns = 0
        self.status: Literal["unset", "ok", "error"] = "unset"
        self.error_type: str | None = None
        self.status_message: str | None = None
        self.backend: object = None

    @property
    def duration_ms(self) -> float | None:
        """How long the span lasted, once it has ended."""
        if not self.end_ns:
            return None
        return (self.end_ns - self.start_ns) / 1e6

    @property
    def ended(self) -> bool:
        """Whether the span has ended."""
        return self.end_ns != 0

    def __enter__(self) -> Self:
        self.start_ns = time.perf_counter_ns()
        self._token = _current.set(self)
        if self._tracer is not None:
            self._tracer.on_start(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is not None and not isinstance(exc, GeneratorExit | AgentInterrupt):
            self.record_error(exc)
        self.end()

    def end(self) -> None:
        """End the span; `with` does this. Ending twice does nothing."""
        if self.end_ns:
            return
        self.end_ns = time.perf_counter_ns()
        if self.status == "unset":
            self.status = "ok"
        if self._token is not None:
            # A span ended in another context than it started in (an async generator
            # stepped from several tasks) was never current there: nothing to restore.
            # (try/except, not contextlib.suppress: this runs for every span.)
            try:  # noqa: SIM105
                _current.reset(self._token)
            except ValueError:
                pass
            self._token = None
        if self._tracer is not None:
            self._tracer.on_end(self)

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set one attribute."""
        self.attributes[key] = value

    def record_error(self, error: BaseException | str, message: str | None = None) -> None:
        """Mark the span failed.

        Args:
            error: The exception (its class name becomes `error.type`) or an
                `error.type` value such as `"tool_error"`.
            message: What went wrong; the exception's text by default.
        """
        if isinstance(error, BaseException):
            error_type = type(error).__qualname__
            message = message if message is not None else str(error)
        else:
            error_type = error
        self.status = "error"
        self.error_type = error_type
        self.status_message = message[:_MESSAGE_LIMIT] if message else None
        self.attributes[ERROR_TYPE] = error_type

    def record_usage(self, usage: Usage) -> None:
        """Record tokens spent (a model call's, or a run's total)."""
        attributes = self.attributes
        attributes[INPUT_TOKENS] = usage.input_tokens
        attributes[OUTPUT_TOKENS] = usage.output_tokens
        if usage.cache_read_tokens:
            attributes[CACHE_READ_TOKENS] = usage.cache_read_tokens
        if usage.cache_write_tokens:
            attributes[CACHE_WRITE_TOKENS] = usage.cache_write_tokens

    def record_response(self, response: ModelResponse) -> None:
        """Record what a model call returned: model, id, finish reason and usage."""
        attributes = self.attributes
        # Each field read once: a pydantic field read costs several plain ones.
        model, response_id, finish = response.model, response.response_id, response.finish_reason
        if model:
            attributes[RESPONSE_MODEL] = model
        if response_id:
            attributes[RESPONSE_ID] = response_id
        attributes[FINISH_REASONS] = (finish,)
        self.record_usage(response.usage)
        if self._capture:
            attributes[OUTPUT_MESSAGES] = _dumps(
                [_message_parts(response.message, finish_reason=finish)]
            )

    def record_result(self, result: ToolResult) -> None:
        """Record a tool call's result; a failed call marks the span failed.

        The result text is recorded only with `capture_content`.
        """
        if result.is_error:
            if self.status != "error":
                self.record_error("tool_error", result.content if self._capture else None)
        elif self._capture:
            self.attributes[TOOL_RESULT] = result.content

    def record_output(self, text: str) -> None:
        """Record an agent run's answer (only with `capture_content`)."""
        if self._capture:
            self.attributes[OUTPUT_MESSAGES] = _dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": text}]}]
            )

    def __repr__(self) -> str:
        return f"<Span {self.name!r} {self.kind} {self.status}>"


class _NullSpan(Span):
    """The span a `NullTracer` hands out: every method does nothing."""

    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    def end(self) -> None:
        return None

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        return None

    def record_error(self, error: BaseException | str, message: str | None = None) -> None:
        return None

    def record_usage(self, usage: Usage) -> None:
        return None

    def record_response(self, response: ModelResponse) -> None:
        return None

    def record_result(self, result: ToolResult) -> None:
        return None

    def record_output(self, text: str) -> None:
        return None


_current: ContextVar[Span | None] = ContextVar("tidemill_current_span", default=None)
_NULL_SPAN = _NullSpan(None, "agent", "", {})


def current_span() -> Span | None:
    """The span open in the calling context, if any."""
    return _current.get()


@runtime_checkable
class Tracer(Protocol):
    """Where an agent's spans go: the three span factories the runtime calls.

    Every built-in tracer derives from `BaseTracer`, which implements these
    on top of two hooks, `on_start` and `on_end`; implement those to send
    spans somewhere new. `NullTracer` is the tracer of an agent without one.
    """

    def agent_span(
        self,
        name: str,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        provider: str | None = None,
        parent: Span | None = None,
    ) -> Span:
        """A span for one agent run: `invoke_agent {name}`."""
        ...

    def model_span(
        self,
        model: str,
        *,
        provider: str,
        settings: ModelSettings | None = None,
        messages: Sequence[Message] = (),
        parent: Span | None = None,
    ) -> Span:
        """A span for one model call: `chat {model}`; `messages` are kept only with capture."""
        ...

    def tool_span(
        self, call: ToolCall, *, description: str | None = None, parent: Span | None = None
    ) -> Span:
        """A span for one tool call: `execute_tool {tool}`."""
        ...

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description, for `describe()` and logs."""
        ...


class BaseTracer(ABC):
    """A tracer built on two hooks: `on_start` and `on_end`.

    Subclass it to send spans somewhere new; the span factories, parent
    resolution and attributes come with it.

    Args:
        capture_content: Record prompts, answers, tool arguments and tool
            results on spans. Off by default: they may hold personal data
            and secrets.
    """

    def __init__(self, *, capture_content: bool = False) -> None:
        self.capture_content = capture_content
        """Whether spans record prompts, answers, tool arguments and tool results."""

    @abstractmethod
    def on_start(self, span: Span) -> None:
        """Called when a span starts (its `with` block is entered)."""

    @abstractmethod
    def on_end(self, span: Span) -> None:
        """Called when a span ends, with its final attributes, status and duration."""

    def agent_span(
        self,
        name: str,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        provider: str | None = None,
        parent: Span | None = None,
    ) -> Span:
        """A span for one agent run: `invoke_agent {name}`."""
        attributes: dict[str, AttributeValue] = {
            OPERATION_NAME: "invoke_agent",
            AGENT_NAME: name,
        }
        if provider is not None:
            attributes[PROVIDER_NAME] = attributes[SYSTEM] = provider_name(provider)
        if model is not None:
            attributes[REQUEST_MODEL] = model
        if thread_id is not None:
            attributes[CONVERSATION_ID] = thread_id
        if run_id is not None:
            attributes[RUN_ID] = run_id
        return Span(self, "agent", f"invoke_agent {name}", attributes, self._parent(parent))

    def model_span(
        self,
        model: str,
        *,
        provider: str,
        settings: ModelSettings | None = None,
        messages: Sequence[Message] = (),
        parent: Span | None = None,
    ) -> Span:
        """A span for one model call: `chat {model}`."""
        name, head = _model_head(model, provider)
        attributes = head.copy()
        parent = self._parent(parent)
        if parent is not None:
            conversation = parent.attributes.get(CONVERSATION_ID)
            if isinstance(conversation, str):
                attributes[CONVERSATION_ID] = conversation
        if settings:
            _record_settings(settings, attributes)
        if self.capture_content and messages:
            attributes[INPUT_MESSAGES] = _dumps([_message_parts(m) for m in messages])
        return Span(self, "model", name, attributes, parent)

    def tool_span(
        self, call: ToolCall, *, description: str | None = None, parent: Span | None = None
    ) -> Span:
        """A span for one tool call: `execute_tool {tool}`."""
        tool = call.name
        attributes: dict[str, AttributeValue] = {
            OPERATION_NAME: "execute_tool",
            TOOL_NAME: tool,
            TOOL_CALL_ID: call.id,
            TOOL_TYPE: "function",
        }
        if description:
            attributes[TOOL_DESCRIPTION] = description
        if self.capture_content:
            attributes[TOOL_ARGUMENTS] = (
                call.raw_arguments if call.raw_arguments is not None else _dumps(call.arguments)
            )
        return Span(self, "tool", f"execute_tool {tool}", attributes, self._parent(parent))

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description."""
        return {"type": type(self).__name__, "capture_content": self.capture_content}

    def _parent(self, parent: Span | None) -> Span | None:
        if parent is not None and parent._tracer is self:
            return parent
        current = _current.get()
        return current if current is not None and current._tracer is self else None


class NullTracer:
    """The tracer of an agent that is not traced: hands out one span that does nothing.

    Calling it costs a method call and an empty `with` block, nothing more.
    """

    capture_content = False
    """Always False: nothing is recorded."""

    def agent_span(
        self,
        name: str,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        model: str | None = None,
        provider: str | None = None,
        parent: Span | None = None,
    ) -> Span:
        """The no-op span."""
        return _NULL_SPAN

    def model_span(
        self,
        model: str,
        *,
        provider: str,
        settings: ModelSettings | None = None,
        messages: Sequence[Message] = (),
        parent: Span | None = None,
    ) -> Span:
        """The no-op span."""
        return _NULL_SPAN

    def tool_span(
        self, call: ToolCall, *, description: str | None = None, parent: Span | None = None
    ) -> Span:
        """The no-op span."""
        return _NULL_SPAN

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description."""
        return {"type": "NullTracer"}


@functools.lru_cache(maxsize=256)
def _model_head(model: str, provider: str) -> tuple[str, dict[str, AttributeValue]]:
    """A model span's name and first attributes, made once per model (copy the dict)."""
    name = provider_name(provider)
    attributes: dict[str, AttributeValue] = {
        OPERATION_NAME: "chat",
        PROVIDER_NAME: name,
        SYSTEM: name,
        REQUEST_MODEL: model,
    }
    return f"chat {model}", attributes


def _message_parts(message: Message, *, finish_reason: str | None = None) -> dict[str, JsonValue]:
    """A message in the conventions' `{role, parts}` shape."""
    parts: list[JsonValue] = []
    if message.content:
        parts.append({"type": "text", "content": message.content})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        )
    if message.tool_call_id is not None:
        parts = [
            {"type": "tool_call_response", "id": message.tool_call_id, "result": message.content}
        ]
    shaped: dict[str, JsonValue] = {"role": message.role.value, "parts": parts}
    if finish_reason is not None:
        shaped["finish_reason"] = finish_reason
    return shaped


def _record_settings(settings: ModelSettings, attributes: dict[str, AttributeValue]) -> None:
    """The request settings the conventions name (`gen_ai.request.*`)."""
    if "temperature" in settings:
        attributes["gen_ai.request.temperature"] = settings["temperature"]
    if "max_tokens" in settings:
        attributes["gen_ai.request.max_tokens"] = settings["max_tokens"]
    if "top_p" in settings:
        attributes["gen_ai.request.top_p"] = settings["top_p"]
    if "seed" in settings:
        attributes["gen_ai.request.seed"] = settings["seed"]
    if "stop" in settings:
        attributes["gen_ai.request.stop_sequences"] = tuple(settings["stop"])


def _dumps(value: JsonValue | Mapping[str, JsonValue]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
