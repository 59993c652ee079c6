"""Retention: how fast ended runs are pruned, and what pruning costs the runs going on.

1. A real worker runs `--seed` runs of a small tree (a script that prints,
   a two-branch `parallel`, a `for_each` of three: six runs, eleven jobs,
   logs and run events each). Their rows (runs, jobs, results, payloads,
   logs, events) are then copied, with new run ids, until the store holds
   `--trees` ended trees, all made 40 days old. Copying is only how the
   volume is built; what is timed is `AsyncEngine.prune_runs(30 days)`
   deleting every one of them, a batch (200 trees) per transaction:
   trees/s and rows/s.
2. The same again, while a worker runs a stream of one-step runs (submitted
   one at a time, back to back, by this process): each run's latency (its
   submit until `wait` returns) is measured with no prune going on, then
   while `prune_runs` runs, p50/p99/max side by side.
3. And again while a worker's standing retention (`Worker(keep_runs=...)`:
   batches of 50, each full one followed by a pause as long as it took)
   prunes the same backlog.

    .venv/bin/python benchmarks/retention.py                       # both backends
    .venv/bin/python benchmarks/retention.py --backend sqlite --trees 20000

PostgreSQL comes from $TIDEMILL_BENCH_POSTGRES_URL (default
postgresql://postgres@127.0.0.1:5432/test), in a schema of its own, dropped
afterwards; SQLite is a file in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from typing import Any

from tidemill.engine import AsyncEngine
from tidemill.engine.workers._retention import BACKGROUND_BATCH, Retention
from tidemill.flows import Flow
from tidemill.store import Tx

POSTGRES_ENV = "TIDEMILL_BENCH_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
DAY = 86400.0
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
        ],
    }
)  # fmt: skip
ONE = Flow.model_validate({"name": "one", "steps": [{"id": "x", "identity": {}}]})
COPIED = {  # table: the columns that name a run, given a copy's suffix
    "tm_runs": ("id", "root_id", "parent_id"),
    "tm_jobs": ("run_id",),
    "tm_results": ("run_id",),
    "tm_payloads": ("run_id",),
    "tm_logs": ("run_id",),
    "tm_events": ("root_id", "run_id"),
}


def columns(tx: Tx, table: str) -> list[str]:
    """The columns a copy writes: not generated, not an identity."""
    if tx.dialect == "sqlite":
        rows = tx.all(f"PRAGMA table_info({table})")
        names = [str(row[1]) for row in rows]
        return [n for n in names if not (n == "id" and table != "tm_runs")]
    rows = tx.all(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = "
        "current_schema() AND table_name = ? AND is_generated = 'NEVER' "
        "AND identity_generation IS NULL ORDER BY ordinal_position",
        (table,),
    )
    return [str(row[0]) for row in rows]


async def copy_trees(engine: AsyncEngine, seeds: list[str], copies: int) -> None:
    """Copy the seed trees' rows `copies` times (new run ids), a few copies per transaction."""

    def read(tx: Tx) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
        marks = ", ".join("?" * len(seeds))
        tree = [r for (r,) in tx.all(f"SELECT id FROM tm_runs WHERE root_id IN ({marks})", seeds)]
        found = {}
        for table, by in COPIED.items():
            names = columns(tx, table)
            by_root = "root_id" in by
            key, ids = ("root_id", seeds) if by_root else ("run_id", tree)
            rows: list[tuple[Any, ...]] = []
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                rows += tx.all(
                    f"SELECT {', '.join(names)} FROM {table} "
                    f"WHERE {key} IN ({', '.join('?' * len(part))})",
                    part,
                )
            found[table] = (names, rows)
        return found

    source = await engine.store.transact(read)
    per_tx = max(1, 2000 // len(seeds))
    for first in range(0, copies, per_tx):

        def write(tx: Tx, first: int = first) -> None:
            for n in range(first, min(copies, first + per_tx)):
                suffix = f"-c{n}"
                for table, (names, rows) in source.items():
                    renamed = [i for i, name in enumerate(names) if name in COPIED[table]]
                    values = [
                        tuple(
                            (v + suffix if v is not None else None) if i in renamed else v
                            for i, v in enumerate(row)
                        )
                        for row in rows
                    ]
                    marks = ", ".join("?" * len(names))
                    for row in values:
                        tx.execute(
                            f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", row
                        )

        await engine.store.transact(write)


async def age_all(engine: AsyncEngine, days: float) -> None:
    shift = days * DAY
    await engine.store.transact(
        lambda tx: tx.execute(
            "UPDATE tm_runs SET created_at = created_at - ?, finished_at = finished_at - ?",
            (shift, shift),
        )
    )


async def build(engine: AsyncEngine, seed: int, trees: int) -> int:
    async with engine.worker(concurrency=8, poll=0.05):
        seeds = await engine.submit_many(TREE, [{"n": n} for n in range(seed)])
        for run_id in seeds:
            await engine.wait(run_id, timeout=600)
    await copy_trees(engine, seeds, trees // seed - 1)
    await age_all(engine, 40)
    counted = await engine.store.transact(
        lambda tx: tx.one("SELECT COUNT(*) FROM tm_runs WHERE parent_id IS NULL")
    )
    return int(counted[0])


async def latencies(engine: AsyncEngine, stop: asyncio.Event, out: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await engine.wait(await engine.submit(ONE), timeout=120)
        out.append(time.perf_counter() - started)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    async with AsyncEngine(url, migrate=True) as engine:
        trees = await build(engine, args.seed, args.trees)
        rows_before = await engine.store.transact(
            lambda tx: sum(int(tx.one(f"SELECT COUNT(*) FROM {t}")[0]) for t in COPIED)  # type: ignore[index]
        )
        started = time.perf_counter()
        pruned = await engine.prune_runs(30 * DAY)
        took = time.perf_counter() - started
        assert pruned.runs == trees, (pruned.runs, trees)
        deleted = sum(pruned.rows.values())
        figures.update(trees=trees, rows=rows_before, deleted=deleted, prune_s=took,
                       trees_per_s=trees / took, rows_per_s=deleted / took)  # fmt: skip

        # 2. Latency of a stream of runs, without and with a prune going on.
        trees = await build(engine, args.seed, args.trees)
        async with engine.worker(concurrency=4, poll=0.05):
            quiet: list[float] = []
            stop = asyncio.Event()
            task = asyncio.create_task(latencies(engine, stop, quiet))
            await asyncio.sleep(args.window)
            stop.set()
            await task
            busy: list[float] = []
            stop = asyncio.Event()
            task = asyncio.create_task(latencies(engine, stop, busy))
            started = time.perf_counter()
            pruned = await engine.prune_runs(30 * DAY)
            during = time.perf_counter() - started
            stop.set()
            await task
        figures.update(quiet=quiet, busy=busy, prune_busy_s=during, pruned_busy=pruned.runs)

        # 3. The same with a worker's standing retention (smaller batches, paced) instead.
        await build(engine, args.seed, args.trees)
        async with engine.worker(concurrency=4, poll=0.05):
            paced: list[float] = []
            stop = asyncio.Event()
            task = asyncio.create_task(latencies(engine, stop, paced))
            retention = Retention(engine.store, 30 * DAY)
            started = time.perf_counter()
            gone = await retention.once()
            background = time.perf_counter() - started
            stop.set()
            await task
        figures.update(paced=paced, paced_s=background, pruned_paced=gone)
    return figures


def postgres_url() -> tuple[str, str, str]:
    base = os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL)
    schema = f"bench_retention_{secrets.token_hex(4)}"
    return base, schema, f"{base}?schema={schema}"


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def report(name: str, f: dict[str, Any]) -> None:
    print(f"\n== {name} ==")
    print(f"pruned {f['trees']:,} ended trees ({f['deleted']:,} rows; the copied tables held "
          f"{f['rows']:,}) "
          f"in {f['prune_s']:.2f} s: {f['trees_per_s']:,.0f} trees/s, "
          f"{f['rows_per_s']:,.0f} rows/s")  # fmt: skip
    quiet, busy = f["quiet"], f["busy"]
    print(f"a stream of one-step runs: {len(quiet)} with no prune, {len(busy)} during a prune "
          f"of {f['pruned_busy']:,} trees ({f['prune_busy_s']:.2f} s)")  # fmt: skip
    print(f"and {len(f['paced'])} during a worker's standing retention of "
          f"{f['pruned_paced']:,} trees ({f['paced_s']:.2f} s, batches of {BACKGROUND_BATCH}, "
          "paced)")  # fmt: skip
    print("                       p50 ms   p99 ms   max ms")
    rows = (("no prune", quiet), ("prune_runs", busy), ("standing retention", f["paced"]))
    for label, values in rows:
        print(f"{label:<21}{statistics.median(values) * 1000:>8.1f} {pct(values, 0.99):>8.1f} "
              f"{max(values) * 1000:>8.1f}")  # fmt: skip
    for label, values in rows[1:]:
        print(
            f"{label}: p50 {statistics.median(values) / statistics.median(quiet):.2f}x, "
            f"p99 {pct(values, 0.99) / pct(quiet, 0.99):.2f}x the runs' latency with no prune"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--trees", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--window", type=float, default=10.0)
    args = parser.parse_args()
    print(f"{args.trees:,} trees of 6 runs (copies of {args.seed} real ones), python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cpus")  # fmt: skip
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as folder:
            report("SQLite", asyncio.run(measure(f"sqlite:///{folder}/r.db", args)))
    if args.backend in ("postgres", "both"):
        base, schema, url = postgres_url()
        try:
            report("PostgreSQL", asyncio.run(measure(url, args)))
        finally:
            drop_schema(base, schema)


if __name__ == "__main__":
    main()
