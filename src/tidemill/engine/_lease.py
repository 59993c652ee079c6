"""`Lease`: a worker's claim on one job, checked before each effect the job has.

A worker holds a job until its lease runs out (`lease_until`, renewed every
third of the lease while the job runs). A worker that stalls (a GC pause, a
frozen VM, SIGSTOP) longer than that may find, when it wakes, that another
worker took the job over and perhaps finished it. Its late writes are
refused (they are fenced by the claim's epoch), but what it starts before
writing anything (a script, a tool call, a model call) would run a second
time. So the worker asks `Lease.hold` right before each of those: while the
lease is comfortably within its time this costs a clock read; near or past
its end it asks the store, which either extends it (nobody took the job) or
says it is gone (`LeaseLost`, and nothing is started).

Two clocks, each for what it can answer. The store sets and judges leases on
the database's clock, so that no worker's clock decides when a job is taken
over. The worker counts its lease on its own monotonic clock, which no change
of the wall clock moves, from the moment it *sent* the claim or renewal: the
database set the lease's end `lease` seconds after a moment no earlier than
that, so the worker's count ends first, and a lease it trusts without asking
is one the database still holds for it.

What is left is a stall after the check and before the effect: a window of
microseconds in the worker's own code, which no check can close. A script
or tool that must act exactly once uses its idempotency key
(`current_step().idempotency_key`, `TIDEMILL_IDEMPOTENCY_KEY`) with the
system it acts on.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tidemill.errors import LeaseLost

__all__ = ["Lease"]


@dataclass(slots=True, eq=False)
class Lease:
    """One job's claim as its worker knows it.

    Attributes:
        job_id: The job.
        epoch: The claim's epoch (each claim of the job increments it).
        until: When the lease runs out at the latest, on this process's
            monotonic clock (`time.monotonic`): the lease's length after the
            last claim or renewal was sent.
        confirm: Asks the store to extend the lease; answers the new `until`,
            or None when the job is no longer held at `epoch`.
        margin: Seconds before `until` from which `hold` asks the store
            instead of trusting the clock (room for the worker's clock running
            a little slower than the database's).
        lost: Set once the lease is known to be gone.

    Examples:
        >>> import asyncio
        >>> async def gone(lease):
        ...     return None
        >>> lease = Lease(7, 1, until=time.monotonic() + 30, confirm=gone)
        >>> asyncio.run(lease.hold())  # well within its time: no store round trip
        >>> lease.until = time.monotonic() - 1  # the worker stalled past it
        >>> asyncio.run(lease.hold())
        Traceback (most recent call last):
        ...
        tidemill.errors.LeaseLost: Job 7 is no longer held at epoch 1: ...
    """

    job_id: int
    epoch: int
    until: float
    confirm: Callable[[Lease], Awaitable[float | None]]
    margin: float = 1.0
    lost: bool = False

    async def hold(self) -> None:
        """Return when the job is still this worker's; else raise `LeaseLost`.

        Raises:
            LeaseLost: The lease ran out and another worker took the job, or
                its run was cancelled, or it was seen lost before.
        """
        if not self.lost and time.monotonic() < self.until - self.margin:
            return
        if not self.lost:
            until = await self.confirm(self)
            if until is not None:
                self.until = until
                return
            self.lost = True
        raise LeaseLost(
            f"Job {self.job_id} is no longer held at epoch {self.epoch}: its lease ran out "
            "while this worker was stalled and another worker took it over, or its run ended.",
            hint="Nothing was started for it; the job's current holder runs it.",
            context={"job": self.job_id, "epoch": self.epoch},
        )
