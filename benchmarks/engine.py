"""The engine's cost per step and its throughput, next to DBOS and Procrastinate.

Two tables, from one run, on the same PostgreSQL server:

1. Forty sequential trivial steps (each returns its input + 1), milliseconds
   per step = wall time from submit until the run's result is read / 40,
   median over measured runs after one warm-up:
   - Tidemill, in-process function steps (`script: {function: engine_steps:inc,
     in_process: true}`), on SQLite and on PostgreSQL;
   - Tidemill, pooled script steps (inline `def main(x): return x + 1`, each
     in a pre-started child process), on SQLite and on PostgreSQL;
   - DBOS, one workflow of 40 `@DBOS.step()` functions;
   - Procrastinate, a chain of 40 jobs, each deferring the next.
   Tidemill runs one in-process worker (concurrency 4), submitting from the
   same process, as a script would.

2. 1,000 independent trivial jobs drained by 1, 2 and 4 worker processes on
   PostgreSQL: jobs per second from the moment the workers start until every
   job is done. Tidemill: 1,000 runs of a one-step flow, workers with
   concurrency 1 (as Procrastinate's); Procrastinate: 1,000 deferred jobs.
   Both sides alike: the worker processes have started and connected (each
   says "ready") before the clock starts, and the clock stops when a plain
   query on a connection of its own, every 5 ms, finds no job to do or doing.

    .venv-bench/bin/python benchmarks/engine.py [--quick]

PostgreSQL comes from $TIDEMILL_BENCH_POSTGRES_URL (default
postgresql://postgres@127.0.0.1:5432/test); Tidemill uses a schema of its own
per row, dropped afterwards; the peers make and drop databases of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).parent))

import engine_peers

from tidemill.engine import AsyncEngine
from tidemill.flows import Flow

POSTGRES_ENV = "TIDEMILL_BENCH_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
STEPS = 40
TARGET_MS = {"in-process SQLite": 1.0, "in-process PostgreSQL": 2.0, "script": 10.0}
WORKER_FLAG = "--tidemill-worker"
CONCURRENCY = 1  # per worker process in the throughput table, as Procrastinate's workers


def chain(kind: str, steps: int) -> Flow:
    """`steps` sequential steps, each adding one to the previous result."""
    body: list[dict[str, Any]] = []
    for i in range(steps):
        previous = {"expr": "flow_input.start"} if i == 0 else {"expr": "previous_result"}
        if kind == "function":
            step: dict[str, Any] = {
                "id": f"s{i}",
                "script": {"function": "engine_steps:inc", "in_process": True},
                "inputs": {"x": previous},
            }
        else:
            step = {
                "id": f"s{i}",
                "script": "def main(x):\n    return x + 1\n",
                "inputs": {"x": previous},
            }
        body.append(step)
    return Flow.model_validate({"name": f"chain-{kind}", "steps": body})


def schema_url(base: str) -> tuple[str, str]:
    schema = f"tm_bench_{os.getpid()}_{secrets.token_hex(3)}"
    return f"{base}?schema={schema}", schema


def drop_schema(base: str, schema: str) -> None:
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def sequential(url: str, kind: str, runs: int) -> list[float]:
    """Seconds per step for each measured run of the chain."""
    flow = chain(kind, STEPS)
    engine = AsyncEngine(url, migrate=True)
    per_step: list[float] = []
    try:
        async with engine.worker(concurrency=4, poll=0.5, pool_size=2):
            for index in range(runs + 1):
                started = time.perf_counter()
                run_id = await engine.submit(flow, {"start": 0})
                result = await engine.wait(run_id, timeout=120)
                elapsed = time.perf_counter() - started
                engine_peers.check(result == STEPS, f"chain returned {result}")
                if index:  # the first run warms up
                    per_step.append(elapsed / STEPS)
    finally:
        await engine.close()
    return per_step


async def _worker_main(url: str) -> None:
    """A worker process of the throughput table: ready, then `go` on stdin, then work."""
    import signal

    engine = AsyncEngine(url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await engine.store.transact(lambda tx: tx.counts())  # connected and warm
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    async with engine.worker(concurrency=CONCURRENCY, poll=0.2):
        await stop.wait()
    await engine.close()


async def throughput(base: str, jobs: int, workers: int) -> float:
    """Jobs per second: `jobs` one-step runs drained by `workers` worker processes."""
    url, schema = schema_url(base)
    flow = Flow.model_validate(
        {
            "name": "noop",
            "steps": [
                {
                    "id": "noop",
                    "script": {"function": "engine_steps:noop", "in_process": True},
                }
            ],
        }
    )
    engine = AsyncEngine(url, migrate=True)
    processes: list[subprocess.Popen[str]] = []
    try:
        run_ids = await engine.submit_many(flow, [{}] * jobs)
        for _ in range(workers):
            processes.append(
                subprocess.Popen(  # noqa: ASYNC220 - started before the clock
                    [sys.executable, __file__, WORKER_FLAG, url],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for process in processes:  # interpreters start and connect, untimed (as the peer's)
            assert process.stdout is not None
            line = await asyncio.to_thread(process.stdout.readline)
            engine_peers.check(line.strip() == "ready", f"a worker process said {line!r}")
        # The clock stops when no job is left to do or doing, seen as the peer sees
        # it: one plain query on a connection of its own every POLL_INTERVAL.
        async with await psycopg.AsyncConnection.connect(base, autocommit=True) as watch:
            await watch.execute(f'SET search_path TO "{schema}"')
            started = time.perf_counter()
            for process in processes:
                assert process.stdin is not None
                process.stdin.write("go\n")
                process.stdin.flush()
            while True:
                left = await watch.execute(
                    "SELECT count(*) FROM tm_jobs WHERE status IN ('queued', 'running')"
                )
                row = await left.fetchone()
                if row is not None and row[0] == 0:
                    break
                engine_peers.check(time.perf_counter() - started < 120, "not done in 120 s")
                await asyncio.sleep(engine_peers.POLL_INTERVAL)
            elapsed = time.perf_counter() - started
        counts = await engine.store.transact(lambda tx: tx.counts())
        engine_peers.check(counts == {"succeeded": jobs}, f"job statuses {counts}")
        engine_peers.check(
            (await engine.get(run_ids[-1])).status == "succeeded", "the last run did not succeed"
        )
        return jobs / elapsed
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        await engine.close()
        drop_schema(base, schema)


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and jobs")
    args = parser.parse_args()
    runs = 2 if args.quick else 5
    jobs = 200 if args.quick else 1000
    base = os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL)

    rows: list[tuple[str, list[float], float | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(
            (
                "Tidemill in-process, SQLite",
                asyncio.run(sequential(f"sqlite:///{tmp}/a.db", "function", runs)),
                TARGET_MS["in-process SQLite"],
            )
        )
        url, schema = schema_url(base)
        try:
            rows.append(
                (
                    "Tidemill in-process, PostgreSQL",
                    asyncio.run(sequential(url, "function", runs)),
                    TARGET_MS["in-process PostgreSQL"],
                )
            )
        finally:
            drop_schema(base, schema)
        rows.append(
            (
                "Tidemill script pool, SQLite",
                asyncio.run(sequential(f"sqlite:///{tmp}/b.db", "script", runs)),
                TARGET_MS["script"],
            )
        )
        url, schema = schema_url(base)
        try:
            rows.append(
                (
                    "Tidemill script pool, PostgreSQL",
                    asyncio.run(sequential(url, "script", runs)),
                    TARGET_MS["script"],
                )
            )
        finally:
            drop_schema(base, schema)
    dbos = engine_peers.dbos_sequential(base, STEPS, runs)
    chain_peer = engine_peers.procrastinate_chain(base, STEPS, runs)
    rows.append(("DBOS (one workflow), PostgreSQL", dbos, None))
    rows.append(("Procrastinate (job chain), PostgreSQL", chain_peer, None))

    print(
        f"\n{STEPS} sequential trivial steps: ms per step (median of {runs} runs after a warm-up)"
    )
    print(f"{'':40} {'ms/step':>8} {'vs DBOS':>8} {'vs Procr.':>9}  target")
    for name, values, target in rows:
        median = statistics.median(values)
        verdict = (
            ""
            if target is None
            else (f"<= {target:g} ms " + ("PASS" if median * 1000 <= target else "FAIL"))
        )
        print(
            f"{name:40} {ms(values)} {statistics.median(dbos) / median:7.2f}x "
            f"{statistics.median(chain_peer) / median:8.2f}x  {verdict}"
        )
    print("  (vs columns: how many times cheaper per step than the peer; >1 is faster)")

    print(
        f"\n{jobs} independent trivial jobs on PostgreSQL: jobs per second (workers: concurrency 1)"
    )
    print(f"{'workers':>8} {'Tidemill':>10} {'Procrastinate':>14} {'ratio':>7}  target >= 2x")
    for workers in (1, 2, 4):
        ours = asyncio.run(throughput(base, jobs, workers))
        theirs = engine_peers.procrastinate_throughput(base, jobs, workers)
        ratio = ours / theirs
        verdict = "PASS" if ratio >= 2 else "FAIL"
        print(f"{workers:>8} {ours:10.0f} {theirs:14.0f} {ratio:6.2f}x  {verdict}")
    dbos_version = engine_peers.version("dbos")
    procrastinate_version = engine_peers.version("procrastinate")
    print(f"\nversions: dbos {dbos_version}, procrastinate {procrastinate_version}; ", end="")
    print(f"{os.cpu_count()} CPUs")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == WORKER_FLAG:
        asyncio.run(_worker_main(sys.argv[2]))
    else:
        main()
