"""Provider failures translated into typed `ProviderError`s.

Every way a provider call can fail ends here: an HTTP error status with a
JSON or non-JSON body, an error object inside a 200 stream, or a transport
failure. The class is chosen by what the caller can do about it (wait, fix
the key, shorten the prompt, raise the timeout), and the API key is removed
from every message and body first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypedDict

from tidemill.errors import (
    AuthenticationError,
    ContextWindowExceeded,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
)
from tidemill.llm._json import JsonObject, get_object, get_str, loads_object
from tidemill.llm._retry import RETRY_STATUSES

__all__ = [
    "ErrorFacts",
    "ErrorReporter",
    "error_from_payload",
    "error_from_response",
    "redact",
    "retyped",
]

_BODY_LIMIT = 4000
_DETAIL_LIMIT = 300
_REDACTED = "[REDACTED]"

# Key-shaped tokens, scrubbed even when they are not this client's key (a proxy may echo one):
# OpenAI, Anthropic, OpenRouter and DeepSeek (`sk-`), Groq (`gsk_`), xAI (`xai-`), Google
# API keys (`AIza`), AWS access key ids (`AKIA`, temporary `ASIA`).
_KEY_PATTERN = re.compile(
    r"\b(?:(?:sk|xai)-[A-Za-z0-9_\-]{12,}|gsk_[A-Za-z0-9]{12,}"
    r"|AIza[A-Za-z0-9_\-]{30,}|A[KS]IA[A-Z0-9]{16})"
)

# How providers word "the prompt is too long" in a 400.
_CONTEXT_PATTERN = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|too many tokens"
    r"|input is too long|exceeds? the (model'?s )?(maximum|max) (context|input)",
    re.IGNORECASE,
)
_CONTEXT_CODES = frozenset({"context_length_exceeded", "request_too_large"})
_AUTH_CODES = frozenset(
    {"authentication_error", "permission_error", "invalid_api_key", "permission_denied"}
)
_RATE_CODES = frozenset({"rate_limit_error", "rate_limit_exceeded", "insufficient_quota"})
_RETRY_CODES = frozenset({"overloaded_error", "api_error", "server_error", "rate_limit_error"})


class _Common(TypedDict):
    provider: str
    status_code: int | None
    body: str | None
    code: str | None


@dataclass(frozen=True, slots=True)
class ErrorFacts:
    """What an error body says, whatever the provider's shape."""

    message: str | None = None
    code: str | None = None


@dataclass(frozen=True, slots=True)
class ErrorReporter:
    """Builds the errors of one provider, with its secrets scrubbed; parsers raise these."""

    provider: str
    secrets: tuple[str, ...] = ()
    auth_hint: str | None = None

    def from_payload(self, payload: JsonObject, body: str | None = None) -> ProviderError:
        """The error for an error object found in a response or stream."""
        return error_from_payload(
            self.provider, payload, secrets=self.secrets, body=body, auth_hint=self.auth_hint
        )

    def broken(self, message: str, *, body: str | None = None) -> ProviderError:
        """The error for a response or stream that does not make sense (cut short, not JSON)."""
        return ProviderError(
            redact(message, self.secrets),
            provider=self.provider,
            body=redact(body[:_BODY_LIMIT], self.secrets) if body is not None else None,
            retryable=True,
            hint="The response was cut short or garbled on the way; try again.",
        )


def redact(text: str, secrets: Sequence[str]) -> str:
    """Remove `secrets` and anything shaped like an API key from `text`.

    Examples:
        >>> redact("bad key sk-abcdefghijklmnop1234 for user", ["hunter22"])
        'bad key [REDACTED] for user'
        >>> redact("groq gsk_" + "a1B2" * 13 + ", aws AKIAIOSFODNN7EXAMPLE", [])
        'groq [REDACTED], aws [REDACTED]'
    """
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, _REDACTED)
    return _KEY_PATTERN.sub(_REDACTED, text)


def read_facts(payload: JsonObject) -> ErrorFacts:
    """Find the message and code in an error body of any provider's shape.

    Shapes: OpenAI and compatible `{"error": {"message", "type", "code"}}`,
    Anthropic `{"type": "error", "error": {"type", "message"}}`, OpenRouter's
    numeric `code` with `metadata.raw`, and flat `{"message"}` / `{"detail"}`.
    """
    inner = payload.get("error")
    if isinstance(inner, str):
        return ErrorFacts(message=inner, code=get_str(payload, "code"))
    error = get_object(payload, "error") or payload
    message = get_str(error, "message") or get_str(error, "detail") or get_str(payload, "detail")
    raw = get_str(get_object(error, "metadata"), "raw")
    if raw and raw not in (message or ""):
        message = f"{message}: {raw}" if message else raw
    code_value = error.get("code")
    code = code_value if isinstance(code_value, str) else None
    code = code or get_str(error, "type")
    return ErrorFacts(message=message, code=code)


def error_from_response(
    provider: str,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    secrets: Sequence[str] = (),
    retry_after: float | None = None,
    statuses: frozenset[int] = RETRY_STATUSES,
    auth_hint: str | None = None,
) -> ProviderError:
    """Build the error for an HTTP response with an error status."""
    text = body.decode("utf-8", errors="replace")
    payload = loads_object(text)
    facts = read_facts(payload) if payload is not None else ErrorFacts()
    detail = facts.message or _snippet(text) or "no details"
    retryable = status in statuses and facts.code != "insufficient_quota"
    should = {k.lower(): v for k, v in headers.items()}.get("x-should-retry")
    if should in ("true", "false"):
        retryable = should == "true"
    return _build(
        provider,
        f"{provider} answered HTTP {status}: {detail}",
        status=status,
        facts=facts,
        body=text,
        secrets=secrets,
        retryable=retryable,
        retry_after=retry_after,
        auth_hint=auth_hint,
    )


def error_from_payload(
    provider: str,
    payload: JsonObject,
    *,
    secrets: Sequence[str] = (),
    body: str | None = None,
    auth_hint: str | None = None,
) -> ProviderError:
    """Build the error for an error object that arrived inside a 200 stream.

    The HTTP status is unknown (`status_code` is `None`) unless the object
    carries one, as Groq's `status_code` and OpenRouter's numeric `code` do.
    """
    facts = read_facts(payload)
    error = get_object(payload, "error") or payload
    status = _status_in(error)
    detail = facts.message or "no details"
    retryable = facts.code in _RETRY_CODES or (status is not None and status in RETRY_STATUSES)
    return _build(
        provider,
        f"{provider} reported an error in the stream: {detail}",
        status=status,
        facts=facts,
        body=body,
        secrets=secrets,
        retryable=retryable,
        retry_after=None,
        auth_hint=auth_hint,
    )


def _build(
    provider: str,
    message: str,
    *,
    status: int | None,
    facts: ErrorFacts,
    body: str | None,
    secrets: Sequence[str],
    retryable: bool,
    retry_after: float | None,
    auth_hint: str | None,
) -> ProviderError:
    message = redact(message, secrets)
    clean_body = redact(body[:_BODY_LIMIT], secrets) if body is not None else None
    code = facts.code
    common = _Common(provider=provider, status_code=status, body=clean_body, code=code)
    # The wait a vendor asked for is kept on whatever it may retry (a 503 as much as a 429).
    wait = retry_after if retryable else None
    if status in (401, 403) or code in _AUTH_CODES:
        return AuthenticationError(message, **common, hint=auth_hint)
    if status == 429 or code in _RATE_CODES:
        if code == "insufficient_quota":
            return RateLimitError(
                message,
                **common,
                retryable=False,
                hint="The account is out of credit or quota; check billing with the provider.",
            )
        return RateLimitError(message, **common, retryable=retryable, retry_after=retry_after)
    if status == 413 or code in _CONTEXT_CODES or _is_context_message(status, facts.message):
        return ContextWindowExceeded(
            message,
            **common,
            hint="Shorten the conversation (drop or summarise old turns) or lower max_tokens.",
        )
    if status in (408, 504):
        return ProviderTimeout(
            message,
            **common,
            retryable=retryable,
            hint="The provider timed out; try again, or send a shorter request.",
            retry_after=wait,
        )
    hint = "Check the model id and the base URL." if status == 404 else None
    return ProviderError(message, **common, retryable=retryable, hint=hint, retry_after=wait)


def _is_context_message(status: int | None, message: str | None) -> bool:
    return status in (None, 400, 422) and bool(message and _CONTEXT_PATTERN.search(message))


def _status_in(error: JsonObject) -> int | None:
    for key in ("status_code", "status", "code"):
        value = error.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _DETAIL_LIMIT else flat[: _DETAIL_LIMIT - 3] + "..."


@contextmanager
def retyped(translate: Callable[[ProviderError], Exception]) -> Iterator[None]:
    """Raise `translate(error)` for a `ProviderError` raised inside, chained to it.

    An adapter re-types what its vendor says that the shared mapping cannot
    know (Google's rejected key is a 400); an error `translate` returns
    unchanged is re-raised as it was.
    """
    try:
        yield
    except ProviderError as exc:
        translated = translate(exc)
        if translated is exc:
            raise
        raise translated from exc
