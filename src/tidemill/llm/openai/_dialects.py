"""How each OpenAI-compatible vendor differs from OpenAI's Chat Completions.

Mistral, DeepSeek, Groq, Together, OpenRouter, Ollama, vLLM and any server
behind a custom base URL speak the Chat Completions format, each with a few
quirks. A dialect holds one vendor's facts (credentials, base URL, which
`max_tokens` field it takes, whether it accepts `stream_options`) and its
small behaviour differences as methods; `OpenAIChatModel` does the rest.

Quirks that are harmless everywhere (the many names of streamed reasoning,
OpenRouter's keep-alive comments, error objects inside a 200 stream) are
handled by the shared parser rather than here.
"""

from __future__ import annotations

import hashlib
import re
import string
from functools import cached_property
from typing import ClassVar, Literal

from pydantic import JsonValue

from tidemill.errors import ConfigurationError, MalformedToolCall, ProviderError
from tidemill.llm._credentials import Credentials, CredentialSource
from tidemill.llm._model import OutputFormat
from tidemill.llm._options import Body, FieldRule, RequestFields, put, setting
from tidemill.llm._strict_schema import openai_schema
from tidemill.llm.openai._chat_wire import ChatAssistantMessage, ChatJsonSchema, ChatResponseFormat
from tidemill.types import ImageRef, Message

__all__ = [
    "DIALECTS",
    "CompatibleDialect",
    "DeepSeekDialect",
    "GroqDialect",
    "MistralDialect",
    "OllamaDialect",
    "OpenAIDialect",
    "OpenRouterDialect",
    "TogetherDialect",
    "VllmDialect",
    "openai_headers",
]


def openai_headers(credentials: Credentials) -> dict[str, str]:
    """The headers of every OpenAI-style call (Chat Completions, Responses, `/embeddings`).

    The key as a bearer token, the organization and project when set, then
    the extra headers.

    Examples:
        >>> openai_headers(Credentials(api_key="sk-x", headers={"x-team": "a"}))
        {'authorization': 'Bearer sk-x', 'x-team': 'a'}
    """
    headers: dict[str, str] = {}
    if credentials.api_key:
        headers["authorization"] = f"Bearer {credentials.api_key}"
    if credentials.organization:
        headers["openai-organization"] = credentials.organization
    if credentials.project:
        headers["openai-project"] = credentials.project
    headers.update(credentials.headers)
    return headers


class OpenAIDialect:
    """OpenAI itself, and the base every other dialect adjusts.

    Subclass it for another OpenAI-compatible server and pass an instance as
    `OpenAIChatModel(..., provider=MyDialect())`.
    """

    name: ClassVar[str] = "openai"
    """The provider's name in spec strings and errors."""
    source: ClassVar[CredentialSource] = CredentialSource(
        "openai",
        "OPENAI_API_KEY",
        "https://api.openai.com/v1",
        base_url_env="OPENAI_BASE_URL",
        organization_env="OPENAI_ORG_ID",
        project_env="OPENAI_PROJECT_ID",
    )
    """Where the API key and base URL come from."""
    max_tokens_field: ClassVar[Literal["max_tokens", "max_completion_tokens"]] = (
        "max_completion_tokens"
    )
    """The body field that carries `ModelSettings.max_tokens`."""
    seed_field: ClassVar[Literal["seed", "random_seed"]] = "seed"
    """The body field that carries `ModelSettings.seed`."""
    stream_usage: ClassVar[bool] = True
    """Whether to send `stream_options.include_usage`; without it OpenAI streams no usage."""

    def call_id(self, call_id: str) -> str:
        """Rewrite a tool-call id from the history into one this vendor accepts."""
        return call_id

    def add_assistant_fields(self, message: Message, wire: ChatAssistantMessage) -> None:
        """Add vendor fields to an outgoing assistant message (OpenAI takes none)."""

    def check_image(self, image: ImageRef) -> None:
        """Refuse, before sending, an image this vendor documents it cannot take.

        Raises:
            ConfigurationError: Saying which images the vendor does take.
        """

    def translate_error(self, error: ProviderError) -> Exception:
        """Turn a provider error into the exception to raise (by default, itself)."""
        return error

    @cached_property
    def request_fields(self) -> RequestFields:
        """What this API makes of each request field: every field is sent as it is.

        The typed fields are written by `build_chat_request` under the
        vendor's names (`max_tokens_field`, `seed_field`); any other field of
        `ModelRequest.options` goes into the body unchanged.
        """
        limit = f"`{self.max_tokens_field}`"
        seed = "as is" if self.seed_field == "seed" else f"`{self.seed_field}`"
        usage = (
            "as is, with `include_usage` as the proxy needs it"
            if self.stream_usage
            else "as is, without `include_usage` (usage is reported unasked)"
        )
        rules = {
            "temperature": setting("as is"),
            "top_p": setting("as is"),
            "max_tokens": setting(limit),
            "max_completion_tokens": setting(limit),
            "stop": setting("as is"),
            "seed": setting(seed),
            "tools": setting("as is"),
            "tool_choice": setting("as is"),
            "response_format": setting(self.response_format_words),
            "stream_options": FieldRule(usage, send=_merge_stream_options),
        }
        return RequestFields(self.name, rules)

    response_format_words: ClassVar[str] = "as is"
    """What `response_format` becomes, for the proxy's parameter table."""

    def response_format(self, output: OutputFormat) -> ChatResponseFormat:
        """The `response_format` asking for `output`: a `json_schema`, or `json_object` mode.

        Raises:
            ConfigurationError: For `strict=True` with a schema that cannot be made strict.
        """
        if output.schema is None:
            return {"type": "json_object"}
        spec = ChatJsonSchema(
            name=output.name,
            schema=openai_schema(output.schema, strict=output.strict),
            strict=output.strict,
        )
        if output.description:
            spec["description"] = output.description
        return {"type": "json_schema", "json_schema": spec}


class MistralDialect(OpenAIDialect):
    """Mistral La Plateforme: tool-call ids must be exactly 9 letters or digits."""

    name = "mistral"
    source = CredentialSource(
        "mistral", "MISTRAL_API_KEY", "https://api.mistral.ai/v1", base_url_env="MISTRAL_BASE_URL"
    )
    max_tokens_field = "max_tokens"
    seed_field = "random_seed"  # Mistral's name; it refuses an unknown `seed`
    # Mistral reports usage on the final chunk unasked and validates its body strictly.
    stream_usage = False

    def call_id(self, call_id: str) -> str:
        """Map any id to a stable 9-character one, so a call and its result still match."""
        return mistral_call_id(call_id)


class DeepSeekDialect(OpenAIDialect):
    """DeepSeek: `reasoning_content` is streamed and must be sent back in tool-call loops.

    DeepSeek's JSON Output takes only `response_format: {"type": "json_object"}`
    (https://api-docs.deepseek.com/guides/json_mode), so an output schema is
    sent as JSON mode: the prompt must say "json" and describe the shape (the
    agent's output instructions do), and the answer must be validated.
    """

    name = "deepseek"
    source = CredentialSource(
        "deepseek", "DEEPSEEK_API_KEY", "https://api.deepseek.com", base_url_env="DEEPSEEK_BASE_URL"
    )
    max_tokens_field = "max_tokens"
    response_format_words = "`json_object` (JSON mode only: a schema is not sent)"

    def check_image(self, image: ImageRef) -> None:
        """DeepSeek's chat API takes text only."""
        raise ConfigurationError(
            "DeepSeek's chat API takes text only; this message has an image.",
            hint="Describe the image in text, or use a model that takes images "
            "(openai:gpt-4o-mini, anthropic:..., gemini:...).",
        )

    def response_format(self, output: OutputFormat) -> ChatResponseFormat:
        """Always `json_object`: DeepSeek has no `json_schema` response format."""
        return {"type": "json_object"}

    def add_assistant_fields(self, message: Message, wire: ChatAssistantMessage) -> None:
        """Return DeepSeek's own reasoning as `reasoning_content`."""
        # In thinking mode with tools, DeepSeek wants the turn's reasoning back:
        # https://api-docs.deepseek.com/guides/thinking_mode
        own = [r for r in message.reasoning if r.provider in (None, self.name)]
        if own:
            wire["reasoning_content"] = "".join(r.text for r in own)


class GroqDialect(OpenAIDialect):
    """Groq: a tool call that fails Groq's own schema check comes back as an error."""

    name = "groq"
    source = CredentialSource(
        "groq", "GROQ_API_KEY", "https://api.groq.com/openai/v1", base_url_env="GROQ_BASE_URL"
    )
    max_tokens_field = "max_tokens"

    def translate_error(self, error: ProviderError) -> Exception:
        """Raise `tool_use_failed` as `MalformedToolCall`, so the agent can correct itself."""
        if error.code != "tool_use_failed":
            return error
        return MalformedToolCall(
            "Groq rejected the model's tool call: " + error.message,
            feedback=(
                "Your last tool call did not match the tool's schema. "
                "Call the tool again with arguments that follow its schema exactly."
            ),
        )


class TogetherDialect(OpenAIDialect):
    """Together AI."""

    name = "together"
    source = CredentialSource(
        "together",
        "TOGETHER_API_KEY",
        "https://api.together.xyz/v1",
        base_url_env="TOGETHER_BASE_URL",
    )
    max_tokens_field = "max_tokens"


class OpenRouterDialect(OpenAIDialect):
    """OpenRouter: keep-alive comments and `finish_reason: "error"` inside 200 streams."""

    name = "openrouter"
    source = CredentialSource(
        "openrouter",
        "OPENROUTER_API_KEY",
        "https://openrouter.ai/api/v1",
        base_url_env="OPENROUTER_BASE_URL",
    )
    max_tokens_field = "max_tokens"


class OllamaDialect(OpenAIDialect):
    """A local Ollama server (no key), or Ollama's cloud with `OLLAMA_API_KEY`."""

    name = "ollama"
    source = CredentialSource(
        "ollama",
        "OLLAMA_API_KEY",
        "http://localhost:11434/v1",
        base_url_env="OLLAMA_BASE_URL",
        key_required=False,
    )
    max_tokens_field = "max_tokens"

    def check_image(self, image: ImageRef) -> None:
        """Ollama takes images inline only, as base64 `data:` URLs; it fetches no URL."""
        if not (image.url.startswith("data:") and ";base64," in image.url[:100]):
            raise ConfigurationError(
                f"Ollama cannot fetch the image at {image.url[:80]!r}.",
                hint="Pass the image inline, as a base64 data: URL (data:image/png;base64,...).",
            )


class VllmDialect(OpenAIDialect):
    """A vLLM server (a key only if it was started with `--api-key`)."""

    name = "vllm"
    source = CredentialSource(
        "vllm",
        "VLLM_API_KEY",
        "http://localhost:8000/v1",
        base_url_env="VLLM_BASE_URL",
        key_required=False,
    )
    max_tokens_field = "max_tokens"


class CompatibleDialect(OpenAIDialect):
    """Any other OpenAI-compatible server; needs `base_url=`."""

    name = "openai-compatible"
    source = CredentialSource(
        "openai-compatible",
        "OPENAI_COMPATIBLE_API_KEY",
        None,
        base_url_env="OPENAI_COMPATIBLE_BASE_URL",
        key_required=False,
    )
    max_tokens_field = "max_tokens"


DIALECTS: dict[str, OpenAIDialect] = {
    dialect.name: dialect
    for dialect in (
        OpenAIDialect(),
        MistralDialect(),
        DeepSeekDialect(),
        GroqDialect(),
        TogetherDialect(),
        OpenRouterDialect(),
        OllamaDialect(),
        VllmDialect(),
        CompatibleDialect(),
    )
}
"""The built-in dialects by provider name."""


def _merge_stream_options(value: JsonValue, body: Body) -> None:
    """The client's `stream_options`, beside the `include_usage` the builder set."""
    if isinstance(value, dict):
        for key, item in value.items():
            put(body, ("stream_options", key), item)
    else:
        put(body, "stream_options", value)


_MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")
_ALPHABET = string.ascii_letters + string.digits


def mistral_call_id(call_id: str) -> str:
    """Return `call_id` if Mistral accepts it, else a stable 9-character stand-in.

    Examples:
        >>> mistral_call_id("FI5qQGzDE")
        'FI5qQGzDE'
        >>> new = mistral_call_id("call_JMW1whyEaYG438VE1OIflxA2")
        >>> len(new), new.isalnum(), new == mistral_call_id("call_JMW1whyEaYG438VE1OIflxA2")
        (9, True, True)
    """
    if _MISTRAL_ID.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8")).digest()
    return "".join(_ALPHABET[byte % len(_ALPHABET)] for byte in digest[:9])
