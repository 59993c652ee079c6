"""Parsing Bedrock Converse responses, whole or streamed, into Tidemill types.

A `ConverseStream` body is AWS event-stream messages (decoded by
`tidemill.llm.http._eventstream`), each naming its event in the
`:event-type` header with a JSON payload (which carries a random-length
`"p"` padding field, ignored):

- `messageStart`; then per content block, keyed by `contentBlockIndex`, an
  optional `contentBlockStart` (tool uses announce their id and name there;
  text blocks have none), `contentBlockDelta`s and `contentBlockStop`;
- `messageStop` with the stop reason, then `metadata` with the usage (and
  cache read/write tokens). The stream is complete only once `metadata` has
  arrived; a body that ends before it is a `ProviderError`.

Deltas: `text` joins the answer; `toolUse.input` fragments are one call's
argument JSON; `reasoningContent` carries reasoning `text`, its `signature`,
or `redactedContent` (encrypted reasoning as base64), kept exactly as sent
because Claude refuses a next turn whose thinking was changed. Tool blocks
of type `server_tool_use` and their `toolResult` ran at Amazon (the Nova
code interpreter), so they are not tool calls for the agent.

A message whose `:message-type` is `exception` (`throttlingException`,
`modelStreamErrorException`, `validationException`, ...) becomes the typed
error its status would give, with the message Bedrock sent.

The parser also reads the same events as server-sent events carrying
`{"<event type>": payload}`, the shape the AWS SDKs give them (and the
`StreamParser` protocol of `HttpModel` asks for); `BedrockModel` feeds it
the binary messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemill.errors import MalformedToolCall, ProviderError
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
from tidemill.llm.http._eventstream import EventStreamMessage
from tidemill.llm.http._sse import ServerSentEvent
from tidemill.types import (
    FinishReason,
    ModelResponse,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = [
    "EXCEPTION_STATUS",
    "PROVIDER",
    "ConverseStreamParser",
    "parse_converse",
    "parse_converse_usage",
]

PROVIDER = "bedrock"

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "malformed_model_output": "error",
}

EXCEPTION_STATUS: dict[str, int] = {
    "validationException": 400,
    "accessDeniedException": 403,
    "resourceNotFoundException": 404,
    "modelTimeoutException": 408,
    "modelStreamErrorException": 424,
    "throttlingException": 429,
    "serviceQuotaExceededException": 429,
    "internalServerException": 500,
    "serviceUnavailableException": 503,
}
"""The HTTP status each documented stream exception stands for."""

_RETRYABLE_EXCEPTIONS = frozenset(
    {
        "modelStreamErrorException",
        "modelTimeoutException",
        "throttlingException",
        "internalServerException",
        "serviceUnavailableException",
    }
)


def parse_converse_usage(usage: JsonObject) -> Usage:
    """Read a Converse `usage` object.

    Bedrock's `inputTokens` leaves out the tokens read from or written to
    the prompt cache; `Usage.input_tokens` counts them in.

    Examples:
        >>> used = parse_converse_usage({"inputTokens": 10, "outputTokens": 5,
        ...                              "cacheReadInputTokens": 100, "cacheWriteInputTokens": 20})
        >>> used.input_tokens, used.output_tokens, used.cache_read_tokens, used.cache_write_tokens
        (130, 5, 100, 20)
    """
    read = get_int(usage, "cacheReadInputTokens") or 0
    written = get_int(usage, "cacheWriteInputTokens") or 0
    return Usage(
        requests=1,
        input_tokens=(get_int(usage, "inputTokens") or 0) + read + written,
        output_tokens=get_int(usage, "outputTokens") or 0,
        cache_read_tokens=read,
        cache_write_tokens=written,
    )


@dataclass(slots=True)
class _Block:
    """What one `contentBlockIndex` turned out to be."""

    call: int | None = None
    """The slot of its tool call in the response."""
    reasoning: ReasoningBuffer | None = None
    server_side: bool = False


class ConverseStreamParser:
    """Turns a ConverseStream's event-stream messages into stream events and a response.

    Args:
        errors: Builds the typed errors (provider name, secrets to scrub).
        model: The model id, reported as the response's model (Bedrock names none).
    """

    def __init__(self, errors: ErrorReporter, model: str | None = None) -> None:
        self._errors = errors
        self._builder = ResponseBuilder(errors.provider, model=model)
        self._blocks: dict[int, _Block] = {}
        self._stopped = False
        self._done = False

    @property
    def done(self) -> bool:
        """Whether the `metadata` event, the last of a stream, has arrived."""
        return self._done

    def feed(self, message: EventStreamMessage | ServerSentEvent) -> list[Delta]:
        """Take one event-stream message; return the deltas it carries.

        A server-sent event is read as the AWS SDKs present a stream event,
        `{"<event type>": payload}` (`{"throttlingException": {...}}` for an
        exception), as gateways that re-frame Bedrock streams as SSE send them.

        Raises:
            ProviderError: For an exception or error message, or a payload
                that is not a JSON object.
            MalformedToolCall: When Bedrock reports a malformed tool use.
        """
        if self._done:
            return []
        if isinstance(message, ServerSentEvent):
            return self._feed_sse(message)
        kind = message.text_header(":message-type") or "event"
        text = message.payload.decode("utf-8", errors="replace")
        if kind == "error":
            code = message.text_header(":error-code") or "error"
            detail = message.text_header(":error-message") or text
            raise self._errors.from_payload(
                {"error": {"message": detail, "code": code}}, body=text or None
            )
        payload = loads_object(text) if text.strip() else {}
        if payload is None:
            raise self._errors.broken(
                f"{self._errors.provider} sent a stream event that is not a JSON object.",
                body=text,
            )
        if kind == "exception":
            raise self._exception(message.text_header(":exception-type") or "", payload, text)
        return self.add(message.text_header(":event-type") or "", payload)

    def _feed_sse(self, event: ServerSentEvent) -> list[Delta]:
        data = event.data.strip()
        wrapped = loads_object(data) if data else {}
        if wrapped is None:
            raise self._errors.broken(
                f"{self._errors.provider} sent a stream event that is not a JSON object.",
                body=data,
            )
        deltas: list[Delta] = []
        for name, value in wrapped.items():
            payload = value if isinstance(value, dict) else {}
            if name.endswith("Exception"):
                raise self._exception(name, payload, data)
            deltas += self.add(name, payload)
        return deltas

    def add(self, event: str, payload: JsonObject) -> list[Delta]:
        """Take one decoded event, named as in its `:event-type` header."""
        if event == "contentBlockStart":
            return self._start(get_int(payload, "contentBlockIndex"), get_object(payload, "start"))
        if event == "contentBlockDelta":
            return self._delta(get_int(payload, "contentBlockIndex"), get_object(payload, "delta"))
        if event == "messageStop":
            self._stop(get_str(payload, "stopReason"))
        elif event == "metadata":
            usage = get_object(payload, "usage")
            if usage:  # else the builder's: a request whose usage was not reported
                self._builder.usage = parse_converse_usage(usage)
            self._done = True
        return []

    def finish(self) -> ModelResponse:
        """Return the response; raise if the stream ended before `metadata`.

        Raises:
            ProviderError: When the stream was cut short.
            MalformedToolCall: When a tool call has no name.
        """
        if not self._done:
            where = "messageStop" if not self._stopped else "its metadata event"
            raise self._errors.broken(
                f"The {self._errors.provider} stream ended before {where}; "
                "the answer is incomplete."
            )
        return self.build()

    def build(self) -> ModelResponse:
        """Return what was assembled, without checking the stream's end."""
        return self._builder.build()

    # -- events --------------------------------------------------------------------------

    def _block(self, index: int | None) -> _Block:
        return self._blocks.setdefault(-1 if index is None else index, _Block())

    def _start(self, index: int | None, start: JsonObject) -> list[Delta]:
        block = self._block(index)
        if "toolResult" in start:
            block.server_side = True
            return []
        tool = get_object(start, "toolUse")
        if not tool:
            return []
        if get_str(tool, "type") == "server_tool_use":
            block.server_side = True
            return []
        return [self._open_call(block, get_str(tool, "toolUseId"), get_str(tool, "name"))]

    def _open_call(self, block: _Block, call_id: str | None, name: str | None) -> ToolCallDelta:
        block.call = len(self._builder.tool_calls)
        self._builder.tool_calls.append(ToolCallBuffer(call_id=call_id, name=name))
        return ToolCallDelta(index=block.call, call_id=call_id, name=name)

    def _delta(self, index: int | None, delta: JsonObject) -> list[Delta]:
        block = self._block(index)
        if block.server_side:
            return []
        text = get_str(delta, "text")
        if text is not None:
            if not text:
                return []
            self._builder.text.append(text)
            return [TextDelta(delta=text)]
        if "toolUse" in delta:
            fragment = get_str(get_object(delta, "toolUse"), "input") or ""
            deltas: list[Delta] = []
            if block.call is None:  # input with no contentBlockStart: a call without a name
                deltas.append(self._open_call(block, None, None))
            assert block.call is not None
            if fragment:
                self._builder.tool_calls[block.call].parts.append(fragment)
                deltas.append(ToolCallDelta(index=block.call, arguments_delta=fragment))
            return deltas
        if "reasoningContent" in delta:
            return self._reasoning(block, get_object(delta, "reasoningContent"))
        return []

    def _reasoning(self, block: _Block, content: JsonObject) -> list[Delta]:
        if block.reasoning is None:
            block.reasoning = ReasoningBuffer(PROVIDER)
            self._builder.reasoning.append(block.reasoning)
        buffer = block.reasoning
        deltas: list[Delta] = []
        text = get_str(content, "text")
        if text:
            buffer.parts.append(text)
            deltas.append(ReasoningDelta(delta=text))
        signature = get_str(content, "signature")
        if signature:
            buffer.signature = (buffer.signature or "") + signature
            deltas.append(ReasoningDelta(signature=signature))
        redacted = get_str(content, "redactedContent")
        if redacted:
            buffer.redacted_data = (buffer.redacted_data or "") + redacted
        return deltas

    def _stop(self, reason: str | None) -> None:
        self._stopped = True
        if reason == "malformed_tool_use":
            raise MalformedToolCall(
                "Bedrock reported a malformed tool use.",
                feedback="Your last tool call was malformed. Call the tool again, with "
                "arguments that follow its schema.",
            )
        if reason is not None:
            self._builder.finish_reason = _FINISH.get(reason, "unknown")

    def _exception(self, kind: str, payload: JsonObject, text: str) -> ProviderError:
        detail = get_str(payload, "message") or get_str(payload, "Message") or kind
        error: JsonObject = {"message": f"{kind}: {detail}" if kind else detail, "type": kind}
        status = EXCEPTION_STATUS.get(kind)
        if status is not None:
            error["status_code"] = status
        failure = self._errors.from_payload({"error": error}, body=text)
        failure.retryable = kind in _RETRYABLE_EXCEPTIONS
        return failure


def parse_converse(
    payload: JsonObject, errors: ErrorReporter, model: str | None = None
) -> ModelResponse:
    """Parse a whole (non-streamed) Converse response.

    Raises:
        ProviderError: When the body is an error or has no output message.
        MalformedToolCall: When a tool call has no name, or Bedrock says one was malformed.
    """
    message = get_object(get_object(payload, "output"), "message")
    if not isinstance(message.get("content"), list):
        if "message" in payload and "output" not in payload:
            raise errors.from_payload(payload, body=dumps(payload))
        raise errors.broken(
            f"The {errors.provider} response has no output message.", body=dumps(payload)
        )
    # A whole message reads like a stream in which every block arrives complete.
    parser = ConverseStreamParser(errors, model)
    for index, block in enumerate(iter_objects(get_list(message, "content"))):
        tool = get_object(block, "toolUse")
        if tool:
            parser.add(
                "contentBlockStart", {"contentBlockIndex": index, "start": {"toolUse": tool}}
            )
        parser.add("contentBlockDelta", {"contentBlockIndex": index, "delta": _as_delta(block)})
    parser.add("messageStop", {"stopReason": payload.get("stopReason")})
    parser.add("metadata", {"usage": get_object(payload, "usage")})
    return parser.build()


def _as_delta(block: JsonObject) -> JsonObject:
    """A whole content block as the delta that would have streamed it."""
    if "toolUse" in block:
        given = get_object(block, "toolUse").get("input")
        return {"toolUse": {"input": dumps(given) if isinstance(given, dict) and given else ""}}
    reasoning = get_object(block, "reasoningContent")
    if reasoning:
        text = get_object(reasoning, "reasoningText")
        if text:
            return {"reasoningContent": text}
        return {"reasoningContent": {"redactedContent": reasoning.get("redactedContent")}}
    if "text" in block:
        return {"text": block.get("text")}
    return {}
