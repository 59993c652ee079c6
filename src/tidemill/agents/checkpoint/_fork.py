"""Time travel: a new thread that starts from one record of another thread's history."""

from __future__ import annotations

import secrets

from tidemill.agents.checkpoint._base import Checkpointer
from tidemill.agents.checkpoint._compact import fold_snapshot
from tidemill.errors import InvalidOption, JournalConflict

__all__ = ["HistoryUnavailable", "fork_thread"]


class HistoryUnavailable(InvalidOption):
    """The record asked for is not in the thread's journal (any more).

    Raised by `fork_thread` for a seq before the thread's first record (a
    compacted prefix, folded into the snapshot that starts the journal) or
    after its last one. A `ConfigurationError` and a `ValueError`.

    Attributes:
        thread_id: The thread.
        seq: The seq asked for.
        available: The first and last seq still stored, or None for an empty thread.
    """

    def __init__(self, thread_id: str, seq: int, available: tuple[int, int] | None) -> None:
        if available is None:
            message = f"Thread {thread_id!r} has no records to fork from."
            hint = "Check the thread id; threads() lists the stored ones."
        else:
            first, last = available
            message = (
                f"Record {seq} of thread {thread_id!r} was compacted into the snapshot at seq "
                f"{first}; records {first} to {last} are available."
                if seq < first
                else f"Thread {thread_id!r} has no record {seq}: records {first} to {last} are "
                "available."
            )
            hint = (
                f"Fork at a seq from {first} to {last} (history() lists them); seq {first} "
                "holds the state as of every record before it."
                if seq < first
                else f"Fork at a seq from {first} to {last}; history() lists them."
            )
        super().__init__(
            message,
            hint=hint,
            context={"thread_id": thread_id, "seq": seq, "available": list(available or ())},
        )
        self.thread_id = thread_id
        self.seq = seq
        self.available = available


async def fork_thread(
    checkpointer: Checkpointer, thread_id: str, *, at: int, new_thread_id: str | None = None
) -> str:
    """Start a new thread holding `thread_id`'s state as of its record `at`.

    The new thread's first record is a `ThreadSnapshot` of the fold of
    records up to `at` (with `forked_from` and `forked_at` set), at seq 1;
    the two threads then go on independently. A fork of a thread paused for
    approval is paused on the same calls. Works on any `Checkpointer`.

    Args:
        checkpointer: Where both threads are kept.
        thread_id: The thread to fork.
        at: The seq of the record whose state the fork starts from: one of
            the records `history()` lists.
        new_thread_id: The new thread's id; a fresh one when None.

    Returns:
        The new thread's id.

    Raises:
        HistoryUnavailable: When `at` is not one of the stored records.
        InvalidOption: When `new_thread_id` already has records.

    Examples:
        >>> import asyncio
        >>> from tidemill.agents.checkpoint import MemoryCheckpointer
        >>> from tidemill.agents.journal import RunFinished
        >>> saver = MemoryCheckpointer()
        >>> events = [RunFinished(output=1), RunFinished(output=2)]
        >>> _ = asyncio.run(saver.append("t", events, after=0))
        >>> fork = asyncio.run(fork_thread(saver, "t", at=1, new_thread_id="t2"))
        >>> [(r.seq, r.event.kind, r.event.output) for r in asyncio.run(saver.read(fork))]
        [(1, 'snapshot', 1)]
    """
    records = await checkpointer.read(thread_id)
    if not records:
        raise HistoryUnavailable(thread_id, at, None)
    first, last = records[0].seq, records[-1].seq
    if not first <= at <= last:
        raise HistoryUnavailable(thread_id, at, (first, last))
    snapshot = fold_snapshot(thread_id, ((r.seq, r.event) for r in records if r.seq <= at))
    snapshot = snapshot.model_copy(update={"forked_from": thread_id, "forked_at": at})
    target = new_thread_id or f"{thread_id}:fork-{secrets.token_hex(6)}"
    try:
        await checkpointer.append(target, [snapshot], after=0)
    except JournalConflict:
        raise InvalidOption(
            f"Cannot fork into thread {target!r}: it already has records.",
            hint="Pass another new_thread_id, or None for a fresh one.",
            context={"thread_id": target},
        ) from None
    return target
