"""Errors of the proxy, answered in OpenAI's error shape with the right HTTP status.

Every failure a request can meet ends here: a bad request body, an unknown
model, the proxy's own missing credentials, and each `ProviderError` the
adapters raise. `ProxyError` carries the status, OpenAI's `type`, `code` and
`param`, and headers to pass on (`retry-after`); `proxy_error` translates any
other exception into one. Every message is scrubbed of API keys on its way
out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from tidemill.errors import (
    AuthenticationError,
    ConfigurationError,
    ContextWindowExceeded,
    MalformedToolCall,
    MissingCredentialsError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    TidemillError,
)
from tidemill.llm._failures import redact
from tidemill.llm.proxy._notices import unconfigured_provider
from tidemill.llm.proxy._wire import ErrorBody

__all__ = ["InvalidRequest", "ProxyError", "UnknownModel", "not_served", "proxy_error"]

# Upstream statuses a client can act on, passed through as they are; other failures are a 502.
_PASSED_THROUGH = frozenset({400, 404, 409, 413, 422})


class ProxyError(TidemillError):
    """A request the proxy answers with an HTTP error, in OpenAI's error shape.

    Args:
        message: What happened, shown to the client.
        status: The HTTP status.
        type: OpenAI's error `type` (`invalid_request_error`, `api_error`, ...).
        code: OpenAI's error `code` (`model_not_found`, ...), when there is one.
        param: The request field at fault, e.g. `messages[1].content`.
        headers: Headers to send with the error (`retry-after`).

    Examples:
        >>> error = ProxyError("No such thing.", status=404, code="not_found")
        >>> error.body()
        {'error': {'message': 'No such thing.', 'type': 'invalid_request_error', \
'param': None, 'code': 'not_found'}}
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, context={"status": status, "code": code, "param": param})
        self.status = status
        self.type = type
        self.code = code
        self.param = param
        self.headers = dict(headers or {})

    def body(self, secrets: Sequence[str] = ()) -> ErrorBody:
        """The JSON error body, with `secrets` and key-shaped tokens removed."""
        return {
            "error": {
                "message": redact(self.message, secrets),
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class InvalidRequest(ProxyError):
    """The request body is not a Chat Completions request the proxy can serve (HTTP 400).

    Examples:
        >>> InvalidRequest("`messages` must be a list.", param="messages").status
        400
    """

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message, status=400, param=param, code=code)


class UnknownModel(ProxyError):
    """The `model` of the request names nothing the proxy can serve (HTTP 404)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=404, code="model_not_found", param="model")


def not_served(name: str | None, provider: str | None) -> str:
    """What a client is told of a model whose provider the proxy is not set up for.

    Examples:
        >>> not_served("groq:llama-3.3-70b-versatile", "groq")
        "The model 'groq:llama-3.3-70b-versatile' is not served by this proxy: its 'groq' \
provider is not set up here."
    """
    model = "The model" if name is None else f"The model {name!r}"
    setup = f": its {provider!r} provider is not set up here" if provider else ""
    return f"{model} is not served by this proxy{setup}."


def proxy_error(error: BaseException) -> ProxyError:
    """Translate any exception met while serving a request into a `ProxyError`.

    Upstream refusals keep their meaning: a rejected key is a 401 (or 403),
    a rate limit a 429 carrying `retry-after`, a too-long prompt a 400 with
    code `context_length_exceeded`, a timeout a 504, other upstream failures
    a 502. A request the upstream cannot take as asked (an image its
    provider cannot fetch, a schema strict mode cannot express) is a 400
    saying why. A provider the proxy has no key or base URL for is a 404: the
    model is not served here (the variable to set is for the operator's log,
    see `log_failure`). Anything unexpected is a 500 that names no internals.

    Examples:
        >>> from tidemill.errors import RateLimitError
        >>> error = proxy_error(RateLimitError("Slow down.", provider="openai", retry_after=1.5))
        >>> error.status, error.headers
        (429, {'retry-after': '2', 'retry-after-ms': '1500'})
    """
    if isinstance(error, ProxyError):
        return error
    if isinstance(error, ProviderError):
        return _from_provider(error)
    if isinstance(error, MalformedToolCall):
        return ProxyError(
            f"The upstream model produced a tool call that could not be read: {error.message}",
            status=502,
            type="api_error",
            code="upstream_malformed_tool_call",
        )
    provider = unconfigured_provider(error)
    if provider is not None or isinstance(error, MissingCredentialsError):
        # The operator's setup, not the client's request: the client learns only that the
        # model is not served here, the operator reads what to set in the log.
        return UnknownModel(not_served(None, provider))
    if isinstance(error, ConfigurationError):
        param, code = error.context.get("param"), error.context.get("code")  # `UnsupportedOption`
        return ProxyError(
            str(error),
            status=400,
            type="invalid_request_error",
            code=code if isinstance(code, str) else "unsupported_for_model",
            param=param if isinstance(param, str) else None,
        )
    if isinstance(error, TidemillError):
        return ProxyError(str(error), status=500, type="api_error", code="internal_error")
    return ProxyError(
        "The proxy failed while serving this request; its log has the details.",
        status=500,
        type="api_error",
        code="internal_error",
    )


def _from_provider(error: ProviderError) -> ProxyError:
    message = str(error)
    upstream = error.status_code
    if isinstance(error, RateLimitError):
        return ProxyError(
            message,
            status=429,
            type="rate_limit_error",
            code=error.code or "rate_limit_exceeded",
            headers=_retry_after(error.retry_after),
        )
    if isinstance(error, AuthenticationError):
        forbidden = upstream == 403
        return ProxyError(
            f"The upstream provider refused the proxy's credentials: {message}",
            status=403 if forbidden else 401,
            type="permission_error" if forbidden else "authentication_error",
            code=error.code or "upstream_authentication_failed",
        )
    if isinstance(error, ContextWindowExceeded):
        return ProxyError(message, status=400, code="context_length_exceeded", param="messages")
    wait = _retry_after(error.retry_after)  # a 503's `retry-after`, passed on as a 429's is
    if isinstance(error, ProviderTimeout):
        return ProxyError(
            message, status=504, type="api_error", code="upstream_timeout", headers=wait
        )
    if upstream in _PASSED_THROUGH:
        return ProxyError(message, status=upstream, code=error.code, headers=wait)
    return ProxyError(
        message,
        status=502,
        type="api_error",
        code=error.code or "upstream_error",
        headers=wait,
    )


def _retry_after(seconds: float | None) -> dict[str, str]:
    if seconds is None:
        return {}
    return {"retry-after": str(math.ceil(seconds)), "retry-after-ms": str(round(seconds * 1000))}
