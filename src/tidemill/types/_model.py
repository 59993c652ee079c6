"""What one model call returns."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from tidemill.types._messages import Message
from tidemill.types._usage import Usage

__all__ = ["FinishReason", "ModelResponse"]

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error", "unknown"]
"""Why a model stopped, normalised across providers."""


class ModelResponse(BaseModel):
    """The complete answer of one model call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message: Message
    """The assistant message: text, reasoning and tool calls."""
    usage: Usage = Field(default_factory=Usage)
    """What the call cost."""
    finish_reason: FinishReason = "stop"
    """Why the model stopped, normalised across providers."""
    model: str | None = None
    """The model that answered, as the provider names it."""
    provider: str | None = None
    """The provider that served the call, by Tidemill's name for it (`openai`, ...)."""
    response_id: str | None = None
    """The provider's id for this response."""
    logprobs: JsonValue = Field(default=None, exclude_if=lambda value: value is None)
    """The answer's log probabilities, when the request asked for them (the
    `logprobs` option) and the provider returned some; `None` otherwise.

    They are the provider's own JSON, in Chat Completions' form
    (`{"content": [{"token", "logprob", "bytes", "top_logprobs"}, ...], "refusal": ...}`):
    a whole answer's `choices[0].logprobs` as it came, a stream's the
    `logprobs` of its chunks joined (see `TextDelta.logprobs`). Left out of
    the JSON when `None`.
    """
