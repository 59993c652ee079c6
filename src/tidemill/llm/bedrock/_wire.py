"""The Bedrock Converse request body, as `TypedDict`s.

One body serves `Converse` and `ConverseStream`. Only what Tidemill sends is
described; see
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html.
Blob fields (image bytes, redacted reasoning) travel as base64 strings in
the JSON protocol. Responses are read with the checked accessors of
`tidemill.llm._json`.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

from pydantic import JsonValue

__all__ = [
    "ConverseContentBlock",
    "ConverseImage",
    "ConverseImageSource",
    "ConverseInferenceConfig",
    "ConverseMessage",
    "ConverseOutputConfig",
    "ConverseReasoningContent",
    "ConverseReasoningText",
    "ConverseRequest",
    "ConverseS3Location",
    "ConverseServiceTier",
    "ConverseSpecificTool",
    "ConverseSystemBlock",
    "ConverseTool",
    "ConverseToolChoice",
    "ConverseToolConfig",
    "ConverseToolResult",
    "ConverseToolResultContent",
    "ConverseToolSpec",
    "ConverseToolUse",
    "ImageFormat",
]

ImageFormat = Literal["png", "jpeg", "gif", "webp"]


class ConverseS3Location(TypedDict):
    uri: str


class ConverseImageSource(TypedDict, total=False):
    bytes: str
    """Base64 image bytes."""
    s3Location: ConverseS3Location


class ConverseImage(TypedDict):
    format: ImageFormat
    source: ConverseImageSource


class ConverseToolUse(TypedDict):
    toolUseId: str
    name: str
    input: dict[str, JsonValue]


class ConverseToolResultContent(TypedDict):
    text: str


class ConverseToolResult(TypedDict):
    toolUseId: str
    content: list[ConverseToolResultContent]
    status: Literal["success", "error"]


class ConverseReasoningText(TypedDict):
    text: str
    signature: NotRequired[str]


class ConverseReasoningContent(TypedDict, total=False):
    reasoningText: ConverseReasoningText
    redactedContent: str
    """Base64 encrypted reasoning, sent back exactly as received."""


class ConverseContentBlock(TypedDict, total=False):
    """A content block: exactly one of its keys is set."""

    text: str
    image: ConverseImage
    toolUse: ConverseToolUse
    toolResult: ConverseToolResult
    reasoningContent: ConverseReasoningContent


class ConverseMessage(TypedDict):
    role: Literal["user", "assistant"]
    content: list[ConverseContentBlock]


class ConverseSystemBlock(TypedDict):
    text: str


class ConverseToolSpec(TypedDict):
    name: str
    description: NotRequired[str]
    inputSchema: dict[Literal["json"], dict[str, JsonValue]]


class ConverseTool(TypedDict):
    toolSpec: ConverseToolSpec


class ConverseSpecificTool(TypedDict):
    name: str


class ConverseToolChoice(TypedDict, total=False):
    """Exactly one key is set: `auto: {}`, `any: {}` or `tool: {"name": ...}`."""

    auto: dict[str, JsonValue]
    any: dict[str, JsonValue]
    tool: ConverseSpecificTool


class ConverseToolConfig(TypedDict):
    tools: list[ConverseTool]
    toolChoice: NotRequired[ConverseToolChoice]


class ConverseInferenceConfig(TypedDict, total=False):
    maxTokens: int
    temperature: float
    topP: float
    stopSequences: list[str]


class ConverseServiceTier(TypedDict):
    type: Literal["default", "flex", "priority"]


class ConverseOutputConfig(TypedDict, total=False):
    effort: Literal["low", "medium", "high", "xhigh", "max"]


class ConverseRequest(TypedDict, total=False):
    messages: Required[list[ConverseMessage]]
    system: list[ConverseSystemBlock]
    inferenceConfig: ConverseInferenceConfig
    toolConfig: ConverseToolConfig
    additionalModelRequestFields: dict[str, JsonValue]
    requestMetadata: dict[str, str]
    """Key-value pairs to filter invocation logs by (the request's `metadata`)."""
    serviceTier: ConverseServiceTier
    outputConfig: ConverseOutputConfig
