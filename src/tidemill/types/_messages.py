"""Messages, tool calls and tool results: the conversation every layer speaks."""

from __future__ import annotations

import secrets
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from tidemill.types._build import validator

__all__ = [
    "ImageRef",
    "Message",
    "Reasoning",
    "Role",
    "ToolCall",
    "ToolDefinition",
    "ToolResult",
    "new_call_id",
]


def new_call_id() -> str:
    """Return a fresh tool-call id, for calls whose provider gave none."""
    return "call_" + secrets.token_hex(12)


class Role(StrEnum):
    """Who speaks a message."""

    SYSTEM = "system"
    """Instructions to the model."""
    USER = "user"
    """The person (or program) the model talks to."""
    ASSISTANT = "assistant"
    """The model."""
    TOOL = "tool"
    """A tool call's result."""


# The members, read once. On Python 3.11 `Role.USER` is looked up through
# `EnumType.__getattr__`, which costs about as much as building a small tuple;
# the constructors below run for every message of every agent iteration.
SYSTEM, USER, ASSISTANT, TOOL = Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ImageRef(_Frozen):
    """An image, carried by reference rather than inline bytes.

    Journals stay small: a message holds the image's address, not its pixels.
    """

    url: str
    """An `https:` URL, a `data:` URL, or a reference a store resolves."""
    media_type: str | None = None
    """The MIME type, such as `image/png`, when known."""
    detail: Literal["auto", "low", "high"] | None = None
    """The resolution hint some providers accept."""


class Reasoning(_Frozen):
    """A model's reasoning, kept so it can be sent back on the next turn.

    Providers that sign their reasoning (Anthropic thinking, Gemini thought
    signatures, OpenAI reasoning items) reject a follow-up turn whose
    reasoning was altered or dropped, so it is stored exactly as received.
    """

    text: str = ""
    """The readable reasoning or its summary; empty when redacted."""
    signature: str | None = None
    """The provider's signature over `text`."""
    redacted_data: str | None = None
    """Opaque encrypted reasoning that must be returned verbatim."""
    provider: str | None = None
    """The provider that produced it; other providers ignore it."""
    id: str | None = None
    """The provider's id for the reasoning item, when it has one."""


class ToolCall(_Frozen):
    """A model's request to call a tool.

    Examples:
        >>> call = ToolCall(name="add", arguments={"a": 1, "b": 2})
        >>> call.id.startswith("call_")
        True
    """

    id: str = Field(default_factory=new_call_id)
    """The call id; tool results and approval decisions refer to it."""
    name: str
    """The tool's name as the model wrote it (it may not exist)."""
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    """The parsed arguments."""
    raw_arguments: str | None = None
    """The argument text, kept only when it was not a JSON object."""
    signature: str | None = None
    """A provider signature attached to the call (Gemini thought signatures)."""


class ToolResult(_Frozen):
    """What a tool call produced, as the model will see it."""

    call_id: str
    """The id of the call this answers."""
    name: str
    """The tool's name."""
    content: str
    """The result, rendered as text for the model."""
    is_error: bool = False
    """Whether the call failed; the content then says why."""


def _empty_object_schema() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


class ToolDefinition(_Frozen):
    """A tool as a model sees it: a name, a description and a JSON Schema."""

    name: str
    """The name the model calls the tool by."""
    description: str = ""
    """What the tool does, for the model to decide when to call it."""
    parameters: dict[str, JsonValue] = Field(default_factory=_empty_object_schema)
    """The JSON Schema of the arguments object."""


class Message(_Frozen):
    """One message of a conversation.

    A message carries text, and depending on its role: images (user), tool
    calls and reasoning (assistant), or a tool result (tool).

    Examples:
        >>> Message.user("Hi").role.value
        'user'
        >>> Message.model_validate_json(Message.user("Hi").model_dump_json()).content
        'Hi'
    """

    role: Role
    """Who speaks the message."""
    content: str = ""
    """The text of the message."""
    images: tuple[ImageRef, ...] = ()
    """Images the message refers to."""
    reasoning: tuple[Reasoning, ...] = ()
    """The assistant's reasoning, in the order produced."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tools the assistant asked to call."""
    tool_call_id: str | None = None
    """For a tool message: the call it answers."""
    name: str | None = None
    """For a tool message, the tool; otherwise an optional speaker name."""
    is_error: bool = False
    """For a tool message: whether the call failed."""

    @classmethod
    def system(cls, content: str) -> Message:
        """Build a system message."""
        return cls._build({"role": SYSTEM, "content": content})

    @classmethod
    def user(cls, content: str, *, images: tuple[ImageRef, ...] = ()) -> Message:
        """Build a user message."""
        return cls._build({"role": USER, "content": content, "images": images})

    @classmethod
    def assistant(
        cls,
        content: str = "",
        *,
        tool_calls: tuple[ToolCall, ...] = (),
        reasoning: tuple[Reasoning, ...] = (),
        name: str | None = None,
    ) -> Message:
        """Build an assistant message."""
        # Only the fields given: each one passed costs a validation on a hot path.
        fields: dict[str, Any] = {"role": ASSISTANT, "content": content}
        if tool_calls:
            fields["tool_calls"] = tool_calls
        if reasoning:
            fields["reasoning"] = reasoning
        if name is not None:
            fields["name"] = name
        return cls._build(fields)

    @classmethod
    def tool(cls, result: ToolResult) -> Message:
        """Build the tool message that carries `result` back to the model."""
        return cls._build(
            {
                "role": TOOL,
                "content": result.content,
                "tool_call_id": result.call_id,
                "name": result.name,
                "is_error": result.is_error,
            }
        )

    @classmethod
    def _build(cls, fields: dict[str, Any]) -> Message:
        # A message is built for every turn and every tool result of every run.
        return _new_message(fields) if cls is Message else cls(**fields)


_new_message = validator(Message)
