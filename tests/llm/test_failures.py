from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from llm_replay import API_KEY, fixture_bytes

from tidemill.errors import (
    AuthenticationError,
    ContextWindowExceeded,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
)
from tidemill.llm._failures import ErrorReporter, error_from_payload, error_from_response, redact


def response_error(
    status: int, body: bytes | Mapping[str, object], headers: dict[str, str] | None = None
) -> ProviderError:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return error_from_response("openai", status, headers or {}, raw, secrets=[API_KEY])


@pytest.mark.parametrize(
    ("status", "body", "kind", "retryable"),
    [
        (
            401,
            {"error": {"message": "Incorrect API key", "code": "invalid_api_key"}},
            AuthenticationError,
            False,
        ),
        (
            403,
            {"type": "error", "error": {"type": "permission_error", "message": "no"}},
            AuthenticationError,
            False,
        ),
        (
            429,
            {"error": {"message": "slow down", "code": "rate_limit_exceeded"}},
            RateLimitError,
            True,
        ),
        (
            429,
            {"error": {"message": "pay up", "code": "insufficient_quota"}},
            RateLimitError,
            False,
        ),
        (
            400,
            {"error": {"message": "too long", "code": "context_length_exceeded"}},
            ContextWindowExceeded,
            False,
        ),
        (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                },
            },
            ContextWindowExceeded,
            False,
        ),
        (
            400,
            {"object": "error", "message": "This model's maximum context length is 32768 tokens."},
            ContextWindowExceeded,
            False,
        ),
        (
            413,
            {"type": "error", "error": {"type": "request_too_large", "message": "big"}},
            ContextWindowExceeded,
            False,
        ),
        (500, {"error": {"message": "boom"}}, ProviderError, True),
        (
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ProviderError,
            True,
        ),
        (504, b"<html>Gateway Timeout</html>", ProviderTimeout, True),
        (400, {"error": {"message": "bad field"}}, ProviderError, False),
    ],
)
def test_status_and_body_choose_the_error(
    status: int, body: dict[str, object] | bytes, kind: type[ProviderError], retryable: bool
) -> None:
    error = response_error(status, body)
    assert type(error) is kind
    assert (error.status_code, error.retryable, error.provider) == (status, retryable, "openai")


def test_recorded_404_bodies() -> None:
    openai = response_error(404, fixture_bytes("openai-chat/error-404-model-not-found.json"))
    assert type(openai) is ProviderError and openai.code == "model_not_found"
    assert "this-model-does-not-exist-12345" in openai.message
    assert openai.hint == "Check the model id and the base URL."
    anthropic = response_error(404, fixture_bytes("anthropic/error-404-not-found.json"))
    assert anthropic.code == "not_found_error" and "model:" in anthropic.message


def test_recorded_openrouter_429_includes_the_upstream_message() -> None:
    error = response_error(429, fixture_bytes("openrouter/error-429.json"))
    assert isinstance(error, RateLimitError)
    assert "temporarily rate-limited upstream" in error.message


def test_non_json_body_is_quoted_briefly() -> None:
    error = response_error(502, b"<html><body>" + b"Bad gateway " * 100 + b"</body></html>")
    assert type(error) is ProviderError and error.retryable
    assert error.message.startswith("openai answered HTTP 502: <html><body>Bad gateway")
    assert error.message.endswith("...") and len(error.message) < 400
    assert error.body is not None and error.body.startswith("<html>")


def test_should_retry_header_overrides_the_status() -> None:
    assert not response_error(500, {}, {"x-should-retry": "false"}).retryable
    assert response_error(400, {}, {"x-should-retry": "true"}).retryable


def test_retry_after_travels_on_rate_limit_errors() -> None:
    error = error_from_response("anthropic", 429, {}, b"{}", retry_after=4.0)
    assert isinstance(error, RateLimitError) and error.retry_after == 4.0


@pytest.mark.parametrize(
    ("status", "kind"),
    [(503, ProviderError), (500, ProviderError), (529, ProviderError), (504, ProviderTimeout)],
)
def test_retry_after_is_kept_for_every_retryable_status(
    status: int, kind: type[ProviderError]
) -> None:
    error = error_from_response("openai", status, {}, b"{}", retry_after=30.0)
    assert type(error) is kind and error.retryable
    assert error.retry_after == 30.0


def test_retry_after_is_dropped_when_the_error_is_not_retried() -> None:
    # A 400 is not retried, whatever the header says; a vendor's `x-should-retry: false` wins.
    assert error_from_response("openai", 400, {}, b"{}", retry_after=5.0).retry_after is None
    refused = error_from_response(
        "openai", 503, {"x-should-retry": "false"}, b"{}", retry_after=5.0
    )
    assert refused.retry_after is None


def test_the_key_never_appears_in_messages_or_bodies() -> None:
    echoed = {"error": {"message": f"Incorrect API key provided: {API_KEY}."}}
    error = response_error(401, echoed)
    for text in (str(error), error.message, error.body or "", repr(error.context)):
        assert API_KEY not in text
    assert "[REDACTED]" in error.message


def test_key_shaped_tokens_are_scrubbed_even_when_not_ours() -> None:
    assert redact("key sk-proj-abcdefghijklmnopqrst leaked", []) == "key [REDACTED] leaked"
    assert redact("ask-me anything", []) == "ask-me anything"


@pytest.mark.parametrize(
    "key",
    [
        "gsk_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2,  # Groq
        "xai-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",  # xAI
        "AIzaSyA-" + "b3dEf6hIj9kLm2nOp5qRs8tUv1wXy4",  # Google API key
        "AKIAIOSFODNN7EXAMPLE",  # AWS access key id
        "ASIAY34FZKBOKMUTVV7A",  # AWS temporary access key id
        "sk-ant-api03-" + "Ab3dEf6hIj9kLm2nOp5q",  # Anthropic
        "sk-or-v1-" + "0123456789abcdef0123",  # OpenRouter
    ],
)
def test_every_vendors_key_shape_is_scrubbed(key: str) -> None:
    echoed = f"upstream said: invalid key {key}, try again"
    assert redact(echoed, []) == "upstream said: invalid key [REDACTED], try again"
    error = error_from_payload("openai-compatible", {"error": {"message": echoed}}, body=echoed)
    assert key not in str(error) and key not in (error.body or "")


def test_words_that_merely_start_like_a_key_are_left_alone() -> None:
    text = "gsk_short, AIzaShort, AKIA-lower, the-task-scheduler-service-name"
    assert redact(text, []) == text


def test_errors_inside_a_stream() -> None:
    groq = error_from_payload(
        "groq",
        {
            "error": {
                "message": "bad tool",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
                "status_code": 400,
            }
        },
    )
    assert (groq.status_code, groq.code, groq.retryable) == (400, "tool_use_failed", False)
    overloaded = error_from_payload(
        "anthropic",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    assert (overloaded.status_code, overloaded.code, overloaded.retryable) == (
        None,
        "overloaded_error",
        True,
    )
    rate = error_from_payload("anthropic", {"error": {"type": "rate_limit_error", "message": "x"}})
    assert isinstance(rate, RateLimitError)


def test_reporter_scrubs_its_secrets() -> None:
    reporter = ErrorReporter("openai", (API_KEY,))
    error = reporter.broken(f"bad {API_KEY}", body=f"body {API_KEY}")
    assert API_KEY not in str(error) and API_KEY not in (error.body or "")
    assert error.retryable
