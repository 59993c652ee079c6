"""Checks of racing appends: on one event loop, and from OS threads with loops of their own.

Of appends racing with the same `after`, exactly one wins and the others
raise `JournalConflict`; appends from many OS threads at once all land.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence

from tidemill.agents.checkpoint._base import Checkpointer
from tidemill.agents.checkpoint.conformance._harness import (
    assert_events,
    assert_seqs,
    checked_append,
    checked_read,
    marker,
    new_prefix,
)
from tidemill.errors import JournalConflict

__all__ = [
    "check_appends_from_os_threads",
    "check_concurrent_appends_one_wins",
    "check_os_thread_race_one_wins",
]


_THREAD_TIMEOUT = 30.0
"""Seconds the OS-thread checks wait for their threads."""

_Job = Callable[[Callable[[], None]], Awaitable[object]]
"""Work for one OS thread: given `start`, which it calls once ready to race."""


def _run_in_threads(jobs: Sequence[_Job]) -> list[object]:
    """Run each job on its own OS thread and event loop; return results or exceptions.

    Each job gets a `start` function to call once it is ready: it returns
    when every job has called it, so the jobs' appends begin together.
    """
    barrier = threading.Barrier(len(jobs))
    results: list[object] = [None] * len(jobs)
    started = [False] * len(jobs)

    def work(index: int) -> None:
        def start() -> None:
            barrier.wait(_THREAD_TIMEOUT)
            started[index] = True

        async def drive() -> object:
            return await jobs[index](start)

        try:
            results[index] = asyncio.run(drive())
        except BaseException as exc:  # reported to the check, which fails on it
            results[index] = exc
            if not started[index]:
                barrier.abort()  # the others would wait for this job forever

    threads = [
        threading.Thread(target=work, args=(i,), name=f"conformance-{i}", daemon=True)
        for i in range(len(jobs))
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + _THREAD_TIMEOUT
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [thread.name for thread in threads if thread.is_alive()]
    assert not stuck, f"OS threads {stuck} did not finish within {_THREAD_TIMEOUT} s"
    return results


async def check_concurrent_appends_one_wins(checkpointer: Checkpointer) -> None:
    """Of several appends racing with the same `after` on one event loop, exactly one wins.

    The others raise `JournalConflict`, and only the winner's events are stored.
    Tried on a new thread (`after=0`) and on an existing one.
    """
    prefix = new_prefix()
    for thread_id, after in ((prefix + "new", 0), (prefix + "existing", 2)):
        if after:
            await checked_append(checkpointer, thread_id, [marker("a"), marker("b")], after=0)
        writers = 8
        outcomes = await asyncio.gather(
            *(
                checkpointer.append(thread_id, [marker(f"w{i}"), marker(i)], after=after)
                for i in range(writers)
            ),
            return_exceptions=True,
        )
        _assert_one_winner(outcomes, thread_id, after + 2)
        records = await checked_read(checkpointer, thread_id)
        assert_seqs(records, 1, thread_id)
        assert len(records) == after + 2, (
            f"{writers} racing appends of 2 events left {len(records)} records in {thread_id!r}, "
            f"expected {after + 2}"
        )
        winner = next(i for i, outcome in enumerate(outcomes) if not isinstance(outcome, Exception))
        tail = [r.event for r in records[after:]]
        assert tail == [marker(f"w{winner}"), marker(winner)], (
            f"thread {thread_id!r} holds {tail!r}, not the events of the winning append"
        )


def _assert_one_winner(outcomes: Sequence[object], thread_id: str, last: int) -> None:
    wins = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    others = [
        outcome
        for outcome in outcomes
        if isinstance(outcome, BaseException) and not isinstance(outcome, JournalConflict)
    ]
    assert not others, (
        f"racing appends to {thread_id!r} raised {[f'{type(e).__name__}: {e}' for e in others]}; "
        "losers must raise JournalConflict"
    )
    assert len(wins) == 1, (
        f"{len(wins)} of {len(outcomes)} racing appends to {thread_id!r} succeeded; "
        "exactly one must"
    )
    assert wins[0] == last, f"the winning append returned {wins[0]!r}, expected {last}"


async def check_appends_from_os_threads(checkpointer: Checkpointer) -> None:
    """Appends from several OS threads, each with its own event loop, all land.

    Each thread appends to its own journal, one event at a time and then a
    batch, all at the same moment as the others.
    """
    prefix = new_prefix()
    workers, each = 6, 5

    def job(index: int) -> _Job:
        async def append_all(start: Callable[[], None]) -> object:
            thread_id = f"{prefix}{index}"
            await checkpointer.read(thread_id)  # open connections before the start
            start()
            for seq in range(each):
                await checkpointer.append(thread_id, [marker(f"{index}.{seq}")], after=seq)
            return await checkpointer.append(
                thread_id, [marker(f"{index}.x"), marker(f"{index}.y")], after=each
            )

        return append_all

    results = await asyncio.to_thread(_run_in_threads, [job(i) for i in range(workers)])
    errors = [f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)]
    assert not errors, f"appends from OS threads failed: {errors}"
    for index in range(workers):
        thread_id = f"{prefix}{index}"
        records = await checked_read(checkpointer, thread_id)
        expected = [marker(f"{index}.{seq}") for seq in range(each)]
        expected += [marker(f"{index}.x"), marker(f"{index}.y")]
        assert_seqs(records, 1, thread_id)
        assert_events(records, expected, thread_id)


async def check_os_thread_race_one_wins(checkpointer: Checkpointer) -> None:
    """Of appends racing from several OS threads on one thread, exactly one wins.

    Each OS thread runs its own event loop, as separate workers do, and all
    append with the same `after`.
    """
    prefix = new_prefix()
    for thread_id, after in ((prefix + "new", 0), (prefix + "existing", 1)):
        if after:
            await checked_append(checkpointer, thread_id, [marker("first")], after=0)

        def job(index: int, thread_id: str = thread_id, after: int = after) -> _Job:
            async def race(start: Callable[[], None]) -> object:
                await checkpointer.read(thread_id)
                start()
                return await checkpointer.append(
                    thread_id, [marker(f"w{index}"), marker(index)], after=after
                )

            return race

        outcomes = await asyncio.to_thread(_run_in_threads, [job(i) for i in range(6)])
        _assert_one_winner(outcomes, thread_id, after + 2)
        records = await checked_read(checkpointer, thread_id)
        assert_seqs(records, 1, thread_id)
        assert len(records) == after + 2, (
            f"racing appends from OS threads left {len(records)} records in {thread_id!r}, "
            f"expected {after + 2}"
        )
