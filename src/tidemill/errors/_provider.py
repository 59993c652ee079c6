"""Errors from LLM providers: HTTP status, network and broken streams.

Raised by the provider layer (`tidemill.llm`). The adapters build them from an HTTP
response, a transport failure or an error inside a stream; the API key is scrubbed from
every message and body before they get here.
"""

from __future__ import annotations

from tidemill.errors._base import TidemillError

__all__ = [
    "AuthenticationError",
    "ContextWindowExceeded",
    "ProviderError",
    "ProviderTimeout",
    "RateLimitError",
]


class ProviderError(TidemillError):
    """An LLM provider refused or failed a call.

    Catch this to handle every provider failure; the subclasses say what to
    do about the common ones. A failure the provider layer may retry (a 429,
    a 5xx, a dropped connection before the first streamed byte) is only
    raised once the retries are spent.

    Attributes:
        provider: The provider's name, as in a spec string (`openai`, `anthropic`, ...).
        status_code: The HTTP status, or `None` when no response arrived
            (a network failure, an error event inside a 200 stream).
        body: The response body as received (shortened, API key removed), or `None`.
        code: The provider's error code or type (`model_not_found`,
            `overloaded_error`), when it sent one.
        retryable: Whether the same request may succeed later.
        retry_after: Seconds the provider asked to wait before trying again
            (`retry-after`), kept for every retryable status, or `None`.

    Examples:
        >>> err = ProviderError("HTTP 404: no such model.", provider="openai", status_code=404)
        >>> err.status_code, err.retryable
        (404, False)
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        body: str | None = None,
        code: str | None = None,
        retryable: bool = False,
        hint: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(
            message,
            hint=hint,
            context={"provider": provider, "status_code": status_code, "code": code},
        )
        self.provider = provider
        self.status_code = status_code
        self.body = body
        self.code = code
        self.retryable = retryable
        self.retry_after = retry_after


class RateLimitError(ProviderError):
    """The provider refused the call because of a rate limit or an exhausted quota.

    Attributes:
        retry_after: Seconds the provider asked to wait, when it said.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = 429,
        body: str | None = None,
        code: str | None = None,
        retryable: bool = True,
        retry_after: float | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(
            message,
            provider=provider,
            status_code=status_code,
            body=body,
            code=code,
            retryable=retryable,
            hint=hint
            or "Wait and try again, send fewer requests, or allow more retries with the "
            "model option retry=RetryPolicy(max_retries=...).",
            retry_after=retry_after,
        )
        self.context["retry_after"] = retry_after


class AuthenticationError(ProviderError):
    """The API key is missing, wrong, revoked, or not allowed to use this model."""


class ContextWindowExceeded(ProviderError):
    """The request (conversation, tools and `max_tokens`) is longer than the model accepts."""


class ProviderTimeout(ProviderError):
    """The provider did not answer, or stopped sending, within the timeout."""
