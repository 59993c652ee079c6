"""Waking a worker on PostgreSQL `NOTIFY`, over a connection of its own."""

from __future__ import annotations

import asyncio
import logging

from tidemill.store import Store

__all__ = ["listen_forever"]

log = logging.getLogger("tidemill.worker")


async def listen_forever(store: Store, wake: asyncio.Event) -> None:
    """Set `wake` on each `NOTIFY` of the store's channel; reconnect when the connection drops."""
    import psycopg

    dsn = store.listen_dsn()
    assert dsn is not None
    while True:
        try:
            connection = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
            async with connection:
                await connection.execute(f"LISTEN {store.channel}")
                wake.set()
                async for _ in connection.notifies():
                    wake.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("listen connection lost: %s", exc)
        await asyncio.sleep(1.0)  # a cancel here stops the worker's listening, as anywhere
