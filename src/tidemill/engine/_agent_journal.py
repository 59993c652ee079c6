"""Where an `ai_agent` step keeps its journal: the store's own database.

An agent step's conversation is a thread of the agent library's journal,
kept by its SQLite or PostgreSQL checkpointer in the same database (and
PostgreSQL schema) as the store, in the table `tidemill_journal`. The thread
id is derived from the run and the step, so every attempt of the step, on
any worker, continues the same thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from tidemill.agents.checkpoint import Checkpointer, PostgresCheckpointer, SQLiteCheckpointer
from tidemill.agents.journal import JournalRecord, ThreadState
from tidemill.store import StoreURL

__all__ = ["Journal", "open_journal", "thread_id"]


def thread_id(run_id: str, step_id: str) -> str:
    """The agent thread of a step of a run.

    Example:
        >>> thread_id("01J9Z", "answer")
        'tidemill:01J9Z:answer'
    """
    return f"tidemill:{run_id}:{step_id}"


@dataclass(slots=True)
class Journal:
    """A thread read from its journal: the records and their fold.

    Attributes:
        records: Every record, oldest first.
        state: The thread's state, folded from them.
    """

    records: list[JournalRecord]
    state: ThreadState

    @classmethod
    def of(cls, thread: str, records: Sequence[JournalRecord]) -> Journal:
        """Fold `records` of `thread`.

        Example:
            >>> Journal.of("t", []).state.status
            'new'
        """
        state = ThreadState(thread)
        for record in records:
            state.apply(record.seq, record.event)
        return cls(list(records), state)

    @classmethod
    async def read(cls, checkpointer: Checkpointer, thread: str) -> Journal:
        """Read and fold a thread."""
        return cls.of(thread, await checkpointer.read(thread))

    def started_at(self) -> float | None:
        """When the thread's current agent run began (seconds since the epoch), if it has one."""
        for record in reversed(self.records):
            if record.event.kind == "user_message":
                return record.created_at.timestamp()
        return None

    def runs(self) -> int:
        """How many agent runs the thread has had (one per attempt that started afresh)."""
        return sum(1 for record in self.records if record.event.kind == "user_message")


@contextlib.asynccontextmanager
async def open_journal(url: StoreURL) -> AsyncIterator[Checkpointer]:
    """A checkpointer on the store's database, closed on exit.

    Example:
        >>> import asyncio, tempfile
        >>> async def threads(url):
        ...     async with open_journal(url) as journal:
        ...         return await journal.threads()
        >>> asyncio.run(threads(StoreURL.parse(f"sqlite:///{tempfile.mkdtemp()}/t.db")))
        []
    """
    checkpointer: Checkpointer
    if url.dialect == "sqlite":
        assert url.path is not None
        checkpointer = SQLiteCheckpointer(url.path)
    else:
        checkpointer = PostgresCheckpointer(url.dsn, schema=url.schema)
    try:
        yield checkpointer
    finally:
        await checkpointer.aclose()
