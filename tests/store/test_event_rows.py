"""`tm_events` on SQLite and PostgreSQL: rows in id order, resumed after an id, by root."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tidemill.store import EventRow, RunRow, Store, StoreURL, Tx, upgrade
from tidemill.store._results import LOG_EVENT_TEXT


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    store = Store(StoreURL.parse(store_url))
    await upgrade(store)
    try:
        yield store
    finally:
        await store.close()


def define(tx: Tx) -> None:
    tx.put_definition("d", "f", "{}", 1.0)


def run_row(run_id: str, root_id: str, parent_id: str | None = None) -> RunRow:
    return RunRow(
        run_id, root_id, parent_id, None, None, "[]", "f", "d", "running", None, 1.0, 1.0,
        None, None,
    )  # fmt: skip


async def test_events_come_in_id_order_and_resume_after_an_id(store: Store) -> None:
    def write(tx: Tx) -> None:
        define(tx)
        tx.insert_run(run_row("root", "root"))
        tx.insert_run(run_row("child", "root", "root"))
        tx.insert_run(run_row("other", "other"))
        tx.add_event("root", "a", {"n": 1}, now=2.0, root_id="root")
        tx.add_event("child", "b", {"n": 2}, now=3.0)  # its root is looked up
        tx.add_event("other", "c", {}, now=4.0, root_id="other")
        tx.add_event("root", "d", {"n": [1, "é"]}, now=5.0, root_id="root", step_id="s")

    await store.transact(write)
    rows: list[EventRow] = await store.transact(lambda tx: tx.events("root"))
    assert [(r.kind, r.run_id, r.root_id) for r in rows] == [
        ("run_queued", "root", "root"),
        ("run_started", "child", "root"),
        ("a", "root", "root"),
        ("b", "child", "root"),
        ("d", "root", "root"),
    ]
    assert rows[1].data == {"flow": "f", "parent_id": "root", "parent_job": None, "scope": []}
    assert (rows[4].data, rows[4].step_id, rows[4].job_id, rows[4].at) == (
        {"n": [1, "é"]},
        "s",
        None,
        5.0,
    )
    ids = [r.id for r in rows]
    assert ids == sorted(ids)
    later = await store.transact(lambda tx: tx.events("root", after=ids[2]))
    assert later == rows[3:]
    page = await store.transact(lambda tx: tx.events("root", after=ids[0], limit=2))
    assert page == rows[1:3]
    own = await store.transact(lambda tx: tx.events("root", run_id="child"))
    assert [r.kind for r in own] == ["run_started", "b"]
    assert await store.transact(lambda tx: tx.events("nobody")) == []


async def test_a_claim_records_each_job_s_start(store: Store) -> None:
    def write(tx: Tx) -> None:
        define(tx)
        tx.insert_run(run_row("r", "r"))
        tx.insert_job("r", "one", 1, now=1.0)
        tx.insert_job("r", "two", 1, now=1.0)

    await store.transact(write)
    claimed = await store.transact(lambda tx: tx.claim("w1", 5, now=2.0, lease_until=100.0))
    assert [job.step_id for job in claimed] == ["one", "two"]
    rows = await store.transact(lambda tx: tx.events("r"))
    started = [r for r in rows if r.kind == "step_started"]
    assert [(r.step_id, r.job_id, r.data) for r in started] == [
        ("one", claimed[0].id, {"attempt": 1, "worker": "w1"}),
        ("two", claimed[1].id, {"attempt": 1, "worker": "w1"}),
    ]
    # A job whose lease ran out is taken over: its start says so.
    again = await store.transact(lambda tx: tx.claim("w2", 5, now=200.0, lease_until=300.0))
    assert len(again) == 2
    rows = await store.transact(lambda tx: tx.events("r", after=started[-1].id))
    assert [(r.job_id, r.data) for r in rows] == [
        (job.id, {"attempt": 1, "worker": "w2", "reclaimed": True}) for job in claimed
    ]


async def test_a_finished_job_is_one_event(store: Store) -> None:
    def write(tx: Tx) -> int:
        define(tx)
        tx.insert_run(run_row("r", "r"))
        job = tx.insert_job("r", "s", 1, now=1.0, status="running", worker="w", lease_until=9.0)
        assert tx.finish_job(job.id, status="failed", now=2.0, epoch=job.epoch, error={"type": "E"})
        assert not tx.finish_job(job.id, status="failed", now=2.0, epoch=job.epoch)
        return job.id

    job_id = await store.transact(write)
    rows = await store.transact(lambda tx: tx.events("r"))
    assert [(r.kind, r.job_id, r.step_id, r.data) for r in rows[1:]] == [
        ("step_finished", job_id, "s", {"status": "failed", "attempt": 1, "error": {"type": "E"}})
    ]


async def test_a_log_chunk_is_an_event_cut_when_long(store: Store) -> None:
    long = "y" * (LOG_EVENT_TEXT + 5)

    def write(tx: Tx) -> None:
        define(tx)
        tx.insert_run(run_row("r", "r"))
        job = tx.insert_job("r", "s", 1, now=1.0)
        tx.append_logs("r", job.id, [("stdout", "hi\n"), ("stderr", ""), ("stderr", long)], 2.0)

    await store.transact(write)
    logs = await store.transact(lambda tx: tx.logs("r"))
    rows = [r for r in await store.transact(lambda tx: tx.events("r")) if r.kind == "log"]
    assert [r.data for r in rows] == [
        {"stream": "stdout", "text": "hi\n", "log_id": logs[0].id},
        {"stream": "stderr", "text": long[:LOG_EVENT_TEXT], "log_id": logs[1].id,
         "size": len(long), "truncated": True},
    ]  # fmt: skip
    assert {r.step_id for r in rows} == {"s"}
