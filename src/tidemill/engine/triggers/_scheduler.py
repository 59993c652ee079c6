"""`Scheduler`: starts each fire of a workspace's schedules once, however many are running.

Every fire is a row of `tm_schedule_fires`, keyed by (schedule, fire time),
inserted with `ON CONFLICT DO NOTHING` in the transaction that creates its
run: whichever scheduler inserts it first fires it, every other one moves
on. Workers (`Worker(schedules=True)`, the default) and servers each run one;
they may race freely.

On each tick a scheduler re-reads the schedule items' paths and versions
and the fired runs that ended (one transaction; a changed item is parsed
again), fires what is due, records the
outcome of fired runs that ended (starting `on_failure` or `on_recovery`,
`_handlers`), plans the runs of the fires due before its next look (reading
the target as the owner now, so that at the fire's time one transaction
starts it: the fire's row, the run, checking the flow and what it includes
are still the versions planned, else planning again), and answers when it
next needs to look: the earliest next fire, or in `reread` seconds,
whichever is sooner. `run` sleeps exactly that long, so a fire starts within
milliseconds of its time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemill.engine.runs._scope import Definitions
from tidemill.engine.triggers._due import choose, due_fires
from tidemill.engine.triggers._handlers import Ended, Handlers
from tidemill.engine.triggers._known import Known, Schedules
from tidemill.engine.triggers._start import Ready, prepare_run, start_run, still_current
from tidemill.store import Store, Tx
from tidemill.workspace import DEFAULT_WORKSPACE, AsyncWorkspace

if TYPE_CHECKING:
    from tidemill.engine._metrics import Metrics

__all__ = ["Scheduler"]

log = logging.getLogger("tidemill.scheduler")

Rows = list[tuple[str, int, str, float, str]]


class Scheduler:
    """Fires the schedules of one workspace in a store, each fire exactly once.

    Args:
        store: The store the schedules, their fires and the runs are in.
        defs: Flow definitions already parsed (shared with an engine or worker).
        workspace_name: The workspace whose schedules it fires.
        clock: The time (seconds since the epoch) fires are judged by; tests
            pass a fake one. The runs it starts are stamped with the real time.
        reread: Seconds between looks when no fire is due sooner: how soon a
            new or edited schedule, and a fired run that ended, are seen.
        on_fired: Called after a transaction that started runs (a worker in
            this process claims them at once).
        metrics: Where the fires it records are counted, by status
            (`tidemill_schedule_fires_total`).

    Examples:
        >>> import asyncio
        >>> from tidemill.engine import AsyncEngine
        >>> from tidemill.engine.triggers import Scheduler
        >>> async def main() -> float:
        ...     async with AsyncEngine("sqlite:///:memory:", migrate=True) as engine:
        ...         scheduler = Scheduler(engine.store, engine.defs, clock=lambda: 1000.0)
        ...         return await scheduler.tick()  # no schedules: look again in a second
        >>> asyncio.run(main())
        1001.0
    """

    def __init__(
        self,
        store: Store,
        defs: Definitions,
        *,
        workspace_name: str = DEFAULT_WORKSPACE,
        clock: Callable[[], float] = time.time,
        reread: float = 1.0,
        on_fired: Callable[[], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.defs = defs
        self.workspace_name = workspace_name
        self.clock = clock
        self.reread = reread
        self.on_fired = on_fired
        self.schedules = Schedules()
        self.fired = 0
        """Fires this scheduler recorded (started, skipped or failed)."""
        self._sessions: dict[str, AsyncWorkspace] = {}
        self._handlers = Handlers(self)

    def session(self, owner: str) -> AsyncWorkspace:
        """The workspace as `owner`, whom a schedule runs as (no admin needed to act so)."""
        found = self._sessions.get(owner)
        if found is None:
            found = AsyncWorkspace(
                self.store, workspace=self.workspace_name, user=owner, create=False, migrate=False
            )
            self._sessions[owner] = found
        return found

    async def tick(self) -> float:
        """Fire what is due now; return when to look next (seconds since the epoch)."""
        now = self.clock()
        ended = await self._refresh()
        for known in list(self.schedules.by_path.values()):
            if known.cron is None:
                known.advance(now)  # paused: its fires until now are not missed, just not due
            elif known.next_at is not None and known.next_at <= now:
                await self._fire_due(known, now)
        await self._handlers.check(ended)
        soonest = self.schedules.next_at()
        later = now + self.reread
        await self._plan_ahead(later)
        return later if soonest is None else min(soonest, later)

    async def _plan_ahead(self, until: float) -> None:
        """Plan the run of each fire due by `until` (the next look), so that it starts at once."""
        for known in list(self.schedules.by_path.values()):
            fire_at, spec = known.next_at, known.spec
            if fire_at is None or fire_at > until or spec is None or known.cron is None:
                continue
            if known.planned is not None and known.planned[0] == fire_at:
                continue
            ready = await prepare_run(self.session(known.owner), spec.target, spec.inputs)
            known.planned = (fire_at, ready) if isinstance(ready, Ready) else None

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until `stop` is set, sleeping until each next look; survive store errors."""
        while not stop.is_set():
            try:
                wake_at = await self.tick()
            except Exception:  # the store was unreachable, say: log it, try again shortly
                log.exception("the scheduler's tick failed; trying again")
                wake_at = self.clock() + self.reread
            delay = max(0.0, wake_at - self.clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)

    async def _refresh(self) -> list[Ended]:
        """Read the schedule items again, and the fired runs that ended (one transaction)."""
        ws = self.workspace_name

        def read(tx: Tx) -> tuple[Rows, dict[str, float], list[Ended]]:
            rows = tx.schedule_items(ws)
            last = tx.last_fires(ws) if self.schedules.unknown(rows) else {}
            return rows, last, tx.ended_fires(ws)

        rows, last, ended = await self.store.transact(read)
        self.schedules.update(rows, last)
        return ended

    async def _fire_due(self, known: Known, now: float) -> None:
        cron, spec = known.cron, known.spec
        assert cron is not None
        assert spec is not None
        due = due_fires(cron, known.cursor, now)
        run, skip = choose(spec.catch_up, due, now=now)
        if skip:
            await self._record_skipped(known, skip)
        for fire_at in run:
            await self._fire(known, fire_at)
        if due:
            known.advance(due[-1])

    async def _record_skipped(self, known: Known, fires: list[float]) -> None:
        ws = self.workspace_name

        def write(tx: Tx) -> int:
            now = time.time()
            return sum(
                tx.insert_fire(
                    ws, known.path, fire_at, status="skipped", version=known.version, now=now
                )
                for fire_at in fires
            )

        skipped = await self.store.transact(write)
        self.fired += skipped
        if self.metrics is not None:
            self.metrics.schedule_fires("skipped", skipped)

    async def _fire(self, known: Known, fire_at: float) -> None:
        """Start the run of one fire, or record why it could not start; once, whoever is first."""
        spec = known.spec
        assert spec is not None
        planned, known.planned = known.planned, None
        ahead = planned is not None and planned[0] == fire_at and isinstance(planned[1], Ready)
        ready: Ready | str
        if planned is not None and ahead and isinstance(planned[1], Ready):
            ready = planned[1]
        else:
            ready = await prepare_run(self.session(known.owner), spec.target, spec.inputs)
        outcome = await self.store.transact(
            lambda tx: self._write_fire(tx, known, fire_at, ready, check=ahead)
        )
        if outcome == "stale":  # the flow (or what it includes) changed since it was planned
            ready = await prepare_run(self.session(known.owner), spec.target, spec.inputs)
            outcome = await self.store.transact(
                lambda tx: self._write_fire(tx, known, fire_at, ready, check=False)
            )
        inserted, started = outcome if isinstance(outcome, tuple) else (False, None)
        self.fired += inserted
        if inserted and self.metrics is not None:
            self.metrics.schedule_fires("failed" if isinstance(ready, str) else "started")
        if isinstance(ready, str) and inserted:
            log.warning("schedule %s could not fire at %s: %s", known.path, fire_at, ready)
        if started is not None and self.on_fired is not None:
            self.on_fired()

    def _write_fire(
        self, tx: Tx, known: Known, fire_at: float, ready: Ready | str, *, check: bool
    ) -> tuple[bool, str | None] | str:
        """The fire's transaction: its row and its run; `stale` when the plan is out of date."""
        ws = self.workspace_name
        now = time.time()
        if check and isinstance(ready, Ready) and not still_current(tx, ws, ready):
            return "stale"
        failed = ready if isinstance(ready, str) else None
        status = "failed" if failed is not None else "started"
        if not tx.insert_fire(
            ws, known.path, fire_at, status=status, version=known.version, now=now, error=failed
        ):
            return False, None  # another scheduler fired it first
        if not isinstance(ready, Ready):
            return True, None
        source = {"schedule": known.path, "fire_at": fire_at}
        run = start_run(tx, self.defs, ready, now=now, source=source)
        tx.set_fire_run(ws, known.path, fire_at, run.id)
        return True, run.id
