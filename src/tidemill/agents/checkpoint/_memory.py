"""`MemoryCheckpointer`: journals in a dict, for tests and single processes."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from tidemill.agents.checkpoint._base import decode_event, encode_event
from tidemill.agents.checkpoint._compact import checked_max_history, compaction_point, fold_snapshot
from tidemill.agents.journal import JournalEvent, JournalRecord
from tidemill.errors import JournalConflict

__all__ = ["MemoryCheckpointer"]


class MemoryCheckpointer:
    """Keeps journals in memory: fast, dependency-free, gone when the process ends.

    The default when an agent has no checkpointer, so approval pauses work
    out of the box within one process. Safe to share between threads.
    Events are kept as JSON, as the durable backends keep them: what works
    here works there, and a long-lived process holds bytes, not object graphs
    the garbage collector has to walk.

    Args:
        max_history: The most records a thread keeps. When an append would
            pass it, the thread's older records are folded into one
            `ThreadSnapshot` record (see `tidemill.agents.checkpoint`), in
            the same step; None (the default) keeps every record.

    Raises:
        InvalidOption: When `max_history` is below `MIN_HISTORY` (4).

    Examples:
        >>> import asyncio
        >>> from tidemill.agents.journal import RunFinished
        >>> saver = MemoryCheckpointer()
        >>> asyncio.run(saver.append("t", [RunFinished(output="hi")], after=0))
        1
        >>> [r.event.kind for r in asyncio.run(saver.read("t"))]
        ['finished']
    """

    def __init__(self, *, max_history: int | None = None) -> None:
        self.max_history = checked_max_history(max_history)
        """The most records a thread keeps, or None for all of them."""
        self._journals: dict[str, tuple[list[bytes], list[float]]] = {}
        """Each thread's events as JSON, and the Unix time each was written.

        Two flat lists, not a list of pairs: appending bytes and floats
        allocates nothing the garbage collector has to track.
        """
        self._first: dict[str, int] = {}
        """The seq of each compacted thread's first record (a snapshot); 1 when absent."""
        self._lock = threading.Lock()

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        """Append `events` after entry `after`; see `Checkpointer.append`."""
        if not events:
            return after
        payloads = [encode_event(event) for event in events]
        now = time.time()
        with self._lock:
            journal = self._journals.get(thread_id)
            if journal is None:
                if after != 0:
                    raise JournalConflict(thread_id, after)
                journal = self._journals[thread_id] = ([], [])
            stored, times = journal
            first = self._first.get(thread_id, 1)
            if first + len(stored) - 1 != after:
                raise JournalConflict(thread_id, after)
            stored += payloads
            times += [now] * len(payloads)
            last = after + len(payloads)
            point = compaction_point(first, last, self.max_history)
            if point is not None:
                self._compact(thread_id, first, point)
            return last

    def _compact(self, thread_id: str, first: int, point: int) -> None:
        """Fold records `first .. point` into a snapshot at `point`; the lock is held."""
        stored, times = self._journals[thread_id]
        covered = point - first + 1
        snapshot = fold_snapshot(
            thread_id,
            (
                (seq, decode_event(payload, thread_id=thread_id, seq=seq))
                for seq, payload in enumerate(stored[:covered], start=first)
            ),
        )
        stored[:covered] = [encode_event(snapshot)]
        times[:covered] = [times[covered - 1]]
        self._first[thread_id] = point

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        """Return the records after `after`, in order."""
        with self._lock:
            payloads, times = self._journals.get(thread_id, ([], []))
            first = self._first.get(thread_id, 1)
            start = max(after + 1, first)
            skip = start - first
            rows = list(zip(payloads[skip:], times[skip:], strict=True))
        return [
            JournalRecord(
                seq,
                decode_event(payload, thread_id=thread_id, seq=seq),
                datetime.fromtimestamp(created, UTC),
            )
            for seq, (payload, created) in enumerate(rows, start=start)
        ]

    async def threads(self) -> list[str]:
        """Return the known thread ids, sorted."""
        with self._lock:
            return sorted(self._journals)

    async def delete(self, thread_id: str) -> bool:
        """Drop a thread's journal."""
        with self._lock:
            self._first.pop(thread_id, None)
            return self._journals.pop(thread_id, None) is not None

    async def prune(self, *, older_than: timedelta) -> int:
        """Drop threads whose newest record is older than `older_than`."""
        limit = time.time() - older_than.total_seconds()
        with self._lock:
            old = [t for t, (_, times) in self._journals.items() if times and times[-1] < limit]
            for thread_id in old:
                del self._journals[thread_id]
                self._first.pop(thread_id, None)
            return len(old)

    async def aclose(self) -> None:
        """Nothing to release."""
