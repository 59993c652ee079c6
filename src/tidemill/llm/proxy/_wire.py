"""What the proxy sends back, as `TypedDict`s of OpenAI's Chat Completions shapes.

Only the fields the proxy writes are described; see
https://platform.openai.com/docs/api-reference/chat/object and
https://platform.openai.com/docs/api-reference/chat/streaming.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from pydantic import JsonValue

__all__ = [
    "ChunkChoice",
    "ChunkDelta",
    "ChunkFunction",
    "ChunkToolCall",
    "CompletionBody",
    "CompletionChoice",
    "CompletionChunk",
    "CompletionMessage",
    "CompletionTokensDetails",
    "CompletionUsage",
    "ErrorBody",
    "ErrorDetail",
    "ModelCard",
    "ModelList",
    "OpenAIFinishReason",
    "PromptTokensDetails",
    "ResponseFunction",
    "ResponseToolCall",
]

OpenAIFinishReason = Literal["stop", "length", "tool_calls", "content_filter"]
"""The finish reasons of Chat Completions."""


class PromptTokensDetails(TypedDict):
    cached_tokens: int


class CompletionTokensDetails(TypedDict):
    reasoning_tokens: int


class CompletionUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails


class ResponseFunction(TypedDict):
    name: str
    arguments: str
    """The arguments as JSON text, as OpenAI sends them."""


class ResponseToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: ResponseFunction


class CompletionMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    refusal: None
    tool_calls: NotRequired[list[ResponseToolCall]]
    reasoning_content: NotRequired[str]
    """The model's readable reasoning: not OpenAI's, but the field DeepSeek, vLLM and
    many gateways use, which clients of those already read."""


class CompletionChoice(TypedDict):
    index: int
    message: CompletionMessage
    finish_reason: OpenAIFinishReason
    logprobs: JsonValue
    """The upstream's own log probabilities (`ModelResponse.logprobs`), or `null`."""


class CompletionBody(TypedDict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: NotRequired[CompletionUsage]
    """Left out when the upstream reported none."""
    system_fingerprint: None


class ChunkFunction(TypedDict, total=False):
    name: str
    arguments: str


class ChunkToolCall(TypedDict):
    index: int
    id: NotRequired[str]
    type: NotRequired[Literal["function"]]
    function: ChunkFunction


class ChunkDelta(TypedDict, total=False):
    role: Literal["assistant"]
    content: str
    reasoning_content: str
    tool_calls: list[ChunkToolCall]


class ChunkChoice(TypedDict):
    index: int
    delta: ChunkDelta
    finish_reason: OpenAIFinishReason | None
    logprobs: JsonValue
    """The upstream's log probabilities of this chunk's text (`TextDelta.logprobs`), or `null`."""


class CompletionChunk(TypedDict):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChunkChoice]
    system_fingerprint: None
    usage: NotRequired[CompletionUsage | None]


class ErrorDetail(TypedDict):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(TypedDict):
    error: ErrorDetail


class ModelCard(TypedDict):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(TypedDict):
    object: Literal["list"]
    data: list[ModelCard]
