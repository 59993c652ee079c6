"""Google Cloud plumbing: Vertex AI targets and the re-typing of Google's errors."""

from __future__ import annotations

import pytest
from llm_replay import fixture_bytes

from tidemill.errors import (
    AuthenticationError,
    ConfigurationError,
    ContextWindowExceeded,
    ProviderError,
    RateLimitError,
)
from tidemill.llm import Credentials
from tidemill.llm._failures import error_from_response
from tidemill.llm.google._auth import VertexSource, translate_google_error, vertex_host


def test_vertex_hosts() -> None:
    assert vertex_host("us-central1") == "https://us-central1-aiplatform.googleapis.com"
    assert vertex_host("global") == "https://aiplatform.googleapis.com"


def test_arguments_beat_credentials_beat_the_environment() -> None:
    source = VertexSource("vertex")
    environ = {
        "GOOGLE_CLOUD_PROJECT": "env-p",
        "GOOGLE_CLOUD_LOCATION": "env-l",
        "GOOGLE_OAUTH_ACCESS_TOKEN": "env-t",
    }
    from_env = source.resolve(environ=environ)
    assert (from_env.project, from_env.region, from_env.api_key) == ("env-p", "env-l", "env-t")
    creds = Credentials(api_key="cred-t", project="cred-p", region="cred-l", headers={"x": "1"})
    from_creds = source.resolve(creds, environ=environ, headers={"y": "2"})
    assert (from_creds.project, from_creds.region, from_creds.api_key) == (
        "cred-p",
        "cred-l",
        "cred-t",
    )
    assert from_creds.headers == {"x": "1", "y": "2"}
    from_args = source.resolve(
        creds, project="p", location="l", access_token="t", base_url="http://h/", environ=environ
    )
    assert (from_args.project, from_args.region, from_args.api_key, from_args.base_url) == (
        "p",
        "l",
        "t",
        "http://h",
    )


def test_the_anthropic_sdk_variables_are_understood_and_global_is_the_default() -> None:
    creds = VertexSource("anthropic-vertex").resolve(
        environ={"ANTHROPIC_VERTEX_PROJECT_ID": "p", "GOOGLE_OAUTH_ACCESS_TOKEN": "t"}
    )
    assert (creds.project, creds.region) == ("p", "global")
    regional = VertexSource("anthropic-vertex").resolve(
        environ={"ANTHROPIC_VERTEX_PROJECT_ID": "p", "CLOUD_ML_REGION": "us-east5"},
        access_token="t",
    )
    assert regional.base_url == "https://us-east5-aiplatform.googleapis.com"


def test_missing_pieces_name_their_variables() -> None:
    with pytest.raises(ConfigurationError, match="No Google Cloud project") as caught:
        VertexSource("vertex").resolve(access_token="t", environ={})
    assert "GOOGLE_CLOUD_PROJECT" in str(caught.value)
    with pytest.raises(ConfigurationError, match="No access token") as caught:
        VertexSource("vertex").resolve(project="p", environ={})
    assert "gcloud auth print-access-token" in str(caught.value)


def test_a_rejected_key_becomes_an_authentication_error() -> None:
    generic = error_from_response(
        "gemini", 400, {}, fixture_bytes("gemini/error-400-api-key-invalid.json")
    )
    assert type(generic) is ProviderError
    typed = translate_google_error(generic)
    assert isinstance(typed, AuthenticationError)
    assert (typed.status_code, typed.body) == (400, generic.body)


def test_an_over_long_prompt_becomes_a_context_window_error() -> None:
    body = (
        b'{"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": '
        b'"The input token count (2000000) exceeds the maximum number of tokens allowed '
        b'(1048576)."}}'
    )
    assert isinstance(
        translate_google_error(error_from_response("gemini", 400, {}, body)),
        ContextWindowExceeded,
    )


def test_other_errors_pass_through_unchanged() -> None:
    limited = error_from_response(
        "gemini", 429, {}, b'{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}'
    )
    assert isinstance(limited, RateLimitError)
    assert translate_google_error(limited) is limited
    missing = error_from_response(
        "gemini", 404, {}, fixture_bytes("gemini/error-404-not-found-on-stream-endpoint.json")
    )
    assert translate_google_error(missing) is missing
