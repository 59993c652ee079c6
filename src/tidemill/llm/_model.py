"""`Model`: the one interface the agent runtime calls a language model through."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.types import (
    Message,
    ModelResponse,
    ReasoningDelta,
    ResponseDone,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
)

__all__ = [
    "ForcedTool",
    "Model",
    "ModelRequest",
    "ModelSettings",
    "ModelStreamEvent",
    "OutputFormat",
    "ToolChoice",
]

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


_FORMAT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """Ask a model to answer with JSON text of a given shape (structured output).

    Each adapter sends it in its vendor's own form: OpenAI's `json_schema`
    response format, Gemini's `responseSchema`, and for Anthropic and Bedrock
    a tool with the schema that the model is made to call, whose call comes
    back as the response's text. Either way the answer is JSON *text* in
    `ModelResponse.message.content`; validate it yourself, a provider's
    guarantee varies (see `strict`).

    Args:
        name: A name for the format (letters, digits, `_` and `-`, at most 64):
            OpenAI's `json_schema.name`, the forced tool's name for Anthropic
            and Bedrock.
        schema: The JSON Schema of the answer; `None` asks for any JSON object
            (OpenAI's `json_object` mode, Gemini's JSON MIME type). OpenAI and
            DeepSeek refuse JSON mode unless a message says "JSON".
        strict: Ask for OpenAI's strict mode: the schema is rewritten to
            OpenAI's strict subset (see `strict_json_schema`) and sent with
            `strict: true`. Other providers ignore the flag.
        description: What the answer is for, sent where the vendor takes one.

    Raises:
        ConfigurationError: For a name the vendors refuse, a schema that is
            not a mapping, or `strict` without a schema.

    Examples:
        >>> fmt = OutputFormat("city", {"type": "object", "properties": {}})
        >>> fmt.name, fmt.strict, fmt.is_json_object
        ('city', False, False)
        >>> OutputFormat.json_object().is_json_object
        True
        >>> OutputFormat("a city")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: The output format name 'a city' is not valid. Hint: ...
    """

    name: str = "final_answer"
    schema: Mapping[str, JsonValue] | None = None
    strict: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _FORMAT_NAME.fullmatch(self.name):
            raise ConfigurationError(
                f"The output format name {self.name!r} is not valid.",
                hint="Use 1 to 64 letters, digits, '_' or '-' (e.g. 'final_answer').",
            )
        if self.schema is not None and not isinstance(self.schema, Mapping):
            raise ConfigurationError(
                f"The output format schema must be a JSON Schema object, not "
                f"{type(self.schema).__name__}.",
                hint="Pass a dict such as {'type': 'object', 'properties': {...}}.",
            )
        if self.strict and self.schema is None:
            raise ConfigurationError(
                "Strict mode needs a schema: a bare JSON object format cannot be strict.",
                hint="Pass the schema, or leave strict=False for plain JSON mode.",
            )

    @classmethod
    def json_object(cls, name: str = "final_answer") -> OutputFormat:
        """Any JSON object (JSON mode), with no schema."""
        return cls(name)

    @property
    def is_json_object(self) -> bool:
        """Whether this asks for any JSON object rather than a schema."""
        return self.schema is None

    def object_schema(self) -> dict[str, JsonValue]:
        """The schema, or a permissive object schema in JSON mode (for a forced tool)."""
        if self.schema is None:
            return {"type": "object"}
        return dict(self.schema)


@dataclass(frozen=True, slots=True)
class ForcedTool:
    """Make the model call one tool of the request, by its name (`ModelRequest.tool_choice`).

    Examples:
        >>> ForcedTool("get_weather")
        ForcedTool(name='get_weather')
    """

    name: str


ToolChoice = Literal["auto", "none", "required"] | ForcedTool
"""Whether the model must call a tool: it decides (`auto`), calls none (`none`),
calls at least one (`required`), or calls the one named (`ForcedTool`)."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call needs."""

    messages: Sequence[Message]
    """The conversation, system message first when there is one."""
    tools: Sequence[ToolDefinition] = ()
    """The tools the model may call."""
    settings: ModelSettings = field(default_factory=lambda: ModelSettings())
    output_format: OutputFormat | None = None
    """Ask for a JSON answer of this shape (structured output); `None` for plain text."""
    tool_choice: ToolChoice = "auto"
    """Whether the model must call one of `tools` (sent only when there are tools)."""
    options: Mapping[str, JsonValue] = field(default_factory=dict)
    """Further request parameters by their Chat Completions names (`user`,
    `presence_penalty`, `logit_bias`, a server's own such as vLLM's `top_k`).

    An OpenAI-format adapter sends each as it is; any other sends those its
    API has an equivalent for, in its own form, and raises `UnsupportedOption`
    (`tidemill.llm._options`) for the rest: none is left out unseen.
    """


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
    supports_output_format: bool = False
    """Whether `ModelRequest.output_format` is sent to the provider natively.

    The agent runtime only passes an output format to models that say so;
    either way it still validates the final answer itself.
    """

    @abstractmethod
    async def request(self, request: ModelRequest) -> ModelResponse:
        """Make one model call and return the whole response."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        """Make one model call, yielding events as they arrive, `ResponseDone` last."""
        response = await self.request(request)
        if response.message.content:
            yield TextDelta(delta=response.message.content, logprobs=response.logprobs)
        yield ResponseDone(response=response)

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections; the default holds none."""

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description, for logs and `describe()`."""
        return {"provider": self.provider, "model": self.model_name}
