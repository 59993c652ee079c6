"""A Tidemill answer written back in Anthropic's Messages API shape, whole or streamed.

A whole answer (`message_body`) holds a `text` block for the text and a
`tool_use` block for each tool call (its `id` the model's call id, a fresh
`toolu_` one when it gave none; its `input` the parsed arguments). The
`stop_reason` is `tool_use` when the answer calls tools, `max_tokens` when
it was cut short, `refusal` for a content filter, `end_turn` otherwise:
Tidemill's finish reasons do not tell a stop sequence from a natural end, so
`stop_sequence` is never sent. Usage is Anthropic's: `input_tokens` without
the cached ones, which are counted apart.

A streamed answer (`MessageEvents`) is `message_start`, then for each block
`content_block_start` (a text block empty, a tool_use block with an empty
`input`), its `content_block_delta`s (`text_delta`, or `input_json_delta`
with the argument text as it arrives in `partial_json`) and
`content_block_stop`, then `message_delta` (the stop reason and usage) and
`message_stop`. Blocks are numbered in the order they open. A block is
closed when the next one opens, as Anthropic's own streams do, except a tool
call whose arguments are not yet a whole JSON object: an upstream that
interleaves the fragments of parallel calls keeps it open, and its later
fragments still go to its own index. Text and calls the model returned whole
instead of streaming them are sent at the end.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from tidemill.llm._json import dumps, loads_object
from tidemill.llm._model import ModelStreamEvent
from tidemill.types import (
    ModelResponse,
    ResponseDone,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)

__all__ = ["MessageEvents", "event", "message_body", "stop_reason", "tool_use_id", "usage_body"]


def tool_use_id() -> str:
    """A fresh `toolu_` id, for a call whose model gave none."""
    return "toolu_" + secrets.token_hex(12)


def stop_reason(response: ModelResponse) -> str:
    """Anthropic's `stop_reason` for `response`.

    Examples:
        >>> from tidemill.types import Message
        >>> stop_reason(ModelResponse(message=Message.assistant("Hi"), finish_reason="length"))
        'max_tokens'
        >>> call = ToolCall(name="add")
        >>> stop_reason(ModelResponse(message=Message.assistant(tool_calls=(call,))))
        'tool_use'
    """
    reason = response.finish_reason
    if reason == "length":
        return "max_tokens"
    if response.message.tool_calls:
        return "tool_use"
    return "refusal" if reason == "content_filter" else "end_turn"


def usage_body(usage: Usage) -> dict[str, int]:
    """A `Usage` as Anthropic's `usage`: its `input_tokens` leave the cached ones out.

    The cache counts are sent when there are some.

    Examples:
        >>> usage_body(Usage(input_tokens=10, output_tokens=2, cache_read_tokens=4))
        {'input_tokens': 6, 'output_tokens': 2, 'cache_read_input_tokens': 4}
    """
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    body = {
        "input_tokens": max(usage.input_tokens - cached, 0),
        "output_tokens": usage.output_tokens,
    }
    if usage.cache_read_tokens:
        body["cache_read_input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        body["cache_creation_input_tokens"] = usage.cache_write_tokens
    return body


def _tool_use(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": call.id or tool_use_id(), "name": call.name, "input": {}}


def message_body(response: ModelResponse, *, model: str, message_id: str) -> dict[str, Any]:
    """A Messages API answer for `response`.

    Examples:
        >>> from tidemill.types import Message
        >>> call = ToolCall(id="call_1", name="add", arguments={"a": 1})
        >>> body = message_body(ModelResponse(message=Message.assistant("On it.",
        ...     tool_calls=(call,))), model="m", message_id="msg_1")
        >>> [block["type"] for block in body["content"]], body["content"][1]["input"]
        (['text', 'tool_use'], {'a': 1})
    """
    message = response.message
    content: list[dict[str, Any]] = []
    if message.content or not message.tool_calls:
        content.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        content.append({**_tool_use(call), "input": call.arguments})
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(response),
        "stop_sequence": None,
        "usage": usage_body(response.usage),
    }


def event(name: str, data: dict[str, Any]) -> bytes:
    """One server-sent event of a Messages stream."""
    return b"event: %s\ndata: %s\n\n" % (name.encode(), dumps(data).encode("utf-8"))


@dataclass
class _Call:
    """One streamed tool call: its block once it has one, the argument text sent so far."""

    call_id: str | None
    name: str | None
    block: int | None = None
    parts: list[str] = field(default_factory=list)


class MessageEvents:
    """Writes one streamed answer as Messages API events.

    Args:
        model: The model name to report.
        message_id: The `msg_` id of the answer.

    Examples:
        >>> import json
        >>> events = MessageEvents(model="m", message_id="msg_1")
        >>> data = events.event(TextDelta(delta="Hi")) + events.event(
        ...     ToolCallDelta(index=0, call_id="call_1", name="add", arguments_delta='{"a":'))
        >>> [(d["type"], d["index"]) for d in (json.loads(line[6:])
        ...  for line in data.decode().splitlines() if line.startswith("data: "))]
        [('content_block_start', 0), ('content_block_delta', 0), ('content_block_stop', 0), \
('content_block_start', 1), ('content_block_delta', 1)]
    """

    def __init__(self, *, model: str, message_id: str) -> None:
        self.model = model
        self.message_id = message_id
        self._blocks = 0
        self._open: set[int] = set()
        self._text: int | None = None
        self._saw_text = False
        self._calls: dict[int, _Call] = {}

    def start(self) -> bytes:
        """The first event: `message_start`, with no content yet."""
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_body(Usage()),
        }
        return event("message_start", {"type": "message_start", "message": message})

    def event(self, item: ModelStreamEvent) -> bytes:
        """The events for one model stream event (empty bytes for none)."""
        if isinstance(item, TextDelta):
            return self._say(item.delta) if item.delta else b""
        if isinstance(item, ToolCallDelta):
            return self._fragment(item)
        if isinstance(item, ResponseDone):
            return self.finish(item.response)
        return b""  # reasoning: this endpoint serves no thinking

    def finish(self, response: ModelResponse) -> bytes:
        """The closing events: what was never streamed, every block's stop, the stop reason."""
        message = response.message
        parts: list[bytes] = []
        if message.content and not self._saw_text:
            parts.append(self._say(message.content))
        for position, call in enumerate(self._calls.values()):
            if call.block is None:  # its name never came: the response has it
                whole = message.tool_calls[position] if position < len(message.tool_calls) else None
                call.name = whole.name if whole is not None else ""
                call.call_id = call.call_id or (whole.id if whole is not None else None)
                parts.append(self._begin(call, "".join(call.parts)))
        for whole in message.tool_calls[len(self._calls) :]:
            call = _Call(call_id=whole.id, name=whole.name)
            self._calls[-1 - len(self._calls)] = call  # a key no upstream index uses
            parts.append(self._begin(call, dumps(whole.arguments)))
        if not self._blocks:
            parts.append(self._open_block({"type": "text", "text": ""}))
        parts += [self._stop(index) for index in sorted(self._open)]
        self._open.clear()
        delta = {"stop_reason": stop_reason(response), "stop_sequence": None}
        usage = usage_body(response.usage)
        closing = {"type": "message_delta", "delta": delta, "usage": usage}
        parts.append(event("message_delta", closing))
        parts.append(event("message_stop", {"type": "message_stop"}))
        return b"".join(parts)

    # -- pieces --------------------------------------------------------------------------

    def _say(self, text: str) -> bytes:
        opened = b""
        if self._text is None:
            opened = self._open_block({"type": "text", "text": ""})
            self._text = self._blocks - 1
        self._saw_text = True
        return opened + self._delta(self._text, {"type": "text_delta", "text": text})

    def _fragment(self, item: ToolCallDelta) -> bytes:
        call = self._calls.get(item.index)
        if call is None:
            call = self._calls[item.index] = _Call(call_id=item.call_id, name=item.name or None)
        elif call.block is None:  # the id or name may come after the first fragment
            call.call_id = call.call_id or item.call_id
            call.name = call.name or item.name or None
        if call.block is None:
            if call.name is None:
                call.parts.append(item.arguments_delta)
                return b""
            return self._begin(call, "".join(call.parts) + item.arguments_delta)
        if not item.arguments_delta or call.block not in self._open:
            # A call is closed only once its arguments are a whole object: nothing can follow.
            return b""
        call.parts.append(item.arguments_delta)
        return self._json(call.block, item.arguments_delta)

    def _begin(self, call: _Call, arguments: str) -> bytes:
        """Open `call`'s block and send the arguments it has so far."""
        block = {"type": "tool_use", "id": call.call_id or tool_use_id(), "name": call.name or ""}
        opened = self._open_block({**block, "input": {}})
        call.block = self._blocks - 1
        call.parts = [arguments] if arguments else []
        return opened + (self._json(call.block, arguments) if arguments else b"")

    def _open_block(self, block: dict[str, Any]) -> bytes:
        """Close what is done, then open `block` at the next index."""
        closing = b""
        if self._text is not None:
            closing += self._stop(self._text)
            self._text = None
        for call in self._calls.values():
            if call.block in self._open and _whole("".join(call.parts)):
                closing += self._stop(call.block)
        index = self._blocks
        self._blocks += 1
        self._open.add(index)
        opened = {"type": "content_block_start", "index": index, "content_block": block}
        return closing + event("content_block_start", opened)

    def _stop(self, index: int | None) -> bytes:
        if index is None or index not in self._open:
            return b""
        self._open.discard(index)
        return event("content_block_stop", {"type": "content_block_stop", "index": index})

    def _json(self, index: int, text: str) -> bytes:
        return self._delta(index, {"type": "input_json_delta", "partial_json": text})

    def _delta(self, index: int, delta: dict[str, str]) -> bytes:
        data = {"type": "content_block_delta", "index": index, "delta": delta}
        return event("content_block_delta", data)


def _whole(text: str) -> bool:
    """Whether `text` is a whole JSON object: no fragment of it can still be on its way."""
    try:
        return text.rstrip().endswith("}") and loads_object(text) is not None
    except RecursionError:
        return False
