"""Between sync and async code: the thin layer under every sync facade and sync tool.

`LoopThread` runs coroutines for sync callers; `SyncFunction` calls a plain
function from a coroutine without blocking a loop that other work shares.
"""

from __future__ import annotations

import asyncio
import contextvars
import signal
import threading
import time
import weakref
from asyncio.events import _get_running_loop, _set_running_loop
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
    """An event loop owned by one object, for its blocking methods; made on first use.

    Sync methods hand their coroutine to this loop and wait. Because the loop
    lives as long as its owner, connections opened by one call (an HTTP
    client, a database connection) are still usable by the next, and the sync
    methods work even when the caller is already inside an event loop (a
    notebook).

    The loop runs where it costs least. While nothing else uses it, a
    blocking call runs it on the caller's own thread, as
    `loop.run_until_complete` does, which saves handing the coroutine to
    another thread and the result back (two thread switches, up to 200 us a
    call on the benchmarks' host). Between such calls the loop rests. When a
    call leaves anything that needs the loop to go on (a task, a callback, a
    timer, or a connection or process it watches, as an MCP session does),
    when another thread calls while one runs, or when a call is interrupted,
    the loop gets a daemon thread of its own and keeps it until `close()`:
    from then on every call hands its coroutine to that thread and waits.

    Ctrl-C during a call on the main thread cancels the call's task, which
    then ends as a cancelled task does, and the call raises
    `KeyboardInterrupt`; a second Ctrl-C raises it at once.
    """

    def __init__(self, name: str = "tidemill-sync") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        """The loop's own thread, once it has one."""
        self._driver: threading.Thread | None = None
        """The thread running the loop for its own blocking call, meanwhile."""
        self._handoff = False
        """Whether the loop gets a thread of its own when the running call ends."""
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._lock = threading.Lock()

    def run(self, coroutine: Coroutine[Any, Any, T], *, sync_on_loop: bool = False) -> T:
        """Run `coroutine` on the loop and return its result (or raise its error).

        Args:
            coroutine: What to run.
            sync_on_loop: The caller waits for this coroutine and nothing else
                (an agent's `run()`): a plain function it calls through
                `SyncFunction` may run on the thread running the loop while
                nothing else runs on the loop.

        Raises:
            ConfigurationError: When called on the thread that runs the loop,
                where it would wait for itself forever.
        """
        try:
            loop, drive = self._enter()
        except BaseException:
            coroutine.close()
            raise
        if drive:
            return self._drive(loop, coroutine, sync_on_loop)
        return _wait(_submit(coroutine, loop, sync_on_loop))

    def iterate(self, iterator: AsyncIterator[T], *, sync_on_loop: bool = False) -> Iterator[T]:
        """Drive an async iterator from sync code, one item at a time (see `run`)."""
        self._refuse_here()
        try:
            while True:
                item = self.run(_next(iterator), sync_on_loop=sync_on_loop)
                if item is _DONE:
                    return
                yield cast(T, item)
        finally:
            closer = getattr(iterator, "aclose", None)
            if closer is not None and self._loop is not None:
                self.run(closer())

    def close(self) -> None:
        """Stop the loop and its thread; a later call makes a new one.

        A call running meanwhile on another thread finishes, and the loop
        closes when it returns.
        """
        with self._lock:
            loop, thread, driver = self._loop, self._thread, self._driver
            self._loop = self._thread = self._driver = None
            self._handoff = False
            if self._finalizer is not None:
                self._finalizer.detach()
                self._finalizer = None
        if loop is None or driver is not None:
            return  # nothing made yet, or the call running it closes it (`_leave`)
        if thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not threading.current_thread():
                thread.join()
        loop.close()

    def _refuse_here(self) -> None:
        """Refuse a blocking call on the thread that runs the loop; note a re-entry."""
        calling = _CALLING.get()
        here = threading.current_thread()
        loop = self._loop
        if calling is not None and loop is not None and calling[0] is loop:
            # A plain function calling back into the loop that called it: on
            # that loop's thread it would wait for itself, so it stays in a thread.
            calling[1].reenters = True
        if here is self._thread or here is self._driver:
            raise ConfigurationError(
                f"A blocking method was called on the thread that runs its event loop "
                f"({self._name!r}), so it would wait for itself forever.",
                hint="In a coroutine or a tool running there, await the async method "
                "(arun, aresume, astate, ...) instead.",
                context={"thread": self._name},
            )

    def _enter(self) -> tuple[asyncio.AbstractEventLoop, bool]:
        """The loop for a blocking call made here, and whether this thread runs it."""
        self._refuse_here()
        with self._lock:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.new_event_loop()
                # An owner dropped without close(): its resting loop closes with it.
                self._finalizer = weakref.finalize(self, _close_resting, loop)
            if self._thread is None and self._driver is None:
                self._driver = threading.current_thread()
                return loop, True
            if self._thread is None:
                # Another thread runs the loop for its own call, which may end
                # before this one: the loop then goes on in a thread of its own.
                self._handoff = True
            return loop, False

    def _drive(
        self, loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T], sync_on_loop: bool
    ) -> T:
        """Run the loop on this thread until `coroutine` is done."""
        outer = _get_running_loop()  # a caller inside a loop: it waits for this call anyway
        try:
            token = _LENT.set(loop if sync_on_loop else None)
            try:
                # The task copies this context, and the mark with it.
                task = loop.create_task(coroutine)
            finally:
                _LENT.reset(token)
        except BaseException:
            coroutine.close()
            self._leave(loop, handoff=False)
            raise
        interrupts = _Interrupts(task, loop)
        _set_running_loop(None)
        handoff = False
        try:
            with interrupts:
                result = loop.run_until_complete(task)
        except BaseException:
            if not task.done():
                # Stopped halfway (a second Ctrl-C, say): cancel the task, and let a
                # thread of the loop's own see the cancellation through, as it would have.
                task.cancel()
                handoff = True
            elif not task.cancelled():
                task.exception()  # seen: it is raised here
            if interrupts.count:
                raise KeyboardInterrupt from None
            raise
        finally:
            _set_running_loop(outer)
            self._leave(loop, handoff=handoff)
        if interrupts.count:
            raise KeyboardInterrupt
        return result

    def _leave(self, loop: asyncio.AbstractEventLoop, *, handoff: bool) -> None:
        """The end of a call that ran the loop: let it rest, or give it a thread."""
        with self._lock:
            closing = self._loop is not loop  # closed during the call
            if not closing:
                self._driver = None
                if handoff or self._handoff or _busy(loop):
                    self._handoff = False
                    if self._finalizer is not None:
                        self._finalizer.detach()
                        self._finalizer = None
                    thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                    thread.start()
                    self._thread = thread
        if closing:
            loop.close()


class _Interrupts:
    """On the main thread, while the loop runs there: Ctrl-C cancels `task` (asyncio.run's way).

    Installed only over Python's default SIGINT handler, as `asyncio.Runner` does.
    """

    __slots__ = ("count", "installed", "loop", "task")

    def __init__(self, task: asyncio.Task[Any], loop: asyncio.AbstractEventLoop) -> None:
        self.task, self.loop = task, loop
        self.count = 0
        self.installed = False

    def __enter__(self) -> None:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            signal.signal(signal.SIGINT, self._on_sigint)
            self.installed = True

    def __exit__(self, *exc_info: object) -> None:
        if self.installed:
            previous = signal.signal(signal.SIGINT, signal.default_int_handler)
            if previous != self._on_sigint:  # set by the call meanwhile: theirs stays
                signal.signal(signal.SIGINT, previous)

    def _on_sigint(self, signum: int, frame: object) -> None:
        self.count += 1
        if self.count > 1:
            raise KeyboardInterrupt
        if not self.task.done():  # done: the call raises once it has returned
            self.task.cancel()
            self.loop.call_soon_threadsafe(_nothing)  # wakes a loop waiting in select()


def _nothing() -> None:
    pass


def _busy(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether anything on `loop` may need it to run before the next blocking call.

    Anything scheduled (a callback, a live timer), a watched file descriptor
    besides the loop's own wake-up socket (a connection, a subprocess's pipes),
    or a task not done. A loop of a kind this cannot see into counts as busy.
    """
    try:
        ready = loop._ready  # type: ignore[attr-defined]
        timers = loop._scheduled  # type: ignore[attr-defined]
        watched = len(loop._selector.get_map())  # type: ignore[attr-defined]
    except AttributeError:
        return True
    if ready or watched > 1 or any(not timer.cancelled() for timer in timers):
        return True
    return bool(asyncio.all_tasks(loop))


def _close_resting(loop: asyncio.AbstractEventLoop) -> None:
    if not loop.is_running() and not loop.is_closed():
        loop.close()


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
    the thread running the loop (the caller's own, or the loop's thread:
    see `LoopThread`) when the calling task is the only task on that loop
    and the function's last call took at most `ON_LOOP_LIMIT`.

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
