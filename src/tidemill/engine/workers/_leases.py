"""`Leases`: the claims a worker holds, renewed while their jobs run.

Every third of the lease, one transaction extends the leases of every job
the worker holds. A job whose lease could not be extended (another worker
took it over after this one stalled, or its run was cancelled) is marked
lost, and its step is cancelled if it is still running. Only the step is
cancelled, never the writing of its outcome: a renewal that reads the store
just after the outcome was recorded finds the job no longer running, and
that must not throw away what the recording claimed next.

The store sets each lease `lease` seconds after the database's clock; the
worker counts it on its monotonic clock from when it sent the claim or the
renewal (see `Lease`). No wall clock is read for a lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

from tidemill.engine._lease import Lease
from tidemill.errors import StoreError
from tidemill.store import JobRow, Store, Tx

__all__ = ["Leases"]

log = logging.getLogger("tidemill.worker")


class Leases:
    """The leases of one worker's jobs.

    Args:
        store: The store the claims are in.
        worker: The worker's id, as its claims name it.
        lease: Seconds a claim lasts without renewal.
    """

    def __init__(self, store: Store, worker: str, lease: float) -> None:
        self.store = store
        self.worker = worker
        self.lease = lease
        self.margin = min(1.0, lease / 10)
        self._held: dict[int, Lease] = {}
        self._steps: dict[int, asyncio.Task[Any]] = {}
        self._abandoned: dict[int, tuple[int, float]] = {}

    def take(self, job: JobRow, sent: float) -> Lease:
        """Start holding `job`, claimed by a transaction sent at `sent` (`time.monotonic`)."""
        lease = Lease(job.id, job.epoch, sent + self.lease, self._confirm, margin=self.margin)
        self._held[job.id] = lease
        return lease

    def release(self, lease: Lease) -> None:
        """Stop holding the job (it was recorded, or lost)."""
        if self._held.get(lease.job_id) is lease:
            del self._held[lease.job_id]

    @contextlib.contextmanager
    def step(self, lease: Lease, task: asyncio.Task[Any]) -> Iterator[None]:
        """While the block runs, losing `lease` cancels `task` (the job's step)."""
        self._steps[lease.job_id] = task
        try:
            yield
        finally:
            if self._steps.get(lease.job_id) is task:
                del self._steps[lease.job_id]

    async def abandon(self, job: JobRow, *, retry_in: float) -> None:
        """Queue `job` again, due in `retry_in` seconds: its outcome could not be recorded.

        A worker never takes over a job it holds itself (it may still be
        running it), so without this a job whose recording failed would wait
        for another worker. When the store refuses this too, it is tried
        again with each renewal until it is done or the job is someone else's.
        """
        self._abandoned[job.id] = (job.epoch, time.time() + retry_in)
        await self._requeue()

    async def _requeue(self) -> None:
        abandoned = dict(self._abandoned)

        def release(tx: Tx) -> None:
            for job_id, (epoch, run_at) in abandoned.items():
                tx.release_job(job_id, epoch, run_at)

        try:
            await self.store.transact(release)
        except StoreError as exc:
            log.warning("could not queue %d job(s) again, will retry: %s", len(abandoned), exc)
            return
        for job_id in abandoned:
            self._abandoned.pop(job_id, None)

    async def renew_forever(self) -> None:
        """Extend the held leases every third of the lease, until cancelled."""
        while True:
            await asyncio.sleep(self.lease / 3)
            await self.renew()
            if self._abandoned:
                await self._requeue()

    async def renew(self) -> None:
        """Extend every held lease once; mark those that are gone, and stop their steps."""
        held = dict(self._held)
        if not held:
            return
        until = time.monotonic() + self.lease
        epochs = {job_id: lease.epoch for job_id, lease in held.items()}
        try:
            kept = await self.store.transact(
                partial(_renew, worker=self.worker, held=epochs, lease=self.lease)
            )
        except StoreError as exc:
            log.warning("lease renewal failed: %s", exc)
            return
        for job_id, lease in held.items():
            if job_id in kept:
                lease.until = until
                continue
            if self._held.get(job_id) is not lease:
                continue  # recorded meanwhile: its job is not running any more
            lease.lost = True
            step = self._steps.get(job_id)
            if step is not None:
                step.cancel()

    async def _confirm(self, lease: Lease) -> float | None:
        """Extend one lease now; its new end, or None when it is gone (or unknown)."""
        until = time.monotonic() + self.lease
        try:
            kept = await self.store.transact(
                partial(
                    _renew, worker=self.worker, held={lease.job_id: lease.epoch}, lease=self.lease
                )
            )
        except StoreError as exc:
            # Unsure is not held: starting the effect could run it twice.
            log.warning("job %s: could not confirm its lease (%s)", lease.job_id, exc)
            return None
        return until if lease.job_id in kept else None


def _renew(tx: Tx, *, worker: str, held: dict[int, int], lease: float) -> set[int]:
    return tx.renew(worker, held, lease=lease)
