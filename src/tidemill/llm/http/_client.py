"""`HttpClient`: the HTTP plumbing every provider adapter shares.

It POSTs JSON to one provider over an `httpx.AsyncClient` and owns the
mechanics that are the same for every API: a deadline for the whole call,
retries with backoff on 429/5xx/connection failures (never once a stream's
first byte has arrived), and translation of every failure into a typed
`ProviderError` with the API key scrubbed out.

The `httpx.AsyncClient` is injected (`client=`) or created on first use and
owned; only an owned client is closed by `aclose()`. There is no
module-level client. A long-lived process shares one: whatever composes it
(a `Worker`, the proxy's `ModelRouter`, your own code) makes it with
`new_http_client()`, passes it to every model it builds (`http_client=`),
and closes it after them; each model keeps its own per-request timeout and
retry policy. Pooled connections belong to the event loop that opened them,
so a shared client serves one loop, and an owned client is kept per loop;
close the model (`aclose`) before its loop ends, as `asyncio.run` callers
and the sync facades do.
"""

from __future__ import annotations

import asyncio
import functools
import http.cookiejar
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass

import httpx

from tidemill._version import __version__
from tidemill.errors import ConfigurationError, ProviderError, ProviderTimeout
from tidemill.llm._failures import error_from_payload, error_from_response, redact
from tidemill.llm._json import JsonObject, dumps, loads_object
from tidemill.llm._retry import RetryPolicy, parse_retry_after
from tidemill.llm.http._transport import StreamingTransport, use_streaming_transport

__all__ = ["DEFAULT_TIMEOUT", "HttpClient", "Sleep", "new_http_client"]

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Per-request limits of an owned client: 10 s to connect, 600 s for each read or write."""

_ERROR_BODY_LIMIT = 64 * 1024

Sleep = Callable[[float], Awaitable[None]]
"""How the client waits between retries; tests pass a recorder instead of `asyncio.sleep`."""


def no_cookies() -> http.cookiejar.CookieJar:
    """A cookie jar that accepts none.

    A client shared by many calls (and, in the proxy, by many callers) must
    not send the cookies one answer set with every later request.

    Examples:
        >>> cookies = httpx.Cookies(no_cookies())
        >>> request = httpx.Request("POST", "https://api.example.com/v1/chat")
        >>> cookies.extract_cookies(httpx.Response(200, headers={"set-cookie": "s=1"},
        ...                                        request=request))
        >>> len(cookies.jar)
        0
    """
    policy = http.cookiejar.DefaultCookiePolicy(allowed_domains=[])
    return http.cookiejar.CookieJar(policy=policy)


def new_http_client(
    *,
    timeout: httpx.Timeout | None = None,
    max_connections: int = 1000,
    max_keepalive: int = 100,
) -> httpx.AsyncClient:
    """A client for many models of one process: a large pool, no cookies.

    It is what `HttpClient` makes for itself when none is injected, so a
    shared one behaves the same: `StreamingTransport` unless the environment
    configures an HTTP proxy (or `TIDEMILL_HTTP_TRANSPORT=httpx`), and
    `DEFAULT_TIMEOUT` for models that set no `timeout=` of their own (a
    model's own timeout is applied to each of its requests). Whoever makes
    it passes it to the models (`http_client=`), uses it on one event loop,
    and closes it (`aclose`) after closing them.

    Args:
        timeout: The client's default per-request limits (`DEFAULT_TIMEOUT`).
        max_connections: Open connections at most (`httpx`'s transport only;
            `StreamingTransport` opens one per concurrent request).
        max_keepalive: Idle connections kept for reuse.

    Examples:
        >>> import asyncio
        >>> from tidemill.llm import resolve_model
        >>> client = new_http_client()
        >>> fast = resolve_model("openai:gpt-4o-mini", api_key="sk-test", http_client=client)
        >>> smart = resolve_model("anthropic:claude-sonnet-4-5", api_key="k", http_client=client)
        >>> asyncio.run(fast.aclose())  # a model leaves a client it was given open
        >>> client.is_closed
        False
        >>> asyncio.run(client.aclose())
    """
    timeout = timeout or DEFAULT_TIMEOUT
    if use_streaming_transport():
        transport = StreamingTransport(max_idle=max_keepalive)
        return httpx.AsyncClient(timeout=timeout, transport=transport, cookies=no_cookies())
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_keepalive)
    return httpx.AsyncClient(timeout=timeout, limits=limits, cookies=no_cookies())


@functools.cache
def _user_agent() -> str:
    return f"tidemill/{__version__} httpx/{httpx.__version__}"


@dataclass(slots=True)
class _Opened:
    response: httpx.Response
    chunks: AsyncIterator[bytes]
    head: bytes
    """The whole body (plain requests) or the first non-empty chunk (streams)."""


class _Retryable(Exception):
    """One attempt failed in a way the retry loop may try again."""

    def __init__(self, error: ProviderError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


class HttpClient:
    """POST JSON to one provider, with a deadline, retries and typed errors.

    Args:
        provider: The provider's name, used in error messages.
        client: An `httpx.AsyncClient` to use, e.g. one `new_http_client()`
            shared by the models of a process; it stays the caller's to close.
            Without one, a client is created on first use and closed by `aclose`.
        timeout: Per-request `httpx` limits (connect, read, write, pool).
            Applied to an injected client too when given.
        retry: When to retry; `RetryPolicy(max_retries=0)` disables retries.
        secrets: Values to scrub from error messages and bodies (the API key).
        auth_hint: The hint of an `AuthenticationError`.
        sleep: How to wait between retries.

    Examples:
        >>> import asyncio, httpx
        >>> transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"ok": 1}))
        >>> http = HttpClient("demo", client=httpx.AsyncClient(transport=transport))
        >>> asyncio.run(http.post_json("https://example.invalid/v1", {"q": 1}, headers={}))
        {'ok': 1}
    """

    def __init__(
        self,
        provider: str,
        *,
        client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        secrets: Sequence[str] = (),
        auth_hint: str | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.provider = provider
        self.retry = retry or RetryPolicy()
        self._injected = client
        self._timeout = httpx.Timeout(timeout) if isinstance(timeout, int | float) else timeout
        self._secrets = tuple(secrets)
        self._auth_hint = auth_hint
        self._sleep = sleep
        self._owned: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}

    @property
    def owns_client(self) -> bool:
        """Whether the `httpx` client is created and closed here (none was injected)."""
        return self._injected is None

    @property
    def timeout(self) -> httpx.Timeout | None:
        """The per-request `httpx` limits given at construction; None: the client's own."""
        return self._timeout

    def add_secrets(self, secrets: Sequence[str]) -> None:
        """Scrub `secrets` from errors too: credentials found after construction (botocore's)."""
        self._secrets += tuple(s for s in secrets if s and s not in self._secrets)

    async def aclose(self) -> None:
        """Close the owned clients; an injected one is left open. A later call opens a new one."""
        here = asyncio.get_running_loop()
        owned, self._owned = self._owned, {}
        for loop, client in owned.items():
            if loop is here:
                await client.aclose()
            elif loop.is_running():
                # Opened on another thread's loop: close it there.
                done = asyncio.run_coroutine_threadsafe(client.aclose(), loop)
                await asyncio.wrap_future(done)
            # A client of a loop that has ended lost its connections with it.

    async def post_json(
        self,
        url: str,
        body: Mapping[str, object],
        *,
        headers: Mapping[str, str],
        time_limit: float | None = None,
    ) -> JsonObject:
        """POST `body` and return the decoded JSON object of the answer.

        Args:
            url: The endpoint.
            body: The JSON request body.
            headers: Request headers (auth included).
            time_limit: Seconds for the whole call, retries included.

        Raises:
            ProviderError: Or a subclass, when the call fails after its retries,
                or the answer is not a JSON object.
        """
        deadline = self._deadline(time_limit)
        opened = await self._send(url, body, headers, deadline, time_limit, stream=False)
        text = opened.head.decode("utf-8", errors="replace")
        payload = loads_object(text)
        if payload is None:
            raise ProviderError(
                f"{self.provider} answered HTTP {opened.response.status_code} "
                "with a body that is not a JSON object.",
                provider=self.provider,
                status_code=opened.response.status_code,
                body=redact(text[:4000], self._secrets),
            )
        return payload

    async def post_stream(
        self,
        url: str,
        body: Mapping[str, object],
        *,
        headers: Mapping[str, str],
        time_limit: float | None = None,
    ) -> AsyncGenerator[bytes, None]:
        """POST `body` and yield the answer's body in chunks as they arrive.

        Retries happen only before the first byte of the body; after it, a
        failure is raised as it is. Close the iterator (`contextlib.aclosing`)
        to release the connection early.

        Raises:
            ProviderError: Or a subclass, when the call fails or the stream
                breaks off; `ProviderTimeout` when it stalls past a timeout.
        """
        deadline = self._deadline(time_limit)
        opened = await self._send(url, body, headers, deadline, time_limit, stream=True)
        try:
            if opened.head:
                yield opened.head
            while True:
                try:
                    if deadline is None:  # no whole-call limit: skip a timer per chunk
                        chunk = await anext(opened.chunks, None)
                    else:
                        async with asyncio.timeout_at(deadline):
                            chunk = await anext(opened.chunks, None)
                except TimeoutError:
                    raise self._deadline_error(time_limit) from None
                except httpx.TimeoutException as exc:
                    raise ProviderTimeout(
                        f"{self.provider} stopped sending its stream for longer than "
                        "the read timeout.",
                        provider=self.provider,
                        retryable=True,
                        hint="Raise the model's timeout=, or try again.",
                    ) from exc
                except httpx.HTTPError as exc:
                    raise ProviderError(
                        f"The {self.provider} stream broke off: {type(exc).__name__}.",
                        provider=self.provider,
                        retryable=True,
                    ) from exc
                if chunk is None:
                    return
                if chunk:
                    yield chunk
        finally:
            await opened.response.aclose()

    # -- mechanics -----------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        if self._injected is not None:
            return self._injected
        loop = asyncio.get_running_loop()
        client = self._owned.get(loop)
        if client is None or client.is_closed:
            for old in [old for old in self._owned if old.is_closed()]:
                del self._owned[old]
            # A worker may run hundreds of steps at once through one model.
            client = new_http_client(timeout=self._timeout)
            self._owned[loop] = client
        return client

    @staticmethod
    def _deadline(time_limit: float | None) -> float | None:
        if time_limit is None:
            return None
        return asyncio.get_running_loop().time() + time_limit

    def _deadline_error(self, time_limit: float | None) -> ProviderTimeout:
        limit = f"the {time_limit:g} s timeout" if time_limit is not None else "its timeout"
        return ProviderTimeout(
            f"{self.provider} did not finish within {limit} of the call.",
            provider=self.provider,
            retryable=True,
            hint="Raise the timeout setting, or ask for a shorter answer (max_tokens).",
        )

    async def _send(
        self,
        url: str,
        body: Mapping[str, object],
        headers: Mapping[str, str],
        deadline: float | None,
        time_limit: float | None,
        *,
        stream: bool,
    ) -> _Opened:
        content = dumps(body).encode("utf-8")
        all_headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
            "user-agent": _user_agent(),
            **headers,
        }
        attempt = 0
        while True:
            try:
                return await self._attempt(url, content, all_headers, deadline, stream=stream)
            except TimeoutError:
                raise self._deadline_error(time_limit) from None
            except _Retryable as failure:
                error, retry_after = failure.error, failure.retry_after
            wait = self.retry.delay(attempt, retry_after=retry_after)
            if not error.retryable or attempt >= self.retry.max_retries or wait is None:
                raise error
            if deadline is not None and asyncio.get_running_loop().time() + wait >= deadline:
                raise error
            await self._sleep(wait)
            attempt += 1

    async def _attempt(
        self,
        url: str,
        content: bytes,
        headers: Mapping[str, str],
        deadline: float | None,
        *,
        stream: bool,
    ) -> _Opened:
        client = self._client()
        try:
            request = client.build_request(
                "POST",
                url,
                content=content,
                headers=headers,
                timeout=self._timeout if self._timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.InvalidURL as exc:
            raise ConfigurationError(
                f"The {self.provider} URL {url!r} is not valid: {exc}",
                hint="Check base_url=.",
            ) from exc
        try:
            async with asyncio.timeout_at(deadline):
                response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise self._transport_failure(exc) from exc
        try:
            async with asyncio.timeout_at(deadline):
                return await self._read_head(response, stream=stream)
        except httpx.HTTPError as exc:
            await response.aclose()
            raise self._transport_failure(exc) from exc
        except BaseException:
            await response.aclose()
            raise

    async def _read_head(self, response: httpx.Response, *, stream: bool) -> _Opened:
        chunks = response.aiter_bytes()
        if response.status_code >= 400:
            body = await read_error_body(chunks)
            await response.aclose()
            retry_after = parse_retry_after(response.headers)
            error = error_from_response(
                self.provider,
                response.status_code,
                response.headers,
                body,
                secrets=self._secrets,
                retry_after=retry_after,
                statuses=self.retry.statuses,
                auth_hint=self._auth_hint,
            )
            raise _Retryable(error, retry_after)
        media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if not stream or media_type == "application/json":
            body = b"".join([chunk async for chunk in chunks])
            await response.aclose()
            if stream:
                self._raise_json_error(body)
            return _Opened(response, _no_chunks(), body)
        async for chunk in chunks:
            if chunk:
                return _Opened(response, chunks, chunk)
        return _Opened(response, chunks, b"")

    def _raise_json_error(self, body: bytes) -> None:
        """A stream request answered with plain JSON: raise the error it carries."""
        payload = loads_object(body)
        if payload is not None and "error" in payload:
            raise error_from_payload(
                self.provider,
                payload,
                secrets=self._secrets,
                body=body.decode("utf-8", errors="replace"),
                auth_hint=self._auth_hint,
            )
        raise ProviderError(
            f"{self.provider} answered a streaming request with plain JSON instead of "
            "an event stream.",
            provider=self.provider,
            status_code=200,
            body=redact(body.decode("utf-8", errors="replace")[:4000], self._secrets),
            hint="Check that the base URL points at an API that supports streaming.",
        )

    def _transport_failure(self, exc: httpx.HTTPError) -> _Retryable:
        if isinstance(exc, httpx.TimeoutException):
            error: ProviderError = ProviderTimeout(
                f"{self.provider} did not answer in time ({type(exc).__name__}).",
                provider=self.provider,
                retryable=True,
                hint="Raise the model's timeout=, or try again.",
            )
        else:
            transient = isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError)
            error = ProviderError(
                f"Could not reach {self.provider}: {type(exc).__name__}: "
                + redact(str(exc), self._secrets),
                provider=self.provider,
                retryable=transient,
                hint="Check the network and the base URL." if transient else None,
            )
        error.__cause__ = exc
        return _Retryable(error)


async def read_error_body(chunks: AsyncIterable[bytes]) -> bytes:
    """The first 64 KiB of an error's body, reading no further than needed."""
    limit = _ERROR_BODY_LIMIT
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        parts.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


async def _no_chunks() -> AsyncIterator[bytes]:
    empty: tuple[bytes, ...] = ()
    for chunk in empty:
        yield chunk
