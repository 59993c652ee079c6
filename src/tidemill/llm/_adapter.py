"""`HttpModel`: the shared core of the HTTP provider adapters.

An adapter has three jobs: build the HTTP call for a `ModelRequest`, parse
a whole response, and parse a streamed one. `HttpModel` does the rest once
for all of them: credentials, the HTTP client and its lifecycle, settings
defaults, decoding the event stream, checking that a stream really
finished before `ResponseDone` is yielded, and pricing each answer
(`Usage.cost_usd`, see `_pricing`).
"""

from __future__ import annotations

import difflib
import inspect
from abc import abstractmethod
from collections.abc import AsyncGenerator, Callable, Collection, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Protocol, Required, TypedDict, Unpack

import httpx
from pydantic import JsonValue

from tidemill.llm._credentials import Credentials
from tidemill.llm._json import JsonObject
from tidemill.llm._model import Model, ModelRequest, ModelSettings, ModelStreamEvent
from tidemill.llm._pricing import load_prices, price_usage
from tidemill.llm._retry import RetryPolicy
from tidemill.llm.http._client import HttpClient
from tidemill.llm.http._sse import ServerSentEvent, SSEDecoder
from tidemill.types import ModelResponse, ReasoningDelta, ResponseDone, TextDelta, ToolCallDelta

__all__ = [
    "EndpointOptions",
    "HttpCall",
    "HttpEndpoint",
    "HttpModel",
    "StreamParser",
    "UnknownOption",
    "unknown_option",
]

Delta = TextDelta | ReasoningDelta | ToolCallDelta
"""What a stream parser yields before the final `ResponseDone`."""


@dataclass(frozen=True, slots=True)
class HttpCall:
    """One HTTP request an adapter wants made."""

    url: str
    headers: Mapping[str, str]
    body: Mapping[str, object]


class StreamParser(Protocol):
    """Turns one response's server-sent events into stream events.

    `feed` is called with each event in order; `finish` once the body has
    ended, returning the assembled response or raising a `ProviderError`
    when the stream stopped before its end.
    """

    @property
    def done(self) -> bool:
        """Whether the terminal event has arrived; later bytes are not read."""
        ...

    def feed(self, event: ServerSentEvent) -> list[Delta]:
        """Take one event; return the deltas it carries."""
        ...

    def finish(self) -> ModelResponse:
        """Return the assembled response, or raise if the stream was cut short."""
        ...


class EndpointOptions(TypedDict, total=False):
    """The options of `HttpEndpoint`, for subclasses that pass them through (`HttpModel`)."""

    provider: Required[str]
    credentials: Required[Credentials]
    http_client: httpx.AsyncClient | None
    timeout: httpx.Timeout | float | None
    retry: RetryPolicy | None
    auth_hint: str | None


class HttpEndpoint:
    """What every HTTP adapter holds, chat or embedding: its ids, credentials and client.

    The HTTP client (retries, deadlines, typed errors with the credentials'
    secrets scrubbed) is made here and the price table loaded, once for
    `HttpModel` and the embedders' `HttpEmbedder`.

    Args:
        model_name: The model id sent to the provider.
        provider: The provider's name.
        credentials: The resolved credentials (key, base URL, headers).
        http_client: An `httpx.AsyncClient` to use (and keep open); by
            default one is created on first use and closed by `aclose`.
        timeout: Per-request `httpx` limits, in seconds or as an `httpx.Timeout`.
        retry: The retry policy; `RetryPolicy(max_retries=0)` disables retries.
        auth_hint: The hint of an `AuthenticationError`.
    """

    model_name: str
    provider: str

    def __init__(
        self,
        model_name: str,
        *,
        provider: str,
        credentials: Credentials,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        auth_hint: str | None = None,
    ) -> None:
        self.check_model_name(model_name, provider)
        self.model_name = model_name
        self.provider = provider
        self.credentials = credentials
        self.http = HttpClient(
            provider,
            client=http_client,
            timeout=timeout,
            retry=retry,
            secrets=credentials.secrets(),
            auth_hint=auth_hint,
        )
        load_prices()

    def check_model_name(self, model_name: str, provider: str) -> None:
        """Refuse a model id before anything is built; any id by default."""
        return None

    async def aclose(self) -> None:
        """Close the HTTP client if this adapter created it; an injected one stays open."""
        await self.http.aclose()


class HttpModel(HttpEndpoint, Model):
    """A `Model` that calls a provider's HTTP API directly.

    Subclasses implement `build_call`, `parse_response` and `stream_parser`.

    Args:
        model_name: The model id sent to the provider.
        settings: Defaults for every call; a request's own settings win.
        **options: The provider, credentials, HTTP client, timeout, retry
            policy and auth hint, as `HttpEndpoint` takes them.
    """

    def __init__(
        self,
        model_name: str,
        *,
        settings: ModelSettings | None = None,
        **options: Unpack[EndpointOptions],
    ) -> None:
        super().__init__(model_name, **options)
        self.settings: ModelSettings = settings or ModelSettings()

    @abstractmethod
    def build_call(self, request: ModelRequest, *, stream: bool) -> HttpCall:
        """Build the HTTP request for `request`."""

    @abstractmethod
    def parse_response(self, payload: JsonObject) -> ModelResponse:
        """Parse a whole (non-streamed) response body."""

    @abstractmethod
    def stream_parser(self) -> StreamParser:
        """Return a fresh parser for one streamed response."""

    def merged_settings(self, request: ModelRequest) -> ModelSettings:
        """The model's default settings overlaid with the request's."""
        return ModelSettings(**{**self.settings, **request.settings})

    def priced(self, response: ModelResponse) -> ModelResponse:
        """`response` with its cost in `usage.cost_usd`, or counted as unpriced.

        The model id the provider reported is looked up first (an Azure
        deployment's name says nothing about its model), then the one requested.
        """
        usage = price_usage(
            response.usage, provider=self.provider, models=(response.model, self.model_name)
        )
        return response.model_copy(update={"usage": usage})

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Make one call and return the whole response.

        Raises:
            ProviderError: Or a subclass, when the provider refuses or fails the call.
            MalformedToolCall: When a tool call in the answer has no name.
        """
        call = self.build_call(request, stream=False)
        timeout = self.merged_settings(request).get("timeout")
        payload = await self.http.post_json(
            call.url, call.body, headers=call.headers, time_limit=timeout
        )
        return self.priced(self.parse_response(payload))

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        """Make one call, yielding deltas as they arrive and `ResponseDone` last.

        Raises:
            ProviderError: Or a subclass, when the call fails, the stream
                carries an error, or it ends before its final event.
        """
        call = self.build_call(request, stream=True)
        timeout = self.merged_settings(request).get("timeout")
        parser = self.stream_parser()
        decoder = SSEDecoder(self.provider)
        chunks = self.http.post_stream(
            call.url, call.body, headers=call.headers, time_limit=timeout
        )
        async with aclosing(chunks):
            async for chunk in chunks:
                for event in decoder.feed(chunk):
                    for delta in parser.feed(event):
                        yield delta
                if parser.done:
                    break
            else:
                for event in decoder.close():
                    for delta in parser.feed(event):
                        yield delta
        yield ResponseDone(response=self.priced(parser.finish()))

    def describe(self) -> dict[str, JsonValue]:
        """Describe the model: provider, model id and base URL (never the key)."""
        return {**super().describe(), "base_url": self.credentials.base_url}


@dataclass(frozen=True, slots=True)
class UnknownOption:
    """An option an adapter's constructor does not take, found by `unknown_option`."""

    option: str
    """The option given."""
    close: list[str]
    """The closest options it does take (at most two), for a did-you-mean."""
    known: list[str]
    """Every option it takes, sorted."""


def unknown_option(
    build: Callable[..., object], config: Mapping[str, object], *, fixed: Collection[str] = ()
) -> UnknownOption | None:
    """The first of `config` that is not a keyword-only parameter of `build`, if any.

    Spec resolution (chat models and embedders alike) words the error;
    `fixed` are parameters the spec itself sets, which are not options.

    Examples:
        >>> def build(model: str, *, api_key: str = "", timeout: float = 1.0) -> None: ...
        >>> unknown_option(build, {"api_kye": "k"})
        UnknownOption(option='api_kye', close=['api_key'], known=['api_key', 'timeout'])
        >>> unknown_option(build, {"timeout": 2.0}) is None
        True
    """
    parameters = inspect.signature(build).parameters
    known = sorted(
        name
        for name, p in parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in fixed
    )
    for option in config:
        if option not in known:
            return UnknownOption(option, difflib.get_close_matches(option, known, n=2), known)
    return None
