"""Assembling a `ModelResponse` from the pieces a parser finds.

A streamed response arrives as fragments (text deltas, reasoning deltas,
tool-call argument fragments, usage) and a whole response as a list of
parts; both adapters collect them in a `ResponseBuilder` and build one
`ModelResponse` at the end, so streamed and whole answers come out alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from tidemill.errors import MalformedToolCall
from tidemill.llm._json import loads
from tidemill.types import (
    FinishReason,
    Message,
    ModelResponse,
    Reasoning,
    ToolCall,
    Usage,
    new_call_id,
)

__all__ = [
    "ReasoningBuffer",
    "ResponseBuilder",
    "ToolCallBuffer",
    "joined_logprobs",
    "parse_arguments",
]


def parse_arguments(text: str) -> tuple[dict[str, JsonValue], str | None]:
    """Split tool-call argument text into parsed arguments and the raw text to keep.

    Empty text means no arguments. Text that is not a JSON object (broken
    JSON, a list, a truncated stream) gives no arguments and is kept as the
    raw text, so the runtime can tell the model what went wrong.

    Examples:
        >>> parse_arguments('{"city": "Paris"}')
        ({'city': 'Paris'}, None)
        >>> parse_arguments("")
        ({}, None)
        >>> parse_arguments('{"city": "Par')
        ({}, '{"city": "Par')
    """
    if not text.strip():
        return {}, None
    try:
        value = loads(text)
    except ValueError:
        return {}, text
    if isinstance(value, dict):
        return value, None
    return {}, text


def joined_logprobs(pieces: list[JsonValue]) -> JsonValue:
    """One answer's log probabilities, from those of its pieces (a stream's chunks).

    No piece gives `None`, and one piece is the answer's as it came. Several
    are joined key by key: lists (`content`, `refusal`) one after the other,
    any other value the last that is not `null`. A piece that is not an
    object has nothing to join and is left out (its chunk carried it).

    Examples:
        >>> joined_logprobs([{"content": [{"token": "Hi"}], "refusal": None},
        ...                  {"content": [{"token": "!"}], "refusal": None}])
        {'content': [{'token': 'Hi'}, {'token': '!'}], 'refusal': None}
    """
    if len(pieces) < 2:
        return pieces[0] if pieces else None
    joined: dict[str, JsonValue] = {}
    copied: set[str] = set()  # lists of `joined` that are its own, not a piece's
    for piece in pieces:
        if not isinstance(piece, dict):
            continue
        for key, value in piece.items():
            known = joined.get(key)
            if isinstance(value, list) and isinstance(known, list):
                if key not in copied:
                    known = joined[key] = list(known)
                    copied.add(key)
                known.extend(value)
            elif value is not None or key not in joined:
                joined[key] = value
    return joined


@dataclass(slots=True)
class ToolCallBuffer:
    """One tool call being assembled from fragments."""

    call_id: str | None = None
    name: str | None = None
    parts: list[str] = field(default_factory=list)

    @property
    def arguments(self) -> str:
        """The argument text received so far."""
        return "".join(self.parts)

    def build(self) -> ToolCall:
        """Return the finished call.

        Raises:
            MalformedToolCall: When the provider never named the tool.
        """
        if not self.name:
            raise MalformedToolCall(
                "The model produced a tool call without a tool name.",
                feedback="Your last tool call had no tool name. Call a tool by its name.",
            )
        arguments, raw = parse_arguments(self.arguments)
        return ToolCall(
            id=self.call_id or new_call_id(),
            name=self.name,
            arguments=arguments,
            raw_arguments=raw,
        )


@dataclass(slots=True)
class ReasoningBuffer:
    """One piece of reasoning (an Anthropic thinking block, an OpenAI-style reasoning run)."""

    provider: str
    parts: list[str] = field(default_factory=list)
    signature: str | None = None
    redacted_data: str | None = None
    reasoning_id: str | None = None

    def build(self) -> Reasoning:
        """Return the finished reasoning, exactly as received."""
        return Reasoning(
            text="".join(self.parts),
            signature=self.signature,
            redacted_data=self.redacted_data,
            provider=self.provider,
            id=self.reasoning_id,
        )


@dataclass(slots=True)
class ResponseBuilder:
    """Collects the parts of one response and builds the `ModelResponse`."""

    provider: str
    model: str | None = None
    response_id: str | None = None
    text: list[str] = field(default_factory=list)
    reasoning: list[ReasoningBuffer] = field(default_factory=list)
    tool_calls: list[ToolCallBuffer] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(requests=1, unreported_requests=1))
    """Until the parser finds the provider's usage: one request whose tokens are unknown."""
    finish_reason: FinishReason | None = None
    logprobs: list[JsonValue] = field(default_factory=list)
    """The log probabilities of each piece that had some, as the provider sent them."""

    def resolved_finish_reason(self) -> FinishReason:
        """The provider's finish reason, or what the content implies when it gave none.

        A turn that ends in tool calls finished to call them (some
        OpenAI-compatible servers say "stop" then); any other without a
        reason is `unknown`.
        """
        finish = self.finish_reason
        if finish is None or (finish == "stop" and self.tool_calls):
            return "tool_calls" if self.tool_calls else (finish or "unknown")
        return finish

    def build(self) -> ModelResponse:
        """Return the assembled response.

        With no finish reason from the provider, a response with tool calls
        finished to call them, and any other is marked `unknown`.

        Raises:
            MalformedToolCall: When a tool call has no name.
        """
        calls = tuple(buffer.build() for buffer in self.tool_calls)
        finish = self.resolved_finish_reason()
        message = Message.assistant(
            "".join(self.text),
            tool_calls=calls,
            reasoning=tuple(buffer.build() for buffer in self.reasoning),
        )
        response = ModelResponse(
            message=message,
            usage=self.usage,
            finish_reason=finish,
            model=self.model,
            provider=self.provider,
            response_id=self.response_id,
        )
        logprobs = joined_logprobs(self.logprobs)
        if logprobs is None:
            return response
        # Parsed JSON already, and large (twenty alternatives a token): kept as it came,
        # since validating it again would copy it, at some 50 ms a thousand tokens.
        return response.model_copy(update={"logprobs": logprobs})
