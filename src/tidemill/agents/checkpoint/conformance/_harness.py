"""What every conformance check is built from.

Thread ids no other run uses, calls that turn a backend's exception into an
`AssertionError` saying which call failed, and assertions on what reads back.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from pydantic import JsonValue

from tidemill.agents.checkpoint._base import Checkpointer
from tidemill.agents.journal import JournalEvent, JournalRecord, RunFinished
from tidemill.errors import JournalConflict

__all__ = [
    "assert_events",
    "assert_seqs",
    "checked_append",
    "checked_read",
    "checked_threads",
    "expect_conflict",
    "marker",
    "new_prefix",
    "short",
]


def new_prefix() -> str:
    """A thread-id prefix no other run of the suite uses."""
    return f"conformance-{secrets.token_hex(6)}-"


def marker(value: JsonValue) -> RunFinished:
    """A small event that says which writer wrote it."""
    return RunFinished(output=value)


async def checked_append(
    checkpointer: Checkpointer, thread_id: str, events: Sequence[JournalEvent], *, after: int
) -> int:
    """Append and check the returned seq, with a clear message on any error."""
    try:
        last = await checkpointer.append(thread_id, events, after=after)
    except Exception as exc:
        raise AssertionError(
            f"append({thread_id!r}, {len(events)} event(s), after={after}) raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    expected = after + len(events)
    assert last == expected, (
        f"append({thread_id!r}, {len(events)} event(s), after={after}) returned {last!r}, "
        f"expected the new last seq {expected}"
    )
    return last


async def checked_read(
    checkpointer: Checkpointer, thread_id: str, *, after: int = 0
) -> list[JournalRecord]:
    try:
        return await checkpointer.read(thread_id, after=after)
    except Exception as exc:
        raise AssertionError(
            f"read({thread_id!r}, after={after}) raised {type(exc).__name__}: {exc}"
        ) from exc


async def checked_threads(checkpointer: Checkpointer) -> list[str]:
    try:
        return await checkpointer.threads()
    except Exception as exc:
        raise AssertionError(f"threads() raised {type(exc).__name__}: {exc}") from exc


async def expect_conflict(
    checkpointer: Checkpointer, thread_id: str, events: Sequence[JournalEvent], *, after: int
) -> None:
    """Assert that this append raises `JournalConflict`."""
    try:
        result = await checkpointer.append(thread_id, events, after=after)
    except JournalConflict:
        return
    except Exception as exc:
        raise AssertionError(
            f"append({thread_id!r}, after={after}) with a stale `after` raised "
            f"{type(exc).__name__}: {exc}; expected JournalConflict"
        ) from exc
    raise AssertionError(
        f"append({thread_id!r}, after={after}) with a stale `after` returned {result!r}; "
        "expected JournalConflict"
    )


def assert_seqs(records: Sequence[JournalRecord], first: int, thread_id: str) -> None:
    seqs = [record.seq for record in records]
    expected = list(range(first, first + len(records)))
    assert seqs == expected, f"thread {thread_id!r} has seqs {seqs}, expected {expected}"


def assert_events(
    records: Sequence[JournalRecord], events: Sequence[JournalEvent], thread_id: str
) -> None:
    """Assert that `records` hold exactly `events`, in order."""
    assert len(records) == len(events), (
        f"thread {thread_id!r} reads back {len(records)} record(s), expected {len(events)}"
    )
    for record, event in zip(records, events, strict=True):
        assert record.event == event, (
            f"entry {record.seq} of thread {thread_id!r} ({event.kind}) does not round-trip: "
            f"wrote {short(event)}, read {short(record.event)}"
        )


def short(value: object, limit: int = 400) -> str:
    """`repr(value)`, cut to `limit` characters for messages."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
