"""Faults of the database under running workers: connections killed, writes refused.

PostgreSQL's backends are terminated (`pg_terminate_backend`) again and
again while a worker runs flows and an agent step: the worker reconnects,
every run finishes, and every step is recorded once. Writes that fail (a
full disk, SQLite's `database is locked`) give a typed error, the job is
tried again later, and nothing is half written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import SerializationError
from tidemill.flows import Flow
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, Role, ToolCall

pytestmark = pytest.mark.timeout(60)

SLEEPY = "import time\ndef main(i: int):\n    time.sleep(0.1)\n    return i\n"
STEPS = 15
TOOL = (
    "import os\n"
    "def main(path: str):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(os.environ['TIDEMILL_TOOL_CALL_ID'] + '\\n')\n"
    "    return 'ok'\n"
)


def sleepy(name: str, steps: int) -> Flow:
    return Flow.model_validate(
        {"name": name, "steps": [
            {"id": f"s{i}", "script": SLEEPY, "inputs": {"i": i}} for i in range(steps)]}
    )  # fmt: skip


def agent(effects: Path) -> Flow:
    tool = {"name": "effect", "script": TOOL, "inputs": {"path": str(effects)}}
    step = {"id": "agent", "inputs": {"user_message": "go"},
            "ai_agent": {"model": "fake", "tools": [tool]}}  # fmt: skip
    return Flow.model_validate({"name": "agent", "steps": [step]})


def scripted(_choice: Any) -> ScriptedModel:
    """Calls c0, c1, c2, then finishes, by the tool results its request holds.

    Not a script: a script moves on with each request the model answers, and
    a lost connection can make the step ask again, after the model answered,
    with the same conversation; this model then asks for the same call again.
    """

    def answer(request: ModelRequest) -> Message | str:
        done = sum(1 for message in request.messages if message.role is Role.TOOL)
        if done >= 3:
            return "finished"
        return Message.assistant("", tool_calls=[ToolCall(id=f"c{done}", name="effect")])

    return ScriptedModel(handler=answer)


async def rows(engine: AsyncEngine, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = await engine.store.transact(lambda tx: tx.all(sql, params))
    return found


async def journal_of(url: str, run_id: str) -> str:
    """The agent step's journal, one line per record: what a failure message needs."""
    from tidemill.agents.checkpoint import PostgresCheckpointer
    from tidemill.store import StoreURL

    parsed = StoreURL.parse(url)
    checkpointer = PostgresCheckpointer(parsed.dsn, schema=parsed.schema)
    try:
        records = await checkpointer.read(f"tidemill:{run_id}:agent")
        return "\n".join(f"{r.seq} {r.event.model_dump_json()[:400]}" for r in records)
    finally:
        await checkpointer.aclose()


async def kill_backends(base: str, application: str, stop: asyncio.Event) -> list[float]:
    """Terminate the backends of `application` every 0.2 s until `stop`; when each died."""
    import psycopg

    killed: list[float] = []
    async with await psycopg.AsyncConnection.connect(base, autocommit=True) as connection:
        while not stop.is_set():
            cursor = await connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (application,),
            )
            killed += [time.monotonic() for (done,) in await cursor.fetchall() if done]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)
    return killed


@pytest.mark.slow
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
async def test_runs_finish_while_the_workers_connections_are_killed(
    store_url: str, tmp_path: Path
) -> None:
    base = store_url.partition("?")[0]
    application = f"tidemill_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    url = f"{store_url}&application_name={application}"
    effects = tmp_path / "effects"
    engine = AsyncEngine(url, migrate=True)
    stop = asyncio.Event()
    try:
        runs = [await engine.submit(sleepy(f"sleepy{n}", STEPS)) for n in range(4)]
        agent_run = await engine.submit(agent(effects))
        killer = asyncio.create_task(kill_backends(base, application, stop))
        async with engine.worker(concurrency=4, lease=3.0, poll=0.1, models=scripted):
            deadline = time.monotonic() + 40
            for run_id in [*runs, agent_run]:
                while True:
                    with contextlib.suppress(Exception):  # the waiter's own connection dies too
                        info = await engine.get(run_id)
                        if info.status in ("succeeded", "failed", "cancelled"):
                            break
                    assert time.monotonic() < deadline, "the runs did not finish"
                    await asyncio.sleep(0.1)
            finished = time.monotonic()
            stop.set()
            killed = await killer
        # Connections died while the runs ran, not only after: else this tested nothing.
        assert sum(1 for moment in killed if moment < finished) >= 5, killed
        for run_id in runs:
            assert (await engine.get(run_id)).status == "succeeded"
            results = await rows(
                engine,
                "SELECT step_id, COUNT(*) FROM tm_results WHERE run_id = ? GROUP BY step_id",
                run_id,
            )
            assert dict(results) == {f"s{i}": 1 for i in range(STEPS)}
            assert await engine.wait(run_id, timeout=5) == STEPS - 1
        assert await engine.wait(agent_run, timeout=5) == "finished"
        calls = effects.read_text().splitlines()
        # Each call once, or once more when its start was journaled and a kill cut it off.
        if sorted(set(calls)) != ["c0", "c1", "c2"]:
            pytest.fail(
                f"tool calls that ran: {calls}; journal:\n" + await journal_of(url, agent_run)
            )
    finally:
        stop.set()
        await engine.close()


BIG = (
    "import os\n"
    "def main(path: str, i: int):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(os.environ['TIDEMILL_STEP_ID'] + '\\n')\n"
    "    return 'x' * 200_000\n"
)
"""A step whose result needs new pages of the database to be stored."""


async def test_a_full_disk_refuses_the_write_whole_and_the_job_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite's "database or disk is full", simulated with `max_page_count`."""
    from tidemill.errors import StoreError
    from tidemill.store import _store

    effects = tmp_path / "effects"
    steps = [{"id": f"s{i}", "script": BIG, "inputs": {"path": str(effects), "i": i}}
             for i in range(3)]  # fmt: skip
    engine = AsyncEngine(f"sqlite:///{tmp_path}/t.db", migrate=True)
    limit: list[int] = []
    opened = _store._open_sqlite

    def open_limited(path: Any) -> Any:
        connection = opened(path)
        if limit:
            connection.execute(f"PRAGMA max_page_count = {limit[0]}")
        return connection

    monkeypatch.setattr(_store, "_open_sqlite", open_limited)
    try:
        run_id = await engine.submit(Flow.model_validate({"name": "big", "steps": steps}))
        store = await engine._open()

        def set_limit(pages: int) -> None:
            limit[:] = [pages]
            for connection in list(store._connections):
                connection.execute(f"PRAGMA max_page_count = {pages}")

        (connection,) = store._connections
        set_limit(connection.execute("PRAGMA page_count").fetchone()[0])  # full from now on
        with caplog.at_level("WARNING", logger="tidemill.worker"):
            async with engine.worker(concurrency=1, lease=1.0, poll=0.05, pool_size=1):
                deadline = time.monotonic() + 30
                while not any(r.exc_info for r in caplog.records):
                    assert time.monotonic() < deadline, caplog.text
                    await asyncio.sleep(0.05)
                (refused, *_) = [r for r in caplog.records if r.exc_info]
                assert refused.exc_info is not None
                error = refused.exc_info[1]
                assert isinstance(error, StoreError), error
                assert "database or disk is full" in str(error) and error.hint
                assert await rows(engine, "SELECT step_id FROM tm_results") == []  # nothing half
                set_limit(1_000_000)  # space again
                assert await engine.wait(run_id, timeout=30) == "x" * 200_000
        results = await rows(
            engine, "SELECT step_id, COUNT(*) FROM tm_results GROUP BY step_id ORDER BY step_id"
        )
        assert results == [("s0", 1), ("s1", 1), ("s2", 1)]
        ran = effects.read_text().splitlines()
        assert ran.count("s0") >= 2 and ran.count("s1") == ran.count("s2") == 1, ran
    finally:
        await engine.close()


async def test_a_damaged_journal_entry_fails_the_resume_naming_it(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    """An agent step paused for an approval; one entry of its journal is damaged meanwhile."""
    effects = tmp_path / "effects"
    tool = {"name": "effect", "script": TOOL, "inputs": {"path": str(effects)},
            "requires_approval": True}  # fmt: skip
    step = {"id": "agent", "inputs": {"user_message": "go"},
            "ai_agent": {"model": "fake", "tools": [tool]}}  # fmt: skip
    run_id = await engine.submit(Flow.model_validate({"name": "paused", "steps": [step]}))
    async with engine.worker(concurrency=1, poll=0.05, models=scripted):
        deadline = time.monotonic() + 30
        while not (pending := await engine.approvals(run_id)):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    thread = f"tidemill:{run_id}:agent"
    before = await rows(
        engine, "SELECT seq, payload FROM tidemill_journal WHERE thread_id = ? ORDER BY seq", thread
    )
    assert len(before) >= 2
    seq, payload = before[1]
    original = payload if isinstance(payload, str) else json.dumps(payload)  # PostgreSQL: jsonb

    async def damage(text: str) -> None:
        sql = "UPDATE tidemill_journal SET payload = ? WHERE thread_id = ? AND seq = ?"
        await engine.store.transact(lambda tx: tx.execute(sql, (text, thread, seq)))

    named = f"Entry {seq} of thread {thread!r}"
    await damage('{"kind": "model_response", "response": {"message": 42}}')  # JSON, no event
    with pytest.raises(SerializationError, match=re.escape(named)):
        await engine.approve(pending[0].id)  # the decision is checked against the journal
    assert [a.id for a in await engine.approvals(run_id)] == [pending[0].id]  # still pending
    await damage(original)
    await engine.approve(pending[0].id)
    await damage('{"kind": "model_response", "response": {"message": 42}}')  # before it resumes
    async with engine.worker(concurrency=1, poll=0.05, models=scripted):
        info = await engine.get(run_id)
        deadline = time.monotonic() + 30
        while info.status not in ("succeeded", "failed"):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
            info = await engine.get(run_id)
    assert info.status == "failed" and info.error is not None
    assert info.error["type"] == "SerializationError"
    assert named in info.error["message"]
    assert not effects.exists()  # the approved call did not run on a journal it cannot read
    after = await rows(
        engine, "SELECT seq FROM tidemill_journal WHERE thread_id = ? ORDER BY seq", thread
    )
    assert [seq for (seq,) in after] == [seq for seq, _ in before]  # nothing else was lost
    jobs = await engine.jobs(run_id)
    assert [job.status for job in jobs][-1] == "failed" and len(jobs) <= 2  # not retried


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
async def test_postgres_out_of_disk_refuses_the_write_whole_and_the_job_runs_again(
    store_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A trigger answers inserts of results with `disk_full` (SQLSTATE 53100) for a while."""
    from tidemill.errors import StoreError

    schema = store_url.partition("?schema=")[2]
    effects = tmp_path / "effects"
    steps = [{"id": f"s{i}", "script": BIG, "inputs": {"path": str(effects), "i": i}}
             for i in range(3)]  # fmt: skip
    engine = AsyncEngine(store_url, migrate=True)
    try:
        run_id = await engine.submit(Flow.model_validate({"name": "big", "steps": steps}))
        refuse = (
            f'CREATE FUNCTION "{schema}".tm_full() RETURNS trigger LANGUAGE plpgsql AS $$ '
            "BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' "
            "USING ERRCODE = 'disk_full'; END $$; "
            f'CREATE TRIGGER tm_full BEFORE INSERT ON "{schema}".tm_results '
            f'FOR EACH ROW EXECUTE FUNCTION "{schema}".tm_full()'
        )
        await engine.store.transact(lambda tx: tx.execute(refuse))
        with caplog.at_level("WARNING", logger="tidemill.worker"):
            async with engine.worker(concurrency=1, lease=1.0, poll=0.05, pool_size=1):
                deadline = time.monotonic() + 20  # well within the store's 60 s of reconnecting
                while not any(r.exc_info for r in caplog.records):
                    assert time.monotonic() < deadline, caplog.text
                    await asyncio.sleep(0.05)
                (refused, *_) = [r for r in caplog.records if r.exc_info]
                assert refused.exc_info is not None
                error = refused.exc_info[1]
                assert isinstance(error, StoreError), error
                assert "No space left on device" in str(error) and error.hint
                assert await rows(engine, "SELECT step_id FROM tm_results") == []
                drop = f'DROP TRIGGER tm_full ON "{schema}".tm_results'
                await engine.store.transact(lambda tx: tx.execute(drop))
                assert await engine.wait(run_id, timeout=30) == "x" * 200_000
        results = await rows(
            engine, "SELECT step_id, COUNT(*) FROM tm_results GROUP BY step_id ORDER BY step_id"
        )
        assert [tuple(r) for r in results] == [("s0", 1), ("s1", 1), ("s2", 1)]
    finally:
        await engine.close()
