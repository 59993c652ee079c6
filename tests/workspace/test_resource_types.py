"""The built-in resource types: valid schemas, write-only secrets, `resolve_model` arguments."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tidemill.errors import ConfigurationError
from tidemill.llm import resolve_model
from tidemill.llm._spec import KNOWN_PROVIDERS
from tidemill.workspace._resource_types import (
    BUILTIN_TYPES,
    ResourceType,
    builtin_type,
    credentials_from_resource,
)
from tidemill.workspace._values import (
    InvalidValue,
    check_resource_type_schema,
    check_resource_value,
    secret_fields,
)

PROVIDERS = [kind for kind in BUILTIN_TYPES if kind.provider is not None]

# A full value of each provider type: every field its schema has.
_FULL: dict[str, dict[str, Any]] = {
    "openai": {
        "api_key": "sk-test",
        "base_url": "https://gateway.example/v1",
        "organization": "org-1",
        "project": "proj-1",
        "headers": {"X-Team": "ops"},
        "model": "gpt-4o-mini",
    },
    "azure": {
        "base_url": "https://acme.openai.azure.com",
        "api_key": "az-key",
        "api_version": "2024-10-21",
        "azure_ad_token": "ad-token",
        "headers": {},
        "model": "my-deployment",
    },
    "anthropic_vertex": {
        "project": "acme",
        "region": "us-east5",
        "access_token": "ya29.test",
        "base_url": "https://us-east5-aiplatform.googleapis.com",
        "model": "claude-sonnet-4-5@20250929",
    },
    "vertex": {"project": "acme", "region": "us-central1", "access_token": "ya29.test"},
    "bedrock": {
        "region": "eu-west-1",
        "aws_access_key_id": "AKIDEXAMPLE",
        "aws_secret_access_key": "secret",
        "aws_session_token": "session",
        "headers": {"X-Trace": "1"},
        "model": "us.amazon.nova-micro-v1:0",
    },
    "ollama": {"base_url": "http://localhost:11434/v1", "model": "llama3.2"},
    "vllm": {"base_url": "http://localhost:8000/v1"},
    "openai_compatible": {"base_url": "https://llm.internal/v1", "api_key": "k"},
}


def _full(kind: ResourceType) -> dict[str, Any]:
    return _FULL.get(
        kind.name, {"api_key": "key-test", "base_url": "https://x.example/v1", "model": "m-1"}
    )


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials come from the resource only, never from the developer's shell."""
    for name in list(os.environ):
        if name.startswith(("AWS_", "OPENAI", "AZURE_", "GOOGLE_", "ANTHROPIC", "GEMINI")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every HTTP request attempted; building a model must send none."""
    attempts: list[str] = []

    async def send_async(self: httpx.AsyncClient, request: httpx.Request, **_: Any) -> Any:
        attempts.append(str(request.url))
        raise AssertionError("a request was sent")

    def send(self: httpx.Client, request: httpx.Request, **_: Any) -> Any:
        attempts.append(str(request.url))
        raise AssertionError("a request was sent")

    monkeypatch.setattr(httpx.AsyncClient, "send", send_async)
    monkeypatch.setattr(httpx.Client, "send", send)
    yield attempts
    assert attempts == []


def test_names_are_unique_and_looked_up() -> None:
    names = [kind.name for kind in BUILTIN_TYPES]
    assert len(names) == len(set(names))
    for kind in BUILTIN_TYPES:
        assert builtin_type(kind.name) is kind
    assert builtin_type("nope") is None


def test_every_spec_provider_has_a_type() -> None:
    covered = {kind.provider for kind in PROVIDERS}
    # `openai-responses:` takes the credentials of OpenAI itself.
    assert covered == KNOWN_PROVIDERS - {"openai-responses"}


@pytest.mark.parametrize("kind", BUILTIN_TYPES, ids=lambda kind: kind.name)
def test_every_schema_is_a_valid_2020_12_schema(kind: ResourceType) -> None:
    check_resource_type_schema(kind.schema)
    assert kind.schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert kind.schema["type"] == "object"
    assert kind.summary and "\n" not in kind.summary


@pytest.mark.parametrize("kind", PROVIDERS, ids=lambda kind: kind.name)
def test_provider_schemas_are_closed_and_hide_secrets(kind: ResourceType) -> None:
    schema = kind.schema
    assert schema["additionalProperties"] is False
    properties = schema["properties"]
    secrets = secret_fields(schema)
    for name in ("api_key", "aws_secret_access_key", "aws_session_token", "access_token"):
        if name in properties:
            assert name in secrets
    for name in ("base_url", "region", "model", "headers", "organization", "project"):
        assert name not in secrets
    assert set(properties) <= {
        "api_key",
        "base_url",
        "organization",
        "project",
        "headers",
        "region",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "access_token",
        "api_version",
        "azure_ad_token",
        "model",
    }
    check_resource_value(schema, _full(kind), path=f"f/ai/{kind.name}")


def test_who_requires_what() -> None:
    required = {kind.name: kind.schema.get("required", []) for kind in PROVIDERS}
    for name in ("openai", "anthropic", "gemini", "mistral", "deepseek", "groq", "together"):
        assert required[name] == ["api_key"]
    assert required["openrouter"] == ["api_key"]
    for name in ("ollama", "vllm", "bedrock", "vertex", "anthropic_vertex"):
        assert required[name] == []
    assert required["openai_compatible"] == ["base_url"]
    assert required["azure"] == ["base_url"]
    with pytest.raises(InvalidValue, match="'api_key' is a required property"):
        check_resource_value(builtin_type("openai").schema, {}, path="f/ai/openai")  # type: ignore[union-attr]


def test_only_openai_takes_an_organization() -> None:
    with_org = {kind.name for kind in PROVIDERS if "organization" in kind.schema["properties"]}
    assert with_org == {"openai"}


def test_base_url_must_be_http() -> None:
    schema = builtin_type("ollama").schema  # type: ignore[union-attr]
    with pytest.raises(InvalidValue, match=r"at \$\.base_url: 'ftp://x' does not match"):
        check_resource_value(schema, {"base_url": "ftp://x"}, path="f/ai/ollama")


def test_ai_agent_holds_the_keys_of_an_inline_step_and_no_provider() -> None:
    agent = builtin_type("ai_agent")
    assert agent is not None and agent.provider is None
    assert "provisional" not in agent.summary
    assert agent.schema["additionalProperties"] is False
    value = {"model": "openai:gpt-4o", "system": "Be brief.", "tools": [], "memory": {}}
    check_resource_value(agent.schema, value, path="f/ai/helper")
    with pytest.raises(InvalidValue, match=r"at \$\.tools"):
        check_resource_value(agent.schema, {"model": "m", "tools": "all"}, path="f/ai/helper")


def test_openai_credentials_build_a_model_without_a_request(sent: list[str]) -> None:
    value = {"api_key": "sk-fake-key", "model": "gpt-4o-mini", "headers": {"X-Team": "ops"}}
    arguments = credentials_from_resource("openai", value, path="f/ai/openai")
    assert arguments == {"api_key": "sk-fake-key", "headers": {"X-Team": "ops"}}
    model = resolve_model(f"openai:{value['model']}", **arguments)
    assert (model.provider, model.model_name) == ("openai", "gpt-4o-mini")
    assert sent == []


@pytest.mark.parametrize("kind", PROVIDERS, ids=lambda kind: kind.name)
def test_every_provider_resource_builds_its_model(kind: ResourceType, sent: list[str]) -> None:
    value = _full(kind)
    arguments = credentials_from_resource(kind.name, value)
    assert "model" not in arguments
    model = resolve_model(f"{kind.provider}:{value.get('model', 'some-model')}", **arguments)
    assert model.provider == kind.provider
    assert sent == []


def test_arguments_take_the_adapters_names() -> None:
    bedrock = credentials_from_resource("bedrock", _FULL["bedrock"])
    assert bedrock == {
        "region": "eu-west-1",
        "access_key_id": "AKIDEXAMPLE",
        "secret_access_key": "secret",
        "session_token": "session",
        "headers": {"X-Trace": "1"},
    }
    vertex = credentials_from_resource("vertex", _FULL["vertex"])
    assert vertex == {"project": "acme", "location": "us-central1", "access_token": "ya29.test"}


def test_headers_are_copied() -> None:
    headers = {"X-A": "1"}
    arguments = credentials_from_resource("groq", {"api_key": "k", "headers": headers})
    arguments["headers"]["X-B"] = "2"
    assert headers == {"X-A": "1"}


@pytest.mark.parametrize("name", ["ai_agent", "postgres"])
def test_a_non_provider_type_is_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="not an LLM provider resource type"):
        credentials_from_resource(name, {"api_key": "k"})


def test_a_bad_value_is_refused_without_its_secret() -> None:
    with pytest.raises(InvalidValue) as caught:
        credentials_from_resource("anthropic", {"api_key": 12345678, "extra": 1}, path="f/ai/a")
    text = str(caught.value)
    assert "f/ai/a" in text and "at $.api_key: must be a string" in text
    assert "12345678" not in text
