"""`Connection`: one HTTP/1.1 connection of `StreamingTransport`, as an asyncio protocol.

What arrives waits in its buffer until a reader takes it (the response head
reader and `Body`, in `_response`); the reader waits for more with
`receive`, which shares one timer across many waits. It stops reading from
the socket while too much is buffered, and `send` waits while the socket's
write buffer is full.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
from typing import cast

__all__ = ["Connection", "Origin"]

_HIGH_WATER = 1024 * 1024
"""Unread bytes buffered before the connection stops reading from the socket."""

Origin = tuple[str, str, int]
"""Where a connection goes, the key of the pool: scheme, host and port."""


class Connection(asyncio.Protocol):
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

    def readable(self) -> bool:
        """Whether the socket holds bytes or an end the loop has not delivered yet.

        An idle connection the server closed a moment ago looks open until the
        loop next polls it; asked before reusing it, this sees the close
        already (the check `httpcore` makes before reusing a connection).
        """
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return False
        try:
            fd = sock.fileno()
            if fd < 0:
                return True
            if hasattr(select, "poll"):  # no limit on the descriptor's number, unlike select
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                return bool(poller.poll(0))
            return bool(select.select([fd], [], [], 0)[0])
        except (OSError, ValueError):
            return True

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
