"""Triggers and time (issue 26): what waiting runs cost the store, how late they wake, and
how far a schedule firing every second drifts.

1. Waiting runs. N runs (default 100,000) are parked by a real worker: half
   `sleep: {until: flow_input.at}` with their times spread over `--spread`
   seconds a little ahead, half `wait_for_event` (distinct keys, a 1 h
   timeout, so they are in the timed index too). Then, over `--window`
   seconds, an idle worker's store traffic is counted, and the same is
   counted before any run was submitted (0 waiting): statements and
   transactions per second, and the time spent in them. Then the sleeps
   wake while we watch: lateness = the job's `finished_at` (the waking
   transaction's clock) minus its `until`. Then events are sent to a sample
   of the event waits, one `send_event` at a time: latency = from the call
   until it returns (the step's result and its run's end are committed by
   then).

   The counting is in this process, where the worker runs: every statement a
   transaction runs (`Statements.execute`, the one door every query of a
   `Tx` goes through), every `Store.transact` and `Store.write_one` (each is
   one transaction; SQLite's `BEGIN`/`COMMIT` and the LISTEN connection are
   not counted as statements). On PostgreSQL the server's
   `pg_stat_database.xact_commit` delta for the database is printed too, as
   a cross-check: it counts every client of that database, other tests
   included.

2. Schedule drift. A schedule `* * * * * *` of a one-step flow, two workers
   (each with its scheduler, racing for every fire) for `--minutes`;
   drift = the fire row's `created_at` (stamped in the transaction that
   inserts it and creates its run) minus its `fire_at`; also the run's first
   job's `started_at` minus `fire_at`. Missed fires (a second with no fire
   row, between the schedule's save and its pause) and duplicates (a fire time
   with two runs) must be none. Each scheduler's ticks, its stages per fire
   (wake, refresh, run_plan, insert, commit) and event-loop stalls are traced,
   and printed for any fire over 100 ms.

    .venv/bin/python benchmarks/triggers.py                     # both parts, SQLite and PostgreSQL
    .venv/bin/python benchmarks/triggers.py --only waits --runs 10000 --backend sqlite
    .venv/bin/python benchmarks/triggers.py --only drift --minutes 1

PostgreSQL comes from $TIDEMILL_BENCH_POSTGRES_URL (default
postgresql://postgres@127.0.0.1:5432/test), in a schema of its own per part,
dropped afterwards; SQLite is a file in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidemill.engine import AsyncEngine
from tidemill.flows import Flow
from tidemill.store import Store, Tx
from tidemill.store._statements import Statements
from tidemill.store._waits import WaitQueries, WaitRow
from tidemill.workspace import AsyncWorkspace

POSTGRES_ENV = "TIDEMILL_BENCH_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
CHUNK = 5000  # runs per submit_many transaction
SLEEP = Flow.model_validate(
    {
        "name": "nap",
        "inputs": {"type": "object"},
        "steps": [{"id": "nap", "sleep": {"until": "flow_input.at"}}],
    }
)
EVENT = Flow.model_validate(
    {
        "name": "await",
        "inputs": {"type": "object"},
        "steps": [
            {
                "id": "paid",
                "wait_for_event": {"name": "bench_paid", "key": "flow_input.key", "timeout": "1h"},
            }
        ],
    }
)
TICK = {"summary": "A trivial flow", "steps": [{"id": "tick", "identity": {}}]}


# --- counting the store's traffic ------------------------------------------------


@dataclass
class Traffic:
    """Statements and transactions this process sent to the store while counting."""

    statements: Counter[str] = field(default_factory=Counter)
    statement_seconds: Counter[str] = field(default_factory=Counter)
    transactions: int = 0
    transaction_seconds: float = 0.0
    counting: bool = False
    woken: list[tuple[float, float]] = field(default_factory=list)
    """(due_at, commit time) of each sleep a sweep ended, stamped once its transaction committed."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self.lock:
            self.statements.clear()
            self.statement_seconds.clear()
            self.transactions = 0
            self.transaction_seconds = 0.0

    def snapshot(self) -> tuple[Counter[str], Counter[str], int, float]:
        with self.lock:
            return (
                Counter(self.statements),
                Counter(self.statement_seconds),
                self.transactions,
                self.transaction_seconds,
            )


TRAFFIC = Traffic()
_LOCAL = threading.local()  # the sleeps the current store thread's transaction ends


def _shape(sql: str) -> str:
    """A statement's kind, for the table: its first words, literals left out."""
    text = re.sub(r"\s+", " ", sql).strip()
    text = re.sub(r"'[^']*'", "'…'", text)
    return text[:70]


@contextlib.contextmanager
def counted() -> Iterator[Traffic]:
    """Count what every `Tx` executes and every transaction, in this process."""
    execute = Statements.execute
    transact = Store.transact
    write_one = Store.write_one
    due_waits = WaitQueries.due_waits

    def noting_due_waits(self: WaitQueries, now: float, limit: int) -> list[WaitRow]:
        rows = due_waits(self, now, limit)
        collector = getattr(_LOCAL, "collector", None)
        if collector is not None:
            collector.extend(w.due_at for w in rows if w.kind == "sleep" and w.due_at is not None)
        return rows

    def counting_execute(self: Statements, sql: str, params: Sequence[Any] = ()) -> Any:
        if not TRAFFIC.counting:
            return execute(self, sql, params)
        started = time.perf_counter()
        try:
            return execute(self, sql, params)
        finally:
            spent = time.perf_counter() - started
            shape = _shape(sql)
            with TRAFFIC.lock:
                TRAFFIC.statements[shape] += 1
                TRAFFIC.statement_seconds[shape] += spent

    async def counting_transact(self: Store, fn: Any) -> Any:
        collected: list[float] = []

        def noting(tx: Tx) -> Any:
            collected.clear()  # a retried transaction starts again
            _LOCAL.collector = collected
            try:
                return fn(tx)
            finally:
                _LOCAL.collector = None

        started = time.perf_counter()
        try:
            result = await transact(self, noting)
        finally:
            if TRAFFIC.counting:
                with TRAFFIC.lock:
                    TRAFFIC.transactions += 1
                    TRAFFIC.transaction_seconds += time.perf_counter() - started
        if collected:  # committed (the result is back on the loop): these sleeps ended now
            stamp = time.time()
            with TRAFFIC.lock:
                TRAFFIC.woken.extend((due, stamp) for due in collected)
        return result

    async def counting_write_one(self: Store, sql: str, params: Sequence[Any] = ()) -> Any:
        started = time.perf_counter()
        try:
            return await write_one(self, sql, params)
        finally:
            if TRAFFIC.counting:
                shape = _shape(sql)
                with TRAFFIC.lock:
                    TRAFFIC.transactions += 1
                    TRAFFIC.transaction_seconds += time.perf_counter() - started
                    TRAFFIC.statements[shape] += 1

    Statements.execute = counting_execute  # type: ignore[method-assign]
    Store.transact = counting_transact  # type: ignore[method-assign]
    Store.write_one = counting_write_one  # type: ignore[method-assign]
    WaitQueries.due_waits = noting_due_waits  # type: ignore[method-assign]
    try:
        yield TRAFFIC
    finally:
        Statements.execute = execute  # type: ignore[method-assign]
        Store.transact = transact  # type: ignore[method-assign]
        Store.write_one = write_one  # type: ignore[method-assign]
        WaitQueries.due_waits = due_waits  # type: ignore[method-assign]


@dataclass
class Window:
    """One counting window's figures."""

    seconds: float
    statements: Counter[str]
    statement_seconds: Counter[str]
    transactions: int
    transaction_seconds: float
    server_commits: int | None

    @property
    def statements_per_second(self) -> float:
        return sum(self.statements.values()) / self.seconds

    @property
    def transactions_per_second(self) -> float:
        return self.transactions / self.seconds

    @property
    def busy_ms_per_second(self) -> float:
        """Milliseconds of each second spent in statements."""
        return sum(self.statement_seconds.values()) * 1000 / self.seconds


def server_commits(base: str | None) -> int | None:
    """PostgreSQL's committed transactions for the database so far (every client's)."""
    if base is None:
        return None
    import psycopg

    with psycopg.connect(base, autocommit=True) as connection:
        row = connection.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return None if row is None else int(row[0])


async def count_window(seconds: float, base: str | None) -> Window:
    """Count the store's traffic for `seconds` while the worker idles."""
    before = await asyncio.to_thread(server_commits, base)
    TRAFFIC.reset()
    TRAFFIC.counting = True
    started = time.perf_counter()
    await asyncio.sleep(seconds)
    TRAFFIC.counting = False
    elapsed = time.perf_counter() - started
    statements, statement_seconds, transactions, transaction_seconds = TRAFFIC.snapshot()
    after = await asyncio.to_thread(server_commits, base)
    delta = None if before is None or after is None else after - before - 2  # our own two reads
    return Window(elapsed, statements, statement_seconds, transactions, transaction_seconds, delta)


# --- backends -----------------------------------------------------------------------


@dataclass
class Backend:
    name: str
    url: str
    base: str | None  # PostgreSQL's URL without the schema (None: SQLite)
    schema: str | None = None


@contextlib.contextmanager
def backend(name: str, base: str, tmp: str, part: str) -> Iterator[Backend]:
    if name == "sqlite":
        yield Backend("SQLite", f"sqlite:///{tmp}/{part}.db", None)
        return
    import psycopg

    schema = f"tm_bench_triggers_{os.getpid()}_{secrets.token_hex(3)}"
    try:
        yield Backend("PostgreSQL", f"{base}?schema={schema}", base, schema)
    finally:
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# --- part 1: waiting runs ---------------------------------------------------------------


def percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

    return {
        "p50": at(0.50),
        "p95": at(0.95),
        "p99": at(0.99),
        "max": ordered[-1],
        "min": ordered[0],
    }


async def park(
    engine: AsyncEngine, flow: Flow, inputs: list[dict[str, Any]], *, quiet: bool
) -> tuple[float, float]:
    """Submit the runs in chunks and wait until every one of them waits; (submit s, total s)."""
    started = time.perf_counter()
    for offset in range(0, len(inputs), CHUNK):
        await engine.submit_many(flow, inputs[offset : offset + CHUNK])
    submitted = time.perf_counter() - started
    name = flow.name

    def left(tx: Tx) -> int:
        row = tx.one(
            "SELECT COUNT(*) FROM tm_jobs j JOIN tm_runs r ON r.id = j.run_id "
            "WHERE r.flow_name = ? AND j.status IN ('queued', 'running')",
            (name,),
        )
        return 0 if row is None else int(row[0])

    last = time.perf_counter()
    while (remaining := await engine.store.transact(left)) > 0:
        if not quiet and time.perf_counter() - last > 15:
            last = time.perf_counter()
            print(f"    {name}: {remaining} not waiting yet", flush=True)
        await asyncio.sleep(1.0)
    return submitted, time.perf_counter() - started


async def waits_part(b: Backend, runs: int, window: float, spread: float, events: int) -> dict:
    """Part 1 on one backend: the figures, as a dict."""
    out: dict[str, Any] = {"backend": b.name, "runs": runs}
    engine = AsyncEngine(b.url, migrate=True, max_connections=4)
    try:
        await engine.runs(limit=1)  # migrates
        with counted():
            async with engine.worker(concurrency=8):
                await asyncio.sleep(2)  # the worker's first claims and sweep, untimed
                out["idle"] = await count_window(window, b.base)
            n_event = runs // 2
            n_sleep = runs - n_event
            async with engine.worker(concurrency=8):
                keys = [f"k{i:07d}" for i in range(n_event)]
                submit_s, park_s = await park(
                    engine, EVENT, [{"key": key} for key in keys], quiet=False
                )
                out["park_event"] = (n_event, submit_s, park_s)
                rate = n_event / park_s if park_s else 1e9
                # The sleeps' times start after they are parked and counted (with margin).
                first = time.time() + 1.5 * n_sleep / rate + window + 20
                ats = [first + spread * i / max(1, n_sleep - 1) for i in range(n_sleep)]
                submit_s, park_s = await park(
                    engine, SLEEP, [{"at": at} for at in ats], quiet=False
                )
                out["park_sleep"] = (n_sleep, submit_s, park_s)
                out["waiting"] = await engine.store.transact(lambda tx: tx.count_waits())
                ahead = first - time.time() - 2
                measured = min(window, ahead)
                out["window_note"] = "" if measured >= window else f"window cut to {measured:.0f} s"
                out["loaded"] = await count_window(max(5.0, measured), b.base)
                # Wake: watch the sleeps end.
                TRAFFIC.reset()
                TRAFFIC.woken.clear()
                TRAFFIC.counting = True
                last_at = ats[-1]
                await asyncio.sleep(max(0.0, last_at + 5 - time.time()))
                left = await _count_waiting(engine, "nap")
                while left and time.time() < last_at + 120:
                    await asyncio.sleep(1)
                    left = await _count_waiting(engine, "nap")
                TRAFFIC.counting = False
                statements, spent, transactions, _ = TRAFFIC.snapshot()
                out["wake_traffic"] = (statements, spent, transactions)
                out["sleep_left"] = left
                out["lateness"] = await _lateness(engine)
                out["commit_lateness"] = [stamp - due for due, stamp in TRAFFIC.woken]
                # Events: sent one at a time to a sample of the waits.
                sample = keys[:: max(1, n_event // events)][:events]
                latencies: list[float] = []
                for key in sample:
                    sent = time.perf_counter()
                    delivery = await engine.send_event("bench_paid", key, {"key": key})
                    latencies.append(time.perf_counter() - sent)
                    if len(delivery.delivered_to) != 1:
                        raise SystemExit(f"event {key} woke {delivery.delivered_to}")
                out["event_latency"] = latencies
                out["event_check"] = await _events_done(engine, len(sample))
    finally:
        await engine.close()
    return out


async def _count_waiting(engine: AsyncEngine, step: str) -> int:
    def read(tx: Tx) -> int:
        row = tx.one(
            "SELECT COUNT(*) FROM tm_jobs WHERE step_id = ? AND status = 'waiting'", (step,)
        )
        return 0 if row is None else int(row[0])

    count: int = await engine.store.transact(read)
    return count


async def _lateness(engine: AsyncEngine) -> list[float]:
    """Each sleep's lateness: its job's `finished_at` minus its `until` (seconds)."""

    def read(tx: Tx) -> list[tuple[Any, ...]]:
        return tx.all(
            "SELECT j.finished_at, r.body FROM tm_jobs j JOIN tm_results r "
            "ON r.job_id = j.id WHERE j.step_id = 'nap' AND j.status = 'succeeded'"
        )

    rows = await engine.store.transact(read)
    from datetime import datetime

    late = []
    for finished, body in rows:
        until = json.loads(body)
        if isinstance(until, dict) and "value" in until:
            until = until["value"]
        at = datetime.fromisoformat(until["until"]).timestamp()
        late.append(float(finished) - at)
    return late


async def _events_done(engine: AsyncEngine, expected: int) -> str:
    def read(tx: Tx) -> list[tuple[Any, ...]]:
        return tx.all(
            "SELECT r.status, COUNT(*) FROM tm_runs r JOIN tm_jobs j ON j.run_id = r.id "
            "WHERE j.step_id = 'paid' AND j.status = 'succeeded' GROUP BY r.status"
        )

    rows = dict(await engine.store.transact(read))
    return f"{rows} (expected {expected} succeeded)"


def report_waits(out: dict) -> None:
    idle, loaded = out["idle"], out["loaded"]
    print(f"\n== Waiting runs, {out['backend']}: {out['runs']:,} runs ==")
    for kind in ("park_event", "park_sleep"):
        n, submit_s, park_s = out[kind]
        print(
            f"  parked {n:,} {kind[5:]} waits: submitted in {submit_s:.1f} s, all waiting after "
            f"{park_s:.1f} s ({n / park_s:.0f} runs/s)"
        )
    print(f"  waiting now: {out['waiting']}  {out['window_note']}")
    print(f"  {'idle worker, per second':34} {'0 waiting':>11} {'with waits':>11} {'ratio':>7}")
    rows = [
        ("statements", idle.statements_per_second, loaded.statements_per_second),
        ("transactions", idle.transactions_per_second, loaded.transactions_per_second),
        ("ms in statements", idle.busy_ms_per_second, loaded.busy_ms_per_second),
    ]
    if idle.server_commits is not None and loaded.server_commits is not None:
        rows.append(
            (
                "server commits (whole database)",
                idle.server_commits / idle.seconds,
                loaded.server_commits / loaded.seconds,
            )
        )
    for label, a, b in rows:
        ratio = f"{b / a:6.2f}x" if a else "    -"
        print(f"  {label:34} {a:11.2f} {b:11.2f} {ratio}")
    print(f"  statements by kind, per second over {loaded.seconds:.0f} s (0 waiting | with waits):")
    shapes = set(idle.statements) | set(loaded.statements)
    for shape in sorted(shapes, key=lambda s: -loaded.statements[s]):
        a = idle.statements[shape] / idle.seconds
        b = loaded.statements[shape] / loaded.seconds
        ms_a = idle.statement_seconds[shape] * 1000 / max(1, idle.statements[shape])
        ms_b = loaded.statement_seconds[shape] * 1000 / max(1, loaded.statements[shape])
        print(f"    {a:6.2f} | {b:6.2f}/s  {ms_a:6.2f} | {ms_b:6.2f} ms each  {shape}")
    print(f"  sleeps: {len(out['lateness']):,} woke, {out['sleep_left']} still waiting")
    for label, late in (
        ("lateness, job finished_at - until", out["lateness"]),
        ("lateness, wake committed - until", out["commit_lateness"]),
    ):
        p = percentiles(late)
        within = sum(1 for x in late if x <= 1.0) / len(late) if late else 0.0
        print(
            f"  {label:34} "
            + "  ".join(f"{k} {v * 1000:.0f} ms" for k, v in p.items())
            + f"  within 1 s: {within:.2%}  early: {sum(1 for x in late if x < 0)}"
        )
    statements, spent, transactions = out["wake_traffic"]
    top = sorted(spent.items(), key=lambda kv: -kv[1])[:5]
    print(
        f"  while waking: {sum(statements.values()):,} statements, {transactions:,} transactions;"
        " most time in:"
    )
    for shape, seconds in top:
        print(f"    {seconds:7.2f} s  {statements[shape]:8,}x  {shape}")
    lat = out["event_latency"]
    pe = percentiles(lat)
    print(
        f"  event send -> step finished ({len(lat):,} sent one at a time): "
        + "  ".join(f"{k} {v * 1000:.1f} ms" for k, v in pe.items())
    )
    print(f"  event runs: {out['event_check']}")


# --- part 2: schedule drift --------------------------------------------------------------


@dataclass
class FireTrace:
    """One scheduler's way to one fire, on the wall clock (time.time())."""

    fire_at: float
    tick: float = 0.0  # its tick began: its sleep until the fire ended
    refreshed: float = 0.0  # the schedule items re-read (`_refresh`, a transaction)
    planned0: float = 0.0  # `prepare_run` began (the workspace's `run_plan`, a transaction)
    planned: float = 0.0  # it ended
    done: float = 0.0  # `_fire` returned: the fire's transaction committed


TRACES: list[FireTrace] = []
TICKS: list[tuple[int, float, float]] = []  # (scheduler, start, end) of every tick
HANDLER_CHECKS: list[tuple[float, float]] = []  # (start, end) of every `Handlers.check`
LOOP_LAGS: list[tuple[float, float]] = []  # (when, how late) of event-loop stalls over 50 ms


@contextlib.contextmanager
def traced() -> Iterator[None]:
    """Note the stages of every scheduler's fires (see `FireTrace`)."""
    from tidemill.engine.triggers import Scheduler
    from tidemill.engine.triggers import _scheduler as module
    from tidemill.engine.triggers._handlers import Handlers

    check = Handlers.check

    async def traced_check(self: Any) -> None:
        started = time.time()
        try:
            await check(self)
        finally:
            HANDLER_CHECKS.append((started, time.time()))

    tick, refresh, fire, prepare = (
        Scheduler.tick,
        Scheduler._refresh,
        Scheduler._fire,
        module.prepare_run,
    )
    state: dict[int, dict[str, float]] = {}
    current: dict[int, FireTrace] = {}

    async def traced_tick(self: Any) -> float:
        started = time.time()
        state[id(self)] = {"tick": started}
        try:
            return await tick(self)
        finally:
            TICKS.append((id(self), started, time.time()))

    async def traced_refresh(self: Any) -> None:
        await refresh(self)
        state.setdefault(id(self), {})["refreshed"] = time.time()

    async def traced_fire(self: Any, known: Any, fire_at: float) -> None:
        seen = state.get(id(self), {})
        trace = FireTrace(fire_at, seen.get("tick", 0.0), seen.get("refreshed", 0.0))
        task = id(asyncio.current_task())
        current[task] = trace
        try:
            await fire(self, known, fire_at)
        finally:
            current.pop(task, None)
            trace.done = time.time()
            TRACES.append(trace)

    async def traced_prepare(*args: Any, **kwargs: Any) -> Any:
        trace = current.get(id(asyncio.current_task()))
        if trace is not None:
            trace.planned0 = time.time()
        try:
            return await prepare(*args, **kwargs)
        finally:
            if trace is not None:
                trace.planned = time.time()

    Scheduler.tick = traced_tick  # type: ignore[method-assign]
    Scheduler._refresh = traced_refresh  # type: ignore[method-assign]
    Scheduler._fire = traced_fire  # type: ignore[method-assign]
    module.prepare_run = traced_prepare  # type: ignore[assignment]
    Handlers.check = traced_check  # type: ignore[method-assign]
    try:
        yield
    finally:
        Scheduler.tick = tick  # type: ignore[method-assign]
        Scheduler._refresh = refresh  # type: ignore[method-assign]
        Scheduler._fire = fire  # type: ignore[method-assign]
        module.prepare_run = prepare
        Handlers.check = check  # type: ignore[method-assign]


async def watch_loop(stop: asyncio.Event) -> None:
    """Note the event loop's stalls: a 20 ms sleep that ends over 50 ms late."""
    while not stop.is_set():
        expected = time.time() + 0.02
        await asyncio.sleep(0.02)
        late = time.time() - expected
        if late > 0.05:
            LOOP_LAGS.append((time.time(), late))


def stages(fire_at: float, created: float) -> dict[str, float] | None:
    """Where the winning scheduler's time went for one fire (seconds), from `TRACES`."""
    mine = [t for t in TRACES if t.fire_at == fire_at and t.planned and t.planned <= created]
    if not mine:
        return None
    t = max(mine, key=lambda t: t.planned)  # the one whose insert could be the row's
    return {
        "wake": t.tick - fire_at,
        "refresh": t.refreshed - t.tick,
        "between": t.planned0 - t.refreshed,
        "run_plan": t.planned - t.planned0,
        "to insert": created - t.planned,
        "commit": t.done - created,
    }


async def drift_part(b: Backend, minutes: float, workers: int) -> dict:
    engine = AsyncEngine(b.url, migrate=True)
    path = "f/bench/every_second"
    for kept in (TRACES, TICKS, HANDLER_CHECKS, LOOP_LAGS):
        kept.clear()
    done = asyncio.Event()
    watcher = asyncio.create_task(watch_loop(done))
    try:
        await engine.runs(limit=1)  # migrates
        ws = AsyncWorkspace(engine.store, user="bench")
        await ws.add_folder("bench", summary="Benchmarks")
        await ws.write("f/bench/tick", "flow", TICK)
        async with contextlib.AsyncExitStack() as stack:
            stack.enter_context(traced())
            for _ in range(workers):
                await stack.enter_async_context(engine.worker(concurrency=4))
            saved = time.time()
            await ws.write(path, "schedule", {"cron": "* * * * * *", "target": "f/bench/tick"})
            await asyncio.sleep(minutes * 60)
            await ws.pause_schedule(path)
            paused = time.time()
            await asyncio.sleep(3)  # the last runs finish

        def read(tx: Tx) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
            fires = tx.all(
                "SELECT f.fire_at, f.created_at, f.status, f.run_id, "
                "(SELECT MIN(j.started_at) FROM tm_jobs j WHERE j.run_id = f.run_id), "
                "(SELECT r.status FROM tm_runs r WHERE r.id = f.run_id) "
                "FROM tm_schedule_fires f WHERE f.path = ? ORDER BY f.fire_at",
                (path,),
            )
            runs = tx.all("SELECT id, source FROM tm_runs WHERE parent_id IS NULL")
            return fires, runs

        fires, runs = await engine.store.transact(read)
    finally:
        done.set()
        await watcher
        await engine.close()
    per_fire: Counter[float] = Counter()
    for _, source in runs:
        data = json.loads(source) if isinstance(source, str) else (source or {})
        if data.get("schedule") == path:
            per_fire[float(data["fire_at"])] += 1
    # Every whole second after the schedule was saved, up to the one before the pause
    # (the pause takes effect at the next fire the scheduler reads it before).
    expected = set(range(int(saved) + 1, int(paused)))
    missed = sorted(expected - {int(float(row[0])) for row in fires})
    return {
        "backend": b.name,
        "minutes": minutes,
        "workers": workers,
        "saved": saved,
        "paused": paused,
        "fires": len(fires),
        "statuses": Counter(str(row[2]) for row in fires),
        "run_statuses": Counter(str(row[5]) for row in fires),
        "drift": [float(row[1]) - float(row[0]) for row in fires],
        "start_lag": [float(row[4]) - float(row[0]) for row in fires if row[4] is not None],
        "missed": missed,
        "duplicates": sorted(t for t, n in per_fire.items() if n > 1),
        "runs": sum(per_fire.values()),
        "loop_lags": list(LOOP_LAGS),
        "ticks": list(TICKS),
        "checks": list(HANDLER_CHECKS),
        "late_fires": [
            (float(row[0]), float(row[1]) - float(row[0]))
            for row in fires
            if float(row[1]) - float(row[0]) > 0.1
        ],
        "stages": [
            (float(row[1]) - float(row[0]), stages(float(row[0]), float(row[1]))) for row in fires
        ],
    }


def report_drift(out: dict) -> None:
    print(
        f"\n== Schedule `* * * * * *`, {out['backend']}: {out['minutes']:g} min, "
        f"{out['workers']} workers racing =="
    )
    print(
        f"  fires {out['fires']} ({dict(out['statuses'])}), runs {out['runs']} "
        f"({dict(out['run_statuses'])}), missed {len(out['missed'])} {out['missed'][:10]}, "
        f"duplicates {len(out['duplicates'])} {out['duplicates'][:10]}"
    )
    for label, values in (
        ("drift (fire row created_at - fire_at)", out["drift"]),
        ("run's first job started_at - fire_at", out["start_lag"]),
    ):
        p = percentiles(values)
        print(f"  {label:40} " + "  ".join(f"{k} {v * 1000:7.1f} ms" for k, v in p.items()))
    known = [s for _, s in out["stages"] if s is not None]
    if known:
        print(f"  where the time went (the winning scheduler, {len(known)} fires), ms:")
        print("    " + " ".join(f"{name:>20}" for name in ("stage", "p50", "p99", "max")))
        for name in known[0]:
            p = percentiles([s[name] for s in known])
            print(
                f"    {name:>20}" + "".join(f" {p[k] * 1000:20.1f}" for k in ("p50", "p99", "max"))
            )
        print("  the five latest fires:")
        for late, s in sorted(out["stages"], key=lambda x: -x[0])[:5]:
            shown = "?" if s is None else "  ".join(f"{k} {v * 1000:.0f}" for k, v in s.items())
            print(f"    {late * 1000:6.0f} ms: {shown}")
    print(f"  event-loop stalls over 50 ms: {len(out['loop_lags'])}")
    for fire_at, late in out["late_fires"]:
        print(f"  fire {fire_at:.0f} was {late * 1000:.0f} ms late; around it (s from fire_at):")
        for who, start, end in out["ticks"]:
            if fire_at - 2.5 <= start <= fire_at + 1:
                print(
                    f"    scheduler {who % 10000:04d} tick "
                    f"{start - fire_at:+.3f} .. {end - fire_at:+.3f}"
                )
        for start, end in out["checks"]:
            if fire_at - 2.5 <= start <= fire_at + 1 and end - start > 0.05:
                print(f"    handlers' check {start - fire_at:+.3f} .. {end - fire_at:+.3f}")
        for when, lag in out["loop_lags"]:
            if fire_at - 2.5 <= when <= fire_at + 1:
                print(f"    event loop stalled {lag * 1000:.0f} ms, until {when - fire_at:+.3f}")
    worst = max(out["drift"], default=0.0)
    verdict = "met" if worst < 0.1 and not out["missed"] and not out["duplicates"] else "MISSED"
    print(f"  target: max drift < 100 ms, none missed or duplicated: {verdict}")


# --- main ------------------------------------------------------------------------------------


def host_line() -> str:
    load = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--only", choices=("waits", "drift"), help="one part only")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--runs", type=int, default=100_000, help="waiting runs (part 1)")
    parser.add_argument("--window", type=float, default=30.0, help="counting window, s")
    parser.add_argument("--spread", type=float, default=240.0, help="sleeps' times span, s")
    parser.add_argument("--events", type=int, default=1000, help="events sent (part 1)")
    parser.add_argument("--minutes", type=float, default=10.0, help="schedule drift run")
    parser.add_argument("--workers", type=int, default=2, help="workers racing (part 2)")
    parser.add_argument("--postgres", default=os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL))
    args = parser.parse_args()
    names = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    print(f"host: {host_line()}; Python {sys.version.split()[0]}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if args.only in (None, "waits"):
                with backend(name, args.postgres, tmp, "waits") as b:
                    out = asyncio.run(
                        waits_part(b, args.runs, args.window, args.spread, args.events)
                    )
                report_waits(out)
                print(f"  host after: {host_line()}", flush=True)
            if args.only in (None, "drift"):
                with backend(name, args.postgres, tmp, "drift") as b:
                    out = asyncio.run(drift_part(b, args.minutes, args.workers))
                report_drift(out)
                print(f"  host after: {host_line()}", flush=True)


if __name__ == "__main__":
    main()
