"""The OpenAI Chat Completions request body, as `TypedDict`s.

Only what Tidemill sends is described; see
https://platform.openai.com/docs/api-reference/chat/create. Responses are
read with the checked accessors of `tidemill.llm._json` instead, because
OpenAI-compatible vendors bend the response shape in many small ways.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

from pydantic import JsonValue

__all__ = [
    "ChatAssistantMessage",
    "ChatContentPart",
    "ChatFunction",
    "ChatFunctionCall",
    "ChatImagePart",
    "ChatImageURL",
    "ChatJsonObjectFormat",
    "ChatJsonSchema",
    "ChatJsonSchemaFormat",
    "ChatMessage",
    "ChatNamedFunction",
    "ChatNamedToolChoice",
    "ChatRequest",
    "ChatResponseFormat",
    "ChatStreamOptions",
    "ChatSystemMessage",
    "ChatTextPart",
    "ChatTool",
    "ChatToolCall",
    "ChatToolChoice",
    "ChatToolMessage",
    "ChatUserMessage",
]


class ChatTextPart(TypedDict):
    type: Literal["text"]
    text: str


class ChatImageURL(TypedDict):
    url: str
    detail: NotRequired[Literal["auto", "low", "high"]]


class ChatImagePart(TypedDict):
    type: Literal["image_url"]
    image_url: ChatImageURL


ChatContentPart = ChatTextPart | ChatImagePart


class ChatSystemMessage(TypedDict):
    role: Literal["system"]
    content: str


class ChatUserMessage(TypedDict):
    role: Literal["user"]
    content: str | list[ChatContentPart]
    name: NotRequired[str]


class ChatFunctionCall(TypedDict):
    name: str
    arguments: str
    """The arguments as JSON text (OpenAI never takes an object here)."""


class ChatToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: ChatFunctionCall


class ChatAssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[ChatToolCall]]
    name: NotRequired[str]
    reasoning_content: NotRequired[str]
    """DeepSeek: the reasoning of this turn, sent back during tool-call loops."""


class ChatToolMessage(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    content: str


ChatMessage = ChatSystemMessage | ChatUserMessage | ChatAssistantMessage | ChatToolMessage


class ChatFunction(TypedDict):
    name: str
    description: NotRequired[str]
    parameters: dict[str, JsonValue]


class ChatTool(TypedDict):
    type: Literal["function"]
    function: ChatFunction


class ChatNamedFunction(TypedDict):
    name: str


class ChatNamedToolChoice(TypedDict):
    type: Literal["function"]
    function: ChatNamedFunction


ChatToolChoice = Literal["none", "auto", "required"] | ChatNamedToolChoice


class ChatStreamOptions(TypedDict):
    include_usage: bool


class ChatJsonSchema(TypedDict):
    name: str
    description: NotRequired[str]
    schema: dict[str, JsonValue]
    strict: bool


class ChatJsonSchemaFormat(TypedDict):
    type: Literal["json_schema"]
    json_schema: ChatJsonSchema


class ChatJsonObjectFormat(TypedDict):
    type: Literal["json_object"]


ChatResponseFormat = ChatJsonSchemaFormat | ChatJsonObjectFormat


class ChatRequest(TypedDict, total=False):
    model: Required[str]
    messages: Required[list[ChatMessage]]
    tools: list[ChatTool]
    tool_choice: ChatToolChoice
    stream: bool
    stream_options: ChatStreamOptions
    temperature: float
    top_p: float
    max_tokens: int
    max_completion_tokens: int
    stop: list[str]
    seed: int
    random_seed: int
    reasoning_effort: str
    response_format: ChatResponseFormat
