"""Embedding spec strings (`"openai:text-embedding-3-small"`, `"fake"`) turned into embedders."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from tidemill.errors import ConfigurationError
from tidemill.llm._adapter import unknown_option
from tidemill.llm.embeddings._base import EmbeddingModel
from tidemill.llm.embeddings._bedrock import BedrockEmbedder
from tidemill.llm.embeddings._gemini import GeminiEmbedder
from tidemill.llm.embeddings._hashing import HashingEmbedder
from tidemill.llm.embeddings._ollama import OllamaEmbedder
from tidemill.llm.embeddings._openai import NO_EMBEDDINGS, OpenAIEmbedder

__all__ = ["DEFAULT_EMBEDDING_MODELS", "EMBEDDING_PROVIDERS", "resolve_embedder"]

DEFAULT_EMBEDDING_MODELS: Mapping[str, str] = {
    "openai": "text-embedding-3-small",
    "gemini": "gemini-embedding-001",
    "bedrock": "amazon.titan-embed-text-v2:0",
    "mistral": "mistral-embed",
}
"""The model a spec naming only its provider gets (`"openai"`: `text-embedding-3-small`)."""

_COMPATIBLE = ("mistral", "together", "openrouter", "vllm", "openai-compatible")

_BUILDERS: dict[str, tuple[Callable[..., EmbeddingModel], dict[str, Any]]] = {
    "openai": (OpenAIEmbedder, {"provider": "openai"}),
    **{name: (OpenAIEmbedder, {"provider": name}) for name in _COMPATIBLE},
    "ollama": (OllamaEmbedder, {}),
    "gemini": (GeminiEmbedder, {}),
    "bedrock": (BedrockEmbedder, {}),
}

_ELSEWHERE: Mapping[str, str] = {
    "anthropic": "Anthropic has no embeddings API",
    "anthropic-vertex": "Anthropic has no embeddings API",
    "openai-responses": "embeddings are not part of the Responses API; 'openai:' serves them",
    "azure": "Azure OpenAI embeddings are not supported by this version",
    "vertex": "Vertex AI embeddings (its predict API) are not supported by this version",
}
"""Chat providers without an embedding adapter, and why."""

EMBEDDING_PROVIDERS: frozenset[str] = frozenset({*_BUILDERS, "fake"})
"""Providers an embedding spec may name; `fake` is the offline `HashingEmbedder`."""


def resolve_embedder(spec: str | EmbeddingModel, **config: Any) -> EmbeddingModel:
    """Turn `"provider:model"` and its options into an `EmbeddingModel`; pass one through.

    `"fake"` (or `"hashing"`) is the offline `HashingEmbedder` (`dimensions=`).
    The options go to the adapter: `api_key=`, `base_url=`, `dimensions=`,
    `http_client=`, ...; `model=` may name the model instead of the spec.

    Raises:
        ConfigurationError: For an unknown provider or option, a provider
            without embeddings (DeepSeek, Groq), or no model where there is no default.

    Examples:
        >>> resolve_embedder("fake").model_name
        'hashing-256'
        >>> embedder = resolve_embedder("openai", api_key="sk-test")
        >>> type(embedder).__name__, embedder.model_name
        ('OpenAIEmbedder', 'text-embedding-3-small')
        >>> resolve_embedder("ollama:nomic-embed-text").provider
        'ollama'
        >>> resolve_embedder("opena:small")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: Unknown embedding provider in 'opena:small'. ...
    """
    if isinstance(spec, EmbeddingModel):
        if config:
            raise ConfigurationError(
                "Options were given for an embedding model that is already built.",
                hint="Set the options when you construct it.",
                context={"options": sorted(config)},
            )
        return spec
    if not isinstance(spec, str):
        raise ConfigurationError(
            f"Cannot use {type(spec).__name__} as an embedding model.",
            hint="Pass a spec string ('openai:text-embedding-3-small', 'fake') "
            "or an EmbeddingModel.",
        )
    provider, _, model = spec.strip().partition(":")
    option = config.pop("model", None)
    if provider in ("fake", "hashing"):
        return _build(HashingEmbedder, {}, "fake", config, ())
    if provider in NO_EMBEDDINGS:
        raise ConfigurationError(
            f"The {provider!r} provider cannot embed: {NO_EMBEDDINGS[provider]}.",
            hint="Use openai:, gemini:, bedrock:, mistral:, together:, ollama: or 'fake'.",
        )
    if provider in _ELSEWHERE:
        raise ConfigurationError(
            f"The {provider!r} provider has no embedding model here: {_ELSEWHERE[provider]}.",
            hint="Use openai:, gemini:, bedrock:, mistral:, together:, ollama: or 'fake'.",
            context={"provider": provider},
        )
    if provider not in _BUILDERS:
        close = difflib.get_close_matches(provider, sorted(EMBEDDING_PROVIDERS), n=2)
        raise ConfigurationError(
            f"Unknown embedding provider in {spec!r}.",
            hint=(f"Did you mean {' or '.join(repr(c) for c in close)}? " if close else "")
            + "Write 'provider:model', e.g. 'openai:text-embedding-3-small', or 'fake'.",
            context={"known": sorted(EMBEDDING_PROVIDERS)},
        )
    if option is not None and model and option != model:
        raise ConfigurationError(
            f"The spec {spec!r} names the model {model!r}, but model={option!r} was also given.",
            hint="Name the model once.",
        )
    name = model or option or DEFAULT_EMBEDDING_MODELS.get(provider)
    if not name:
        raise ConfigurationError(
            f"The embedding spec {spec!r} names no model, and {provider!r} has no default.",
            hint=f"Write it as '{provider}:<model id>', or pass model='<model id>'.",
        )
    build, fixed = _BUILDERS[provider]
    return _build(build, fixed, provider, config, (name,))


def _build(
    build: Callable[..., EmbeddingModel],
    fixed: dict[str, Any],
    provider: str,
    config: dict[str, Any],
    args: tuple[str, ...],
) -> EmbeddingModel:
    unknown = unknown_option(build, config, fixed=fixed)
    if unknown is not None:
        close = unknown.close
        raise ConfigurationError(
            f"Unknown option {unknown.option!r} for the {provider!r} embedder.",
            hint=(f"Did you mean {' or '.join(repr(c) for c in close)}? " if close else "")
            + f"It takes: {', '.join(unknown.known)}.",
            context={"provider": provider, "options": unknown.known},
        )
    return build(*args, **fixed, **config)
