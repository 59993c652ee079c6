"""Compaction details beyond the conformance suite: older databases, atomicity, stale writers."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tidemill.agents._thread import ThreadWriter, load_state
from tidemill.agents.checkpoint import (
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
    encode_event,
)
from tidemill.agents.checkpoint.conformance import conversation
from tidemill.agents.journal import JournalEvent, JournalRecord, ThreadState, ToolFinished
from tidemill.errors import SerializationError, ThreadBusy
from tidemill.types import ToolResult


def _fold(records: list[tuple[int, object]]) -> ThreadState:
    state = ThreadState("t")
    for seq, event in records:
        state.apply(seq, event)  # type: ignore[arg-type]
    return state


def _v2_rows(thread_id: str, count: int) -> list[tuple[object, ...]]:
    """Rows as the previous version (journal format 2, no snapshots) wrote them."""
    rows: list[tuple[object, ...]] = []
    for seq, event in enumerate(conversation(thread_id, runs=3)[:count], start=1):
        payload = json.loads(encode_event(event))
        payload["schema_version"] = 2
        rows.append((thread_id, seq, event.kind, 2, json.dumps(payload), 1_700_000_000.0 + seq))
    return rows


async def test_a_sqlite_database_of_the_previous_version_is_compacted_on_its_next_append(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the table as the previous version created it
        db.execute(
            "CREATE TABLE tidemill_journal (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "kind TEXT NOT NULL, schema_version INTEGER NOT NULL, payload TEXT NOT NULL, "
            "created_at REAL NOT NULL, PRIMARY KEY (thread_id, seq)) WITHOUT ROWID"
        )
        db.executemany("INSERT INTO tidemill_journal VALUES (?, ?, ?, ?, ?, ?)", _v2_rows("t", 20))
    events = conversation("t", runs=3)
    saver = SQLiteCheckpointer(path, max_history=5)
    try:
        assert len(await saver.read("t")) == 20  # read as it was
        assert await saver.append("t", events[20:21], after=20) == 21
        records = await saver.read("t")
        assert len(records) <= 5 and records[0].event.kind == "snapshot"
        assert records[-1].seq == 21
        want = _fold(list(enumerate(events[:21], start=1))).snapshot(records=0)
        assert _fold([(r.seq, r.event) for r in records]).snapshot(records=0) == want
    finally:
        await saver.aclose()
    unbounded = SQLiteCheckpointer(path)  # and a reader without max_history reads it too
    try:
        assert [r.seq for r in await unbounded.read("t")] == [r.seq for r in records]
    finally:
        await unbounded.aclose()


async def test_a_postgres_journal_of_the_previous_version_is_compacted_on_its_next_append(
    postgres_checkpointer: PostgresCheckpointer,
) -> None:
    events = conversation("t", runs=3)
    await postgres_checkpointer.append("t", events[:20], after=0)
    bounded = PostgresCheckpointer(
        postgres_checkpointer.url, schema=postgres_checkpointer.schema, max_history=5
    )
    try:
        assert await bounded.append("t", events[20:21], after=20) == 21
        records = await bounded.read("t")
        assert len(records) <= 5 and records[0].event.kind == "snapshot"
        want = _fold(list(enumerate(events[:21], start=1))).snapshot(records=0)
        assert _fold([(r.seq, r.event) for r in records]).snapshot(records=0) == want
        # Another process, which never saw the thread, keeps it bounded too.
        other = PostgresCheckpointer(bounded.url, schema=bounded.schema, max_history=5)
        try:
            last = 21
            for event in events[21:]:
                last = await other.append("t", [event], after=last)
                assert len(await other.read("t")) <= 5
        finally:
            await other.aclose()
    finally:
        await bounded.aclose()


async def test_a_sqlite_compaction_that_fails_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    saver = SQLiteCheckpointer(path, max_history=5)
    events = conversation("t", runs=1)
    await saver.append("t", events[:5], after=0)
    with sqlite3.connect(path) as db:  # a damaged record in the prefix to fold
        db.execute('UPDATE tidemill_journal SET payload = \'{"kind": "?"}\' WHERE seq = 2')
    with pytest.raises(SerializationError, match="Entry 2"):
        await saver.append("t", events[5:6], after=5)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*), max(seq) FROM tidemill_journal").fetchone() == (5, 5)
    await saver.aclose()


async def test_a_writer_that_read_before_a_compaction_is_busy_not_corrupting() -> None:
    saver = MemoryCheckpointer(max_history=5)
    events = conversation("t", runs=1)  # ends with a finished run
    await saver.append("t", events[:4], after=0)  # paused, then approved: the tool may run
    stale = ThreadWriter(saver, await load_state(saver, "t"))
    # Meanwhile another process runs the tool and finishes the run, compacting.
    await saver.append("t", events[4:], after=4)
    assert (await saver.read("t"))[0].event.kind == "snapshot"
    result = ToolResult(call_id="call-t-0", name="lookup", content="late")
    with pytest.raises(ThreadBusy):
        await stale.append(ToolFinished(result=result))
    state = await load_state(saver, "t")
    assert state.status == "finished"
    assert [m.content for m in state.messages if m.role == "tool"] == ["r0"]


async def test_compaction_keeps_created_at_in_order() -> None:
    saver = MemoryCheckpointer(max_history=4)
    last = 0
    for event in conversation("t", runs=2):
        last = await saver.append("t", [event], after=last)
    stamps = [r.created_at for r in await saver.read("t")]
    assert stamps == sorted(stamps)


async def test_the_engine_folds_a_compacted_journal_like_a_whole_one() -> None:
    from tidemill.engine._journal import Journal

    saver = MemoryCheckpointer(max_history=5)
    events = conversation("t", runs=2)[:10]  # the second run paused for approval
    await saver.append("t", events, after=0)
    journal = await Journal.read(saver, "t")
    assert journal.records[0].event.kind == "snapshot"
    whole = Journal.of("t", await _whole(events))
    assert journal.state.snapshot(records=0) == whole.state.snapshot(records=0)
    assert journal.state.status == "paused" and list(journal.state.pending) == ["call-t-1"]


async def _whole(events: list[JournalEvent]) -> list[JournalRecord]:
    saver = MemoryCheckpointer()
    await saver.append("t", events, after=0)
    return await saver.read("t")
