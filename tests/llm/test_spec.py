"""`resolve_model`: spec strings become the HTTP adapters."""

from __future__ import annotations

import httpx
import pytest

from tidemill.errors import ConfigurationError
from tidemill.llm import (
    AnthropicModel,
    AnthropicVertexModel,
    AzureOpenAIModel,
    GeminiModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ScriptedModel,
    VertexGeminiModel,
    _spec,
    resolve_model,
)
from tidemill.llm._spec import DEFAULT_MODELS, KNOWN_PROVIDERS, OPENAI_COMPATIBLE


@pytest.mark.parametrize(
    ("spec", "kind", "provider", "model"),
    [
        ("openai:gpt-4o-mini", OpenAIChatModel, "openai", "gpt-4o-mini"),
        ("gpt-4o-mini", OpenAIChatModel, "openai", "gpt-4o-mini"),
        ("o3-mini", OpenAIChatModel, "openai", "o3-mini"),
        ("anthropic:claude-sonnet-4-5", AnthropicModel, "anthropic", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5", AnthropicModel, "anthropic", "claude-sonnet-4-5"),
        ("mistral-large-latest", OpenAIChatModel, "mistral", "mistral-large-latest"),
        ("deepseek-reasoner", OpenAIChatModel, "deepseek", "deepseek-reasoner"),
        ("groq:openai/gpt-oss-120b", OpenAIChatModel, "groq", "openai/gpt-oss-120b"),
        (
            "together:meta-llama/Llama-3.3-70B-Instruct-Turbo",
            OpenAIChatModel,
            "together",
            "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        ),
        (
            "openrouter:anthropic/claude-sonnet-4.5",
            OpenAIChatModel,
            "openrouter",
            "anthropic/claude-sonnet-4.5",
        ),
        ("ollama:llama3.2:3b", OpenAIChatModel, "ollama", "llama3.2:3b"),
        ("vllm:Qwen/Qwen3-8B", OpenAIChatModel, "vllm", "Qwen/Qwen3-8B"),
    ],
)
async def test_specs_resolve_to_adapters(
    spec: str, kind: type[object], provider: str, model: str
) -> None:
    resolved = resolve_model(spec, api_key="sk-test")
    assert isinstance(resolved, kind)
    assert (resolved.provider, resolved.model_name) == (provider, model)
    await resolved.aclose()


def test_the_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    model = resolve_model("openai:gpt-4o")
    assert isinstance(model, OpenAIChatModel) and model.credentials.api_key == "sk-env"


def test_a_missing_key_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="MISTRAL_API_KEY"):
        resolve_model("mistral:mistral-small-latest")


def test_openai_compatible_needs_a_base_url() -> None:
    with pytest.raises(ConfigurationError, match="base_url"):
        resolve_model("openai-compatible:my-model")
    model = resolve_model("openai-compatible:my-model", base_url="http://gpu:8000/v1")
    assert model.describe()["base_url"] == "http://gpu:8000/v1"


async def test_options_reach_the_adapter() -> None:
    client = httpx.AsyncClient()
    model = resolve_model(
        "anthropic:claude-sonnet-4-5",
        api_key="k",
        http_client=client,
        thinking_budget=2048,
        settings={"temperature": 0.0},
    )
    assert isinstance(model, AnthropicModel)
    assert (model.thinking_budget, model.settings) == (2048, {"temperature": 0.0})
    assert not model.http.owns_client
    await model.aclose()
    assert not client.is_closed
    await client.aclose()


def test_an_unknown_option_suggests_the_closest() -> None:
    with pytest.raises(ConfigurationError, match="Did you mean 'api_key'"):
        resolve_model("openai:gpt-4o", api_kye="k")
    with pytest.raises(ConfigurationError, match="Unknown option 'provider'"):
        resolve_model("openai:gpt-4o", api_key="k", provider="mistral")


@pytest.mark.parametrize(
    ("spec", "options", "kind", "provider"),
    [
        ("gemini:gemini-2.5-flash", {}, GeminiModel, "gemini"),
        ("gemini-2.5-pro", {}, GeminiModel, "gemini"),
        ("vertex:gemini-2.5-pro", {"project": "p"}, VertexGeminiModel, "vertex"),
        ("openai-responses:gpt-5", {}, OpenAIResponsesModel, "openai-responses"),
        (
            "anthropic-vertex:claude-sonnet-4-5@20250929",
            {"project": "p"},
            AnthropicVertexModel,
            "anthropic-vertex",
        ),
        (
            "azure:my-deployment",
            {"base_url": "https://r.openai.azure.com"},
            AzureOpenAIModel,
            "azure",
        ),
    ],
)
async def test_the_other_adapters(
    spec: str, options: dict[str, str], kind: type[object], provider: str
) -> None:
    model = resolve_model(spec, api_key="k", **options)
    assert isinstance(model, kind) and model.provider == provider
    assert model.model_name == (spec.partition(":")[2] or spec)
    await model.aclose()


def test_a_known_provider_without_an_adapter_would_refuse_clearly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every known provider has an adapter now; a future one listed before its adapter lands
    # must still get a clear refusal.
    from tidemill.llm import _spec

    monkeypatch.delitem(_spec._ADAPTERS, "bedrock")
    with pytest.raises(ConfigurationError, match="cannot be called by this version") as caught:
        resolve_model("bedrock:anthropic.claude-v2", api_key="k")
    assert "openai-compatible" in str(caught.value) and "gemini" in str(caught.value)


def test_model_option_names_the_model() -> None:
    # The seed's `.llm("anthropic", model="claude-sonnet-4-5")`.
    model = resolve_model("anthropic", model="claude-sonnet-4-5", api_key="k")
    assert isinstance(model, AnthropicModel)
    assert (model.provider, model.model_name) == ("anthropic", "claude-sonnet-4-5")
    ollama = resolve_model("ollama", model="llama3.2:3b")
    assert (ollama.provider, ollama.model_name) == ("ollama", "llama3.2:3b")


def test_model_option_agreeing_with_the_spec_is_accepted() -> None:
    model = resolve_model("openai:gpt-4o", model="gpt-4o", api_key="k")
    assert model.model_name == "gpt-4o"


@pytest.mark.parametrize("spec", ["anthropic:claude-opus-4-1", "claude-opus-4-1"])
def test_model_option_conflicting_with_the_spec_is_refused(spec: str) -> None:
    with pytest.raises(ConfigurationError, match="already names the model 'claude-opus-4-1'") as e:
        resolve_model(spec, model="claude-sonnet-4-5", api_key="k")
    assert "model='claude-sonnet-4-5'" in str(e.value)


@pytest.mark.parametrize("bad", ["", "  ", 4])
def test_model_option_must_be_a_model_id(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="model= must be a model id"):
        resolve_model("openai", model=bad, api_key="k")


@pytest.mark.parametrize(
    ("provider", "default", "options"),
    [
        ("openai", "gpt-4o-mini", {}),
        ("openai-responses", "gpt-4o-mini", {}),
        ("anthropic", "claude-sonnet-4-5", {}),
        ("anthropic-vertex", "claude-sonnet-4-5@20250929", {"project": "p"}),
        ("gemini", "gemini-2.5-flash", {}),
        ("vertex", "gemini-2.5-flash", {"project": "p"}),
        ("mistral", "mistral-small-latest", {}),
        ("deepseek", "deepseek-chat", {}),
        ("groq", "llama-3.3-70b-versatile", {}),
        ("together", "meta-llama/Llama-3.3-70B-Instruct-Turbo", {}),
        ("openrouter", "openai/gpt-4o-mini", {}),
    ],
)
async def test_a_provider_alone_gets_its_default_model(
    provider: str, default: str, options: dict[str, str]
) -> None:
    assert DEFAULT_MODELS[provider] == default
    model = resolve_model(provider, api_key="k", **options)
    assert (model.provider, model.model_name) == (provider, default)
    await model.aclose()


def test_every_default_is_a_known_provider_and_the_table_is_complete() -> None:
    assert set(DEFAULT_MODELS) <= KNOWN_PROVIDERS
    # Every callable provider either has a default or refuses, saying why.
    assert set(DEFAULT_MODELS) | set(_spec._WHY_NO_DEFAULT) == set(_spec._CALLABLE)
    assert not set(DEFAULT_MODELS) & set(_spec._WHY_NO_DEFAULT)


@pytest.mark.parametrize(
    ("provider", "why"),
    [
        ("azure", "deployments you name yourself"),
        ("bedrock", "differ by account and region"),
        ("ollama", "models you pulled"),
        ("vllm", "model it was started with"),
        ("openai-compatible", "which models it serves"),
    ],
)
def test_a_provider_without_a_default_says_how_to_name_the_model(provider: str, why: str) -> None:
    with pytest.raises(ConfigurationError, match="names a provider but no model") as caught:
        resolve_model(provider, api_key="k", base_url="http://h")
    message = str(caught.value)
    assert why in message
    assert f"'{provider}:<model id>'" in message and "model='<model id>'" in message


def test_model_option_is_not_passed_on_to_the_adapter() -> None:
    # `model` is taken out of the options: it is never passed on as an adapter option.
    model = resolve_model("openai", model="gpt-4.1-mini", api_key="k", temperature=0)
    assert (model.model_name, model.settings) == ("gpt-4.1-mini", {"temperature": 0})


def test_the_offline_model_is_unchanged() -> None:
    assert isinstance(resolve_model("fake", responses=["x"]), ScriptedModel)


def test_every_compatible_vendor_has_a_dialect() -> None:
    from tidemill.llm import DIALECTS, KNOWN_PROVIDERS

    assert set(DIALECTS) == OPENAI_COMPATIBLE
    assert OPENAI_COMPATIBLE <= KNOWN_PROVIDERS
