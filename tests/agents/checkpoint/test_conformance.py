"""Every checkpointer backend against the conformance suite, and the suite against bugs."""

from __future__ import annotations

import asyncio
import threading
import typing
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from tidemill.agents.checkpoint import Checkpointer, MemoryCheckpointer
from tidemill.agents.checkpoint.conformance import (
    CHECKS,
    Check,
    check_appends_from_os_threads,
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
            journal = self._journals.setdefault(thread_id, [])
            now = datetime.now(UTC)
            for offset, event in enumerate(events, start=len(journal) + 1):
                journal.append(JournalRecord(offset, event, now))
            return len(journal)


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
