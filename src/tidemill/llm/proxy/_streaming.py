"""`EventStreamResponse`: one streamed answer sent as server-sent events, kept alive.

The answer arrives as frames: the bytes of zero or more events, and whether
they end the stream (`encoded` makes them from a model stream; the relay in
`_relay` straight from an upstream). The response waits for the first frame
before it commits to a status, so a call the upstream refuses at once (a bad key, a rate limit)
still gets its own HTTP status and OpenAI error body. Once the stream has
begun, an error is sent as an `error` event and the stream ends.

While the upstream is silent, a comment line (`: keep-alive`) goes out every
`keepalive` seconds, so proxies and clients between here and the caller do
not drop an idle connection; if the upstream is silent before its first
event, that first keep-alive also starts the response. A timer fires only
when the interval has passed, so a busy stream pays nothing for it. When the
client disconnects, the upstream stream is closed at once.

The stream is served in the task that called the response (the server's
task for the request), so the upstream request goes out without waiting for
another turn of the event loop; a small task listens for the client's
disconnect and cancels it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing

from starlette.types import Receive, Scope, Send

from tidemill.errors import ConfigurationError
from tidemill.llm._failures import redact
from tidemill.llm._json import dumps
from tidemill.llm._model import ModelStreamEvent
from tidemill.llm.proxy._chunks import ChunkEncoder, error_event
from tidemill.llm.proxy._disconnect import wait_for_disconnect
from tidemill.llm.proxy._errors import ProxyError, proxy_error
from tidemill.llm.proxy._notices import (
    note_unconfigured,
    setup_detail,
    unconfigured_provider,
)
from tidemill.types import ResponseDone

__all__ = ["KEEPALIVE", "EventStreamResponse", "Frames", "encoded", "error_response", "log_failure"]

Frames = AsyncGenerator[tuple[bytes, bool], None]
"""A streamed answer as the client gets it: event bytes, and whether they end the stream."""

KEEPALIVE = b": keep-alive\n\n"
"""The comment sent while the upstream is silent; SSE clients ignore comments."""

_logger = logging.getLogger("tidemill.llm.proxy")

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    # Ask buffering reverse proxies (nginx) to pass each event on at once.
    (b"x-accel-buffering", b"no"),
]


def log_failure(error: BaseException, translated: ProxyError, secrets: Sequence[str] = ()) -> None:
    """Log a failed request, at a level that says whose problem it is.

    Unexpected errors are logged with their traceback, upstream failures as
    warnings, and the client's own mistakes (other 4xx) at info level; the
    message is scrubbed of `secrets` (and key-shaped tokens) as the client's
    copy is. A provider the proxy is not set up for is told to the operator
    once, with what to set (`note_unconfigured`); the client only learns it
    is not served.
    """
    provider = unconfigured_provider(error)
    if provider is not None and isinstance(error, ConfigurationError):
        note_unconfigured(provider, setup_detail(error))
    message = redact(translated.message, secrets)
    if translated.code == "internal_error":
        _logger.error("request failed: %s", message, exc_info=error)
    elif translated.status >= 500 or translated.status in (401, 403, 429):
        _logger.warning("request failed with HTTP %d: %s", translated.status, message)
    else:
        _logger.info("request refused with HTTP %d: %s", translated.status, message)


async def error_response(send: Send, error: ProxyError, secrets: Sequence[str]) -> None:
    """Send `error` as a whole JSON response with its status and headers."""
    body = dumps(error.body(secrets)).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def encoded(events: AsyncGenerator[ModelStreamEvent, None], encoder: ChunkEncoder) -> Frames:
    """A model stream written as frames; `ResponseDone`'s closing events end them.

    The model stream is closed when the frames are.
    """
    async with aclosing(events):
        async for event in events:
            if isinstance(event, ResponseDone):
                yield encoder.finish(event), True
                return
            data = encoder.event(event)
            if data:
                yield data, False


class EventStreamResponse:
    """An ASGI response that streams frames of `chat.completion.chunk` events.

    Args:
        frames: The answer; closed when the response ends, after its last
            bytes were sent.
        preamble: Bytes sent before the first frame (or keep-alive), such as
            the chunk with the assistant role, or a function that makes them
            (called when the first bytes go out, after the upstream request).
        keepalive: Seconds of upstream silence before a keep-alive comment.
        secrets: Values to scrub from error messages.
        headers: Extra response headers.
    """

    def __init__(
        self,
        frames: Frames,
        *,
        preamble: bytes | Callable[[], bytes] = b"",
        keepalive: float,
        secrets: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.frames = frames
        self.preamble = preamble
        self.keepalive = keepalive
        self.secrets = tuple(secrets)
        self.headers = _SSE_HEADERS + [
            (k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()
        ]
        self._started = False
        self._ended = False
        self._lock = asyncio.Lock()
        self._last_write = 0.0
        self._send: Send | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._keeping: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the stream (ASGI) in the calling task; a client that disconnects cancels it."""
        task = asyncio.current_task()
        assert task is not None, "an ASGI app runs in a task"
        loop = asyncio.get_running_loop()
        gone = served = False
        listening: asyncio.Task[None] | None = None

        def left(listener: asyncio.Task[None]) -> None:
            nonlocal gone
            # Once the last frame went out, the frames finish their cleanup (the relay keeps
            # its upstream connection by reading the end of its body) rather than being cut.
            if not self._ended and not listener.cancelled():
                gone = True
                task.cancel()

        def watch() -> None:
            # Set up at the stream's first pause (while the upstream request is on its way),
            # so that the request goes out first.
            nonlocal listening
            if served:
                return
            listening = loop.create_task(wait_for_disconnect(receive))
            listening.add_done_callback(left)
            self._timer = loop.call_later(
                self._last_write + self.keepalive - time.monotonic(), self._keep_alive_due
            )

        self._send = send
        self._last_write = time.monotonic()
        watching = loop.call_soon(watch)
        try:
            await self._serve(send)
        except asyncio.CancelledError:
            if not gone or task.uncancel() > 0:  # cancelled by someone else too: pass it on
                raise
        finally:
            served = True
            watching.cancel()
            if listening is not None:
                listening.remove_done_callback(left)
                listening.cancel()
            await self._stop_keep_alives()

    async def _serve(self, send: Send) -> None:
        try:
            await self._relay(send)
        except Exception as exc:
            await self._stop_keep_alives()
            await self._fail(send, exc)

    async def _relay(self, send: Send) -> None:
        """Send every frame; the last is sent before the frames are closed."""
        async with aclosing(self.frames) as frames:
            async for data, final in frames:
                if final:
                    await self._write(send, data, more_body=False)
                    return
                await self._write(send, data)
        raise ProxyError(
            "The upstream stream ended without its final event.",
            status=502,
            type="api_error",
            code="upstream_incomplete",
        )

    async def _write(self, send: Send, data: bytes, *, more_body: bool = True) -> None:
        async with self._lock:
            if self._ended:  # a keep-alive that lost the race with the last frame
                return
            if not self._started:
                await send({"type": "http.response.start", "status": 200, "headers": self.headers})
                self._started = True
                preamble = self.preamble
                data = (preamble if isinstance(preamble, bytes) else preamble()) + data
            self._ended = not more_body
            await send({"type": "http.response.body", "body": data, "more_body": more_body})
            self._last_write = time.monotonic()

    def _keep_alive_due(self) -> None:
        """The timer: send a keep-alive if nothing went out for `keepalive` seconds."""
        self._timer = None
        if self._ended or self._send is None:
            return
        wait = self._last_write + self.keepalive - time.monotonic()
        loop = asyncio.get_running_loop()
        if wait > 0:  # something went out since the timer was set
            self._timer = loop.call_later(wait, self._keep_alive_due)
        else:
            self._keeping = loop.create_task(self._keep_alive(self._send))

    async def _keep_alive(self, send: Send) -> None:
        await self._write(send, KEEPALIVE)
        if not self._ended and self._send is not None:
            self._timer = asyncio.get_running_loop().call_later(
                self.keepalive, self._keep_alive_due
            )

    async def _stop_keep_alives(self) -> None:
        self._send = None  # no timer that is already due starts another keep-alive
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._keeping is not None:
            await _stop(self._keeping)
            self._keeping = None

    async def _fail(self, send: Send, exc: Exception) -> None:
        error = proxy_error(exc)
        log_failure(exc, error, self.secrets)
        async with self._lock:
            if not self._started:
                self._started = self._ended = True
                await error_response(send, error, self.secrets)
                return
        await self._write(send, error_event(error.body(self.secrets)), more_body=False)


async def _stop(task: asyncio.Task[None]) -> None:
    """Cancel `task` if it still runs and wait for it, never swallowing our own cancellation."""
    if not task.done():
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
