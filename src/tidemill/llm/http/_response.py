"""The response side of an exchange: its head, read off the connection, and `Body`.

`read_head` reads the status line and headers (skipping 1xx answers) and
`body_length` says how the body is framed; `Body` then reads the body as it
arrives (sized, chunked or close-delimited) and gives the connection back to
its pool once the body's end has been read. `Upstream` is the two together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import httpx

from tidemill.llm.http._connection import Connection, Origin

__all__ = ["Body", "Pool", "StaleConnection", "Upstream", "body_length", "read_head"]

_MAX_HEAD = 64 * 1024
"""The largest response head accepted."""


class Pool(Protocol):
    """Where a `Body` gives its connection back: `StreamingTransport`."""

    def put_back(self, origin: Origin, connection: Connection) -> None:
        """Keep a connection whose response was read to its end for the next request."""


class StaleConnection(Exception):
    """A reused connection that failed before anything of its request could be processed.

    Raised when it was closed before the request was written, or (for a
    method safe to repeat) closed with no answer; the request then goes
    again on a fresh connection.
    """


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
        pool: Pool,
        origin: Origin,
        connection: Connection,
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


async def read_head(
    connection: Connection,
    within: float | None,
    request: httpx.Request | None,
    *,
    repeatable: bool,
) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """Read the status line and headers, skipping informational (1xx) answers.

    Raises:
        StaleConnection: When `repeatable` (a reused connection, a request
            safe to send again) and the connection closed with no answer.
        httpx.RemoteProtocolError: When it closed with no answer otherwise,
            or the head is malformed.
    """
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
            if repeatable and not buffer:
                raise StaleConnection()
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


def body_length(method: str, status: int, headers: list[tuple[bytes, bytes]]) -> int | None:
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
