"""The Anthropic Messages request body, as `TypedDict`s.

Only what Tidemill sends is described; see
https://docs.anthropic.com/en/api/messages. Responses are read with the
checked accessors of `tidemill.llm._json`.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

from pydantic import JsonValue

__all__ = [
    "Base64ImageSource",
    "ContentBlock",
    "ImageBlock",
    "MessageParam",
    "MessagesRequest",
    "MetadataParam",
    "OutputConfigParam",
    "RedactedThinkingBlock",
    "TextBlock",
    "ThinkingBlock",
    "ThinkingParam",
    "ToolChoiceParam",
    "ToolParam",
    "ToolResultBlock",
    "ToolUseBlock",
    "URLImageSource",
]


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class URLImageSource(TypedDict):
    type: Literal["url"]
    url: str


class Base64ImageSource(TypedDict):
    type: Literal["base64"]
    media_type: str
    data: str


class ImageBlock(TypedDict):
    type: Literal["image"]
    source: URLImageSource | Base64ImageSource


class ToolUseBlock(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, JsonValue]


class ToolResultBlock(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str
    is_error: NotRequired[bool]


class ThinkingBlock(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(TypedDict):
    type: Literal["redacted_thinking"]
    data: str


ContentBlock = (
    TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock
)


class MessageParam(TypedDict):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]


class ToolParam(TypedDict):
    name: str
    description: NotRequired[str]
    input_schema: dict[str, JsonValue]


class ToolChoiceParam(TypedDict):
    type: Literal["auto", "any", "tool", "none"]
    name: NotRequired[str]
    """The tool to call, with `type: "tool"`."""
    disable_parallel_tool_use: NotRequired[bool]
    """At most one call (`parallel_tool_calls: false`); not with `type: "none"`."""


class MetadataParam(TypedDict):
    user_id: str
    """An opaque id of the end user (the request's `user` or `safety_identifier`)."""


class OutputConfigParam(TypedDict):
    effort: Literal["low", "medium", "high", "xhigh", "max"]


class ThinkingParam(TypedDict):
    type: Literal["enabled"]
    budget_tokens: int


class MessagesRequest(TypedDict, total=False):
    model: Required[str]
    max_tokens: Required[int]
    messages: Required[list[MessageParam]]
    system: str
    tools: list[ToolParam]
    tool_choice: ToolChoiceParam
    stream: bool
    thinking: ThinkingParam
    temperature: float
    top_p: float
    stop_sequences: list[str]
    metadata: MetadataParam
    service_tier: Literal["auto", "standard_only"]
    output_config: OutputConfigParam
