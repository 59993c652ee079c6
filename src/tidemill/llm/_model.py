"""`Model`: the one interface the agent runtime calls a language model through."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from pydantic import JsonValue

from tidemill.types import (
    Message,
    ModelResponse,
    ReasoningDelta,
    ResponseDone,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
)

__all__ = ["Model", "ModelRequest", "ModelSettings", "ModelStreamEvent"]

ModelStreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | ResponseDone
"""What a model stream yields; the last event is always `ResponseDone`."""


class ModelSettings(TypedDict, total=False):
    """Per-call options every provider understands."""

    temperature: float
    max_tokens: int
    top_p: float
    stop: list[str]
    seed: int
    timeout: float
    """Seconds to wait for the whole call."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call needs."""

    messages: Sequence[Message]
    """The conversation, system message first when there is one."""
    tools: Sequence[ToolDefinition] = ()
    """The tools the model may call."""
    settings: ModelSettings = field(default_factory=lambda: ModelSettings())


class Model(ABC):
    """A language model behind one provider's API.

    Implementations answer a `ModelRequest` with a `ModelResponse`; streaming
    falls back to one whole response unless `stream` is overridden.
    """

    provider: str = "unknown"
    """The provider's name, as in a spec string (`openai`, `anthropic`, ...)."""
    model_name: str = "unknown"
    """The model id sent to the provider."""
    supports_tools: bool = True

    @abstractmethod
    async def request(self, request: ModelRequest) -> ModelResponse:
        """Make one model call and return the whole response."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        """Make one model call, yielding events as they arrive, `ResponseDone` last."""
        response = await self.request(request)
        if response.message.content:
            yield TextDelta(delta=response.message.content)
        yield ResponseDone(response=response)

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections; the default holds none."""

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description, for logs and `describe()`."""
        return {"provider": self.provider, "model": self.model_name}
