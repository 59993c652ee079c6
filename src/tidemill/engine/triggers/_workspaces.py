"""`WorkspaceSchedulers`: a `Scheduler` for each workspace of a store that has schedules.

A store may hold several workspaces (`AsyncWorkspace(..., workspace="acme")`,
`tidemill server --workspace acme`), and a worker runs the runs of all of
them, so it fires all their schedules too. The default workspace's scheduler
starts at once, as a lone `Scheduler` would; every `look` seconds it reads
which other workspaces hold a schedule item and starts a scheduler for each
one it has not started yet. A workspace's scheduler runs until the worker
stops (ticking costs a query or two a second, schedules or not), so the
first schedule of another workspace fires within `look` seconds of being
written, and every later change is seen as in the default workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemill.engine.runs._scope import Definitions
from tidemill.engine.triggers._scheduler import Scheduler
from tidemill.errors import StoreError
from tidemill.store import Store
from tidemill.workspace import DEFAULT_WORKSPACE

if TYPE_CHECKING:
    from tidemill.engine._metrics import Metrics

__all__ = ["WorkspaceSchedulers"]

log = logging.getLogger("tidemill.scheduler")


class WorkspaceSchedulers:
    """Starts one `Scheduler` per workspace with schedules, as workspaces come to have them.

    Args:
        store: The store.
        defs: Flow definitions already parsed (shared with the worker).
        on_fired: Called after a transaction that started runs.
        look: Seconds between two reads of which workspaces have schedules.
        metrics: Where the schedulers count the fires they record.

    Examples:
        >>> import asyncio
        >>> from tidemill.engine import AsyncEngine
        >>> from tidemill.workspace import AsyncWorkspace
        >>> async def main() -> list[str]:
        ...     async with AsyncEngine("sqlite:///:memory:", migrate=True) as engine:
        ...         acme = AsyncWorkspace(engine.store, workspace="acme", user="ada")
        ...         await acme.add_folder("ops")
        ...         await acme.write("f/ops/tick", "flow", {"steps": [{"id": "t", "identity": {}}]})
        ...         await acme.write("f/ops/hourly", "schedule",
        ...                          {"cron": "0 * * * *", "target": "f/ops/tick"})
        ...         schedulers = WorkspaceSchedulers(engine.store, engine.defs)
        ...         await schedulers.look_once()
        ...         return sorted(schedulers.running)
        >>> asyncio.run(main())
        ['acme', 'default']
    """

    def __init__(
        self,
        store: Store,
        defs: Definitions,
        *,
        on_fired: Callable[[], None] | None = None,
        look: float = 10.0,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.defs = defs
        self.on_fired = on_fired
        self.look = look
        self.running: dict[str, Scheduler] = {}
        """The scheduler of each workspace, by name."""
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def look_once(self) -> list[str]:
        """Start a scheduler for each workspace with schedules that has none; their names."""
        names = [DEFAULT_WORKSPACE, *await self.store.transact(lambda tx: tx.schedule_workspaces())]
        started = [name for name in dict.fromkeys(names) if name not in self.running]
        for name in started:
            scheduler = Scheduler(
                self.store,
                self.defs,
                workspace_name=name,
                on_fired=self.on_fired,
                metrics=self.metrics,
            )
            self.running[name] = scheduler
            self._tasks.append(asyncio.create_task(scheduler.run(self._stop)))
        return started

    async def run(self, stop: asyncio.Event) -> None:
        """Look every `look` seconds until `stop` is set; then stop every scheduler."""
        try:
            while not stop.is_set():
                try:
                    await self.look_once()
                except StoreError as exc:
                    log.warning("could not read which workspaces have schedules: %s", exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.look)
        finally:
            self._stop.set()
            await asyncio.gather(*self._tasks, return_exceptions=True)
