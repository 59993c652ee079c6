"""Pruning ended runs by age, on SQLite and PostgreSQL: what goes, what stays.

A run that ended long enough ago goes with the whole tree under it (branch,
loop and sub-flow runs) and every row they own: jobs, results, payloads,
logs, usage, approvals, run events, waits, agent journal threads, webhook
keys, and its flow definition once no run uses it. A newer run, one still
waiting however old, another workspace's runs, agent memory and a schedule's
history of fires stay. Runs are made old by moving their times back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from tidemill.engine import AsyncEngine, Pruned
from tidemill.errors import InvalidOption
from tidemill.flows import Flow
from tidemill.llm import Model, ScriptedModel
from tidemill.store import Tx

pytestmark = pytest.mark.timeout(120)

DAY = 86400.0

# Every table that holds a run's rows, and the column naming its run.
RUN_TABLES = {
    "tm_runs": "root_id",
    "tm_jobs": "run_id",
    "tm_results": "run_id",
    "tm_payloads": "run_id",
    "tm_logs": "run_id",
    "tm_usage": "root_id",
    "tm_approvals": "root_id",
    "tm_events": "root_id",
    "tm_waits": "root_id",
    "tm_hook_keys": "run_id",
}

TREE = Flow.model_validate(
    {
        "name": "tree",
        "steps": [
            {"id": "say", "script": "def main(n):\n    print('n is', n)\n    return n\n",
             "inputs": {"n": {"expr": "flow_input.n"}}},
            {"id": "par", "needs": ["say"], "parallel": {"branches": [
                {"steps": [{"id": "a", "identity": {}, "inputs": {"v": 1}}]},
                {"steps": [{"id": "b", "identity": {}, "inputs": {"v": 2}}]},
            ]}},
            {"id": "each", "needs": ["say"], "for_each": {
                "items": {"expr": "[1, 2, 3]"},
                "steps": [{"id": "sq", "identity": {}, "inputs": {"v": {"expr": "iter.value"}}}],
            }},
            {"id": "ok", "needs": ["par", "each"], "approval": {"message": "go on?"}},
            {"id": "agent", "needs": ["ok"], "ai_agent": {
                "model": "fake", "system": "You answer.", "memory": {"turns": 5}},
             "inputs": {"user_message": "hello", "memory_id": {"expr": "flow_input.memory"}}},
        ],
    }
)  # fmt: skip

RAISES = "def main():\n    raise ValueError(1)\n"

SLEEPER = Flow.model_validate(
    {"name": "sleeper", "steps": [{"id": "nap", "sleep": {"for": "30d"}}]}
)


def resolver(model: Model) -> Callable[[Any], Model]:
    return lambda _choice: model


def answers() -> ScriptedModel:
    return ScriptedModel(handler=lambda request: f"re: {request.messages[-1].content}")


async def rows_of(engine: AsyncEngine, run_ids: list[str]) -> dict[str, int]:
    """Rows each run table holds for these top-level runs' trees (journal threads too)."""

    def count(tx: Tx) -> dict[str, int]:
        tree = [
            str(r)
            for root in run_ids
            for (r,) in tx.all("SELECT id FROM tm_runs WHERE root_id = ?", (root,))
        ]
        counts: dict[str, int] = {}
        for table, column in RUN_TABLES.items():
            ids = run_ids if column == "root_id" or table == "tm_hook_keys" else tree
            total = 0
            for run_id in ids:
                (n,) = tx.one(f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", (run_id,)) or (0,)
                total += int(n)
            counts[table] = total
        counts["tidemill_journal"] = sum(
            int((tx.one("SELECT COUNT(*) FROM tidemill_journal WHERE thread_id LIKE ?",
                        (f"tidemill:{run_id}:%",)) or (0,))[0])
            for run_id in tree
        )  # fmt: skip
        return counts

    result: dict[str, int] = await engine.store.transact(count)
    return result


async def age(engine: AsyncEngine, run_ids: list[str], days: float) -> None:
    """Move these top-level runs' trees `days` back in time."""
    shift = days * DAY

    def move(tx: Tx) -> None:
        for root in run_ids:
            tx.execute(
                "UPDATE tm_runs SET created_at = created_at - ?, finished_at = finished_at - ? "
                "WHERE root_id = ?",
                (shift, shift, root),
            )

    await engine.store.transact(move)


async def finish_tree(engine: AsyncEngine, model: ScriptedModel, n: int, memory: str) -> str:
    """A run of TREE, its approval approved, ended."""
    run_id = await engine.submit(TREE, {"n": n, "memory": memory})
    for _ in range(600):
        pending = await engine.approvals(run_id=run_id)
        if pending:
            await engine.approve(pending[0].id, actor="ada")
            break
        await asyncio.sleep(0.05)
    await engine.wait(run_id, timeout=60)
    return run_id


async def test_an_old_run_goes_whole_and_the_rest_stays(engine: AsyncEngine) -> None:
    model = answers()
    async with engine.worker(poll=0.05, pool_size=1, models=resolver(model)):
        old = await finish_tree(engine, model, 1, "m-old")
        new = await finish_tree(engine, model, 2, "m-new")
        sleeping = await engine.submit(SLEEPER)
        for _ in range(600):
            if (await engine.get(sleeping)).status == "waiting":
                break
            await asyncio.sleep(0.05)
        assert (await engine.get(sleeping)).status == "waiting"
    now = time.time()

    def extras(tx: Tx) -> None:
        tx.put_hook_key("default", "f/x/hook", "key-1", old, now)
        tx.put_hook_key("default", "f/x/hook", "key-2", new, now)
        tx.insert_fire("default", "f/x/every", 1000.0, status="started", version=1,
                       now=now, run_id=old)  # fmt: skip

    await engine.store.transact(extras)
    await age(engine, [old, sleeping], days=40)
    await age(engine, [new], days=10)
    before_old, before_new = await rows_of(engine, [old]), await rows_of(engine, [new])
    # Every kind of row is there to delete (the waits of the sleeping run are checked below).
    assert all(before_old[table] for table in RUN_TABLES if table != "tm_waits"), before_old
    assert before_old["tidemill_journal"] > 0
    assert (await rows_of(engine, [sleeping]))["tm_waits"] == 1

    seen: list[int] = []
    pruned = await engine.prune_runs(timedelta(days=30), on_batch=lambda p: seen.append(p.runs))

    assert pruned.runs == 1 and not pruned.dry_run and seen[-1] == 1
    after_old = await rows_of(engine, [old])
    assert after_old == dict.fromkeys(after_old, 0), after_old
    # What it reported is what went, table by table.
    for table, count in before_old.items():
        if table == "tm_waits":
            continue
        assert pruned.rows.get(table, 0) == count, (table, pruned.rows)
    assert await rows_of(engine, [new]) == before_new
    assert (await engine.get(sleeping)).status == "waiting"
    assert (await rows_of(engine, [sleeping]))["tm_waits"] == 1
    assert await engine.wait(new, timeout=5) is not None
    # Memory outlives runs; the fire stays in the schedule's history, its outcome set.
    memories = await engine.store.transact(
        lambda tx: tx.all("SELECT COUNT(*) FROM tm_agent_memory WHERE run_id = ?", (old,))
    )
    assert memories[0][0] > 0
    fire = await engine.store.transact(
        lambda tx: tx.one("SELECT run_id, outcome FROM tm_schedule_fires WHERE path = 'f/x/every'")
    )
    assert fire == (old, "succeeded")
    with pytest.raises(Exception, match="No run"):
        await engine.get(old)


async def test_a_definition_goes_with_the_last_run_that_used_it(engine: AsyncEngine) -> None:
    one = Flow.model_validate({"name": "one", "steps": [{"id": "x", "identity": {}}]})
    two = Flow.model_validate({"name": "two", "steps": [{"id": "y", "identity": {}}]})
    async with engine.worker(poll=0.05):
        a = await engine.submit(one)
        b = await engine.submit(one)
        c = await engine.submit(two)
        for run_id in (a, b, c):
            await engine.wait(run_id, timeout=60)
    await age(engine, [a, c], days=5)

    def names(tx: Tx) -> list[str]:
        return sorted(str(n) for (n,) in tx.all("SELECT name FROM tm_definitions"))

    pruned = await engine.prune_runs(2 * DAY)
    assert pruned.runs == 2
    assert await engine.store.transact(names) == ["one"]  # b still runs it
    assert (await engine.get(b)).status == "succeeded"


async def test_batches_a_dry_run_and_a_workspace(engine: AsyncEngine) -> None:
    flow = Flow.model_validate({"name": "tiny", "steps": [{"id": "x", "identity": {}}]})
    async with engine.worker(poll=0.05, concurrency=8):
        plain = await engine.submit_many(flow, [{"n": n} for n in range(7)])
        sourced = await engine.submit(flow, source={"workspace": "acme", "path": "f/a/tiny"})
        for run_id in [*plain, sourced]:
            await engine.wait(run_id, timeout=60)
    await age(engine, [*plain, sourced], days=3)

    dry = await engine.prune_runs(DAY, dry_run=True)
    assert (dry.runs, dry.rows, dry.dry_run) == (8, {}, True)
    assert len(await engine.runs(limit=100)) == 8  # nothing went

    only = await engine.prune_runs(DAY, workspace="acme")
    assert only.runs == 1
    assert sourced not in {info.id for info in await engine.runs(limit=100)}

    totals: list[Pruned] = []
    rest = await engine.prune_runs(DAY, batch=3, on_batch=lambda p: totals.append(Pruned(
        p.before, p.runs, dict(p.rows))))  # fmt: skip
    assert rest.runs == 7
    assert [p.runs for p in totals] == [3, 6, 7]  # progress after each transaction
    assert await engine.runs(limit=100) == []


async def test_a_failed_and_a_cancelled_run_go_too_and_bad_ages_are_refused(
    engine: AsyncEngine,
) -> None:
    fails = Flow.model_validate(
        {
            "name": "fails",
            "steps": [{"id": "x", "script": "def main():\n    raise ValueError(1)\n"}],
        }
    )
    async with engine.worker(poll=0.05):
        failed = await engine.submit(fails)
        with pytest.raises(Exception):  # noqa: B017 - RunFailed, whatever its text
            await engine.wait(failed, timeout=60)
    cancelled = await engine.submit(SLEEPER, start_at=time.time() + 3600)
    await engine.cancel(cancelled)
    await age(engine, [failed, cancelled], days=2)
    assert (await engine.prune_runs(DAY)).runs == 2
    for bad in (0, -1.0, float("nan"), float("inf"), timedelta(0), "30d", True):
        with pytest.raises(InvalidOption):
            await engine.prune_runs(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption):
        await engine.prune_runs(DAY, batch=0)


async def test_a_run_retried_after_it_was_listed_is_not_deleted(engine: AsyncEngine) -> None:
    """The deleting transaction checks each listed run again: one retried since stays."""
    fails = Flow.model_validate(
        {
            "name": "fails",
            "steps": [{"id": "x", "script": "def main():\n    raise ValueError(1)\n"}],
        }
    )
    async with engine.worker(poll=0.05):
        run_id = await engine.submit(fails)
        with pytest.raises(Exception):  # noqa: B017
            await engine.wait(run_id, timeout=60)
    await age(engine, [run_id], days=2)
    listed = await engine.store.transact(lambda tx: tx.ended_roots(before=time.time(), limit=9))
    assert listed == [run_id]
    await engine.retry(run_id)
    deleted = await engine.store.transact(lambda tx: tx.delete_run_trees(listed))
    assert deleted == (0, {})
    assert (await engine.get(run_id)).status in ("queued", "running")


async def test_a_worker_keeping_runs_prunes_on_its_own(engine: AsyncEngine) -> None:
    flow = Flow.model_validate({"name": "tiny", "steps": [{"id": "x", "identity": {}}]})
    async with engine.worker(poll=0.05):
        old = await engine.submit(flow)
        await engine.wait(old, timeout=60)
    await age(engine, [old], days=8)
    async with engine.worker(poll=0.05, keep_runs=7 * DAY) as worker:
        assert worker.retention is not None
        for _ in range(200):
            if worker.retention.pruned:
                break
            await asyncio.sleep(0.05)
        recent = await engine.submit(flow)
        await engine.wait(recent, timeout=60)
    assert worker.retention.pruned == 1
    assert [info.id for info in await engine.runs(limit=10)] == [recent]
    with pytest.raises(InvalidOption, match="keep_runs"):
        async with engine.worker(keep_runs=0):
            pass
