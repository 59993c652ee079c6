"""Parsing OpenAI Responses API results, whole or streamed, into Tidemill types.

A response is a list of output items. The stream announces each one
(`response.output_item.added`), sends its pieces (`output_text.delta`,
`refusal.delta`, `function_call_arguments.delta`,
`reasoning_summary_text.delta`), closes it (`response.output_item.done`,
with the item complete) and ends with `response.completed`,
`response.incomplete` or `response.failed`; an `error` event reports a
failure inside the 200 stream. A whole response holds the same items, so
both are read by one accumulator, item by item.

- `reasoning` items become one `Reasoning` per summary part, each carrying
  the item's `id`; the first also keeps `encrypted_content` (as
  `redacted_data`), taken from the *finished* item (the value announced at
  `output_item.added` is not the final one);
- `function_call` items become `ToolCall`s with their `call_id`;
- `message` items give the text, a `refusal` part included (the response
  then finishes with `content_filter`);
- usage counts cached and reasoning tokens; `response.incomplete` for
  `max_output_tokens` finishes with `length`;
- the log probabilities of a text part or delta (asked for with `include:
  ["message.output_text.logprobs"]`) become Chat Completions' `{"content":
  [...], "refusal": null}`, the list as it came (a delta's entries have no
  `bytes`: the stream leaves them out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from pydantic import JsonValue

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
    ModelResponse,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = ["PROVIDER", "ResponsesStreamParser", "parse_response_object", "parse_responses_usage"]

PROVIDER = "openai-responses"

_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


def parse_responses_usage(usage: JsonObject) -> Usage:
    """Read a Responses `usage` object.

    Examples:
        >>> parse_responses_usage({"input_tokens": 90, "output_tokens": 40,
        ...     "input_tokens_details": {"cached_tokens": 64},
        ...     "output_tokens_details": {"reasoning_tokens": 32}}).cache_read_tokens
        64
    """
    inputs = get_object(usage, "input_tokens_details")
    outputs = get_object(usage, "output_tokens_details")
    return Usage(
        requests=1,
        input_tokens=get_int(usage, "input_tokens") or 0,
        output_tokens=get_int(usage, "output_tokens") or 0,
        cache_read_tokens=get_int(inputs, "cached_tokens") or 0,
        cache_write_tokens=get_int(inputs, "cache_write_tokens") or 0,
        reasoning_tokens=get_int(outputs, "reasoning_tokens") or 0,
    )


@dataclass(slots=True)
class _Item:
    """One output item as far as it has arrived."""

    kind: str | None
    call: int | None = None
    """For a function call: its position among the response's tool calls."""
    summaries: dict[int, ReasoningBuffer] = field(default_factory=dict)
    """For reasoning: one buffer per summary part, by `summary_index`."""
    streamed_text: bool = False
    """For a message: whether text deltas arrived (then the finished item adds none)."""


class ResponsesStreamParser:
    """Turns a Responses event stream into stream events and a `ModelResponse`."""

    def __init__(self, errors: ErrorReporter) -> None:
        self._errors = errors
        self._builder = ResponseBuilder(errors.provider)
        self._items: dict[str, _Item] = {}
        self._by_index: dict[int, str] = {}
        self._refused = False
        self._done = False
        self._reasoning_said = False

    @property
    def done(self) -> bool:
        """Whether the terminal event has arrived."""
        return self._done

    def feed(self, event: ServerSentEvent) -> list[Delta]:
        """Take one server-sent event; return the deltas it carries.

        Raises:
            ProviderError: For an `error` event, `response.failed`, or data
                that is not a JSON object.
        """
        data = event.data.strip()
        if self._done or not data or data == "[DONE]":
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
        if kind in ("response.created", "response.in_progress", "response.queued"):
            self._header(get_object(payload, "response"))
        elif kind == "response.output_item.added":
            return self._added(get_object(payload, "item"), get_int(payload, "output_index"))
        elif kind == "response.output_item.done":
            return self.item_done(get_object(payload, "item"), get_int(payload, "output_index"))
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            return self._text(payload, refusal=kind == "response.refusal.delta")
        elif kind == "response.function_call_arguments.delta":
            return self._arguments(payload)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return self._summary(payload)
        elif kind in _TERMINAL:
            self.terminal(kind, get_object(payload, "response"))
        return []

    def finish(self) -> ModelResponse:
        """Return the response; raise if the stream ended before its terminal event.

        Raises:
            ProviderError: When the stream was cut short.
            MalformedToolCall: When a tool call has no name.
        """
        if not self._done:
            raise self._errors.broken(
                f"The {self._errors.provider} stream ended before response.completed; "
                "the answer is incomplete."
            )
        return self.build()

    def build(self) -> ModelResponse:
        """Return what was assembled, without checking the stream's end."""
        if self._refused and self._builder.finish_reason in (None, "stop"):
            self._builder.finish_reason = "content_filter"
        return self._builder.build()

    # -- items ---------------------------------------------------------------------------

    def _header(self, response: JsonObject) -> None:
        builder = self._builder
        builder.response_id = builder.response_id or get_str(response, "id")
        builder.model = builder.model or get_str(response, "model")

    def _item(self, item_id: str | None, index: int | None, kind: str | None) -> _Item:
        """The record of an item, by id or output index, made on first sight."""
        key = item_id or (self._by_index.get(index) if index is not None else None)
        if key is None:
            key = f"#{index if index is not None else len(self._items)}"
        record = self._items.get(key)
        if record is None:
            record = self._items[key] = _Item(kind)
            if index is not None:
                self._by_index.setdefault(index, key)
        elif record.kind is None:
            record.kind = kind
        return record

    def _added(self, item: JsonObject, index: int | None) -> list[Delta]:
        kind = get_str(item, "type")
        record = self._item(get_str(item, "id"), index, kind)
        if kind == "function_call":
            return self._open_call(record, item)
        return []

    def _open_call(self, record: _Item, item: JsonObject) -> list[Delta]:
        if record.call is not None:
            return []
        calls = self._builder.tool_calls
        record.call = len(calls)
        buffer = ToolCallBuffer(call_id=get_str(item, "call_id"), name=get_str(item, "name"))
        calls.append(buffer)
        arguments = get_str(item, "arguments") or ""
        if arguments:
            buffer.parts.append(arguments)
        return [
            ToolCallDelta(
                index=record.call,
                call_id=buffer.call_id,
                name=buffer.name,
                arguments_delta=arguments,
            )
        ]

    def item_done(self, item: JsonObject, index: int | None) -> list[Delta]:
        """Take a finished output item (`output_item.done`, or one of a whole response)."""
        kind = get_str(item, "type")
        record = self._item(get_str(item, "id"), index, kind)
        if kind == "function_call":
            deltas = self._open_call(record, item)
            return deltas + self._final_arguments(record, get_str(item, "arguments"))
        if kind == "reasoning":
            return self._reasoning_done(record, item)
        if kind == "message" and not record.streamed_text:
            return self._message_done(item)
        return []

    def _message_done(self, item: JsonObject) -> list[Delta]:
        """The text of a message whose deltas never came (a whole response)."""
        deltas: list[Delta] = []
        for part in iter_objects(get_list(item, "content")):
            refusal = get_str(part, "refusal") if get_str(part, "type") == "refusal" else None
            text = refusal or get_str(part, "text") or ""
            if refusal:
                self._refused = True
            if text:
                self._builder.text.append(text)
                deltas.append(self._scored(text, None if refusal else part.get("logprobs")))
        return deltas

    def _text(self, payload: JsonObject, *, refusal: bool) -> list[Delta]:
        record = self._item(get_str(payload, "item_id"), get_int(payload, "output_index"), None)
        text = get_str(payload, "delta")
        if refusal:
            self._refused = True
        if not text:
            return []
        record.streamed_text = True
        self._builder.text.append(text)
        return [self._scored(text, None if refusal else payload.get("logprobs"))]

    def _scored(self, text: str, logprobs: object) -> TextDelta:
        """A text delta, with the log probabilities of its tokens in Chat Completions' form.

        The Responses API sends `logprobs: []` when none were asked for: those are no scores.
        """
        if not isinstance(logprobs, list) or not logprobs:
            return TextDelta(delta=text)
        # Decoded from the event's JSON: a JSON value.
        scored: JsonValue = {"content": cast(JsonValue, logprobs), "refusal": None}
        self._builder.logprobs.append(scored)
        # Parsed JSON already: no need to validate it again.
        return TextDelta.model_construct(delta=text, logprobs=scored)

    def _arguments(self, payload: JsonObject) -> list[Delta]:
        record = self._item(
            get_str(payload, "item_id"), get_int(payload, "output_index"), "function_call"
        )
        text = get_str(payload, "delta")
        if record.call is None or not text:
            return []
        self._builder.tool_calls[record.call].parts.append(text)
        return [ToolCallDelta(index=record.call, arguments_delta=text)]

    def _final_arguments(self, record: _Item, final: str | None) -> list[Delta]:
        if record.call is None or final is None:
            return []
        buffer = self._builder.tool_calls[record.call]
        sent = buffer.arguments
        if final == sent:
            return []
        if final.startswith(sent):
            rest = final[len(sent) :]
            buffer.parts.append(rest)
            return [ToolCallDelta(index=record.call, arguments_delta=rest)]
        buffer.parts[:] = [final]  # the finished item is authoritative
        return []

    def _summary(self, payload: JsonObject) -> list[Delta]:
        record = self._item(
            get_str(payload, "item_id"), get_int(payload, "output_index"), "reasoning"
        )
        index = get_int(payload, "summary_index") or get_int(payload, "content_index") or 0
        text = get_str(payload, "delta")
        if not text:
            return []
        deltas: list[Delta] = []
        buffer = record.summaries.get(index)
        if buffer is None:
            if self._reasoning_said:
                deltas.append(ReasoningDelta(delta="\n\n"))  # keep summary parts apart on screen
            buffer = self._summary_buffer(record, index, get_str(payload, "item_id"))
        buffer.parts.append(text)
        self._reasoning_said = True
        deltas.append(ReasoningDelta(delta=text))
        return deltas

    def _summary_buffer(self, record: _Item, index: int, item_id: str | None) -> ReasoningBuffer:
        buffer = ReasoningBuffer(self._errors.provider, reasoning_id=item_id)
        record.summaries[index] = buffer
        self._builder.reasoning.append(buffer)
        return buffer

    def _reasoning_done(self, record: _Item, item: JsonObject) -> list[Delta]:
        item_id = get_str(item, "id")
        deltas: list[Delta] = []
        for index, part in enumerate(iter_objects(get_list(item, "summary"))):
            text = get_str(part, "text") or ""
            buffer = record.summaries.get(index)
            if buffer is None:
                buffer = self._summary_buffer(record, index, item_id)
            if text and not buffer.parts:
                if self._reasoning_said:
                    deltas.append(ReasoningDelta(delta="\n\n"))
                buffer.parts.append(text)
                self._reasoning_said = True
                deltas.append(ReasoningDelta(delta=text))
        encrypted = get_str(item, "encrypted_content")
        if encrypted or not record.summaries:
            first = record.summaries.get(min(record.summaries, default=0))
            if first is None:
                first = self._summary_buffer(record, 0, item_id)
            first.redacted_data = encrypted or first.redacted_data
        return deltas

    def terminal(self, kind: str, response: JsonObject) -> None:
        """Take the final state of the response (`completed`, `incomplete` or `failed`).

        Raises:
            ProviderError: For a failed response.
        """
        self._header(response)
        if kind == "response.failed" or get_str(response, "status") == "failed":
            error = get_object(response, "error") or {"message": "the response failed"}
            raise self._errors.from_payload({"error": error}, body=dumps(response)[:4000])
        usage = get_object(response, "usage")
        if usage:
            self._builder.usage = parse_responses_usage(usage)
        if kind == "response.incomplete" or get_str(response, "status") == "incomplete":
            reason = get_str(get_object(response, "incomplete_details"), "reason")
            if reason == "max_output_tokens":
                self._builder.finish_reason = "length"
            elif reason == "content_filter":
                self._builder.finish_reason = "content_filter"
            else:
                self._builder.finish_reason = "unknown"
        else:
            self._builder.finish_reason = "stop"
        self._done = True


def parse_response_object(payload: JsonObject, errors: ErrorReporter) -> ModelResponse:
    """Parse a whole (non-streamed) Response object.

    Raises:
        ProviderError: When the body is an error, a failed response, or has no output list.
        MalformedToolCall: When a tool call has no name.
    """
    if isinstance(payload.get("error"), dict) and get_str(payload, "object") != "response":
        raise errors.from_payload(payload, body=dumps(payload))
    if not isinstance(payload.get("output"), list):
        raise errors.broken(
            f"The {errors.provider} response has no output list.", body=dumps(payload)
        )
    parser = ResponsesStreamParser(errors)
    for index, item in enumerate(iter_objects(get_list(payload, "output"))):
        parser.item_done(item, index)
    status = get_str(payload, "status")
    parser.terminal(
        "response.failed"
        if status == "failed"
        else "response.incomplete"
        if status == "incomplete"
        else "response.completed",
        payload,
    )
    return parser.build()
