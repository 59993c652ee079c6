"""Parsing Chat Completions responses, whole or streamed, into Tidemill types.

One accumulator serves both: a whole response is read as if its `message`
were a single stream delta, so both paths assemble text, reasoning, tool
calls, usage and the finish reason the same way.

What it copes with, from recorded traffic:

- tool-call fragments keyed by `index`, interleaved across parallel calls,
  with the first `index` not 0 (gateways), without an `index` at all, with
  every call numbered 0 but a new `id` (some servers), with the opening
  fragment repeated in full (OpenRouter), with `name: ""` on continuations
  (Mistral) or `arguments: null`;
- reasoning as `reasoning_content` (DeepSeek, vLLM), `reasoning` (Groq,
  Ollama, OpenRouter), Mistral's `thinking` content parts, and OpenRouter's
  `reasoning_details` signatures;
- usage on the last `choices: []` chunk (OpenAI with `include_usage`) or on
  the finish chunk (DeepSeek, Groq, Mistral), cache hits as
  `cached_tokens` or `prompt_cache_hit_tokens`;
- an error object or `finish_reason: "error"` inside a 200 stream.

A choice's `logprobs` (when the request asked for them) is kept as it came,
on the chunk's first `TextDelta` and, joined, on the response.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    FinishReason,
    ModelResponse,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = ["ChatStreamParser", "StreamEnd", "parse_chat_completion", "parse_chat_usage"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "model_length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
}


def parse_chat_usage(usage: JsonObject) -> Usage:
    """Read a Chat Completions `usage` object, with the vendors' cache fields.

    Examples:
        >>> parse_chat_usage({"prompt_tokens": 10, "completion_tokens": 3,
        ...                   "prompt_tokens_details": {"cached_tokens": 4}}).cache_read_tokens
        4
    """
    prompt = get_object(usage, "prompt_tokens_details")
    completion = get_object(usage, "completion_tokens_details")
    cache_read = max(
        get_int(prompt, "cached_tokens") or 0,
        get_int(usage, "prompt_cache_hit_tokens") or 0,  # DeepSeek
        get_int(usage, "cached_tokens") or 0,  # Together
    )
    return Usage(
        requests=1,
        input_tokens=get_int(usage, "prompt_tokens") or 0,
        output_tokens=get_int(usage, "completion_tokens") or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=get_int(prompt, "cache_write_tokens") or 0,
        reasoning_tokens=get_int(completion, "reasoning_tokens") or 0,
    )


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """How a stream ended: what `ChatStreamParser.end` returns instead of a whole response."""

    finish_reason: FinishReason
    """The reason `finish` would give the response."""
    usage: Usage
    """The usage `finish` would give the response."""


class ChatStreamParser:
    """Turns a Chat Completions event stream into stream events and a `ModelResponse`.

    Args:
        errors: Builds the typed errors (provider name, secrets to scrub).
        reasoning_provider: The `provider` recorded on parsed `Reasoning`.
    """

    def __init__(self, errors: ErrorReporter, *, reasoning_provider: str | None = None) -> None:
        self._errors = errors
        self._reasoning_provider = reasoning_provider or errors.provider
        self._builder = ResponseBuilder(errors.provider)
        self._slots: dict[int, int] = {}
        self._thinking: ReasoningBuffer | None = None
        self._refused = False
        self._done = False
        self._finished = False
        self._usage_seen = False

    @property
    def done(self) -> bool:
        """Whether `[DONE]` has arrived."""
        return self._done

    def feed(self, event: ServerSentEvent) -> list[Delta]:
        """Take one server-sent event; return the deltas it carries.

        Raises:
            ProviderError: For an error event or object, `finish_reason: "error"`,
                or data that is not a JSON object.
        """
        data = event.data.strip()
        if self._done or not data:
            return []
        if event.event == "error":
            payload = loads_object(data) or {"error": {"message": data}}
            raise self._errors.from_payload(payload, body=data)
        if data == "[DONE]":
            self._done = True
            return []
        chunk = loads_object(data)
        if chunk is None:
            raise self._errors.broken(
                f"{self._errors.provider} sent a stream event that is not a JSON object.",
                body=data,
            )
        return self.add_chunk(chunk, whole=False)

    def add_chunk(self, chunk: JsonObject, *, whole: bool) -> list[Delta]:
        """Take one decoded chunk (or, with `whole`, a whole response body)."""
        if chunk.get("error"):
            raise self._errors.from_payload(chunk, body=dumps(chunk))
        builder = self._builder
        builder.response_id = builder.response_id or get_str(chunk, "id")
        builder.model = builder.model or get_str(chunk, "model")
        usage = get_object(chunk, "usage")
        if usage:
            builder.usage = parse_chat_usage(usage)
            self._usage_seen = True
        deltas: list[Delta] = []
        for choice in iter_objects(get_list(chunk, "choices")):
            if get_int(choice, "index") not in (None, 0):
                continue  # n > 1: only the first choice is kept
            found = self._delta(get_object(choice, "message" if whole else "delta"))
            logprobs = choice.get("logprobs")
            if logprobs is not None:  # asked for: the choice's own, as it came
                found = self._scored(found, logprobs)
            deltas += found
            self._finish(choice)
        return deltas

    def finish(self) -> ModelResponse:
        """Return the response; raise if the stream ended before `[DONE]`.

        A stream that lost only its `[DONE]` line after the finish reason and
        usage arrived is complete, and is accepted.

        Raises:
            ProviderError: When the stream was cut short.
            MalformedToolCall: When a tool call has no name.
        """
        self._check_end()
        return self.build()

    def end(self) -> StreamEnd:
        """Check the stream's end as `finish` does, and return only its finish reason and usage.

        For a relay that passed every delta on: the text, reasoning and tool
        calls of the response `finish` would build all came out of `feed`
        already, so this is all that is left to send, without the cost of
        building that response.

        Raises:
            ProviderError: When the stream was cut short.
            MalformedToolCall: When a tool call has no name.
        """
        self._check_end()
        for call in self._builder.tool_calls:
            call.build()  # raises for a call without a name, as `finish` does
        return StreamEnd(finish_reason=self._finish_reason(), usage=self._builder.usage)

    def build(self) -> ModelResponse:
        """Return what was assembled, without checking the stream's end."""
        self._builder.finish_reason = self._finish_reason()
        return self._builder.build()

    # -- pieces --------------------------------------------------------------------------

    def _check_end(self) -> None:
        if not (self._done or (self._finished and self._usage_seen)):
            raise self._errors.broken(
                f"The {self._errors.provider} stream ended before its last event "
                "(no [DONE]); the answer is incomplete."
            )

    def _finish_reason(self) -> FinishReason:
        """The response's finish reason: the provider's, or what its content implies."""
        if self._refused and self._builder.finish_reason in (None, "stop"):
            return "content_filter"
        return self._builder.resolved_finish_reason()

    def _finish(self, choice: JsonObject) -> None:
        reason = get_str(choice, "finish_reason")
        if reason is None:
            return
        if reason == "error":
            error = get_object(choice, "error") or {"message": "the provider failed mid-answer"}
            raise self._errors.from_payload({"error": error}, body=dumps(choice))
        self._builder.finish_reason = _FINISH.get(reason, "unknown")
        self._finished = True

    def _delta(self, delta: JsonObject) -> list[Delta]:
        deltas: list[Delta] = []
        thinking = get_str(delta, "reasoning_content") or get_str(delta, "reasoning")
        if thinking:
            deltas.append(self._think(thinking))
        if "reasoning_details" in delta:  # rare fields are looked up only when present
            for detail in iter_objects(get_list(delta, "reasoning_details")):
                signed = self._sign(detail)
                if signed is not None:
                    deltas.append(signed)
        content = delta.get("content")
        if isinstance(content, str) and content:
            deltas.append(self._say(content))
        elif isinstance(content, list):
            deltas += self._parts(content)
        refusal = get_str(delta, "refusal")
        if refusal:
            self._refused = True
            deltas.append(self._say(refusal))
        if "tool_calls" in delta:
            for fragment in iter_objects(get_list(delta, "tool_calls")):
                call = self._tool_fragment(fragment)
                if call is not None:
                    deltas.append(call)
        return deltas

    def _scored(self, deltas: list[Delta], found: object) -> list[Delta]:
        """`deltas`, the chunk's log probabilities on its first text delta (else on a new one)."""
        logprobs = cast(JsonValue, found)  # decoded from the chunk's JSON: a JSON value
        self._builder.logprobs.append(logprobs)
        for at, delta in enumerate(deltas):
            if isinstance(delta, TextDelta):
                # Parsed JSON already: no need to validate it again.
                deltas[at] = TextDelta.model_construct(delta=delta.delta, logprobs=logprobs)
                return deltas
        deltas.append(TextDelta.model_construct(delta="", logprobs=logprobs))
        return deltas

    def _parts(self, parts: list[object]) -> list[Delta]:
        """Mistral's content arrays: `text` parts and `thinking` parts holding text parts."""
        deltas: list[Delta] = []
        for part in iter_objects(parts):
            kind = get_str(part, "type")
            if kind == "text":
                text = get_str(part, "text")
                if text:
                    deltas.append(self._say(text))
            elif kind == "thinking":
                for inner in iter_objects(get_list(part, "thinking")):
                    text = get_str(inner, "text")
                    if text:
                        deltas.append(self._think(text))
        return deltas

    def _say(self, text: str) -> TextDelta:
        self._builder.text.append(text)
        return TextDelta(delta=text)

    def _reasoning(self) -> ReasoningBuffer:
        if self._thinking is None:
            self._thinking = ReasoningBuffer(self._reasoning_provider)
            self._builder.reasoning.append(self._thinking)
        return self._thinking

    def _think(self, text: str) -> ReasoningDelta:
        self._reasoning().parts.append(text)
        return ReasoningDelta(delta=text)

    def _sign(self, detail: JsonObject) -> ReasoningDelta | None:
        """OpenRouter's `reasoning_details`: keep the signature and encrypted data."""
        signature = get_str(detail, "signature")
        data = get_str(detail, "data") if get_str(detail, "type") == "reasoning.encrypted" else None
        if not signature and not data:
            return None
        buffer = self._reasoning()
        buffer.reasoning_id = buffer.reasoning_id or get_str(detail, "id")
        if data:
            buffer.redacted_data = data
        if not signature:
            return None
        buffer.signature = signature
        return ReasoningDelta(signature=signature)

    def _tool_fragment(self, fragment: JsonObject) -> ToolCallDelta | None:
        function = get_object(fragment, "function")
        call_id = get_str(fragment, "id") or None
        name = get_str(function, "name") or None
        raw = function.get("arguments")
        text = raw if isinstance(raw, str) else dumps(raw) if isinstance(raw, dict) else ""
        slot = self._slot(get_int(fragment, "index"), call_id)
        buffer = self._builder.tool_calls[slot]
        new_id = new_name = None
        if call_id and buffer.call_id is None:
            buffer.call_id = new_id = call_id
        if name and buffer.name is None:
            buffer.name = new_name = name
        sent = buffer.arguments
        if text and call_id and call_id == buffer.call_id and sent and text.startswith(sent):
            # The opening fragment repeated with the arguments so far: keep only what is new.
            text = text[len(sent) :]
        if text:
            buffer.parts.append(text)
        if new_id is None and new_name is None and not text:
            return None
        return ToolCallDelta(index=slot, call_id=new_id, name=new_name, arguments_delta=text)

    def _slot(self, wire_index: int | None, call_id: str | None) -> int:
        """The position of the call a fragment belongs to, opening a new one if needed."""
        calls = self._builder.tool_calls
        if wire_index is None:
            if calls and (call_id is None or calls[-1].call_id in (None, call_id)):
                return len(calls) - 1
        else:
            slot = self._slots.get(wire_index)
            if slot is not None:
                known = calls[slot].call_id
                if call_id is None or known is None or known == call_id:
                    return slot
        calls.append(ToolCallBuffer())
        if wire_index is not None:
            self._slots[wire_index] = len(calls) - 1
        return len(calls) - 1


def parse_chat_completion(
    payload: JsonObject, errors: ErrorReporter, *, reasoning_provider: str | None = None
) -> ModelResponse:
    """Parse a whole (non-streamed) Chat Completions response.

    Raises:
        ProviderError: When the body is an error, or has no choices.
        MalformedToolCall: When a tool call has no name.
    """
    parser = ChatStreamParser(errors, reasoning_provider=reasoning_provider)
    if not any(True for _ in iter_objects(get_list(payload, "choices"))) and not payload.get(
        "error"
    ):
        raise errors.broken(f"The {errors.provider} response has no choices.", body=dumps(payload))
    parser.add_chunk(payload, whole=True)
    return parser.build()
