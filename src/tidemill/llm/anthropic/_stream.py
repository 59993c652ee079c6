"""Parsing Anthropic Messages responses, whole or streamed, into Tidemill types.

A stream is named events: `message_start` (id, model, input usage), then
for each content block `content_block_start`, its deltas and
`content_block_stop`, then `message_delta` (stop reason and cumulative
usage) and `message_stop`; `ping` keeps the connection alive and `error`
reports a failure inside the 200 response.

Blocks are kept by their `index`: text joins the answer, `thinking` and
`redacted_thinking` become `Reasoning` with the signature or opaque data
exactly as sent (Anthropic rejects a next turn whose thinking was changed),
and `tool_use` becomes a `ToolCall` from its `input_json_delta` fragments.
Server-side tool blocks (`server_tool_use`, `*_tool_result`) run at
Anthropic and are not tool calls for the agent, so they are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemill.llm._adapter import Delta
from tidemill.llm._assembly import ReasoningBuffer, ResponseBuilder, ToolCallBuffer
from tidemill.llm._failures import ErrorReporter
from tidemill.llm._json import (
    JsonObject,
    dumps,
    get_int,
    get_list,
    get_object,
    get_str,
    iter_objects,
    loads_object,
)
from tidemill.llm.http._sse import ServerSentEvent
from tidemill.types import (
    FinishReason,
    ModelResponse,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = ["MessagesStreamParser", "parse_message"]

PROVIDER = "anthropic"

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


@dataclass(slots=True)
class _UsageCounts:
    """Anthropic's usage fields; `message_delta` repeats them cumulatively."""

    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    thinking: int = 0
    reported: bool = False
    """Whether any usage arrived; without it the tokens are unknown, not zero."""

    def update(self, usage: JsonObject) -> None:
        if not usage:
            return
        self.reported = True
        self.input = _or(get_int(usage, "input_tokens"), self.input)
        self.cache_write = _or(get_int(usage, "cache_creation_input_tokens"), self.cache_write)
        self.cache_read = _or(get_int(usage, "cache_read_input_tokens"), self.cache_read)
        self.output = _or(get_int(usage, "output_tokens"), self.output)
        details = get_object(usage, "output_tokens_details")
        self.thinking = _or(get_int(details, "thinking_tokens"), self.thinking)

    def usage(self) -> Usage:
        # Anthropic's input_tokens leaves out cached tokens; Usage counts them in.
        if not self.reported:
            return Usage(requests=1, unreported_requests=1)
        return Usage(
            requests=1,
            input_tokens=self.input + self.cache_write + self.cache_read,
            output_tokens=self.output,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
            reasoning_tokens=self.thinking,
        )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


class MessagesStreamParser:
    """Turns an Anthropic event stream into stream events and a `ModelResponse`."""

    def __init__(self, errors: ErrorReporter) -> None:
        self._errors = errors
        self._builder = ResponseBuilder(errors.provider)
        self._counts = _UsageCounts()
        self._text_blocks: set[int] = set()
        self._thinking: dict[int, ReasoningBuffer] = {}
        self._tools: dict[int, int] = {}
        self._done = False

    @property
    def done(self) -> bool:
        """Whether `message_stop` has arrived."""
        return self._done

    def feed(self, event: ServerSentEvent) -> list[Delta]:
        """Take one server-sent event; return the deltas it carries.

        Raises:
            ProviderError: For an `error` event or data that is not a JSON object.
        """
        data = event.data.strip()
        if self._done or not data:
            return []
        payload = loads_object(data)
        if payload is None:
            raise self._errors.broken(
                f"{self._errors.provider} sent a stream event that is not a JSON object.",
                body=data,
            )
        return self.add(payload, event.event)

    def add(self, payload: JsonObject, event: str = "message") -> list[Delta]:
        """Take one decoded event; `event` is its SSE name, used when the data has no `type`."""
        kind = get_str(payload, "type") or event
        if kind == "error":
            raise self._errors.from_payload(payload, body=dumps(payload))
        if kind == "message_start":
            message = get_object(payload, "message")
            self._builder.response_id = get_str(message, "id")
            self._builder.model = get_str(message, "model")
            self._counts.update(get_object(message, "usage"))
        elif kind == "content_block_start":
            return self._start(get_int(payload, "index"), get_object(payload, "content_block"))
        elif kind == "content_block_delta":
            return self._delta(get_int(payload, "index"), get_object(payload, "delta"))
        elif kind == "message_delta":
            reason = get_str(get_object(payload, "delta"), "stop_reason")
            if reason is not None:
                self._builder.finish_reason = _FINISH.get(reason, "unknown")
            self._counts.update(get_object(payload, "usage"))
        elif kind == "message_stop":
            self._done = True
        return []

    def finish(self) -> ModelResponse:
        """Return the response; raise if the stream ended before `message_stop`.

        Raises:
            ProviderError: When the stream was cut short.
            MalformedToolCall: When a tool call has no name.
        """
        if not self._done:
            raise self._errors.broken(
                f"The {self._errors.provider} stream ended before message_stop; "
                "the answer is incomplete."
            )
        return self.build()

    def build(self) -> ModelResponse:
        """Return what was assembled, without checking the stream's end."""
        self._builder.usage = self._counts.usage()
        return self._builder.build()

    # -- blocks --------------------------------------------------------------------------

    def _start(self, index: int | None, block: JsonObject) -> list[Delta]:
        if index is None:
            return []
        kind = get_str(block, "type")
        if kind == "text":
            self._text_blocks.add(index)
            text = get_str(block, "text")
            return [self._say(text)] if text else []
        if kind in ("thinking", "redacted_thinking"):
            buffer = ReasoningBuffer(PROVIDER, redacted_data=get_str(block, "data"))
            self._thinking[index] = buffer
            self._builder.reasoning.append(buffer)
            deltas: list[Delta] = []
            text = get_str(block, "thinking")
            if text:
                buffer.parts.append(text)
                deltas.append(ReasoningDelta(delta=text))
            signature = get_str(block, "signature")
            if signature:
                buffer.signature = signature
                deltas.append(ReasoningDelta(signature=signature))
            return deltas
        if kind == "tool_use":
            slot = len(self._builder.tool_calls)
            call = ToolCallBuffer(call_id=get_str(block, "id"), name=get_str(block, "name"))
            self._builder.tool_calls.append(call)
            self._tools[index] = slot
            given = get_object(block, "input")
            if given:
                call.parts.append(dumps(given))
            return [
                ToolCallDelta(
                    index=slot, call_id=call.call_id, name=call.name, arguments_delta=call.arguments
                )
            ]
        return []

    def _delta(self, index: int | None, delta: JsonObject) -> list[Delta]:
        kind = get_str(delta, "type")
        if kind == "text_delta":
            text = get_str(delta, "text")
            return [self._say(text)] if text else []
        if index is None:
            return []
        if kind in ("thinking_delta", "signature_delta"):
            buffer = self._thinking.get(index)
            if buffer is None:
                return []
            text = get_str(delta, "thinking")
            if text:
                buffer.parts.append(text)
                return [ReasoningDelta(delta=text)]
            signature = get_str(delta, "signature")
            if signature:
                buffer.signature = (buffer.signature or "") + signature
                return [ReasoningDelta(signature=signature)]
            return []
        if kind == "input_json_delta":
            slot = self._tools.get(index)
            fragment = get_str(delta, "partial_json")
            if slot is None or not fragment:
                return []
            self._builder.tool_calls[slot].parts.append(fragment)
            return [ToolCallDelta(index=slot, arguments_delta=fragment)]
        return []

    def _say(self, text: str) -> TextDelta:
        self._builder.text.append(text)
        return TextDelta(delta=text)


def parse_message(payload: JsonObject, errors: ErrorReporter) -> ModelResponse:
    """Parse a whole (non-streamed) Messages response.

    Raises:
        ProviderError: When the body is an error object, has no content
            list, or has neither content nor a `stop_reason` (Anthropic always
            says why a whole message stopped).
        MalformedToolCall: When a tool call has no name.
    """
    if get_str(payload, "type") == "error" or "error" in payload:
        raise errors.from_payload(payload, body=dumps(payload))
    if not isinstance(payload.get("content"), list):
        raise errors.broken(
            f"The {errors.provider} response has no content list.", body=dumps(payload)
        )
    if not get_list(payload, "content") and get_str(payload, "stop_reason") is None:
        raise errors.broken(
            f"The {errors.provider} response has neither content nor a stop_reason.",
            body=dumps(payload),
        )
    # A whole message reads like a stream of one start event per complete block.
    parser = MessagesStreamParser(errors)
    parser.add({"type": "message_start", "message": payload})
    for index, block in enumerate(iter_objects(get_list(payload, "content"))):
        parser.add({"type": "content_block_start", "index": index, "content_block": block})
    parser.add({"type": "message_delta", "delta": {"stop_reason": payload.get("stop_reason")}})
    return parser.build()
