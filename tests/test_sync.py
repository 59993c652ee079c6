"""`LoopThread`: a loop that rests on the caller's thread, and goes to a thread of its own.

While nothing else needs it, a blocking call runs the loop on the caller's
thread. Work a call leaves on the loop (a task, a timer, a connection) keeps
running in a thread of the loop's own, as does a loop that several threads
call at once or that a call was interrupted on. Waits that would hang on a
broken design have timeouts; nothing here is timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any

import pytest

from tidemill._sync import LoopThread
from tidemill.errors import ConfigurationError

WAIT = 10.0
"""Seconds a test waits for something that a correct design makes happen at once."""

NAME = "test-loop"


@pytest.fixture
def sync() -> Iterator[LoopThread]:
    loop_thread = LoopThread(NAME)
    yield loop_thread
    loop_thread.close()


async def here() -> tuple[str, asyncio.AbstractEventLoop]:
    return threading.current_thread().name, asyncio.get_running_loop()


def loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == NAME]


def in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Start `work()` in a thread; its result or exception lands in the list."""
    box: list[object] = []

    def target() -> None:
        try:
            box.append(work())
        except BaseException as exc:  # handed to the test
            box.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    return worker, box


def joined(worker: threading.Thread, box: list[object]) -> object:
    worker.join(WAIT)
    assert not worker.is_alive(), f"still running after {WAIT} s: a deadlock"
    (outcome,) = box
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def give_it_a_thread(sync: LoopThread) -> None:
    """Leave a timer on the loop, so that it keeps a thread of its own from now on."""

    async def leave_a_timer() -> None:
        asyncio.get_running_loop().call_later(WAIT, lambda: None)

    sync.run(leave_a_timer())
    assert len(loop_threads()) == 1


# -- the loop at rest: on the caller's thread ------------------------------------------


def test_a_call_runs_the_loop_on_the_callers_thread_and_leaves_no_thread(
    sync: LoopThread,
) -> None:
    first_thread, loop = sync.run(here())
    assert first_thread == threading.current_thread().name
    assert not loop_threads()

    async def make_future() -> asyncio.Future[str]:
        return asyncio.get_running_loop().create_future()

    async def resolve(future: asyncio.Future[str]) -> str:
        asyncio.get_running_loop().call_soon(future.set_result, "kept")
        return await future

    # What one call makes on the loop, the next can use: it is the same loop.
    future = sync.run(make_future())
    assert sync.run(resolve(future)) == "kept"
    assert sync.run(here()) == (first_thread, loop)


def test_errors_reach_the_caller_and_the_loop_rests_after(sync: LoopThread) -> None:
    async def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        sync.run(fail())
    assert sync.run(here())[0] == threading.current_thread().name
    assert not loop_threads()


async def test_inside_a_running_loop_a_call_runs_nested_and_gives_the_loop_back(
    sync: LoopThread,
) -> None:
    outer, task = asyncio.get_running_loop(), asyncio.current_task()
    _, inner = sync.run(here())
    assert inner is not outer
    assert asyncio.get_running_loop() is outer
    assert asyncio.current_task() is task


def test_a_stream_runs_on_the_callers_thread_and_closes_when_left_early(
    sync: LoopThread,
) -> None:
    closed = threading.Event()

    async def names() -> AsyncIterator[str]:
        try:
            for _ in range(3):
                yield threading.current_thread().name
        finally:
            closed.set()

    for name in sync.iterate(names()):
        assert name == threading.current_thread().name
        break
    assert closed.is_set()
    assert not loop_threads()


# -- work left on the loop: a thread of its own ------------------------------------------


Ask = Callable[[int], Coroutine[Any, Any, tuple[int, str]]]


async def leave_a_server() -> tuple[Ask, asyncio.Task[None]]:
    """An MCP-like session: a task on this loop that answers requests until cancelled."""
    requests: asyncio.Queue[tuple[int, asyncio.Future[tuple[int, str]]]] = asyncio.Queue()

    async def serve() -> None:
        while True:
            value, answer = await requests.get()
            answer.set_result((2 * value, threading.current_thread().name))

    server = asyncio.get_running_loop().create_task(serve())

    async def ask(value: int) -> tuple[int, str]:
        answer: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        await requests.put((value, answer))
        return await answer

    return ask, server


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def leave_a_timer(fired: threading.Event) -> None:
    asyncio.get_running_loop().call_later(0.01, fired.set)


async def leave_a_connection(fired: threading.Event, peer: socket.socket) -> asyncio.Transport:
    """An open connection, as an HTTP client keeps: its data arrives between calls."""

    class Reader(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            fired.set()

    transport, _ = await asyncio.get_running_loop().connect_accepted_socket(Reader, peer)
    return transport


async def close(transport: asyncio.Transport) -> None:
    transport.close()
    await asyncio.sleep(0)  # its connection_lost


def test_a_task_left_on_the_loop_serves_other_threads_between_calls(sync: LoopThread) -> None:
    ask, server = sync.run(leave_a_server())
    (thread,) = loop_threads()
    _, loop = sync.run(here())  # now a hop to that thread and back
    # From a thread that is not the caller, while no blocking call runs:
    asked = asyncio.run_coroutine_threadsafe(ask(21), loop)
    assert asked.result(WAIT) == (42, NAME)
    assert sync.run(ask(1)) == (2, NAME)
    assert loop_threads() == [thread]
    sync.run(stop(server))


@pytest.mark.parametrize("leave", ["timer", "connection"])
def test_a_timer_or_a_connection_left_on_the_loop_is_served_between_calls(
    sync: LoopThread, leave: str
) -> None:
    fired = threading.Event()
    mine, peer = socket.socketpair()
    with mine, peer:
        if leave == "timer":
            sync.run(leave_a_timer(fired))
            assert fired.wait(WAIT)  # with no blocking call running
        else:
            transport = sync.run(leave_a_connection(fired, peer))
            mine.sendall(b"hello")
            assert fired.wait(WAIT)
            sync.run(close(transport))
        assert len(loop_threads()) == 1


def test_a_builders_loop_bound_resource_keeps_working_from_another_thread(
    sync: LoopThread,
) -> None:
    # As `.mcp()` connects on the builder's loop, then an agent on another thread uses it.
    ask, server = sync.run(leave_a_server())
    worker, box = in_thread(lambda: sync.run(ask(5)))
    assert joined(worker, box) == (10, NAME)
    sync.run(stop(server))


# -- several threads -------------------------------------------------------------------


def test_blocking_calls_from_several_threads_run_together(sync: LoopThread) -> None:
    started = threading.Event()
    gate: list[asyncio.Event] = []

    async def first() -> str:
        gate.append(asyncio.Event())
        started.set()
        await gate[0].wait()  # only the second call opens it
        return "first"

    async def second() -> str:
        gate[0].set()
        return "second"

    worker, box = in_thread(lambda: sync.run(first()))
    assert started.wait(WAIT)
    assert sync.run(second()) == "second"
    assert joined(worker, box) == "first"


def test_a_call_that_outlasts_the_one_running_the_loop_finishes_in_the_loops_thread(
    sync: LoopThread,
) -> None:
    started, joined_in = threading.Event(), threading.Event()
    first_gate: list[asyncio.Event] = []
    second_gate: list[asyncio.Event] = []

    async def first() -> str:
        first_gate.append(asyncio.Event())
        started.set()
        await first_gate[0].wait()
        return "first"

    async def second() -> str:
        second_gate.append(asyncio.Event())
        joined_in.set()
        first_gate[0].set()
        await second_gate[0].wait()
        return threading.current_thread().name

    runner, first_box = in_thread(lambda: sync.run(first()))
    assert started.wait(WAIT)
    joiner, second_box = in_thread(lambda: sync.run(second()))
    assert joined_in.wait(WAIT)
    assert joined(runner, first_box) == "first"  # returned while the second call waits
    assert joiner.is_alive()
    (thread,) = loop_threads()
    _, loop = sync.run(here())
    loop.call_soon_threadsafe(second_gate[0].set)
    assert joined(joiner, second_box) == NAME
    assert loop_threads() == [thread]


# -- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize("threaded", [False, True], ids=["at rest", "threaded"])
def test_a_blocking_call_on_the_thread_running_the_loop_is_refused(
    sync: LoopThread, threaded: bool
) -> None:
    if threaded:
        give_it_a_thread(sync)

    async def inner() -> str:
        return "never"

    async def nested() -> str:
        with pytest.raises(ConfigurationError, match="would wait for itself"):
            sync.run(inner())  # closed, never left un-awaited
        with pytest.raises(ConfigurationError, match="would wait for itself"):
            next(iter(sync.iterate(agen())))
        return "refused"

    async def agen() -> AsyncIterator[int]:
        yield 1

    assert sync.run(nested()) == "refused"


# -- Ctrl-C ----------------------------------------------------------------------------


def main_thread_waits() -> bool:
    """Whether the main thread is blocked waiting for a lock (a blocking call's result)."""
    main = threading.main_thread().ident
    assert main is not None
    frame = sys._current_frames().get(main)
    return frame is not None and frame.f_code.co_name == "wait"


def until(condition: Callable[[], bool]) -> None:
    for _ in range(int(WAIT / 0.001)):
        if condition():
            return
        time.sleep(0.001)
    raise AssertionError(f"not so after {WAIT} s")


def ctrl_c() -> None:
    main = threading.main_thread().ident
    assert main is not None
    signal.pthread_kill(main, signal.SIGINT)


@pytest.mark.parametrize("threaded", [False, True], ids=["at rest", "threaded"])
def test_ctrl_c_cancels_the_call_and_raises_keyboard_interrupt(
    sync: LoopThread, threaded: bool
) -> None:
    assert threading.current_thread() is threading.main_thread()
    if threaded:
        give_it_a_thread(sync)
    cancelled = threading.Event()

    async def wait_for_ever() -> None:
        if threaded:  # once the caller waits for the result, as a Ctrl-C finds it
            await asyncio.to_thread(until, main_thread_waits)
        ctrl_c()
        try:
            await asyncio.sleep(WAIT)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(KeyboardInterrupt):
        sync.run(wait_for_ever())
    assert cancelled.wait(WAIT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert sync.run(here())[0] == (NAME if threaded else threading.current_thread().name)


def test_a_second_ctrl_c_raises_at_once_and_the_cancel_finishes_in_a_thread(
    sync: LoopThread,
) -> None:
    assert threading.current_thread() is threading.main_thread()
    second = threading.Event()

    async def ignore_the_first() -> None:
        ctrl_c()
        with contextlib.suppress(asyncio.CancelledError):  # not yet
            await asyncio.sleep(WAIT)
        asyncio.get_running_loop().call_soon(ctrl_c)  # pressed again while this waits
        try:
            await asyncio.sleep(WAIT)
        except asyncio.CancelledError:
            second.set()
            raise

    with pytest.raises(KeyboardInterrupt):
        sync.run(ignore_the_first())
    assert second.wait(WAIT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert sync.run(here())[0] == NAME


def test_ctrl_c_as_the_call_ends_raises_once_it_has_returned(sync: LoopThread) -> None:
    async def finish() -> str:
        task = asyncio.current_task()
        assert task is not None
        task.add_done_callback(lambda _: ctrl_c())  # after the result, before the return
        return "finished"

    with pytest.raises(KeyboardInterrupt):
        sync.run(finish())
    assert sync.run(here())[0] == threading.current_thread().name  # the loop rests
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_sigint_handler_of_the_callers_own_is_left_alone(sync: LoopThread) -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:

        async def press() -> str:
            ctrl_c()
            await asyncio.sleep(0)
            return "finished"

        assert sync.run(press()) == "finished"
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


# -- closing -----------------------------------------------------------------------------


@pytest.mark.parametrize("threaded", [False, True], ids=["at rest", "threaded"])
def test_close_stops_the_loop_and_its_thread_and_a_later_call_makes_a_new_one(
    threaded: bool,
) -> None:
    sync = LoopThread(NAME)
    if threaded:
        give_it_a_thread(sync)
    _, loop = sync.run(here())
    sync.close()
    assert loop.is_closed()
    assert not loop_threads()
    _, again = sync.run(here())
    assert again is not loop
    sync.close()
    sync.close()  # twice does nothing


def test_an_owner_dropped_without_close_leaves_no_open_loop() -> None:
    sync = LoopThread(NAME)
    _, loop = sync.run(here())
    del sync
    gc.collect()
    assert loop.is_closed()


def test_close_during_another_threads_call_lets_it_finish(sync: LoopThread) -> None:
    started, closed = threading.Event(), threading.Event()
    loops: list[asyncio.AbstractEventLoop] = []

    async def outlive_close() -> str:
        loops.append(asyncio.get_running_loop())
        started.set()
        await asyncio.to_thread(closed.wait, WAIT)
        return "finished"

    worker, box = in_thread(lambda: sync.run(outlive_close()))
    assert started.wait(WAIT)
    sync.close()
    # Meanwhile a call from here makes a new loop, and runs it on this thread.
    name, loop = sync.run(here())
    assert name == threading.current_thread().name
    assert loop is not loops[0]
    closed.set()
    assert joined(worker, box) == "finished"
    assert loops[0].is_closed()
    assert not loop.is_closed()
    assert not loop_threads()
