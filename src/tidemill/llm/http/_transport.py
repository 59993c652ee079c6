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

What it does not do: HTTP/2, proxies and Unix sockets. `ModelRouter` uses
`httpx`'s own transport when the environment configures a proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import cast

import httpx

__all__ = [
    "Body",
    "StreamingTransport",
    "Timeouts",
    "Upstream",
    "request_head",
    "use_streaming_transport",
]

_MAX_HEAD = 64 * 1024
"""The largest response head accepted."""
_HIGH_WATER = 1024 * 1024
"""Unread bytes buffered before the connection stops reading from the socket."""

_Origin = tuple[str, str, int]

Timeouts = Mapping[str, float | None]
"""Seconds allowed to `connect`, and for each `read` and `write` (None: no limit)."""


class _Connection(asyncio.Protocol):
    """One connection: what arrived waits in `buffer`; `receive` waits for more."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False
        self.error: BaseException | None = None
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._paused = False
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:  # send small writes at once: a request is one write
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _HIGH_WATER and not self._paused and self.transport is not None:
            self.transport.pause_reading()
            self._paused = True
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        self.disarm()
        self._wake()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # -- use -------------------------------------------------------------------------------

    async def receive(self, within: float | None) -> None:
        """Wait until more bytes arrive or the connection closes.

        Raises:
            TimeoutError: When nothing arrived within `within` seconds.
        """
        if self._paused and self.transport is not None:
            self.transport.resume_reading()
            self._paused = False
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        if within is not None:
            # One timer for many waits: it is set again only when it would fire too late,
            # and when it fires early (data came since), it is set for the current wait.
            self._deadline = deadline = loop.time() + within
            if self._timer is None or self._timer_at > deadline:
                self.disarm()
                self._timer_at = deadline
                self._timer = loop.call_at(deadline, self._expire)
        try:
            await waiter
        finally:
            self._waiter = None

    async def send(self, data: bytes, within: float | None) -> None:
        """Write `data`, waiting (at most `within` seconds) while the socket's buffer is full.

        Raises:
            TimeoutError: When the buffer did not drain in time.
            ConnectionError: When the connection is closed.
        """
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ConnectionError("the connection is closed")
        self.transport.write(data)
        if self._drained is not None:
            async with asyncio.timeout(within):
                await asyncio.shield(self._drained)

    def close(self) -> None:
        self.closed = True
        self.disarm()
        if self.transport is not None:
            self.transport.close()

    def disarm(self) -> None:
        """Cancel the read timer (a connection going back to the pool waits for nothing)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # no wait in progress: the next one sets the timer again
        loop = waiter.get_loop()
        if self._deadline - loop.time() > 0.001:  # bytes came since the timer was set
            self._timer_at = self._deadline
            self._timer = loop.call_at(self._deadline, self._expire)
        else:
            waiter.set_exception(TimeoutError())

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _Stale(Exception):
    """A reused connection the server had closed before it read the request."""


_CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _DONE = range(5)
"""Where a chunked body's reader is: a size line, data, the CRLF after it, trailers, done."""


class Body(httpx.AsyncByteStream):
    """A response body read from its connection as it arrives.

    Args:
        pool: Takes the connection back once the body has been read to its end.
        length: The body's size, `None` for chunked, -1 for a body that ends
            when the server closes the connection.
    """

    def __init__(
        self,
        pool: StreamingTransport,
        origin: _Origin,
        connection: _Connection,
        *,
        length: int | None,
        reusable: bool,
        read_timeout: float | None,
        request: httpx.Request | None,
    ) -> None:
        self._pool = pool
        self._origin = origin
        self._connection = connection
        self._left = length if length is not None else 0
        self._chunked = length is None
        self._until_close = length == -1
        self._state = _CHUNK_SIZE
        self._done = length == 0
        self._reusable = reusable and not self._until_close
        self._read_timeout = read_timeout
        self._request = request
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while data := await self.read():
            yield data

    async def read(self) -> bytes:
        """The body bytes that arrived since the last read, waiting for some; b"" at its end.

        Raises:
            httpx.RemoteProtocolError: When the connection closes before the body's end.
            httpx.ReadTimeout: When nothing arrives within the read timeout.
        """
        connection = self._connection
        while True:
            data = self._take()
            if self._done:
                self._release()
            if data or self._done:
                return data
            if connection.closed:
                if self._until_close:
                    self._done = True
                    continue
                self._release()
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body",
                    request=self._request,
                )
            try:
                await connection.receive(self._read_timeout)
            except TimeoutError:
                self._release()
                raise httpx.ReadTimeout(
                    "timed out reading the response", request=self._request
                ) from None

    async def drain(self, within: float, limit: int = 64 * 1024) -> None:
        """Read the rest of the body (at most `limit` bytes, `within` seconds), then close.

        For a stream whose last event has arrived but not the body's end
        (which often follows in its own packet): reading it keeps the
        connection for the next request instead of opening a new one.
        """
        try:
            with contextlib.suppress(httpx.HTTPError, TimeoutError):
                async with asyncio.timeout(within):
                    while limit > 0 and not self._done and (data := await self.read()):
                        limit -= len(data)
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Give the connection back if the rest of the body is already here, else close it."""
        if not self._done and not self._released:
            with contextlib.suppress(httpx.RemoteProtocolError):
                self._take()
        self._release()

    def _release(self) -> None:
        if self._released:
            return
        self._released = True
        connection = self._connection
        if self._done and self._reusable and not connection.closed and not connection.buffer:
            self._pool.put_back(self._origin, connection)
        else:
            connection.close()

    def _take(self) -> bytes:
        """Take the body bytes buffered so far, decoding chunked framing."""
        buffer = self._connection.buffer
        if self._chunked:
            return self._take_chunked(buffer)
        if self._until_close:
            data = bytes(buffer)
            buffer.clear()
            return data
        data = bytes(buffer[: self._left])
        del buffer[: len(data)]
        self._left -= len(data)
        self._done = self._left == 0
        return data

    def _take_chunked(self, buffer: bytearray) -> bytes:
        parts: list[bytes] = []
        at = 0
        while not self._done:
            if self._state == _CHUNK_DATA:
                piece = bytes(buffer[at : at + self._left])
                if not piece:
                    break
                parts.append(piece)
                at += len(piece)
                self._left -= len(piece)
                if self._left:
                    break
                self._state = _CHUNK_END
                continue
            end = buffer.find(b"\r\n", at)
            if end < 0:
                if len(buffer) - at > _MAX_HEAD:
                    raise self._broken("a chunk-size or trailer line is too long")
                break
            line = bytes(buffer[at:end])
            at = end + 2
            if self._state == _CHUNK_END:
                if line:
                    raise self._broken("no CRLF after a chunk")
                self._state = _CHUNK_SIZE
            elif self._state == _TRAILERS:
                self._done = not line
            else:
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise self._broken(f"bad chunk size {line[:40]!r}") from None
                self._left = size
                self._state = _CHUNK_DATA if size else _TRAILERS
        del buffer[:at]
        return b"".join(parts)

    def _broken(self, why: str) -> httpx.RemoteProtocolError:
        return httpx.RemoteProtocolError(f"malformed chunked body: {why}", request=self._request)


@dataclass(slots=True)
class Upstream:
    """A response whose head has arrived; `body` yields the rest as it arrives."""

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: Body

    def header(self, name: bytes) -> bytes:
        """The value of the header `name` (lowercase), empty when it is absent."""
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return b""


class StreamingTransport(httpx.AsyncBaseTransport):
    """An `httpx` transport for HTTP/1.1 upstreams, cheap per streamed chunk.

    `open` is the same exchange without `httpx`'s request and response
    objects, for callers that relay bodies as they are.

    Args:
        keepalive_expiry: Seconds an idle connection stays in the pool.
        max_idle: Idle connections kept per origin.
        ssl_context: For `https`; by default `httpx`'s (certifi, `SSL_CERT_FILE`).

    Example:
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
        self._idle: dict[_Origin, list[_Connection]] = {}
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
            except _Stale:
                connection.close()  # the server had closed it while idle: try a fresh one
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

    def put_back(self, origin: _Origin, connection: _Connection) -> None:
        """Keep a connection whose response was read to its end for the next request."""
        connection.disarm()
        idle = self._idle.setdefault(origin, [])
        if self._closed or len(idle) >= self.max_idle:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    # -- pieces ------------------------------------------------------------------------------

    def _idle_connection(self, origin: _Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            expired = now - connection.idle_since > self.keepalive_expiry
            if connection.closed or connection.buffer or expired:
                connection.close()
            else:
                return connection
        return None

    async def _connect(
        self, origin: _Origin, within: float | None, request: httpx.Request | None
    ) -> _Connection:
        scheme, host, port = origin
        context = self._context() if scheme == "https" else None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(within):
                _, connection = await loop.create_connection(
                    _Connection, host, port, ssl=context, server_hostname=host if context else None
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
        origin: _Origin,
        connection: _Connection,
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
                raise _Stale() from exc
            raise httpx.WriteError(str(exc), request=request) from exc
        status, reason, headers = await _read_head(
            connection, timeouts.get("read"), request, reused=reused
        )
        length = _body_length(method, status, headers)
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

    Example:
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


async def _read_head(
    connection: _Connection,
    within: float | None,
    request: httpx.Request | None,
    *,
    reused: bool,
) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """Read the status line and headers, skipping informational (1xx) answers."""
    buffer = connection.buffer
    while True:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            raw = bytes(buffer[:end])
            del buffer[: end + 4]
            status, reason, headers = _parse_head(raw, request)
            if 100 <= status < 200:
                continue
            return status, reason, headers
        if len(buffer) > _MAX_HEAD:
            raise httpx.RemoteProtocolError("the response head is too long", request=request)
        if connection.closed:
            if reused and not buffer:
                raise _Stale()
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        try:
            await connection.receive(within)
        except TimeoutError:
            raise httpx.ReadTimeout("timed out waiting for the response", request=request) from None


def _parse_head(
    raw: bytes, request: httpx.Request | None
) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    lines = raw.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or not code.isdigit() or len(code) != 3:
        raise httpx.RemoteProtocolError(f"bad status line {lines[0][:80]!r}", request=request)
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name.strip():
            raise httpx.RemoteProtocolError(f"bad header line {line[:80]!r}", request=request)
        headers.append((name.strip(), value.strip()))
    if version == b"HTTP/1.0":  # no keep-alive by default
        headers.append((b"connection", b"close"))
    return int(code), reason, headers


def _body_length(method: str, status: int, headers: list[tuple[bytes, bytes]]) -> int | None:
    """The body's size; `None` for chunked; -1 when it ends with the connection."""
    if method == "HEAD" or status in (204, 304):
        return 0
    length = -1
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"transfer-encoding" and b"chunked" in value.lower():
            return None
        if lowered == b"content-length" and value.isdigit():
            length = int(value)
    return length


def use_streaming_transport() -> bool:
    """Whether new provider clients should use `StreamingTransport`.

    Not when the environment sets an HTTP proxy (`HTTPS_PROXY`, `ALL_PROXY`,
    ...: only `httpx`'s own transport goes through one), nor when
    `TIDEMILL_HTTP_TRANSPORT=httpx` asks for `httpx`'s transport.

    Example:
        >>> import os
        >>> os.environ["TIDEMILL_HTTP_TRANSPORT"] = "httpx"
        >>> use_streaming_transport()
        False
        >>> del os.environ["TIDEMILL_HTTP_TRANSPORT"]
    """
    if os.environ.get("TIDEMILL_HTTP_TRANSPORT", "").lower() == "httpx":
        return False
    return not (set(urllib.request.getproxies()) & {"http", "https", "all"})
