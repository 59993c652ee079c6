from __future__ import annotations

import pytest

from tidemill.errors import ConfigurationError
from tidemill.llm import Credentials, CredentialSource
from tidemill.llm.anthropic._adapter import ANTHROPIC_SOURCE
from tidemill.llm.openai._dialects import DIALECTS

OPENAI = DIALECTS["openai"].source


def test_key_from_the_environment() -> None:
    creds = OPENAI.resolve(environ={"OPENAI_API_KEY": "sk-env", "OPENAI_ORG_ID": "org-1"})
    assert (creds.api_key, creds.organization) == ("sk-env", "org-1")
    assert creds.base_url == "https://api.openai.com/v1"


def test_arguments_beat_credentials_which_beat_the_environment() -> None:
    given = Credentials(api_key="sk-object", base_url="https://proxy.local/v1/", headers={"a": "1"})
    env = {"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": "https://env.local/v1"}
    creds = OPENAI.resolve(given, headers={"b": "2"}, environ=env)
    assert creds.api_key == "sk-object"
    assert creds.base_url == "https://proxy.local/v1"  # trailing slash dropped
    assert dict(creds.headers) == {"a": "1", "b": "2"}
    assert OPENAI.resolve(given, api_key="sk-arg", environ=env).api_key == "sk-arg"
    assert OPENAI.resolve(environ=env).base_url == "https://env.local/v1"


def test_a_missing_key_names_the_variable_to_set() -> None:
    with pytest.raises(ConfigurationError) as caught:
        ANTHROPIC_SOURCE.resolve(environ={"ANTHROPIC_API_KEY": "  "})
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert caught.value.context == {"provider": "anthropic", "env": "ANTHROPIC_API_KEY"}


def test_local_servers_need_no_key_but_a_custom_one_needs_a_url() -> None:
    assert DIALECTS["ollama"].source.resolve(environ={}).api_key is None
    with pytest.raises(ConfigurationError, match="base URL") as caught:
        DIALECTS["openai-compatible"].source.resolve(environ={})
    assert "OPENAI_COMPATIBLE_BASE_URL" in str(caught.value)
    creds = DIALECTS["openai-compatible"].source.resolve(
        base_url="http://gpu-box:8000/v1", environ={}
    )
    assert creds.base_url == "http://gpu-box:8000/v1"


def test_repr_never_shows_secrets() -> None:
    creds = Credentials(
        api_key="sk-very-secret",
        aws_secret_access_key="aws-very-secret",
        headers={"Authorization": "Bearer hdr-very-secret", "X-Title": "demo"},
        region="eu-west-1",
    )
    text = repr(creds) + str(creds)
    for secret in ("sk-very-secret", "aws-very-secret", "hdr-very-secret"):
        assert secret not in text
    assert "eu-west-1" in text and "X-Title" in text
    assert set(creds.secrets()) == {"sk-very-secret", "aws-very-secret", "Bearer hdr-very-secret"}


def test_a_source_without_a_key_variable() -> None:
    source = CredentialSource("custom", None, "https://x.local")
    with pytest.raises(ConfigurationError, match="Pass api_key="):
        source.resolve(environ={})
