"""Run async code from sync code: the thin layer under every sync facade."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar, cast

__all__ = ["LoopThread"]

T = TypeVar("T")


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

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop and return its result (or raise its error)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._start())
        return _wait(future)

    def iterate(self, iterator: AsyncIterator[T]) -> Iterator[T]:
        """Drive an async iterator from sync code, one item at a time."""
        loop = self._start()
        try:
            while True:
                future = asyncio.run_coroutine_threadsafe(_next(iterator), loop)
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

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop


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
