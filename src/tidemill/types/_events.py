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

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

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
    delta: str


class ReasoningDelta(_Event):
    """A piece of the model's reasoning, or its signature once complete."""

    type: Literal["reasoning"] = "reasoning"
    delta: str = ""
    signature: str | None = None


class ToolCallDelta(_Event):
    """A fragment of a tool call being streamed.

    Fragments with the same `index` belong to the same call; `call_id` and
    `name` arrive on the first one.
    """

    type: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    call_id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


class ResponseDone(_Event):
    """A model call finished; carries the assembled response."""

    type: Literal["response"] = "response"
    response: ModelResponse


class ToolCallStart(_Event):
    """The agent is about to run a tool call."""

    type: Literal["tool_call"] = "tool_call"
    call: ToolCall


class ToolCallEnd(_Event):
    """A tool call finished."""

    type: Literal["tool_result"] = "tool_result"
    result: ToolResult


class ApprovalRequired(_Event):
    """The run paused: these calls wait for a decision. The stream ends here."""

    type: Literal["approval_required"] = "approval_required"
    thread_id: str
    calls: tuple[ToolCall, ...]


class RunStopped(_Event):
    """The run stopped at a bound or a guardrail; the stream then raises the error.

    Emitted just before the error, so a live view can show why the run ended.
    """

    type: Literal["stopped"] = "stopped"
    error: str
    """The error's class name, e.g. `LimitExceeded`."""
    message: str
    limit: str | None = None
    """For a limit: which one."""
    response: AgentResponse
    """The run so far."""


class RunDone(_Event):
    """The run finished; carries the whole response. Always the last event."""

    type: Literal["done"] = "done"
    response: AgentResponse


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
