"""`Sweeper`: what a worker moves on when its time comes, with no polling per run.

Pending approvals whose timeout passed are resolved by their `on_timeout`;
steps whose sleep ended, or whose wait for an event reached its deadline,
end (`Transition.wake_due`). One sweep is a couple of indexed reads however
many runs wait, and the next sweep is timed to the earliest wait's end (at
most `poll` seconds away, so waits parked by other workers are seen too).
Once a minute a sweep also deletes the events sent to runs whose keep ran
out (`Tx.prune_signals`, a batch at a time), so that they do not pile up
in a store where no more events are sent.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from tidemill.engine.runs._scope import Definitions
from tidemill.engine.runs._transition import Transition
from tidemill.errors import StoreError
from tidemill.store import Store, Tx

if TYPE_CHECKING:
    from tidemill.engine._metrics import Metrics

__all__ = ["SIGNALS_EVERY", "Sweeper"]

SIGNALS_EVERY = 60.0
"""Seconds between two sweeps that delete expired events."""

log = logging.getLogger("tidemill.worker")


class Sweeper:
    """Sweeps a store's timed-out approvals and ended waits for one worker.

    Args:
        store: The store.
        defs: The flow definitions the worker shares.
        poll: The longest time between two sweeps (seconds).
        batch: The most waits one sweep ends; when it ends that many, the
            next sweep comes at once.
        metrics: Where the waits it ends are counted (`tidemill_waits_woken_total`).
    """

    def __init__(
        self,
        store: Store,
        defs: Definitions,
        *,
        poll: float,
        batch: int = 200,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.defs = defs
        self.poll = poll
        self.batch = batch
        self._at = 0.0  # monotonic time of the next sweep
        self._signals_at = 0.0  # monotonic time of the next deletion of expired events
        self.signals_pruned = 0
        """Expired events this sweeper deleted."""

    def due(self) -> bool:
        """Whether it is time to sweep."""
        return time.monotonic() >= self._at

    def seconds_left(self) -> float:
        """Seconds until the next sweep is due (0 when it is)."""
        return max(0.0, self._at - time.monotonic())

    def expect(self, due_at: float | None) -> None:
        """A wait ending at `due_at` (epoch seconds) was parked here: sweep by then."""
        if due_at is not None:
            self._at = min(self._at, time.monotonic() + max(0.0, due_at - time.time()))

    async def sweep(self) -> bool:
        """Sweep once; True when it moved a run on (jobs may be queued)."""
        prune = time.monotonic() >= self._signals_at

        def sweep(tx: Tx) -> tuple[int, float | None, bool, int]:
            now = time.time()
            change = Transition(tx, self.defs, now)
            expired = change.expire_approvals()
            woken = change.wake_due(self.batch)
            pruned = tx.prune_signals(now) if prune else 0
            return woken, tx.next_wait_due(), bool(expired or woken), pruned

        try:
            woken, next_due, moved, pruned = await self.store.transact(sweep)
        except StoreError as exc:
            log.warning("sweep failed, will retry: %s", exc)
            self._at = time.monotonic() + self.poll
            return False
        if prune:
            self.signals_pruned += pruned
            self._signals_at = time.monotonic() + SIGNALS_EVERY
        if self.metrics is not None:
            self.metrics.waits_woken(woken)
        wait = self.poll if next_due is None else min(self.poll, next_due - time.time())
        self._at = time.monotonic() + (0.0 if woken >= self.batch else max(0.0, wait))
        return moved
