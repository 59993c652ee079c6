"""`EngineCore`: what every part of `AsyncEngine` stands on: its store, definitions, workers.

`AsyncEngine` is put together from parts, one concern each (submitting and
reading runs, deciding approvals, sending events, reading run events), all
over this core: the store opened (and migrated) on first use, one
transaction at a time, and the workers running in this process, woken when
a change here queues work for them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from tidemill.engine.runs._scope import Definitions
from tidemill.engine.workers._worker import Worker
from tidemill.store import DEFAULT_URL, Store, StoreURL, Tx, check, upgrade

__all__ = ["EngineCore"]


class EngineCore:
    """The store, definitions and in-process workers that `AsyncEngine`'s parts share."""

    def __init__(
        self, url: str | None = None, *, migrate: bool | None = None, max_connections: int = 4
    ) -> None:
        self.url = StoreURL.parse(url or DEFAULT_URL)
        self.store = Store(self.url, max_connections=max_connections)
        self.defs = Definitions()
        self._migrate = self.url.dialect == "sqlite" if migrate is None else migrate
        self._ready = False
        self._workers: list[Worker] = []
        self._progress = asyncio.Event()

    async def _open(self) -> Store:
        if not self._ready:
            if self._migrate:
                await upgrade(self.store)
            else:
                await check(self.store)
            self._ready = True
        return self.store

    async def _transact(self, fn: Callable[[Tx], Any]) -> Any:
        store = await self._open()
        return await store.transact(fn)

    def _wake_workers(self) -> None:
        """Tell this process's workers that a change queued work (they claim at once)."""
        for worker in self._workers:
            worker.wake()

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int = 4, **options: Any) -> AsyncIterator[Worker]:
        """Run a worker in this process for the duration of the block.

        Options are `Worker`'s (`lease`, `poll`, `pool_size`, `on_event`, `models`,
        `metrics`, `http_client`).
        """
        store = await self._open()
        worker = Worker(
            store,
            concurrency=concurrency,
            defs=self.defs,
            on_run_ended=self._progress.set,
            engine=self,
            **options,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        self._workers.append(worker)
        try:
            yield worker
        finally:
            self._workers.remove(worker)
            stop.set()
            await task

    async def close(self) -> None:
        """Close the store's connections."""
        await self.store.close()
