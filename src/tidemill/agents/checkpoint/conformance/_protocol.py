"""Checks of what each call promises: seqs, stale appends, reads, listing, deletes, pruning.

What `append`, `read`, `threads`, `delete` and `prune` promise, each used the
way the runtime uses it, one call at a time; and `created_at` stamps.
"""

from __future__ import annotations

import asyncio
from datetime import UTC as _UTC
from datetime import datetime, timedelta

from tidemill.agents.checkpoint._base import Checkpointer
from tidemill.agents.checkpoint.conformance._harness import (
    assert_events,
    assert_seqs,
    checked_append,
    checked_read,
    checked_threads,
    expect_conflict,
    marker,
    new_prefix,
)
from tidemill.agents.journal import RunFinished

__all__ = [
    "check_created_at",
    "check_delete",
    "check_empty_append_stores_nothing",
    "check_prune",
    "check_read_after_returns_tail",
    "check_seqs_contiguous",
    "check_stale_after_conflicts",
    "check_threads_sorted",
    "check_unknown_thread_reads_empty",
]


async def check_seqs_contiguous(checkpointer: Checkpointer) -> None:
    """Seqs start at 1 and go up by one per event, across batches of any size.

    Each append returns the new last seq, and threads number their entries
    independently of each other.
    """
    prefix = new_prefix()
    first, second = prefix + "a", prefix + "b"
    last = 0
    for size in (1, 3, 1, 5, 2):
        batch = [marker(f"{last + i}") for i in range(1, size + 1)]
        last = await checked_append(checkpointer, first, batch, after=last)
        if last == 1:
            await checked_append(checkpointer, second, [marker("other")], after=0)
    records = await checked_read(checkpointer, first)
    assert_seqs(records, 1, first)
    assert len(records) == last == 12, f"thread {first!r} holds {len(records)} records, expected 12"
    outputs = [record.event.output for record in records if isinstance(record.event, RunFinished)]
    assert outputs == [str(seq) for seq in range(1, 13)], (
        f"thread {first!r} holds its events out of order: {outputs}"
    )
    others = await checked_read(checkpointer, second)
    assert_seqs(others, 1, second)
    assert len(others) == 1, f"thread {second!r} holds {len(others)} records, expected 1"


async def check_stale_after_conflicts(checkpointer: Checkpointer) -> None:
    """An append whose `after` is not the last seq raises `JournalConflict`, storing nothing.

    Covers `after` too small, too large, 0 on an existing thread, and
    non-zero on a thread that does not exist.
    """
    prefix = new_prefix()
    thread_id, missing = prefix + "t", prefix + "missing"
    events = [marker(i) for i in range(3)]
    await checked_append(checkpointer, thread_id, events, after=0)
    for stale in (0, 1, 2, 4, 10):
        await expect_conflict(checkpointer, thread_id, [marker("stale"), marker("x")], after=stale)
    records = await checked_read(checkpointer, thread_id)
    assert_seqs(records, 1, thread_id)
    assert_events(records, events, thread_id)
    for stale in (1, 5):
        await expect_conflict(checkpointer, missing, [marker("stale")], after=stale)
    assert await checked_read(checkpointer, missing) == [], (
        f"a conflicting append to the new thread {missing!r} stored records"
    )
    assert missing not in await checked_threads(checkpointer), (
        f"a conflicting append to the new thread {missing!r} made it appear in threads()"
    )
    await checked_append(checkpointer, thread_id, [marker("next")], after=3)


async def check_read_after_returns_tail(checkpointer: Checkpointer) -> None:
    """`read(after=k)` returns exactly the records with seq greater than `k`."""
    thread_id = new_prefix() + "tail"
    events = [marker(i) for i in range(1, 6)]
    await checked_append(checkpointer, thread_id, events, after=0)
    for after in range(7):
        records = await checked_read(checkpointer, thread_id, after=after)
        expected = events[after:]
        assert_seqs(records, after + 1, thread_id)
        assert [r.event for r in records] == expected, (
            f"read({thread_id!r}, after={after}) returned seqs {[r.seq for r in records]}, "
            f"expected {list(range(after + 1, 6))}"
        )


async def check_unknown_thread_reads_empty(checkpointer: Checkpointer) -> None:
    """A thread that was never appended to reads as `[]`, at any `after`."""
    thread_id = new_prefix() + "never-written"
    for after in (0, 3):
        records = await checked_read(checkpointer, thread_id, after=after)
        assert records == [], f"read of the unknown thread {thread_id!r} returned {records!r}"
    assert thread_id not in await checked_threads(checkpointer), (
        f"reading the unknown thread {thread_id!r} made it appear in threads()"
    )


async def check_threads_sorted(checkpointer: Checkpointer) -> None:
    """`threads()` lists every thread with records once, sorted as Python sorts strings.

    The ids mix cases, digits, punctuation and non-ASCII letters, so a
    database that sorts by a locale's collation instead of by code point
    fails.
    """
    prefix = new_prefix()
    suffixes = ["b", "B", "a", "A", "_z", "10", "9", "é", "Z", "a b", "ab", "~"]
    ids = [prefix + suffix for suffix in suffixes]
    for thread_id in ids:
        await checked_append(checkpointer, thread_id, [marker(thread_id)], after=0)
    listed = await checked_threads(checkpointer)
    duplicates = sorted({t for t in listed if listed.count(t) > 1})
    assert not duplicates, f"threads() lists these ids more than once: {duplicates}"
    assert listed == sorted(listed), (
        f"threads() is not sorted by code point: {[t for t in listed if t.startswith(prefix)]}"
    )
    ours = [thread_id for thread_id in listed if thread_id.startswith(prefix)]
    assert ours == sorted(ids), f"threads() lists {ours}, expected {sorted(ids)}"


async def check_delete(checkpointer: Checkpointer) -> None:
    """`delete` removes one whole thread, returns True then False, and leaves others alone.

    A deleted thread reads as `[]`, is gone from `threads()` and starts again
    at seq 1.
    """
    prefix = new_prefix()
    doomed, kept = prefix + "doomed", prefix + "kept"
    await checked_append(checkpointer, doomed, [marker(i) for i in range(3)], after=0)
    kept_events = [marker("kept"), marker("still")]
    await checked_append(checkpointer, kept, kept_events, after=0)
    first = await checkpointer.delete(doomed)
    assert first is True, f"delete({doomed!r}) of an existing thread returned {first!r}, not True"
    second = await checkpointer.delete(doomed)
    assert second is False, f"a second delete({doomed!r}) returned {second!r}, not False"
    missing = await checkpointer.delete(prefix + "never-written")
    assert missing is False, f"delete of a thread that never existed returned {missing!r}"
    assert await checked_read(checkpointer, doomed) == [], (
        f"deleted thread {doomed!r} still has records"
    )
    listed = await checked_threads(checkpointer)
    assert doomed not in listed, f"deleted thread {doomed!r} is still listed by threads()"
    assert kept in listed, f"delete({doomed!r}) also removed {kept!r} from threads()"
    assert_events(await checked_read(checkpointer, kept), kept_events, kept)
    await checked_append(checkpointer, doomed, [marker("again")], after=0)
    assert_seqs(await checked_read(checkpointer, doomed), 1, doomed)


async def check_prune(checkpointer: Checkpointer) -> None:
    """`prune` removes exactly the threads whose newest record is older than the limit.

    A thread whose first record is old but whose last is new stays, and the
    count returned is the number of threads removed.
    """
    prefix = new_prefix()
    old, mixed, new = prefix + "old", prefix + "mixed", prefix + "new"
    await checked_append(checkpointer, old, [marker("old"), marker("older")], after=0)
    await checked_append(checkpointer, mixed, [marker("old")], after=0)
    await asyncio.sleep(1.0)
    await checked_append(checkpointer, mixed, [marker("new")], after=1)
    await checked_append(checkpointer, new, [marker("new")], after=0)
    kept = await checkpointer.prune(older_than=timedelta(days=1))
    ours = {old, mixed, new}
    listed = set(await checked_threads(checkpointer))
    assert ours <= listed, (
        f"prune(older_than=1 day) removed threads written a second ago: {sorted(ours - listed)} "
        f"(it returned {kept})"
    )
    before = set(await checked_threads(checkpointer))
    removed = await checkpointer.prune(older_than=timedelta(seconds=0.5))
    after = set(await checked_threads(checkpointer))
    assert old not in after, f"prune(older_than=0.5 s) kept {old!r}, last written 1 s before"
    assert await checked_read(checkpointer, old) == [], f"pruned thread {old!r} still has records"
    assert mixed in after, f"prune removed {mixed!r}, whose newest record is new"
    assert new in after, f"prune removed {new!r}, written just before"
    assert len(await checked_read(checkpointer, mixed)) == 2, f"prune removed records of {mixed!r}"
    assert removed == len(before - after), (
        f"prune returned {removed!r} but removed {len(before - after)} thread(s)"
    )


async def check_created_at(checkpointer: Checkpointer) -> None:
    """`created_at` is timezone-aware, close to now, and never decreases along a thread."""
    thread_id = new_prefix() + "clock"
    started = datetime.now(_UTC)
    last = 0
    for size in (1, 3, 1):
        last = await checked_append(
            checkpointer, thread_id, [marker(i) for i in range(size)], after=last
        )
        await asyncio.sleep(0.02)
    records = await checked_read(checkpointer, thread_id)
    assert len(records) == last, f"thread {thread_id!r} holds {len(records)} records"
    for record in records:
        stamp = record.created_at
        assert isinstance(stamp, datetime), (
            f"entry {record.seq}'s created_at is a {type(stamp).__name__}, not a datetime"
        )
        naive = f"entry {record.seq}'s created_at {stamp!r} is naive; it must be timezone-aware"
        assert stamp.tzinfo is not None, naive
        assert stamp.utcoffset() is not None, naive
        drift = abs((stamp - started).total_seconds())
        assert drift < 600, (
            f"entry {record.seq}'s created_at {stamp.isoformat()} is {drift:.0f} s from now "
            f"({started.isoformat()}); is it stored in the wrong timezone?"
        )
    stamps = [record.created_at for record in records]
    backwards = [
        (records[i].seq, records[i + 1].seq)
        for i in range(len(stamps) - 1)
        if stamps[i + 1] < stamps[i]
    ]
    assert not backwards, f"created_at decreases between entries {backwards} of {thread_id!r}"


async def check_empty_append_stores_nothing(checkpointer: Checkpointer) -> None:
    """Appending no events returns `after` and stores nothing.

    On a new thread it does not create the thread: the thread still reads
    as `[]` and is not listed by `threads()`.
    """
    prefix = new_prefix()
    fresh, existing = prefix + "fresh", prefix + "existing"
    result = await checkpointer.append(fresh, [], after=0)
    assert result == 0, f"an empty append to a new thread returned {result!r}, expected 0"
    assert await checked_read(checkpointer, fresh) == [], "an empty append stored records"
    listed = await checked_threads(checkpointer)
    assert fresh not in listed, (
        f"an empty append made {fresh!r} appear in threads(), though it has no records"
    )
    await checked_append(checkpointer, existing, [marker(1), marker(2)], after=0)
    result = await checkpointer.append(existing, [], after=2)
    assert result == 2, f"an empty append after entry 2 returned {result!r}, expected 2"
    assert len(await checked_read(checkpointer, existing)) == 2, "an empty append stored records"
    await checked_append(checkpointer, existing, [marker(3)], after=2)
