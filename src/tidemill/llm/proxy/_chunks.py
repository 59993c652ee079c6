"""A Tidemill model stream written as OpenAI `chat.completion.chunk` server-sent events.

`ChunkEncoder` turns each `ModelStreamEvent` into the bytes of zero or more
events, in the order OpenAI sends them: a first chunk with the assistant
role, then content, `reasoning_content` and `tool_calls` deltas (a call's
first delta carries its `index`, `id`, `type` and `name`; later ones only
argument fragments), a chunk with the finish reason, a usage chunk with
`choices: []` when the client asked for one (and the upstream reported
usage: unknown counts are not sent as zeros), and `data: [DONE]`.

Text deltas are by far the most frequent event, so their bytes are the
stream's fixed prefix and suffix around the JSON-encoded text, rather than
a whole chunk object encoded each time. A text delta with log probabilities
(`TextDelta.logprobs`, when the client asked for them) carries them in its
chunk's `logprobs`, as the upstream sent them; every other chunk has `null`.
"""

from __future__ import annotations

import json
from typing import get_args

from tidemill.llm._model import ModelStreamEvent
from tidemill.llm.proxy._response import (
    finish_reason,
    reported,
    tool_call_arguments,
    usage_body,
)
from tidemill.llm.proxy._wire import (
    ChunkDelta,
    ChunkToolCall,
    CompletionChunk,
    CompletionUsage,
    ErrorBody,
    OpenAIFinishReason,
)
from tidemill.types import (
    FinishReason,
    ModelResponse,
    ReasoningDelta,
    ResponseDone,
    TextDelta,
    ToolCallDelta,
    Usage,
    new_call_id,
)

__all__ = ["DONE", "ChunkEncoder", "error_event"]

DONE = b"data: [DONE]\n\n"
"""The event that ends a Chat Completions stream."""


# One encoder for every chunk: `json.dumps` with options builds a new encoder per call.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _dumps(value: object) -> bytes:
    return _encode(value).encode("utf-8")


_FINISHED: dict[OpenAIFinishReason, bytes] = {
    reason: _dumps([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}])
    for reason in get_args(OpenAIFinishReason)
}
"""The `choices` of the chunk that carries each finish reason."""


def error_event(body: ErrorBody) -> bytes:
    """The event that reports an error after the stream began; the stream ends after it.

    The official SDKs raise an `APIError` for any event whose data holds `error`.

    Examples:
        >>> event = error_event({"error": {"message": "x", "type": "api_error", "param": None,
        ...                                "code": None}})
        >>> event.splitlines()[:2]
        [b'event: error', b'data: {"error":{"message":"x","type":"api_error","param":null,...}}']
    """
    return b"event: error\ndata: " + _dumps(body) + b"\n\n"


class ChunkEncoder:
    r"""Writes one streamed answer as `chat.completion.chunk` events.

    Args:
        model: The model name to report in every chunk.
        response_id: The `chatcmpl-` id every chunk shares.
        created: The Unix timestamp every chunk shares.
        include_usage: Whether the client asked for the final usage chunk; every
            other chunk then carries `"usage": null`, as OpenAI's do.

    Examples:
        >>> import json
        >>> encoder = ChunkEncoder(model="m", response_id="chatcmpl-1", created=0)
        >>> frame = encoder.event(TextDelta(delta="Hi"))
        >>> frame.startswith(b"data: "), frame.endswith(b"}\n\n")
        (True, True)
        >>> chunk = json.loads(frame[6:])
        >>> chunk["object"], chunk["choices"][0]["delta"]
        ('chat.completion.chunk', {'content': 'Hi'})
    """

    def __init__(
        self, *, model: str, response_id: str, created: int, include_usage: bool = False
    ) -> None:
        self.model = model
        self.response_id = response_id
        self.created = created
        self.include_usage = include_usage
        # The chunk object up to the choices, left open: `{"id":...,"choices":`, with the
        # fields in the order `_chunk` gives them.
        self._head = b"".join(
            (
                b'data: {"id":',
                _dumps(response_id),
                b',"object":"chat.completion.chunk","created":',
                _dumps(created),
                b',"model":',
                _dumps(model),
                b',"system_fingerprint":null,"choices":',
            )
        )
        tail = b',"usage":null}\n\n' if include_usage else b"}\n\n"
        self._tail = tail
        self._text_prefix = self._head + b'[{"index":0,"delta":{"content":'
        self._text_suffix = b'},"logprobs":null,"finish_reason":null}]' + tail
        self._slots: dict[int, int] = {}
        self._saw_text = False

    def start(self) -> bytes:
        """The first event: the assistant role, with empty content."""
        return self._delta({"role": "assistant", "content": ""})

    def event(self, event: ModelStreamEvent) -> bytes:
        """The events for one model stream event (empty bytes for none)."""
        if isinstance(event, TextDelta):
            if event.logprobs is not None:
                return self._scored_text(event)
            if not event.delta:
                return b""
            self._saw_text = True
            return self._text_prefix + _dumps(event.delta) + self._text_suffix
        if isinstance(event, ToolCallDelta):
            return self._tool_call(event)
        if isinstance(event, ReasoningDelta):
            return self._delta({"reasoning_content": event.delta}) if event.delta else b""
        return self.finish(event)

    def finish(self, done: ResponseDone) -> bytes:
        """The closing events: what was never streamed, the finish reason, usage, `[DONE]`."""
        response = done.response
        return self._unstreamed(response) + self.closing(response.finish_reason, response.usage)

    def closing(self, reason: FinishReason, usage: Usage) -> bytes:
        """The closing events of an answer streamed in full: the finish reason, usage, `[DONE]`.

        The usage chunk is left out when the upstream reported no usage.
        """
        parts = [self._head, _FINISHED[finish_reason(reason)], self._tail]
        if self.include_usage and reported(usage):  # the fields, `"choices":[]`, the usage
            parts += (self._head, b'[],"usage":', _dumps(usage_body(usage)), b"}\n\n")
        parts.append(DONE)
        return b"".join(parts)

    # -- pieces --------------------------------------------------------------------------

    def _chunk(self, *, usage: CompletionUsage | None = None) -> CompletionChunk:
        chunk: CompletionChunk = {
            "id": self.response_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [],
        }
        if self.include_usage:
            chunk["usage"] = usage
        return chunk

    def _delta(self, delta: ChunkDelta, reason: OpenAIFinishReason | None = None) -> bytes:
        choice = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]
        return self._head + _dumps(choice) + self._tail

    def _scored_text(self, event: TextDelta) -> bytes:
        """A text chunk with the upstream's `logprobs` of it, as they came."""
        self._saw_text = self._saw_text or bool(event.delta)
        return b"".join(
            (
                self._text_prefix,
                _dumps(event.delta),
                b'},"logprobs":',
                _dumps(event.logprobs),
                b',"finish_reason":null}]',
                self._tail,
            )
        )

    def _tool_call(self, event: ToolCallDelta) -> bytes:
        slot = self._slots.get(event.index)
        if slot is None:
            # Upstream indexes need not start at 0 or be dense; the client's must.
            slot = self._slots[event.index] = len(self._slots)
            call: ChunkToolCall = {
                "index": slot,
                "id": event.call_id or new_call_id(),
                "type": "function",
                "function": {"name": event.name or "", "arguments": event.arguments_delta},
            }
        else:
            call = {"index": slot, "function": {"arguments": event.arguments_delta}}
            if event.name:  # a name that arrived after the call's first fragment
                call["function"]["name"] = event.name
            elif not event.arguments_delta:
                return b""
        return self._delta({"tool_calls": [call]})

    def _unstreamed(self, response: ModelResponse) -> bytes:
        """Text and calls the model returned whole instead of streaming them."""
        parts: list[bytes] = []
        message = response.message
        if message.content and not self._saw_text:
            parts.append(self.event(TextDelta(delta=message.content, logprobs=response.logprobs)))
        for call in message.tool_calls[len(self._slots) :]:
            slot = len(self._slots)
            self._slots[-1 - slot] = slot  # a key no upstream index uses
            whole: ChunkToolCall = {
                "index": slot,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": tool_call_arguments(call)},
            }
            parts.append(self._delta({"tool_calls": [whole]}))
        return b"".join(parts)
