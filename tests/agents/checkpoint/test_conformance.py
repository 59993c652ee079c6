"""Every checkpointer backend against the conformance suite, and the suite against bugs."""

from __future__ import annotations

import asyncio
import os
import threading
import typing
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.conftest import POSTGRES_ENV, unique_schema

from tidemill.agents.checkpoint import (
    Checkpointer,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
    encode_event,
)
from tidemill.agents.checkpoint.conformance import (
    CHECKS,
    COMPACTION_CHECKS,
    Check,
    check_appends_from_os_threads,
    check_compaction_keeps_bound_and_state,
    check_compaction_keeps_graph_events,
    check_compaction_stale_after_conflicts,
    check_concurrent_appends_one_wins,
    check_created_at,
    check_stale_after_conflicts,
    check_threads_sorted,
    sample_events,
    validate,
)
from tidemill.agents.journal import JOURNAL_EVENT, JournalEvent, JournalRecord
from tidemill.errors import JournalConflict

BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.mark.parametrize(
    ("checkpointer", "check"),
    [
        pytest.param(backend, check, id=f"{check.__name__}-{backend}")
        for check in CHECKS
        for backend in BACKENDS
    ],
    indirect=["checkpointer"],
)
async def test_check(checkpointer: Checkpointer, check: Check) -> None:
    await check(checkpointer)


async def test_validate_conforms(checkpointer: Checkpointer) -> None:
    assert await validate(checkpointer) == []


@pytest.fixture(params=[(b, n) for b in BACKENDS for n in (4, 7)], ids=lambda p: f"{p[0]}-{p[1]}")
async def bounded(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Checkpointer]:
    """Each backend made with `max_history` (4, the least, and 7)."""
    name, bound = request.param
    backend: Checkpointer
    if name == "memory":
        backend = MemoryCheckpointer(max_history=bound)
    elif name == "sqlite":
        backend = SQLiteCheckpointer(tmp_path / "journal.db", max_history=bound)
    else:
        url = os.environ.get(POSTGRES_ENV)
        if not url:
            pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server (CI sets it)")
        backend = PostgresCheckpointer(url, schema=unique_schema(), max_history=bound)
    try:
        yield backend
    finally:
        if isinstance(backend, PostgresCheckpointer):
            await backend.drop_schema()
        await backend.aclose()


@pytest.mark.parametrize("check", COMPACTION_CHECKS, ids=lambda check: check.__name__)
async def test_compaction_check(bounded: Checkpointer, check: Check) -> None:
    await check(bounded)


async def test_compaction_checks_need_a_bounded_backend() -> None:
    failures = await validate(MemoryCheckpointer(), checks=COMPACTION_CHECKS)
    assert len(failures) == len(COMPACTION_CHECKS)
    assert all("has no max_history" in failure for failure in failures), failures


def test_samples_cover_every_event_kind() -> None:
    union = typing.get_args(typing.get_args(JournalEvent)[0])
    kinds = {model.model_fields["kind"].default for model in union}
    assert {event.kind for event in sample_events()} == kinds
    for event in sample_events("x"):  # and each survives JSON on its own
        assert JOURNAL_EVENT.validate_json(JOURNAL_EVENT.dump_json(event)) == event


def test_checks_are_named_and_documented() -> None:
    names = [check.__name__ for check in CHECKS]
    assert len(set(names)) == len(names)
    assert all(name.startswith("check_") for name in names)
    assert all(check.__doc__ for check in CHECKS)


# -- the suite catches broken backends ----------------------------------------------


class IgnoresAfter(MemoryCheckpointer):
    """Appends whatever `after` says: two writers can both win."""

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        current = len(await self.read(thread_id))
        return await super().append(thread_id, events, after=current)


class NaiveClock(MemoryCheckpointer):
    """Returns created_at without a timezone, as a careless SQL backend might."""

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        return [
            JournalRecord(r.seq, r.event, r.created_at.replace(tzinfo=None))
            for r in await super().read(thread_id, after=after)
        ]


class UnsortedThreads(MemoryCheckpointer):
    """Lists threads in insertion order."""

    async def threads(self) -> list[str]:
        return list(self._journals)


class SlowRaces(MemoryCheckpointer):
    """Checks `after`, then yields to other tasks before writing: a lost update."""

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        if len(await self.read(thread_id)) != after:
            raise JournalConflict(thread_id, after)
        await asyncio.sleep(0)
        with self._lock:
            stored, times = self._journals.setdefault(thread_id, ([], []))
            stored += [encode_event(event) for event in events]
            times += [datetime.now(UTC).timestamp()] * len(events)
            return len(stored)


class ThreadUnsafe(MemoryCheckpointer):
    """Keeps one journal per OS thread by mistake: other threads' appends vanish."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    @property
    def _store(self) -> MemoryCheckpointer:
        if not hasattr(self._local, "store"):
            self._local.store = MemoryCheckpointer()
        store: MemoryCheckpointer = self._local.store
        return store

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        return await self._store.append(thread_id, events, after=after)

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        return await self._store.read(thread_id, after=after)


class Explodes(MemoryCheckpointer):
    """Every method fails with an unexpected error."""

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        raise RuntimeError("disk on fire")

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        raise RuntimeError("disk on fire")

    async def prune(self, *, older_than: timedelta) -> int:
        raise RuntimeError("disk on fire")


class NeverCompacts(MemoryCheckpointer):
    """Says it keeps `max_history` records, and keeps them all."""

    def __init__(self) -> None:
        super().__init__(max_history=5)

    def _compact(self, thread_id: str, first: int, point: int) -> None:
        pass


class DropsOldRecords(MemoryCheckpointer):
    """Bounds the journal by dropping its oldest records, as a ring buffer would."""

    def __init__(self) -> None:
        super().__init__(max_history=5)

    def _compact(self, thread_id: str, first: int, point: int) -> None:
        stored, times = self._journals[thread_id]
        del stored[: point - first], times[: point - first]
        self._first[thread_id] = point


class ForgetsGraphEvents(MemoryCheckpointer):
    """Compacts into a snapshot that leaves LangGraph's events out."""

    def __init__(self) -> None:
        super().__init__(max_history=5)

    def _compact(self, thread_id: str, first: int, point: int) -> None:
        super()._compact(thread_id, first, point)
        stored = self._journals[thread_id][0]
        snapshot = JOURNAL_EVENT.validate_json(stored[0])
        stored[0] = encode_event(snapshot.model_copy(update={"graph": ()}))


class RenumbersOnCompaction(MemoryCheckpointer):
    """Compacts, then numbers the records from 1 again: a stale `after` can win."""

    def __init__(self) -> None:
        super().__init__(max_history=5)

    def _compact(self, thread_id: str, first: int, point: int) -> None:
        super()._compact(thread_id, first, point)
        self._first[thread_id] = 1


@pytest.mark.parametrize(
    ("broken", "caught_by"),
    [
        pytest.param(NeverCompacts, check_compaction_keeps_bound_and_state, id="never-compacts"),
        pytest.param(DropsOldRecords, check_compaction_keeps_bound_and_state, id="drops-records"),
        pytest.param(ForgetsGraphEvents, check_compaction_keeps_graph_events, id="forgets-graph"),
        pytest.param(RenumbersOnCompaction, check_compaction_stale_after_conflicts, id="renumbers"),
    ],
)
async def test_compaction_checks_catch_a_broken_backend(
    broken: type[MemoryCheckpointer], caught_by: Check
) -> None:
    failures = await validate(broken(), checks=COMPACTION_CHECKS)
    assert caught_by.__name__ in {failure.split(":", 1)[0] for failure in failures}, failures
    with pytest.raises(AssertionError):
        await caught_by(broken())


@pytest.mark.parametrize(
    ("broken", "caught_by"),
    [
        pytest.param(IgnoresAfter, check_stale_after_conflicts, id="ignores-after"),
        pytest.param(IgnoresAfter, check_concurrent_appends_one_wins, id="ignores-after-race"),
        pytest.param(NaiveClock, check_created_at, id="naive-created-at"),
        pytest.param(UnsortedThreads, check_threads_sorted, id="unsorted-threads"),
        pytest.param(SlowRaces, check_concurrent_appends_one_wins, id="lost-update"),
        pytest.param(ThreadUnsafe, check_appends_from_os_threads, id="thread-unsafe"),
    ],
)
async def test_validate_catches_a_broken_backend(
    broken: type[MemoryCheckpointer], caught_by: Check
) -> None:
    failures = await validate(broken())
    failed = {failure.split(":", 1)[0] for failure in failures}
    assert caught_by.__name__ in failed, failures
    with pytest.raises(AssertionError):
        await caught_by(broken())


async def test_validate_reports_errors_instead_of_raising() -> None:
    failures = await validate(Explodes())
    assert len(failures) == len(CHECKS)
    assert all("RuntimeError: disk on fire" in failure for failure in failures), failures


async def test_validate_reports_a_hung_check() -> None:
    async def hangs(checkpointer: Checkpointer) -> None:
        await asyncio.sleep(10)

    failures = await validate(MemoryCheckpointer(), checks=[hangs], time_limit=0.05)
    assert failures == ["hangs: did not finish within 0.05 s"]
