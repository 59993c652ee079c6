"""Bounded journals: when a thread outgrows `max_history`, its older records become one snapshot.

Shared by every backend, so they agree on when to compact and on what the
snapshot holds; each backend only does the I/O, atomically.

Seqs across compaction: a record's seq never changes and is never reused.
Compaction replaces records `first .. u` by one `ThreadSnapshot` at seq `u`
(the last record it covers), so the thread then reads `u, u + 1, ..., last`,
still without gaps, and its last seq is what it was: an appender that read
before the compaction appends `after=last` as before, and one whose `after`
is stale gets `JournalConflict` as before. `read(after=k)` with `k` inside the
compacted prefix returns the snapshot first; folding it replaces the state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from tidemill.agents.checkpoint._base import Checkpointer
from tidemill.agents.journal import GraphCheckpoint, GraphWrites, JournalEvent, ThreadSnapshot
from tidemill.agents.journal import ThreadState as _ThreadState
from tidemill.errors import InvalidOption

__all__ = [
    "MIN_HISTORY",
    "BoundedCheckpointer",
    "checked_max_history",
    "compaction_point",
    "fold_snapshot",
]

MIN_HISTORY = 4
"""The smallest `max_history`: a snapshot, a model turn, its tool result and the next turn."""


@runtime_checkable
class BoundedCheckpointer(Checkpointer, Protocol):
    """A `Checkpointer` that says how many records it keeps per thread (see `max_history`)."""

    max_history: int | None
    """The most records a thread keeps, or None for all of them."""


def checked_max_history(max_history: int | None) -> int | None:
    """`max_history` as given, once it is None or a whole number of at least `MIN_HISTORY`.

    Raises:
        InvalidOption: For anything else (a `ConfigurationError` and a `ValueError`).

    Examples:
        >>> checked_max_history(50)
        50
        >>> try:
        ...     checked_max_history(2)
        ... except ValueError as exc:
        ...     print(type(exc).__name__, exc.hint[:37])
        InvalidOption A compacted thread needs room for its
    """
    if max_history is None:
        return None
    if isinstance(max_history, bool) or not isinstance(max_history, int):
        raise InvalidOption(
            f"max_history must be a whole number of records, not {max_history!r}.",
            hint=f"Pass an int of at least {MIN_HISTORY}, or None to keep every record.",
        )
    if max_history < MIN_HISTORY:
        raise InvalidOption(
            f"max_history must be at least {MIN_HISTORY}, not {max_history}.",
            hint=f"A compacted thread needs room for its snapshot and the records after it: "
            f"use {MIN_HISTORY} or more (50 is a good default), or None to keep every record.",
            context={"max_history": max_history},
        )
    return max_history


def compaction_point(first: int, last: int, max_history: int | None) -> int | None:
    """The seq a snapshot goes at when records `first .. last` are too many, else None.

    Compacting down to `max_history // 2 + 1` records, not to `max_history`,
    means a long thread compacts once every half `max_history` appends
    instead of at every one.

    Examples:
        >>> compaction_point(1, 5, 5), compaction_point(1, 6, 5), compaction_point(4, 9, 5)
        (None, 4, 7)
    """
    if max_history is None or last - first + 1 <= max_history:
        return None
    return last - (max_history // 2 + 1) + 1


def fold_snapshot(thread_id: str, records: Iterable[tuple[int, JournalEvent]]) -> ThreadSnapshot:
    """The snapshot of a thread's records `(seq, event)`, oldest first (a snapshot may lead).

    The LangGraph events among them are kept in the snapshot, and a fork's
    origin (`forked_from`, `forked_at`) is carried over from an earlier snapshot.

    Examples:
        >>> from tidemill.agents.journal import RunFinished
        >>> snap = fold_snapshot("t", [(1, RunFinished(output="a")), (2, RunFinished(output="b"))])
        >>> snap.kind, snap.status, snap.output, snap.records
        ('snapshot', 'finished', 'b', 2)
    """
    state = _ThreadState(thread_id)
    graph: list[GraphCheckpoint | GraphWrites] = []
    origin: dict[str, object] = {}
    for seq, event in records:
        if isinstance(event, ThreadSnapshot):
            graph = list(event.graph)
            origin = {"forked_from": event.forked_from, "forked_at": event.forked_at}
        elif isinstance(event, GraphCheckpoint | GraphWrites):
            graph.append(event)
        state.apply(seq, event)
    return state.snapshot(graph=tuple(graph), **origin)
