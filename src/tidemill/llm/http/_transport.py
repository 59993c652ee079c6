"""`StreamingTransport`: a lean HTTP/1.1 transport under the provider layer's `httpx` clients.

Why it exists: model calls stream many small chunks, and `httpx`'s default
transport (httpcore, h11 and anyio) costs about 100 us of CPU for each chunk
it reads (a cancel scope, a timeout and h11's state machine per read), where
an asyncio protocol needs under 10 us. Its pool also offers an idle
connection to every waiting request at once, so under hundreds of
concurrent calls (a worker running 200 agent steps) some requests wait
seconds for a connection (encode/httpcore#1035); here a freed connection
goes to one waiter. This transport speaks HTTP/1.1 over asyncio protocols
itself and plugs into `httpx.AsyncClient(transport=...)`, so everything
above it (the adapters, `HttpClient`'s retries, deadlines and typed errors)
is unchanged. `HttpClient` and the proxy's router use it unless the
environment configures an HTTP proxy, or `TIDEMILL_HTTP_TRANSPORT=httpx`
asks for `httpx`'s own transport.

What it does: a keep-alive pool per origin (idle connections are dropped
after `keepalive_expiry` seconds, or as soon as the server closes them);
TLS with `httpx`'s default context (certifi, or `SSL_CERT_FILE`); chunked,
sized and close-delimited bodies, read as they arrive; the connect, read
and write timeouts of each request; `httpx`'s exception types. A body
closed early goes back to the pool when its end is already buffered (a
stream read up to `[DONE]` usually is), so streams do not reconnect.

A request goes again on a fresh connection only when nothing of it can have
been processed: the pooled connection was found closed before the request
was written (the socket is checked, not only what the loop has seen), or,
for a method safe to repeat (`GET`, `PUT`, ...), it closed without a byte of
answer. A `POST` whose connection closes after it was written is a
`RemoteProtocolError`: the upstream may have started on it (a model call is
billed), so the caller's retry policy decides, with its backoff.

What it does not do: HTTP/2, proxies and Unix sockets. `ModelRouter` uses
`httpx`'s own transport when the environment configures a proxy.

Who owns what: this module is the pool and the exchange (write the request,
read the response's head); `_connection` is one connection, an asyncio
protocol with its buffer and timers; `_response` reads the head and the
body (`Body`, sized, chunked or close-delimited) off a connection.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
import urllib.request
from collections.abc import Iterable, Mapping

import httpx

from tidemill.llm.http._connection import Connection, Origin
from tidemill.llm.http._response import (
    Body,
    StaleConnection,
    Upstream,
    body_length,
    read_head,
)

__all__ = [
    "StreamingTransport",
    "Timeouts",
    "request_head",
    "use_streaming_transport",
]

_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
"""Methods a request of which may be sent twice with the effect of once (RFC 9110, 9.2.2)."""

Timeouts = Mapping[str, float | None]
"""Seconds allowed to `connect`, and for each `read` and `write` (None: no limit)."""


class StreamingTransport(httpx.AsyncBaseTransport):
    """An `httpx` transport for HTTP/1.1 upstreams, cheap per streamed chunk.

    `open` is the same exchange without `httpx`'s request and response
    objects, for callers that relay bodies as they are.

    Args:
        keepalive_expiry: Seconds an idle connection stays in the pool.
        max_idle: Idle connections kept per origin.
        ssl_context: For `https`; by default `httpx`'s (certifi, `SSL_CERT_FILE`).

    Examples:
        >>> import httpx
        >>> client = httpx.AsyncClient(transport=StreamingTransport())
    """

    def __init__(
        self,
        *,
        keepalive_expiry: float = 5.0,
        max_idle: int = 200,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.keepalive_expiry = keepalive_expiry
        self.max_idle = max_idle
        self._ssl_context = ssl_context
        self._idle: dict[Origin, list[Connection]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request` and return its response with the body still to be read."""
        content = await request.aread()
        timeouts: Timeouts = request.extensions.get("timeout", {})
        upstream = await self.open(
            request.method, request.url, request.headers.raw, content, timeouts, request=request
        )
        return httpx.Response(
            upstream.status,
            headers=upstream.headers,
            stream=upstream.body,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": upstream.reason},
        )

    async def open(
        self,
        method: str,
        url: httpx.URL,
        headers: Iterable[tuple[bytes, bytes]],
        content: bytes,
        timeouts: Timeouts,
        *,
        request: httpx.Request | None = None,
    ) -> Upstream:
        """Send one request and wait for its response's head.

        Args:
            method: The HTTP method.
            url: Where to; its host and port pick the pooled connection.
            headers: The request headers; `host` must be among them, and
                `content-length` is set here.
            content: The request body.
            timeouts: `connect`, `read` and `write` limits in seconds (None: none).
            request: The `httpx` request this is for, named by errors.

        Raises:
            httpx.HTTPError: `ConnectError`, `ConnectTimeout`, `ReadTimeout`,
                `WriteTimeout`, `RemoteProtocolError` and the like.
        """
        data = request_head(method, url, headers, len(content)) + content
        return await self.send(method, url, data, timeouts, request=request)

    async def send(
        self,
        method: str,
        url: httpx.URL,
        data: bytes,
        timeouts: Timeouts,
        *,
        request: httpx.Request | None = None,
    ) -> Upstream:
        """`open` for a request already written out: its head (see `request_head`) and body.

        For callers that send many requests with the same head, and write it once.

        Raises:
            httpx.HTTPError: As `open`.
        """
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}")
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        while True:
            connection = self._idle_connection(origin)
            reused = connection is not None
            if connection is None:
                connection = await self._connect(origin, timeouts.get("connect"), request)
            try:
                return await self._exchange(
                    origin, connection, method, data, timeouts, request, reused=reused
                )
            except StaleConnection:
                connection.close()  # nothing of the request was processed: try a fresh one
            except BaseException:
                connection.close()
                raise

    async def aclose(self) -> None:
        """Close the idle connections; those in use close when their body is done."""
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    def put_back(self, origin: Origin, connection: Connection) -> None:
        """Keep a connection whose response was read to its end for the next request."""
        connection.disarm()
        idle = self._idle.setdefault(origin, [])
        if self._closed or len(idle) >= self.max_idle:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    # -- pieces ------------------------------------------------------------------------------

    def _idle_connection(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            expired = now - connection.idle_since > self.keepalive_expiry
            if connection.closed or connection.buffer or expired or connection.readable():
                connection.close()
            else:
                return connection
        return None

    async def _connect(
        self, origin: Origin, within: float | None, request: httpx.Request | None
    ) -> Connection:
        scheme, host, port = origin
        context = self._context() if scheme == "https" else None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(within):
                _, connection = await loop.create_connection(
                    Connection, host, port, ssl=context, server_hostname=host if context else None
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"timed out connecting to {host}", request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}", request=request) from exc
        return connection

    def _context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            context = httpx.create_ssl_context()
            context.set_alpn_protocols(["http/1.1"])
            self._ssl_context = context
        return self._ssl_context

    async def _exchange(
        self,
        origin: Origin,
        connection: Connection,
        method: str,
        data: bytes,
        timeouts: Timeouts,
        request: httpx.Request | None,
        *,
        reused: bool,
    ) -> Upstream:
        try:
            await connection.send(data, timeouts.get("write"))
        except TimeoutError:
            raise httpx.WriteTimeout("timed out sending the request", request=request) from None
        except ConnectionError as exc:
            if reused:
                raise StaleConnection() from exc
            raise httpx.WriteError(str(exc), request=request) from exc
        # Sent, the request may have been processed even if no answer comes: only a
        # request that is safe to repeat goes again on a fresh connection (RFC 9110, 9.2.2).
        status, reason, headers = await read_head(
            connection, timeouts.get("read"), request, repeatable=reused and method in _IDEMPOTENT
        )
        length = body_length(method, status, headers)
        keep_alive = not any(
            name.lower() == b"connection" and b"close" in value.lower() for name, value in headers
        )
        body = Body(
            self,
            origin,
            connection,
            length=length,
            reusable=keep_alive,
            read_timeout=timeouts.get("read"),
            request=request,
        )
        return Upstream(status, reason, headers, body)


def request_head(
    method: str, url: httpx.URL, headers: Iterable[tuple[bytes, bytes]], length: int | None
) -> bytes:
    r"""A request's head: request line, `headers` and `content-length: length`, blank line.

    With `length` None, the head stops after the headers (no `content-length`,
    no blank line), for a caller to finish per request.

    Examples:
        >>> request_head("POST", httpx.URL("http://h/v1/x?a=1"), [(b"host", b"h")], 2)
        b'POST /v1/x?a=1 HTTP/1.1\r\nhost: h\r\ncontent-length: 2\r\n\r\n'
    """
    lines = [b"%s %s HTTP/1.1" % (method.encode("ascii"), url.raw_path)]
    for name, value in headers:
        if name.lower() not in (b"content-length", b"transfer-encoding"):
            lines.append(name + b": " + value)
    if length is None:
        return b"\r\n".join(lines) + b"\r\n"
    if length or method not in ("GET", "HEAD"):
        lines.append(b"content-length: %d" % length)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def use_streaming_transport() -> bool:
    """Whether new provider clients should use `StreamingTransport`.

    Not when the environment sets an HTTP proxy (`HTTPS_PROXY`, `ALL_PROXY`,
    ...: only `httpx`'s own transport goes through one), nor when
    `TIDEMILL_HTTP_TRANSPORT=httpx` asks for `httpx`'s transport.

    Examples:
        >>> import os
        >>> os.environ["TIDEMILL_HTTP_TRANSPORT"] = "httpx"
        >>> use_streaming_transport()
        False
        >>> del os.environ["TIDEMILL_HTTP_TRANSPORT"]
    """
    if os.environ.get("TIDEMILL_HTTP_TRANSPORT", "").lower() == "httpx":
        return False
    return not (set(urllib.request.getproxies()) & {"http", "https", "all"})
