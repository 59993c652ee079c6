"""The store: runs, jobs, results, logs and approvals in SQLite or PostgreSQL.

SQLite is the embedded default (a file, nothing to install); PostgreSQL lets
many workers on many machines share the work. The engine writes every
transaction once, as a function over a `Tx`, and `Store.transact` runs it in
a store thread, retrying it when the database asks.

Examples:
    >>> import asyncio, tempfile
    >>> from tidemill.store import Store, StoreURL, upgrade
    >>> async def main():
    ...     store = Store(StoreURL.parse(f"sqlite:///{tempfile.mkdtemp()}/t.db"))
    ...     applied = await upgrade(store)
    ...     counts = await store.transact(lambda tx: tx.counts())
    ...     await store.close()
    ...     return len(applied), counts
    >>> asyncio.run(main())
    (12, {})
"""

from tidemill.store._events import EventRow
from tidemill.store._migrate import Migration, check, current_version, migrations, pending, upgrade
from tidemill.store._rows import (
    ACTIVE_RUN,
    FINISHED_RUN,
    ApprovalRow,
    JobRow,
    LogRow,
    MemoryRow,
    RunRow,
)
from tidemill.store._run_pages import RunReach, run_page
from tidemill.store._statements import dumps
from tidemill.store._store import Store
from tidemill.store._tx import Tx
from tidemill.store._url import DEFAULT_URL, StoreURL
from tidemill.store._waits import SignalRow, WaitRow

__all__ = [
    "ACTIVE_RUN",
    "DEFAULT_URL",
    "FINISHED_RUN",
    "ApprovalRow",
    "EventRow",
    "JobRow",
    "LogRow",
    "MemoryRow",
    "Migration",
    "RunReach",
    "RunRow",
    "SignalRow",
    "Store",
    "StoreURL",
    "Tx",
    "WaitRow",
    "check",
    "current_version",
    "dumps",
    "migrations",
    "pending",
    "run_page",
    "upgrade",
]
