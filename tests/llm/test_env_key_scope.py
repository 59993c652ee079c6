"""An API key from the environment goes only to the URL the environment or the provider names.

A base URL given in code, in a flow step or in a workspace resource is another
endpoint: without its own key it gets none, so whoever may set a base URL
cannot collect the operator's keys.
"""

from __future__ import annotations

import logging

import pytest

from tidemill.errors import MissingCredentialsError
from tidemill.llm import resolve_model
from tidemill.llm._credentials import CredentialSource

ELSEWHERE = "https://collector.example/v1"
SOURCE = CredentialSource(
    "openai", "OPENAI_API_KEY", "https://api.openai.com/v1", base_url_env="OPENAI_BASE_URL"
)


def test_the_environment_key_goes_to_the_default_url_and_the_environment_url() -> None:
    env = {"OPENAI_API_KEY": "sk-env"}
    assert SOURCE.resolve(environ=env).api_key == "sk-env"
    assert SOURCE.resolve(base_url="https://api.openai.com/v1/", environ=env).api_key == "sk-env"
    gateway = {**env, "OPENAI_BASE_URL": ELSEWHERE}
    assert SOURCE.resolve(environ=gateway).api_key == "sk-env"
    assert SOURCE.resolve(base_url=ELSEWHERE, environ=gateway).api_key == "sk-env"


def test_another_url_without_its_own_key_is_refused_naming_what_to_do() -> None:
    with pytest.raises(MissingCredentialsError) as refused:
        SOURCE.resolve(base_url=ELSEWHERE, environ={"OPENAI_API_KEY": "sk-env"})
    assert ELSEWHERE in str(refused.value) and "OPENAI_API_KEY" in str(refused.value)
    assert "sk-env" not in str(refused.value)
    assert "api_key=" in (refused.value.hint or "")


def test_another_url_with_its_own_key_gets_that_key() -> None:
    resolved = SOURCE.resolve(base_url=ELSEWHERE, api_key="sk-own", environ={"OPENAI_API_KEY": "x"})
    assert (resolved.api_key, resolved.base_url) == ("sk-own", ELSEWHERE)


def test_a_keyless_provider_calls_another_url_without_the_key_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    local = CredentialSource(
        "ollama", "OLLAMA_API_KEY", "http://localhost:11434/v1", key_required=False
    )
    with caplog.at_level(logging.WARNING, logger="tidemill.llm"):
        resolved = local.resolve(base_url=ELSEWHERE, environ={"OLLAMA_API_KEY": "ollama-key"})
    assert resolved.api_key is None
    assert "OLLAMA_API_KEY" in caplog.text and "ollama-key" not in caplog.text


URL_VARIABLES = {
    "openai": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "gemini": "GEMINI_BASE_URL",
    "mistral": "MISTRAL_BASE_URL",
    "azure": "AZURE_OPENAI_ENDPOINT",
    "bedrock": "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
}


@pytest.mark.parametrize(
    ("spec", "variables"),
    [
        ("openai:gpt-4o", {"OPENAI_API_KEY": "sk-env"}),
        ("anthropic:claude-sonnet-4-5", {"ANTHROPIC_API_KEY": "sk-ant-env"}),
        ("gemini:gemini-2.0-flash", {"GEMINI_API_KEY": "gem-env", "GOOGLE_API_KEY": "goo-env"}),
        ("mistral:mistral-small-latest", {"MISTRAL_API_KEY": "mis-env"}),
        ("azure:gpt-4o", {"AZURE_OPENAI_API_KEY": "az-env", "AZURE_OPENAI_AD_TOKEN": "ad-env"}),
        ("vertex:gemini-2.0-flash",
         {"GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.env", "GOOGLE_CLOUD_PROJECT": "acme"}),
        ("bedrock:us.amazon.nova-micro-v1:0",
         {"AWS_BEARER_TOKEN_BEDROCK": "br-env", "AWS_REGION": "us-east-1"}),
    ],
)  # fmt: skip
def test_no_provider_sends_its_environment_secret_to_a_base_url_given_with_the_model(
    monkeypatch: pytest.MonkeyPatch, spec: str, variables: dict[str, str]
) -> None:
    for name in URL_VARIABLES.values():
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(MissingCredentialsError) as refused:
        resolve_model(spec, base_url=ELSEWHERE)
    secrets = [v for k, v in variables.items() if "KEY" in k or "TOKEN" in k]
    assert not any(secret in str(refused.value) for secret in secrets)
    # The same URL named by the environment is trusted with the environment's secret.
    trusted = URL_VARIABLES.get(spec.split(":")[0])
    if trusted:
        monkeypatch.setenv(trusted, ELSEWHERE)
        model = resolve_model(spec, base_url=ELSEWHERE)
    else:
        model = resolve_model(spec)  # Google's own host
    assert model.provider


def test_a_flow_step_naming_its_own_url_gets_no_worker_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from tidemill.engine import ModelChoice, default_models

    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(MissingCredentialsError):
        default_models(ModelChoice("openai:gpt-4o", base_url=ELSEWHERE, step_id="ask"))
    assert default_models(ModelChoice("openai:gpt-4o", step_id="ask")).provider == "openai"
