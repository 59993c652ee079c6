"""Stream events: what a model stream and an agent stream yield.

A model stream yields `TextDelta`, `ReasoningDelta` and `ToolCallDelta`
events and ends with `ResponseDone`. An agent stream passes those on and adds
`ToolCallStart`, `ToolCallEnd`, `ApprovalRequired`, `RunStopped` (just before
the error of a run stopped at a bound) and a final `RunDone`.
Every event has a `type` string, so `StreamEvent` is a discriminated union
that round-trips through JSON (see `STREAM_EVENT`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

from tidemill.types._agent import AgentResponse
from tidemill.types._messages import ToolCall, ToolResult
from tidemill.types._model import ModelResponse

__all__ = [
    "STREAM_EVENT",
    "ApprovalRequired",
    "ReasoningDelta",
    "ResponseDone",
    "RunDone",
    "RunStopped",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextDelta(_Event):
    """A piece of the assistant's text."""

    type: Literal["text"] = "text"
    """The event's tag in `StreamEvent`: always `"text"`."""
    delta: str
    """The next piece of text."""
    logprobs: JsonValue = Field(default=None, exclude_if=lambda value: value is None)
    """The log probabilities of the tokens of this piece, when the request asked
    for them: the provider's own JSON, as one streamed chunk carried it (a
    Chat Completions chunk's `choices[0].logprobs`); `None` otherwise, and
    left out of the JSON then. A chunk with log probabilities but no text
    (a vendor that scores tool-call tokens too) comes as a `TextDelta` with
    an empty `delta`.
    """


class ReasoningDelta(_Event):
    """A piece of the model's reasoning, or its signature once complete."""

    type: Literal["reasoning"] = "reasoning"
    """The event's tag in `StreamEvent`: always `"reasoning"`."""
    delta: str = ""
    """The next piece of reasoning text; empty on an event that carries the signature."""
    signature: str | None = None
    """The provider's signature over the reasoning, sent once it is complete."""


class ToolCallDelta(_Event):
    """A fragment of a tool call being streamed.

    Fragments with the same `index` belong to the same call; `call_id` and
    `name` arrive on the first one.
    """

    type: Literal["tool_call_delta"] = "tool_call_delta"
    """The event's tag in `StreamEvent`: always `"tool_call_delta"`."""
    index: int
    """The call's position among the response's tool calls, from 0."""
    call_id: str | None = None
    """The call's id, on its first fragment."""
    name: str | None = None
    """The tool's name, on the call's first fragment."""
    arguments_delta: str = ""
    """The next piece of the call's arguments, as JSON text."""


class ResponseDone(_Event):
    """A model call finished; carries the assembled response."""

    type: Literal["response"] = "response"
    """The event's tag in `StreamEvent`: always `"response"`."""
    response: ModelResponse
    """The whole answer: message, usage, finish reason."""


class ToolCallStart(_Event):
    """The agent is about to run a tool call."""

    type: Literal["tool_call"] = "tool_call"
    """The event's tag in `StreamEvent`: always `"tool_call"`."""
    call: ToolCall
    """The call about to run."""


class ToolCallEnd(_Event):
    """A tool call finished."""

    type: Literal["tool_result"] = "tool_result"
    """The event's tag in `StreamEvent`: always `"tool_result"`."""
    result: ToolResult
    """The call's result, as the model sees it (an error result if the call failed)."""


class ApprovalRequired(_Event):
    """The run paused: these calls wait for a decision. The stream ends here."""

    type: Literal["approval_required"] = "approval_required"
    """The event's tag in `StreamEvent`: always `"approval_required"`."""
    thread_id: str
    """The paused thread: resume it with a decision for each call."""
    calls: tuple[ToolCall, ...]
    """The calls that wait for a decision."""


class RunStopped(_Event):
    """The run stopped at a bound or a guardrail; the stream then raises the error.

    Emitted just before the error, so a live view can show why the run ended.
    """

    type: Literal["stopped"] = "stopped"
    """The event's tag in `StreamEvent`: always `"stopped"`."""
    error: str
    """The error's class name, e.g. `LimitExceeded`."""
    message: str
    """The error's message."""
    limit: str | None = None
    """For a limit: which one."""
    response: AgentResponse
    """The run so far."""


class RunDone(_Event):
    """The run finished; carries the whole response. Always the last event."""

    type: Literal["done"] = "done"
    """The event's tag in `StreamEvent`: always `"done"`."""
    response: AgentResponse
    """The run's response: output, transcript, steps and usage."""


StreamEvent = Annotated[
    TextDelta
    | ReasoningDelta
    | ToolCallDelta
    | ResponseDone
    | ToolCallStart
    | ToolCallEnd
    | ApprovalRequired
    | RunStopped
    | RunDone,
    Field(discriminator="type"),
]
"""Any event of a model or agent stream."""

STREAM_EVENT: TypeAdapter[StreamEvent] = TypeAdapter(StreamEvent)
"""Validates and serialises any `StreamEvent`, e.g. `STREAM_EVENT.validate_json(text)`."""
