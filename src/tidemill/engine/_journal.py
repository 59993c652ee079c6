"""Where an `ai_agent` step keeps its journal: the store's own database.

An agent step's conversation is a thread of the agent library's journal,
kept by its SQLite or PostgreSQL checkpointer in the same database (and
PostgreSQL schema) as the store, in the table `tidemill_journal`. The thread
id is derived from the run and the step, so every attempt of the step, on
any worker, continues the same thread.

A worker opens its checkpointer once, in a `Journals` it owns, and every
agent step it runs shares it until the worker stops: a few PostgreSQL
connections over which the steps' concurrent reads and appends go out
batched, or SQLite connections that never wait for a lock on the event
loop. Without one, `open_journal` opens a checkpointer for the caller and
closes it after. Either way the caller gets a `StepJournal` view of it,
which answers the agent runtime's read of a thread the step has just read
from memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from tidemill.agents.checkpoint import Checkpointer, PostgresCheckpointer, SQLiteCheckpointer
from tidemill.agents.journal import (
    JournalEvent,
    JournalRecord,
    ModelTurn,
    ThreadState,
    ToolStarted,
)
from tidemill.errors import SerializationError
from tidemill.store import StoreURL

__all__ = ["Journal", "Journals", "StepJournal", "open_journal", "thread_id"]

log = logging.getLogger("tidemill.worker")


def thread_id(run_id: str, step_id: str) -> str:
    """The agent thread of a step of a run.

    Examples:
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

        Examples:
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


def _checkpointer(url: StoreURL) -> Checkpointer:
    """A new checkpointer on the store's database (and PostgreSQL schema)."""
    if url.dialect == "sqlite":
        assert url.path is not None
        return SQLiteCheckpointer(url.path)
    return PostgresCheckpointer(url.dsn, schema=url.schema)


def _busy(exc: SerializationError) -> bool:
    """Whether a SQLite statement failed only because another connection held the lock."""
    cause = exc.__cause__
    text = str(cause)
    return isinstance(cause, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


class _SQLiteJournal:
    """A SQLite checkpointer that never waits for a lock on the caller's event loop.

    `SQLiteCheckpointer` runs its statements on the calling thread, which is
    cheapest while the database is free (a journal append is one short
    statement). But every store transaction holds the write lock, and an
    append that waited for it on a worker's event loop would stall all of
    the worker's steps. So a statement is tried here without waiting; when
    the database is busy (nothing was written), it runs again on a thread
    of the journal's own, which waits for the lock, up to `busy_timeout`,
    while the event loop goes on.

    Args:
        path: The database file (the store's).
        busy_timeout: Seconds the journal thread waits for the lock.
    """

    def __init__(self, path: str | Path, *, busy_timeout: float = 30.0) -> None:
        self._waiting = SQLiteCheckpointer(path, busy_timeout=busy_timeout)  # creates the table
        self._inline = SQLiteCheckpointer(path, busy_timeout=0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    async def _run(self, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return await getattr(self._inline, name)(*args, **kwargs)
        except SerializationError as exc:
            if not _busy(exc):
                raise
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="tidemill-journal", daemon=True
            )
            self._thread.start()
        call = getattr(self._waiting, name)(*args, **kwargs)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, self._loop))

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        """Append `events` after entry `after` (see `Checkpointer.append`)."""
        seq: int = await self._run("append", thread_id, events, after=after)
        return seq

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        """Return the records after `after`, in order."""
        records: list[JournalRecord] = await self._run("read", thread_id, after=after)
        return records

    async def threads(self) -> list[str]:
        """Return every thread id, sorted."""
        threads: list[str] = await self._run("threads")
        return threads

    async def delete(self, thread_id: str) -> bool:
        """Remove a thread's journal."""
        deleted: bool = await self._run("delete", thread_id)
        return deleted

    async def prune(self, *, older_than: timedelta) -> int:
        """Remove threads whose newest record is older than `older_than`."""
        pruned: int = await self._run("prune", older_than=older_than)
        return pruned

    async def aclose(self) -> None:
        """Close the connections, then stop the journal thread."""
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        try:
            await self._inline.aclose()
            await self._waiting.aclose()
        finally:
            if loop is not None and thread is not None:
                loop.call_soon_threadsafe(loop.stop)
                await asyncio.to_thread(thread.join)
                loop.close()

    def __repr__(self) -> str:
        return f"SQLiteCheckpointer({self._inline.path!r}, off the event loop when busy)"


class StepJournal:
    """One agent step's view of a checkpointer: a thread read twice in a row is read once.

    A step reads its thread to decide how to go on (a new run, a resume, an
    outcome to record), and the agent runtime it starts then reads the same
    thread to fold its state. With nothing appended in between, this view
    answers that second read with the records of the first (once; later
    reads go to the database). Nothing is lost by it: an append names the
    seq it follows, so a write by another process in between still makes
    the step's next append fail, as if it had come after the second read.

    Before an append that starts tool calls (a `ToolStarted`, or a
    `ModelTurn` whose calls start with it) it awaits `hold`: the worker's
    check that it still holds the step's job, so a worker that stalled past
    its lease does not start calls its successor runs.

    After each append it calls `on_append` with the thread, the events and
    the new last seq (the engine records them as the run's events). That
    write goes on while the step does (its tool calls, its next model call)
    and is awaited before the next append, and by `flush`: the events keep
    the journal's order, and the step's wait on them stays short.

    Args:
        checkpointer: The checkpointer to read and write; not closed by `aclose`
            (whoever opened it closes it).
        hold: Awaited before an append that starts tool calls; raises to refuse it.
        on_append: Awaited after each append.

    Examples:
        >>> import asyncio
        >>> from tidemill.agents.checkpoint import MemoryCheckpointer
        >>> async def reads():
        ...     journal = StepJournal(MemoryCheckpointer())
        ...     first = await journal.read("t")
        ...     return first is await journal.read("t"), first is await journal.read("t")
        >>> asyncio.run(reads())
        (True, False)
    """

    def __init__(
        self,
        checkpointer: Checkpointer,
        hold: Callable[[], Awaitable[None]] | None = None,
        on_append: Callable[[str, Sequence[JournalEvent], int], Awaitable[None]] | None = None,
    ) -> None:
        self.checkpointer = checkpointer
        self.hold = hold
        self.on_append = on_append
        self._last: dict[str, list[JournalRecord]] = {}
        self._recording: asyncio.Future[None] | None = None

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        """Append `events` after entry `after` (see `Checkpointer.append`)."""
        if self.hold is not None and any(_starts_calls(event) for event in events):
            await self.hold()
        await self.flush()
        self._last.pop(thread_id, None)
        seq = await self.checkpointer.append(thread_id, events, after=after)
        if self.on_append is not None:
            self._recording = asyncio.ensure_future(self.on_append(thread_id, events, seq))
        return seq

    async def flush(self, *, cancel: bool = False) -> None:
        """Wait until the last append's `on_append` is done (or, with `cancel`, stop it)."""
        recording, self._recording = self._recording, None
        if recording is None:
            return
        if cancel:
            recording.cancel()
            with contextlib.suppress(BaseException):
                await recording
            return
        await recording

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        """Return the records after `after`: from the last read, if it is still the newest."""
        last = self._last.pop(thread_id, None)
        if last is not None:
            return last if after == 0 else [record for record in last if record.seq > after]
        records = await self.checkpointer.read(thread_id, after=after)
        if after == 0:
            self._last[thread_id] = records
        return records

    async def threads(self) -> list[str]:
        """Return every thread id, sorted."""
        return await self.checkpointer.threads()

    async def delete(self, thread_id: str) -> bool:
        """Remove a thread's journal."""
        self._last.pop(thread_id, None)
        return await self.checkpointer.delete(thread_id)

    async def prune(self, *, older_than: timedelta) -> int:
        """Remove threads whose newest record is older than `older_than`."""
        self._last.clear()
        return await self.checkpointer.prune(older_than=older_than)

    async def aclose(self) -> None:
        """Forget what was read; the checkpointer stays open."""
        self._last.clear()

    def __repr__(self) -> str:
        return f"StepJournal({self.checkpointer!r})"


class Journals:
    """The journal checkpointers of one worker: opened on first use, shared, closed with it.

    Every agent step a worker runs uses the same checkpointer for its
    store, instead of connecting anew for each attempt. A PostgreSQL
    checkpointer keeps a few connections (per event loop) and batches the
    steps' concurrent statements; a SQLite one waits for locks off the event
    loop (see `_SQLiteJournal`).
    `aclose` closes them; a later step opens new ones.

    Examples:
        >>> import asyncio, tempfile
        >>> async def twice(url):
        ...     journals = Journals()
        ...     try:
        ...         return journals.checkpointer(url) is journals.checkpointer(url)
        ...     finally:
        ...         await journals.aclose()
        >>> asyncio.run(twice(StoreURL.parse(f"sqlite:///{tempfile.mkdtemp()}/t.db")))
        True
    """

    def __init__(self) -> None:
        self._open: dict[StoreURL, Checkpointer] = {}

    def checkpointer(self, url: StoreURL) -> Checkpointer:
        """The checkpointer on `url`'s database, opened on first use."""
        found = self._open.get(url)
        if found is None:
            if url.dialect == "sqlite":
                assert url.path is not None
                found = _SQLiteJournal(url.path)
            else:
                found = _checkpointer(url)
            self._open[url] = found
        return found

    async def aclose(self) -> None:
        """Close every checkpointer opened so far (each once, whatever the others do)."""
        opened, self._open = list(self._open.values()), {}
        failures = await asyncio.gather(
            *(checkpointer.aclose() for checkpointer in opened), return_exceptions=True
        )
        for checkpointer, failure in zip(opened, failures, strict=True):
            if isinstance(failure, Exception):  # its connection was gone already, say
                log.warning("closing the agent journal %r failed: %s", checkpointer, failure)


def _starts_calls(event: JournalEvent) -> bool:
    return isinstance(event, ToolStarted) or (isinstance(event, ModelTurn) and bool(event.started))


@contextlib.asynccontextmanager
async def open_journal(
    url: StoreURL,
    journals: Journals | None = None,
    *,
    hold: Callable[[], Awaitable[None]] | None = None,
    on_append: Callable[[str, Sequence[JournalEvent], int], Awaitable[None]] | None = None,
) -> AsyncIterator[Checkpointer]:
    """A checkpointer on the store's database: the worker's, or one closed on exit.

    It is seen through a `StepJournal` of the caller's own.

    Args:
        url: The store's address.
        journals: The worker's checkpointers, to share; None opens one for
            this block only.
        hold: See `StepJournal`.
        on_append: See `StepJournal`.

    Examples:
        >>> import asyncio, tempfile
        >>> async def threads(url):
        ...     async with open_journal(url) as journal:
        ...         return await journal.threads()
        >>> asyncio.run(threads(StoreURL.parse(f"sqlite:///{tempfile.mkdtemp()}/t.db")))
        []
    """
    if journals is not None:
        async with _flushed(StepJournal(journals.checkpointer(url), hold, on_append)) as journal:
            yield journal
        return
    checkpointer = _checkpointer(url)
    try:
        async with _flushed(StepJournal(checkpointer, hold, on_append)) as journal:
            yield journal
    finally:
        await checkpointer.aclose()


@contextlib.asynccontextmanager
async def _flushed(journal: StepJournal) -> AsyncIterator[StepJournal]:
    """`journal`, its last `on_append` awaited on the way out (stopped, when the block raised)."""
    try:
        yield journal
    except BaseException:
        await journal.flush(cancel=True)
        raise
    await journal.flush()
