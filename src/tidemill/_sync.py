"""Between sync and async code: the thin layer under every sync facade and sync tool.

`LoopThread` runs coroutines for sync callers; `SyncFunction` calls a plain
function from a coroutine without blocking a loop that other work shares.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from asyncio.events import _set_running_loop
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, Generic, TypeVar, cast

from tidemill.errors import ConfigurationError

__all__ = ["ON_LOOP_LIMIT", "LoopThread", "SyncFunction"]

T = TypeVar("T")
R = TypeVar("R")

ON_LOOP_LIMIT = 0.001
"""Seconds: a plain function whose last call took longer makes its next call in a thread."""

_LENT: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "tidemill_lent_loop", default=None
)
"""In a blocking call made with `sync_on_loop=True`: the loop it runs on."""

_CALLING: contextvars.ContextVar[tuple[asyncio.AbstractEventLoop, SyncFunction[Any]] | None] = (
    contextvars.ContextVar("tidemill_sync_call", default=None)
)
"""Inside a `SyncFunction` call: the loop that made it, and the function."""


class LoopThread:
    """An event loop on a daemon thread, owned by one object, started on first use.

    Sync methods hand their coroutine to this loop and wait. Because the loop
    lives as long as its owner, connections opened by one call (an HTTP
    client, a database connection) are still usable by the next, and the sync
    methods work even when the caller is already inside an event loop (a
    notebook).
    """

    def __init__(self, name: str = "tidemill-sync") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, coroutine: Coroutine[Any, Any, T], *, sync_on_loop: bool = False) -> T:
        """Run `coroutine` on the loop and return its result (or raise its error).

        Args:
            coroutine: What to run.
            sync_on_loop: The caller waits for this coroutine and nothing else
                (an agent's `run()`): a plain function it calls through
                `SyncFunction` may run on the loop's own thread while nothing
                else runs on the loop.

        Raises:
            ConfigurationError: When called on the loop's own thread, where
                it would wait for itself forever.
        """
        try:
            loop = self._enter()
        except BaseException:
            coroutine.close()
            raise
        return _wait(_submit(coroutine, loop, sync_on_loop))

    def iterate(self, iterator: AsyncIterator[T], *, sync_on_loop: bool = False) -> Iterator[T]:
        """Drive an async iterator from sync code, one item at a time (see `run`)."""
        loop = self._enter()
        try:
            while True:
                future = _submit(_next(iterator), loop, sync_on_loop)
                item = _wait(future)
                if item is _DONE:
                    return
                yield cast(T, item)
        finally:
            closer = getattr(iterator, "aclose", None)
            if closer is not None and loop.is_running():
                _wait(asyncio.run_coroutine_threadsafe(closer(), loop))

    def close(self) -> None:
        """Stop the loop and its thread; a later call starts a new one."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join()
        loop.close()

    def _enter(self) -> asyncio.AbstractEventLoop:
        """The loop, for a blocking call made here; refused on the loop's own thread."""
        loop = self._start()
        calling = _CALLING.get()
        if calling is not None and calling[0] is loop:
            # A plain function calling back into the loop that called it: on
            # that loop's thread it would wait for itself, so it stays in a thread.
            calling[1].reenters = True
        if threading.current_thread() is self._thread:
            raise ConfigurationError(
                f"A blocking method was called on the event-loop thread {self._name!r} "
                "that runs it, so it would wait for itself forever.",
                hint="In a coroutine or a tool running there, await the async method "
                "(arun, aresume, astate, ...) instead.",
                context={"thread": self._name},
            )
        return loop

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop


def _submit(
    coroutine: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop, sync_on_loop: bool
) -> Future[T]:
    token = _LENT.set(loop if sync_on_loop else None)
    try:
        # The task made for the coroutine copies this context, and the mark with it.
        return asyncio.run_coroutine_threadsafe(coroutine, loop)
    finally:
        _LENT.reset(token)


class SyncFunction(Generic[R]):
    """A plain function called from async code, off any loop that other work shares.

    `call` runs it in a worker thread of the loop's default executor, with a
    copy of the caller's contextvars, as `asyncio.to_thread` does. Where no
    thread is needed, it saves the hop there and back (a future, two thread
    switches and the loop's wake-up: 50 to 150 us on the benchmarks' host).
    Inside a blocking call that lends its loop (`LoopThread.run(...,
    sync_on_loop=True)`, as an agent's `run()` does) the function runs on
    the loop's own thread when the calling task is the only task on that
    loop and the function's last call took at most `ON_LOOP_LIMIT`.

    Its first call runs in a thread, and so does any call after a slower
    one, and every call once one has called a blocking method of the loop
    that called it. A call arriving from another thread while one runs on
    the loop waits for it: for a function as fast as its last call, about
    that limit at most. No call can be stopped halfway. A cancellation of a
    call on the loop's thread takes effect when the call returns; the
    cancelled caller of a call in a worker stops waiting while the worker
    goes on.

    On the loop's thread as in a worker, the function sees no running event
    loop (so `asyncio.run` and libraries that refuse to run inside one work
    as in a thread) and a copy of the caller's contextvars. Its exceptions
    reach the caller as they are, but for `StopIteration`, which neither a
    future nor a coroutine can carry: that becomes a `RuntimeError` with it
    as the cause.

    Examples:
        >>> double = SyncFunction(lambda x: 2 * x)
        >>> asyncio.run(double.call({"x": 21}))
        42
    """

    __slots__ = ("function", "quick", "reenters")

    def __init__(self, function: Callable[..., R]) -> None:
        self.function = function
        """The function."""
        self.quick = False
        """Whether its last call took at most `ON_LOOP_LIMIT` (before any call: no)."""
        self.reenters = False
        """Whether a call has called a blocking method of the loop that called it."""

    async def call(self, arguments: Mapping[str, Any]) -> R:
        """Call the function with `arguments` as keyword arguments; see the class."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        if (
            self.quick
            and not self.reenters
            and _LENT.get() is loop
            # Only this task, so no other work waits for the loop (about 3 us to ask).
            and len(asyncio.all_tasks(loop)) == 1
        ):
            _set_running_loop(None)
            try:
                return context.run(self._timed, loop, arguments)
            finally:
                _set_running_loop(loop)
        return await loop.run_in_executor(None, context.run, self._timed, loop, arguments)

    def _timed(self, loop: asyncio.AbstractEventLoop, arguments: Mapping[str, Any]) -> R:
        """The call itself, in its own context: noting how long it took."""
        _CALLING.set((loop, self))
        started = time.perf_counter()
        try:
            return self.function(**arguments)
        except StopIteration as exc:
            raise RuntimeError(f"{_name(self.function)} raised StopIteration") from exc
        finally:
            self.quick = time.perf_counter() - started <= ON_LOOP_LIMIT


def _name(function: Callable[..., object]) -> str:
    return str(getattr(function, "__name__", None) or type(function).__name__)


_DONE = object()


async def _next(iterator: AsyncIterator[T]) -> T | object:
    try:
        return await anext(iterator)
    except StopAsyncIteration:
        return _DONE


def _wait(future: Future[T]) -> T:
    try:
        return future.result()
    except BaseException:
        # Ctrl-C in the caller: stop the work on the loop too.
        future.cancel()
        raise
