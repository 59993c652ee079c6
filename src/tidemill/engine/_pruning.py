"""`Pruning`: `AsyncEngine.prune_runs`, deleting ended runs older than a limit.

A store keeps every run until it is pruned. `prune_runs(older_than=...)`
deletes the top-level runs that ended (succeeded, failed or cancelled) longer
ago than that, each with the runs under it and everything they own (jobs,
results, logs, usage, approvals, events, agent journals), a batch per
transaction; a run still going, waiting or queued is never touched, however
old. A worker started with `keep_runs` does the same every minute on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from tidemill.engine._engine_core import EngineCore
from tidemill.engine.workers._retention import RETENTION_BATCH, Pruned, check_keep, prune_runs

__all__ = ["Pruning"]


class Pruning(EngineCore):
    """Deleting ended runs by age."""

    async def prune_runs(
        self,
        older_than: float | timedelta,
        *,
        workspace: str | None = None,
        batch: int = RETENTION_BATCH,
        dry_run: bool = False,
        on_batch: Callable[[Pruned], None] | None = None,
    ) -> Pruned:
        """Delete the top-level runs that ended more than `older_than` ago.

        Args:
            older_than: Seconds, or a `timedelta`: runs that ended longer ago go.
            workspace: Only runs started from this workspace's items (None:
                every run of the store, those submitted from Python too).
            batch: Top-level runs deleted per transaction.
            dry_run: Delete nothing; `Pruned.runs` counts what would go.
            on_batch: Called with the running total after each transaction.

        Raises:
            InvalidOption: `older_than` is not a positive duration.

        Examples:
            >>> import asyncio
            >>> from tidemill.engine import AsyncEngine
            >>> from tidemill.flows import Flow
            >>> async def main() -> tuple[int, int]:
            ...     async with AsyncEngine("sqlite:///:memory:", migrate=True) as engine:
            ...         flow = Flow.model_validate({"steps": [{"id": "echo", "identity": {}}]})
            ...         async with engine.worker():
            ...             await engine.wait(await engine.submit(flow, {"n": 1}))
            ...         kept = await engine.prune_runs(timedelta(days=30))
            ...         gone = await engine.prune_runs(1e-9)  # everything that has ended
            ...         return kept.runs, gone.runs
            >>> asyncio.run(main())
            (0, 1)
        """
        seconds = older_than.total_seconds() if isinstance(older_than, timedelta) else older_than
        keep = check_keep(seconds)
        store = await self._open()
        return await prune_runs(
            store,
            before=time.time() - keep,
            workspace=workspace,
            batch=batch,
            dry_run=dry_run,
            on_batch=on_batch,
        )
