"""Model spec strings (`"provider:model"`, bare model ids) turned into `Model`s."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from tidemill.errors import ConfigurationError
from tidemill.llm._model import Model
from tidemill.llm._scripted import ScriptedModel

__all__ = ["KNOWN_PROVIDERS", "ModelSpec", "parse_model_spec", "resolve_model"]

KNOWN_PROVIDERS: frozenset[str] = frozenset(
    {
        "openai",
        "openai-responses",
        "azure",
        "anthropic",
        "anthropic-vertex",
        "gemini",
        "vertex",
        "bedrock",
        "mistral",
        "deepseek",
        "groq",
        "together",
        "openrouter",
        "ollama",
        "vllm",
        "openai-compatible",
    }
)
"""Providers a spec string may name. `fake` and `scripted` name `ScriptedModel`."""

_OFFLINE = frozenset({"fake", "scripted"})

# Bare model ids map to their provider by prefix.
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-", "openai"),
    ("chatgpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("claude-", "anthropic"),
    ("gemini-", "gemini"),
    ("mistral-", "mistral"),
    ("codestral-", "mistral"),
    ("deepseek-", "deepseek"),
)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed spec string."""

    provider: str
    model: str | None = None


def parse_model_spec(spec: str) -> ModelSpec:
    """Parse `"provider:model"`, `"provider"` or a bare model id.

    Raises:
        ConfigurationError: For an unknown provider, with the closest names.

    Example:
        >>> parse_model_spec("anthropic:claude-sonnet-4-5")
        ModelSpec(provider='anthropic', model='claude-sonnet-4-5')
        >>> parse_model_spec("gpt-4o-mini")
        ModelSpec(provider='openai', model='gpt-4o-mini')
        >>> parse_model_spec("fake")
        ModelSpec(provider='fake', model=None)
    """
    text = spec.strip()
    provider, sep, model = text.partition(":")
    if sep:
        _check_provider(provider, spec)
        if not model:
            raise ConfigurationError(
                f"The model spec {spec!r} names no model after the colon.",
                hint=f"Write it as '{provider}:<model id>'.",
            )
        return ModelSpec(provider, model)
    if text in _OFFLINE or text in KNOWN_PROVIDERS:
        return ModelSpec(text)
    for prefix, owner in _PREFIXES:
        if text.startswith(prefix):
            return ModelSpec(owner, text)
    _check_provider(text, spec)
    raise AssertionError("unreachable")  # pragma: no cover


def resolve_model(spec: str | Model, **config: Any) -> Model:
    """Turn a spec string and its options into a `Model`; pass a `Model` through.

    Raises:
        ConfigurationError: For an unknown provider or option, or a provider
            this version cannot call yet.

    Example:
        >>> resolve_model("fake", responses=["hi"]).provider
        'scripted'
    """
    if isinstance(spec, Model):
        if config:
            raise ConfigurationError(
                "Options were given for a model object that is already built.",
                hint="Set the options when you construct the model.",
                context={"options": sorted(config)},
            )
        return spec
    parsed = parse_model_spec(spec)
    if parsed.provider in _OFFLINE:
        try:
            return ScriptedModel(**config)
        except TypeError as exc:
            raise ConfigurationError(
                f"Bad option for the scripted model: {exc}",
                hint="It takes responses=, tool_calls=, handler=, strict= and model_name=.",
            ) from None
    raise ConfigurationError(
        f"The {parsed.provider!r} provider cannot be called by this version of Tidemill.",
        hint="Use llm('fake', responses=[...]) for an offline model, or pass a Model object.",
        context={"provider": parsed.provider, "model": parsed.model},
    )


def _check_provider(name: str, spec: str) -> None:
    if name in KNOWN_PROVIDERS or name in _OFFLINE:
        return
    close = difflib.get_close_matches(name, sorted(KNOWN_PROVIDERS | _OFFLINE), n=3)
    hint = f"Did you mean {' or '.join(repr(c) for c in close)}?" if close else None
    raise ConfigurationError(
        f"Unknown model provider in {spec!r}.",
        hint=hint or "Write 'provider:model', e.g. 'openai:gpt-4o-mini', or 'fake'.",
        context={"known": sorted(KNOWN_PROVIDERS)},
    )
