"""Model spec strings (`"provider:model"`, bare model ids) turned into `Model`s."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tidemill.errors import ConfigurationError
from tidemill.llm._adapter import unknown_option
from tidemill.llm._fallback import FallbackModel
from tidemill.llm._model import Model, ModelSettings
from tidemill.llm._scripted import ScriptedModel
from tidemill.llm.anthropic._adapter import AnthropicModel
from tidemill.llm.anthropic._vertex import AnthropicVertexModel
from tidemill.llm.bedrock._adapter import BedrockModel
from tidemill.llm.google._gemini import GeminiModel, VertexGeminiModel
from tidemill.llm.openai._azure import AzureOpenAIModel
from tidemill.llm.openai._chat import OpenAIChatModel
from tidemill.llm.openai._responses import OpenAIResponsesModel

__all__ = [
    "DEFAULT_MODELS",
    "KNOWN_PROVIDERS",
    "OPENAI_COMPATIBLE",
    "ModelSpec",
    "parse_model_spec",
    "resolve_model",
]

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

DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-4o-mini",
    "openai-responses": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "anthropic-vertex": "claude-sonnet-4-5@20250929",
    "gemini": "gemini-2.5-flash",
    "vertex": "gemini-2.5-flash",
    "mistral": "mistral-small-latest",
    "deepseek": "deepseek-chat",
    "groq": "llama-3.3-70b-versatile",
    "together": "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    "openrouter": "openai/gpt-4o-mini",
}
"""The model a spec naming only its provider gets: `.llm("openai")` is `openai:gpt-4o-mini`.

`azure` (deployment names are yours), `bedrock` (model access and inference
profiles differ by account and region), `ollama`, `vllm` and
`openai-compatible` (they serve what you loaded) have no default: name the
model, as `"ollama:llama3.2"` or with `model=`.
"""

_WHY_NO_DEFAULT: dict[str, str] = {
    "azure": "Azure OpenAI serves deployments you name yourself",
    "bedrock": "Bedrock's model access and inference profiles differ by account and region",
    "ollama": "Ollama serves the models you pulled",
    "vllm": "vLLM serves the model it was started with",
    "openai-compatible": "the server decides which models it serves",
}

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

    Examples:
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


def resolve_model(spec: str | Sequence[str | Model] | Model, **config: Any) -> Model:
    """Turn a spec string and its options into a `Model`; pass a `Model` through.

    A list of specs (or models) becomes a `FallbackModel` that tries them
    in order; the options apply to every model built from a string.

    The model may be given as an option instead: `resolve_model("anthropic",
    model="claude-sonnet-4-5")` is `resolve_model("anthropic:claude-sonnet-4-5")`.
    A spec naming only a provider gets its default from `DEFAULT_MODELS`
    (`"openai"` is `"openai:gpt-4o-mini"`); `azure`, `bedrock`, `ollama`,
    `vllm` and `openai-compatible` have none and must name the model.

    Each provider has an HTTP adapter, and the options are passed to it
    (`api_key=`, `base_url=`, `http_client=`, `settings=`, ...):

    - `openai:` and the OpenAI-compatible vendors (`mistral:`, `deepseek:`,
      `groq:`, `together:`, `openrouter:`, `ollama:`, `vllm:`,
      `openai-compatible:`): `OpenAIChatModel`;
    - `openai-responses:`: `OpenAIResponsesModel`; `azure:<deployment>`:
      `AzureOpenAIModel`;
    - `anthropic:`: `AnthropicModel`; `anthropic-vertex:`: `AnthropicVertexModel`;
    - `gemini:`: `GeminiModel`; `vertex:`: `VertexGeminiModel`;
    - `bedrock:`: `BedrockModel` (the Converse API).

    Raises:
        ConfigurationError: For an unknown provider or option, a missing API
            key, a provider this version cannot call yet, a provider without a
            default and no model, or a `model=` that differs from the spec's.

    Examples:
        >>> resolve_model("fake", responses=["hi"]).provider
        'scripted'
        >>> model = resolve_model("openai:gpt-4o-mini", api_key="sk-test")
        >>> type(model).__name__, model.provider, model.model_name
        ('OpenAIChatModel', 'openai', 'gpt-4o-mini')
        >>> resolve_model("claude-sonnet-4-5", api_key="sk-ant-test").provider
        'anthropic'
        >>> resolve_model("anthropic", model="claude-sonnet-4-5", api_key="k").model_name
        'claude-sonnet-4-5'
        >>> resolve_model("openai", api_key="sk-test").model_name
        'gpt-4o-mini'
        >>> resolve_model(["fake", "fake"]).model_name
        'scripted:scripted,scripted:scripted'
    """
    if not isinstance(spec, str | Model):
        return _fallback(spec, config)
    if isinstance(spec, Model):
        if config:
            raise ConfigurationError(
                "Options were given for a model object that is already built.",
                hint="Set the options when you construct the model.",
                context={"options": sorted(config)},
            )
        return spec
    parsed = _with_model_option(parse_model_spec(spec), spec, config)
    if parsed.provider in _OFFLINE:
        try:
            return ScriptedModel(**config)
        except TypeError as exc:
            raise ConfigurationError(
                f"Bad option for the scripted model: {exc}",
                hint="It takes responses=, tool_calls=, handler=, strict= and model_name=.",
            ) from None
    adapter = _adapter(parsed.provider)
    if adapter is None:
        raise ConfigurationError(
            f"The {parsed.provider!r} provider cannot be called by this version of Tidemill.",
            hint=f"Use one of {', '.join(sorted(_CALLABLE))}, "
            "llm('fake', responses=[...]) for an offline model, or pass a Model object.",
            context={"provider": parsed.provider, "model": parsed.model},
        )
    if not parsed.model:
        reason = _WHY_NO_DEFAULT.get(parsed.provider, "it has no default model")
        raise ConfigurationError(
            f"The model spec {spec!r} names a provider but no model, "
            f"and {parsed.provider!r} has no default: {reason}.",
            hint=f"Write it as '{parsed.provider}:<model id>', or pass model='<model id>'.",
            context={"provider": parsed.provider},
        )
    build, fixed = adapter
    config = _fold_settings(config)
    _check_options(build, fixed, parsed.provider, config)
    return build(parsed.model, **fixed, **config)


def _with_model_option(parsed: ModelSpec, spec: str, config: dict[str, Any]) -> ModelSpec:
    """Fold a `model=` option into the spec, or the provider's default when none is named.

    Takes `model` out of `config` (it is not an adapter option).
    """
    if parsed.provider in _OFFLINE:
        return parsed
    option = config.pop("model", None)
    if option is not None:
        if not isinstance(option, str) or not option.strip():
            raise ConfigurationError(
                f"model= must be a model id string, not {option!r}.",
                hint=f"Pass it as model='<model id>' or write '{parsed.provider}:<model id>'.",
            )
        if parsed.model is not None and parsed.model != option.strip():
            raise ConfigurationError(
                f"The model spec {spec!r} already names the model {parsed.model!r}, "
                f"but model={option!r} was also given.",
                hint=f"Name the model once: '{parsed.provider}:<model id>', or "
                f"llm('{parsed.provider}', model='<model id>').",
                context={"spec": spec, "model": option},
            )
        return ModelSpec(parsed.provider, option.strip())
    if parsed.model is None and parsed.provider in DEFAULT_MODELS:
        return ModelSpec(parsed.provider, DEFAULT_MODELS[parsed.provider])
    return parsed


def _fallback(specs: Sequence[str | Model], config: dict[str, Any]) -> FallbackModel:
    """A `FallbackModel` over `specs`; it owns (and closes) the models built from strings.

    Nothing needs closing when a later spec fails: models open their HTTP
    client on first use.
    """
    if not specs:
        raise ConfigurationError(
            "An empty list of models was given.",
            hint="Give one spec string, or a list of them to try in order.",
        )
    models: list[Model] = []
    owned: list[Model] = []
    for item in specs:
        if isinstance(item, Model):
            models.append(item)
        elif isinstance(item, str):
            models.append(resolve_model(item, **config))
            owned.append(models[-1])
        else:
            raise ConfigurationError(
                f"Cannot use {type(item).__name__} as a model in a fallback list.",
                hint="List spec strings ('openai:gpt-4o') or Model objects.",
            )
    return FallbackModel(models, owned=owned)


_SETTING_NAMES = ModelSettings.__required_keys__ | ModelSettings.__optional_keys__


def _fold_settings(config: dict[str, Any]) -> dict[str, Any]:
    """Move per-call settings given as options (`temperature=0`) into `settings=`."""
    given = {name: config[name] for name in config if name in _SETTING_NAMES}
    if not given:
        return config
    rest = {name: value for name, value in config.items() if name not in given}
    rest["settings"] = {**rest.get("settings", {}), **given}
    return rest


OPENAI_COMPATIBLE: frozenset[str] = frozenset(
    {
        "openai",
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
"""Providers served by the Chat Completions adapter."""


_ADAPTERS: dict[str, Callable[..., Model]] = {
    "anthropic": AnthropicModel,
    "anthropic-vertex": AnthropicVertexModel,
    "azure": AzureOpenAIModel,
    "bedrock": BedrockModel,
    "gemini": GeminiModel,
    "openai-responses": OpenAIResponsesModel,
    "vertex": VertexGeminiModel,
}
"""Providers with an adapter of their own (the rest of `_CALLABLE` share `OpenAIChatModel`)."""

_CALLABLE = OPENAI_COMPATIBLE | frozenset(_ADAPTERS)


def _adapter(provider: str) -> tuple[Callable[..., Model], dict[str, Any]] | None:
    """The adapter class for `provider`, and the arguments that select the provider."""
    if provider in _ADAPTERS:
        return _ADAPTERS[provider], {}
    if provider in OPENAI_COMPATIBLE:
        return OpenAIChatModel, {"provider": provider}
    return None


def _check_options(
    build: Callable[..., Model], fixed: dict[str, Any], provider: str, config: dict[str, Any]
) -> None:
    """Refuse an unknown option by name, suggesting the closest ones."""
    unknown = unknown_option(build, config, fixed=fixed)
    if unknown is not None:
        close = unknown.close
        hint = f"Did you mean {' or '.join(repr(c) for c in close)}?" if close else None
        raise ConfigurationError(
            f"Unknown option {unknown.option!r} for the {provider!r} model.",
            hint=hint or f"It takes: {', '.join(unknown.known)}.",
            context={"provider": provider, "options": unknown.known},
        )


def _check_provider(name: str, spec: str) -> None:
    if name in KNOWN_PROVIDERS or name in _OFFLINE:
        return
    close = difflib.get_close_matches(name, sorted(KNOWN_PROVIDERS | _OFFLINE), n=3)
    hint = f"Did you mean {' or '.join(repr(c) for c in close)}?" if close else None
    raise ConfigurationError(
        f"Unknown model provider in {spec!r}.",
        hint=hint or "Write 'provider:model', e.g. 'openai:gpt-4o-mini', or 'fake'.",
        context={"known": sorted(KNOWN_PROVIDERS), "close": close},
    )
