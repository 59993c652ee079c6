"""When a fired run ends: its fire's outcome, set once, and the handler it starts.

A schedule's `on_failure` flow runs when a fired run fails, with the inputs
`{schedule, fire_at, run_id, error}`; its `on_recovery` flow runs when a
fired run succeeds and the fire before it (the last one that started a run)
failed, with `{schedule, fire_at, run_id}`. Both run as the schedule's owner.
The outcome is set with `WHERE outcome IS NULL` in the transaction that
starts the handler, so with any number of schedulers each handler starts once.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tidemill.engine.triggers._start import Ready, prepare_run, start_run
from tidemill.store import Tx

if TYPE_CHECKING:
    from tidemill.engine.triggers._scheduler import Scheduler

__all__ = ["Ended", "Handlers"]

Ended = tuple[str, float, str, str, Any]
"""A fired run that ended: (schedule path, fire time, run id, its status, its error)."""


class Handlers:
    """Looks for fired runs that ended, for one scheduler."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.started = 0
        """Handler runs this scheduler started."""

    async def check(self, ended: list[Ended] | None = None) -> None:
        """Record the outcome of every fired run that ended, and start its handler.

        `ended` is `Tx.ended_fires` as the caller read it (None: read it now).
        """
        if ended is None:
            ws = self.scheduler.workspace_name
            read: list[Ended] = await self.scheduler.store.transact(lambda tx: tx.ended_fires(ws))
            ended = read
        for path, fire_at, run_id, status, error in ended:
            await self._end(path, fire_at, run_id, status, error)

    async def _handler(
        self, path: str, fire_at: float, run_id: str, status: str, error: Any
    ) -> tuple[str, str, dict[str, Any]] | None:
        """(which, flow path, inputs) of the handler the outcome starts; None: none."""
        known = self.scheduler.schedules.by_path.get(path)
        spec = None if known is None else known.spec
        if spec is None:
            return None
        facts: dict[str, Any] = {"schedule": path, "fire_at": fire_at, "run_id": run_id}
        if status == "failed" and spec.on_failure is not None:
            return "on_failure", spec.on_failure, {**facts, "error": error}
        if status == "succeeded" and spec.on_recovery is not None:
            ws = self.scheduler.workspace_name
            before = await self.scheduler.store.transact(
                lambda tx: tx.previous_outcome(ws, path, fire_at)
            )
            if before == "failed":
                return "on_recovery", spec.on_recovery, facts
        return None

    async def _end(self, path: str, fire_at: float, run_id: str, status: str, error: Any) -> None:
        scheduler, ws = self.scheduler, self.scheduler.workspace_name
        handler = await self._handler(path, fire_at, run_id, status, error)
        ready: Ready | str | None = None
        if handler is not None:
            known = scheduler.schedules.by_path[path]
            ready = await prepare_run(scheduler.session(known.owner), handler[1], handler[2])

        def write(tx: Tx) -> str | None:
            if not tx.set_fire_outcome(ws, path, fire_at, status):
                return None  # another scheduler recorded it first
            if handler is None or ready is None:
                return None
            which, flow = handler[0], handler[1]
            if isinstance(ready, str):
                failed = f"{which} {flow} could not start: {ready}"
                tx.set_fire_handler(ws, path, fire_at, handler_id=None, error=failed)
                return None
            source = {"schedule": path, "fire_at": fire_at, "handler": which}
            run = start_run(tx, scheduler.defs, ready, now=time.time(), source=source)
            tx.set_fire_handler(ws, path, fire_at, handler_id=run.id)
            return run.id

        started = await scheduler.store.transact(write)
        if started is not None:
            self.started += 1
            if scheduler.on_fired is not None:
                scheduler.on_fired()
