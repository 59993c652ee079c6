"""The peer half of the engine benchmark: DBOS and Procrastinate on PostgreSQL.

`benchmarks/engine.py` imports these functions and puts their numbers next to
Tidemill's engine. Each one runs its peer against a database of its own, made
on the server that `pg_url` points at, and drops that database at the end:

- `dbos_sequential`: one DBOS workflow of `steps` sequential trivial steps
  (each returns its input + 1). Seconds per step for each measured run.
- `procrastinate_chain`: a chain of `steps` Procrastinate jobs, each of which
  defers the next one, run by one in-process worker (concurrency 1,
  LISTEN/NOTIFY on). Seconds per step for each measured run, from deferring
  the first job until the last one is marked finished.
- `procrastinate_throughput`: `jobs` trivial jobs deferred up front (not
  timed), then `workers` worker processes, each one Procrastinate worker with
  concurrency 1, drain them. Jobs per second, from the moment the workers are
  told to start until the jobs table has no job left to do.

Run it on its own for a small table:

    .venv-bench/bin/python benchmarks/engine_peers.py

PostgreSQL comes from $TIDEMILL_BENCH_POSTGRES_URL (default
postgresql://postgres@127.0.0.1:5432/test); the role needs CREATEDB.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import logging
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

POSTGRES_ENV = "TIDEMILL_BENCH_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
WORKER_FLAG = "--procrastinate-worker"  # how a throughput worker process is started
NOOP_TASK = "tm_bench_noop"
CHAIN_TASK = "tm_bench_chain"
POLL_INTERVAL = 0.005  # seconds between two looks at the jobs table (throughput)


def check(condition: bool, problem: str) -> None:
    """A check that `python -O` cannot strip: a peer that did the wrong work fails."""
    if not condition:
        raise RuntimeError(f"wrong result: {problem}")


# -- a database of one's own ----------------------------------------------------------


def database_name(peer: str) -> str:
    """A database name no other run uses: the peer, this process and a random tail."""
    return f"tm_bench_{peer}_{os.getpid()}_{secrets.token_hex(3)}"


def with_database(pg_url: str, name: str) -> str:
    """`pg_url` (a URL or key=value conninfo) pointing at database `name` instead."""
    return make_conninfo(pg_url, dbname=name)


def drop_database(pg_url: str, name: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # FORCE ends connections a peer may have left behind (PostgreSQL 13+).
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextmanager
def fresh_database(pg_url: str, peer: str, *, create: bool = True) -> Iterator[str]:
    """Yield the conninfo of a new database (made here unless `create` is False,
    for a peer that makes its own), dropped afterwards whatever happens."""
    name = database_name(peer)
    if create:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_database(pg_url, name)
    finally:
        drop_database(pg_url, name)


# -- DBOS ----------------------------------------------------------------------------------


def sqlalchemy_url(conninfo: str) -> str:
    """The SQLAlchemy URL (psycopg 3 driver) that DBOS wants for a libpq conninfo."""
    from sqlalchemy.engine import URL

    params = conninfo_to_dict(conninfo)
    port = params.get("port")
    query = {
        k: str(v)
        for k, v in params.items()
        if k not in {"user", "password", "host", "port", "dbname"}
    }
    url = URL.create(
        "postgresql+psycopg",
        username=str(params["user"]) if params.get("user") else None,
        password=str(params["password"]) if params.get("password") else None,
        host=str(params["host"]) if params.get("host") else None,
        port=int(port) if port else None,
        database=str(params["dbname"]) if params.get("dbname") else None,
        query=query,
    )
    return url.render_as_string(hide_password=False)


def dbos_sequential(pg_url: str, steps: int = 40, runs: int = 5) -> list[float]:
    """DBOS: one workflow of `steps` sequential trivial steps, seconds per step.

    DBOS 3 needs no application database: its system database (workflow status
    and step outputs) is the one made here, by DBOS itself on launch. The
    workflow and its step are sync functions, called directly, so the workflow
    runs in this thread. One warm-up run, then `runs` measured ones.
    """
    from dbos import DBOS, DBOSConfig

    with fresh_database(pg_url, "dbos", create=False) as conninfo:
        # Registered here, not at import, so that `destroy_registry` below leaves
        # nothing behind and the function can run more than once in a process.
        @DBOS.step(name="tm_bench_add_one")
        def add_one(value: int) -> int:
            return value + 1

        @DBOS.workflow(name="tm_bench_sequential")
        def sequential(n: int) -> int:
            value = 0
            for _ in range(n):
                value = add_one(value)
            return value

        config: DBOSConfig = {
            "name": "tm-bench-dbos",
            "system_database_url": sqlalchemy_url(conninfo),
            "log_level": "WARNING",
        }
        DBOS(config=config)
        try:
            DBOS.launch()
            check(sequential(steps) == steps, "warm-up workflow result")
            per_step: list[float] = []
            for _ in range(runs):
                start = time.perf_counter()
                result = sequential(steps)
                per_step.append((time.perf_counter() - start) / steps)
                check(result == steps, f"workflow returned {result}, expected {steps}")
        finally:
            DBOS.destroy(destroy_registry=True)
    return per_step


# -- Procrastinate -------------------------------------------------------------------------


def procrastinate_app(conninfo: str) -> Any:
    """A Procrastinate app on `conninfo`, with the trivial task the throughput runs use."""
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo))

    @app.task(name=NOOP_TASK)
    async def noop(value: int) -> int:
        return value

    return app


async def _procrastinate_chain(conninfo: str, steps: int, runs: int) -> list[float]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo))

    @app.task(name=CHAIN_TASK)
    async def chain(value: int, last: int) -> int:
        if value < last:
            await chain.defer_async(value=value + 1, last=last)
        return value + 1

    # Where the chain ends: once the worker has written the last job's status.
    # There is no public hook after that write, so the app's own job manager
    # method is wrapped on this instance.
    done = asyncio.Event()
    finished: list[int] = []
    manager = app.job_manager
    finish_job = manager.finish_job

    async def finish_and_tell(job: Any, status: Any, delete_job: bool) -> None:
        await finish_job(job=job, status=status, delete_job=delete_job)
        if job.task_kwargs["value"] == job.task_kwargs["last"]:
            finished.append(job.task_kwargs["value"])
            done.set()

    manager.finish_job = finish_and_tell  # type: ignore[method-assign]

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        worker = asyncio.create_task(
            app.run_worker_async(
                concurrency=1,
                wait=True,
                listen_notify=True,
                install_signal_handlers=False,
                delete_jobs="never",
            )
        )
        try:
            await asyncio.sleep(0.2)  # the worker registered and listening
            per_step: list[float] = []
            for index in range(runs + 1):  # the first chain is the warm-up
                # Let the worker go idle on LISTEN first. Deferring the moment the
                # last job is finished can race the worker's own "no job left"
                # fetch, which then clears the notification and the next chain
                # waits for the 5 s poll (seen here: one run at 129 ms/step).
                await asyncio.sleep(0.05)
                done.clear()
                start = time.perf_counter()
                await chain.defer_async(value=1, last=steps)
                await asyncio.wait_for(done.wait(), timeout=60)
                elapsed = time.perf_counter() - start
                if index:
                    per_step.append(elapsed / steps)
        finally:
            worker.cancel()  # a graceful stop: the worker finishes what it runs
            with suppress(asyncio.CancelledError):
                await worker
        rows = await app.connector.execute_query_all_async(
            "SELECT status, count(*) AS n FROM procrastinate_jobs GROUP BY status"
        )
    counts = {str(row["status"]): int(row["n"]) for row in rows}
    check(counts == {"succeeded": (runs + 1) * steps}, f"job statuses {counts}")
    check(len(finished) == runs + 1, f"{len(finished)} chains finished")
    return per_step


def procrastinate_chain(pg_url: str, steps: int = 40, runs: int = 5) -> list[float]:
    """Procrastinate: a chain of `steps` jobs, each deferring the next, seconds per step.

    One worker in this process (`run_worker_async`, concurrency 1, LISTEN/NOTIFY
    on, always waiting for jobs). A run is timed from deferring its first job
    until the worker has marked its last job finished. One warm-up chain, then
    `runs` measured ones. The schema goes into a fresh database.
    """
    with fresh_database(pg_url, "procrastinate") as conninfo:
        return asyncio.run(_procrastinate_chain(conninfo, steps, runs))


async def _worker_process(conninfo: str) -> None:
    """The body of one throughput worker process (started with WORKER_FLAG).

    It opens its app, says "ready" on stdout, waits for a line on stdin, then
    runs one worker (concurrency 1) that stops once no job is left to fetch.
    """
    app = procrastinate_app(conninfo)
    async with app.open_async():
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        await app.run_worker_async(
            concurrency=1,
            wait=False,
            listen_notify=False,
            install_signal_handlers=True,
            delete_jobs="never",
        )


async def _defer_jobs(conninfo: str, jobs: int) -> None:
    app = procrastinate_app(conninfo)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        noop = app.tasks[NOOP_TASK]
        batch = 500
        for first in range(0, jobs, batch):
            values = range(first, min(first + batch, jobs))
            await noop.batch_defer_async(*({"value": value} for value in values))


def _stop(process: subprocess.Popen[str]) -> None:
    """End a worker process that is still there: SIGTERM, then SIGKILL."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def procrastinate_throughput(pg_url: str, jobs: int = 1000, workers: int = 1) -> float:
    """Procrastinate: `jobs` trivial jobs drained by `workers` worker processes, jobs/s.

    The jobs are deferred in batches first (not timed). Each worker is its own
    OS process (this file run with WORKER_FLAG) holding one Procrastinate
    worker with concurrency 1 (the async task is trivial, so one process per
    core is the natural way to scale). The processes start and connect before
    the clock runs; the clock starts when they are told to go and stops when
    the jobs table (polled every POLL_INTERVAL) has no job left to do or doing.
    """
    with fresh_database(pg_url, "procrastinate") as conninfo:
        asyncio.run(_defer_jobs(conninfo, jobs))
        processes: list[subprocess.Popen[str]] = []
        try:
            for _ in range(workers):
                processes.append(
                    subprocess.Popen(
                        [sys.executable, os.path.abspath(__file__), WORKER_FLAG, conninfo],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                )
            for process in processes:
                assert process.stdout is not None
                line = process.stdout.readline()
                check(line.strip() == "ready", f"a worker process said {line!r}")
            with psycopg.connect(conninfo, autocommit=True) as conn:
                start = time.perf_counter()
                for process in processes:
                    assert process.stdin is not None
                    process.stdin.write("go\n")
                    process.stdin.flush()
                deadline = start + 120
                while True:
                    row = conn.execute(
                        "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
                    ).fetchone()
                    if row is not None and row[0] == 0:
                        break
                    check(time.perf_counter() < deadline, "the workers did not finish in 120 s")
                    time.sleep(POLL_INTERVAL)
                elapsed = time.perf_counter() - start
                done = conn.execute(
                    "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
                ).fetchone()
            check(done is not None and done[0] == jobs, f"{done} jobs succeeded, expected {jobs}")
            for process in processes:
                # wait=False: each worker stops on its own once nothing is left.
                process.wait(timeout=30)
        finally:
            for process in processes:
                _stop(process)
    return jobs / elapsed


# -- standalone run ------------------------------------------------------------------------


def version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    pg_url = os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL)
    print(
        f"dbos {version('dbos')}, procrastinate {version('procrastinate')}, "
        f"PostgreSQL at {conninfo_to_dict(pg_url).get('host')}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )

    print(f"\nsequential: {args.steps} steps, median of {args.runs} runs after a warm-up")
    print(f"{'peer':<28}{'ms/step':>10}{'min':>10}{'max':>10}")
    rows: dict[str, list[float]] = {
        "DBOS workflow of steps": dbos_sequential(pg_url, args.steps, args.runs),
        "Procrastinate job chain": procrastinate_chain(pg_url, args.steps, args.runs),
    }
    for label, samples in rows.items():
        ms = [s * 1000 for s in samples]
        print(f"{label:<28}{statistics.median(ms):>10.2f}{min(ms):>10.2f}{max(ms):>10.2f}")
    dbos_ms = statistics.median(rows["DBOS workflow of steps"]) * 1000
    chain_ms = statistics.median(rows["Procrastinate job chain"]) * 1000
    print(f"Procrastinate / DBOS: {chain_ms / dbos_ms:.2f}x")

    print(f"\nthroughput: {args.jobs} trivial jobs, worker processes of concurrency 1")
    print(f"{'workers':<10}{'jobs/s':>10}{'vs 1':>8}")
    first: float | None = None
    for count in args.workers:
        rate = procrastinate_throughput(pg_url, args.jobs, count)
        first = first or rate
        print(f"{count:<10}{rate:>10.0f}{rate / first:>7.2f}x")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    # Procrastinate warns about an App made in `__main__` (its task paths); the
    # tasks here are registered by explicit name, in every process alike.
    logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)
    if len(sys.argv) == 3 and sys.argv[1] == WORKER_FLAG:
        asyncio.run(_worker_process(sys.argv[2]))
    else:
        main()
