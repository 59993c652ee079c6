"""The HTTP server's runs API next to Prefect's server: submit, read, list, and live events.

Both servers run in processes of their own on this machine, in the same run,
each over SQLite in a temporary directory, and the same load generator (this
process, `httpx.AsyncClient`) drives them alike:

- submit: `POST /api/runs` (Tidemill, a workspace flow `f/bench/noop` of one
  identity step) against `POST /api/flow_runs/` (Prefect, after one
  `POST /api/flows/`; the run is recorded as Pending). Neither server runs a
  worker here, so this measures the API and the store: runs per second at a
  fixed concurrency (16), and the latency p50/p99 under that load and one
  request at a time;
- read: `GET /api/runs/{id}` against `GET /api/flow_runs/{id}`, random runs;
- list: a page of 50, newest first, once the store holds `--runs` runs
  (100,000): `GET /api/runs?limit=50` (then its keyset `cursor`) against
  `POST /api/flow_runs/filter` (`EXPECTED_START_TIME_DESC`, then `offset`);
- live events (Tidemill alone: Prefect's server has no server-sent events for a
  run): 500 subscribers to `GET /api/runs/{id}/events` of 20 live runs of a
  flow of paced steps, served by a second Tidemill server with its worker;
  lag = the moment the client has an event - the event's `at`.

The runs beyond those the submit cells made are seeded quickly and untimed:
through the API when its rate would do it in under a minute and a half, or
else straight into the store (Tidemill: `AsyncEngine.submit_many` of the
flow's run plan, as `POST /api/runs` would submit it, without its audit row;
Prefect: copies of a run the API made, inserted into its SQLite tables). The
report says which.

    .venv-bench/bin/python benchmarks/server.py [--quick] [--runs 100000]

A measurement whose route the Tidemill server does not have yet is skipped,
saying so (the routes are read from its `/openapi.json`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import importlib.metadata
import json
import os
import platform
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONCURRENCY = 16
FLOW_PATH = "f/bench/noop"
LIVE_PATH = "f/bench/paced"
WORKSPACE = "bench"
USER = "bench"
NOOP_FLOW = {
    "summary": "Nothing to do",
    "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "steps": [{"id": "a", "identity": {}, "inputs": {"n": "flow_input.n"}}],
}
PREFECT_SORT = "EXPECTED_START_TIME_DESC"
SEED_API_SECONDS = 90.0
"""Seed through the API when its measured rate would take at most this long."""
PAGE = 50
STAND_IN = "bench_stand_in_events"
"""The name (and OpenAPI operation id prefix) of `--stand-in-events`'s route."""
TARGETS = {"submit_ratio": 3.0, "submit_p50_ms": 5.0, "list_ms": 20.0, "sse_p99_ms": 100.0}


async def pause(seconds: float) -> float:
    """The paced step of the live-events flow (run in the worker, `server:pause`)."""
    await asyncio.sleep(seconds)
    return seconds


def live_flow(steps: int, lead: float, gap: float) -> dict[str, Any]:
    """A first step of `lead` s (the subscribers connect meanwhile), then `steps` of `gap` s."""
    body: list[dict[str, Any]] = [
        {"id": "lead", "script": {"function": "server:pause", "in_process": True},
         "inputs": {"seconds": lead}},
    ]  # fmt: skip
    for i in range(steps):
        body.append(
            {"id": f"s{i}", "script": {"function": "server:pause", "in_process": True},
             "inputs": {"seconds": gap}, "needs": ["lead" if i == 0 else f"s{i - 1}"]}
        )  # fmt: skip
    return {"summary": "Paced steps", "steps": body}


# -- measurement -------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Cell:
    """One target's timings of one operation at one concurrency."""

    target: str
    op: str
    concurrency: int
    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0
    errors: list[str] = field(default_factory=list)
    skipped: str | None = None
    retries: int = 0
    """503 answers sent again (each request's latency includes its retries)."""

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall else float("nan")

    def ms(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000.0


Call = Callable[[int], Awaitable[str | None]]
"""One request, by its index; an error's description, or None."""


async def drive(
    cell: Cell, count: int, call: Call, target: Target | None = None, seconds: float = 0.0
) -> Cell:
    """Make `count` calls, `cell.concurrency` at a time (closed loop), timing each.

    With `seconds`, no call starts after that long (a slow server makes fewer).
    """
    counter = iter(range(count))
    retries = target.retries if target else 0
    deadline = time.perf_counter() + seconds if seconds else float("inf")

    async def worker() -> None:
        for index in counter:
            started = time.perf_counter()
            if started > deadline:
                return
            try:
                error = await call(index)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            if error is None:
                cell.latencies.append(time.perf_counter() - started)
            else:
                cell.errors.append(error)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(cell.concurrency)))
    cell.wall = time.perf_counter() - started
    if target:
        cell.retries = target.retries - retries
    return cell


def _status(response: Any, expected: int) -> str | None:
    if response.status_code == expected:
        return None
    request = response.request
    return f"HTTP {response.status_code} {request.method} {request.url.path}: {response.text[:200]}"


def _items(body: Any) -> list[Any]:
    """A list answer's runs: the list itself, or the first list-valued field of the object."""
    if isinstance(body, list):
        return body
    for key in ("runs", "items", "data", "results"):
        if isinstance(body.get(key), list):
            return list(body[key])
    return next((v for v in body.values() if isinstance(v, list)), [])


def _cursor(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    for key in ("next_cursor", "cursor", "next"):
        if body.get(key):
            return str(body[key])
    return None


# -- the two servers' clients ------------------------------------------------------------------


class Target:
    """A server under test: how to submit, read and list its runs."""

    name: str
    client: Any
    skipped: dict[str, str]
    retries: int = 0
    """503 answers retried (Prefect answers 503 when SQLite is busy; its client retries them)."""

    async def send(self, method: str, url: str, **kwargs: Any) -> Any:
        """A request, sent again after a short backoff while the answer is 503 (10 tries)."""
        for attempt in range(10):
            response = await self.client.request(method, url, **kwargs)
            if response.status_code != 503 or attempt == 9:
                return response
            self.retries += 1
            await asyncio.sleep(min(1.0, 0.02 * 2**attempt) * random.uniform(0.5, 1.5))
        raise AssertionError("unreachable")

    async def submit(self, index: int) -> tuple[str | None, str | None]:
        raise NotImplementedError

    async def read(self, run_id: str) -> str | None:
        raise NotImplementedError

    async def first_page(self) -> str | None:
        raise NotImplementedError

    async def walk(self, pages: int, cell: Cell) -> None:
        raise NotImplementedError


class Tidemill(Target):
    name = "tidemill"

    def __init__(self, client: Any, routes: dict[tuple[str, str], str]) -> None:
        self.client = client
        self.skipped = {}
        wanted = {
            "submit": ("post", "/api/runs"),
            "read": ("get", "/api/runs/{}"),
            "list": ("get", "/api/runs"),
            "events": ("get", "/api/runs/{}/events"),
        }
        for op, (method, path) in wanted.items():
            if (method, path) not in routes:
                self.skipped[op] = (
                    f"the Tidemill server has no `{method.upper()} {path.replace('{}', '{id}')}` "
                    "yet (not in its /openapi.json)"
                )

    async def submit(self, index: int) -> tuple[str | None, str | None]:
        response = await self.send(
            "POST", "/api/runs", json={"path": FLOW_PATH, "inputs": {"n": index}}
        )
        error = _status(response, 201)
        if error:
            return None, error
        body = response.json()
        return str(body.get("id") or body.get("run_id")), None

    async def read(self, run_id: str) -> str | None:
        return _status(await self.send("GET", f"/api/runs/{run_id}"), 200)

    async def first_page(self) -> str | None:
        response = await self.send("GET", "/api/runs", params={"limit": PAGE})
        error = _status(response, 200)
        if error is None and len(_items(response.json())) != PAGE:
            error = f"a page of {len(_items(response.json()))} runs, not {PAGE}"
        return error

    async def walk(self, pages: int, cell: Cell) -> None:
        cursor: str | None = None
        for _ in range(pages):
            params: dict[str, Any] = {"limit": PAGE}
            if cursor:
                params["cursor"] = cursor
            started = time.perf_counter()
            response = await self.send("GET", "/api/runs", params=params)
            elapsed = time.perf_counter() - started
            error = _status(response, 200)
            body = response.json() if error is None else None
            cursor = _cursor(body) or response.headers.get("x-next-cursor")
            if error is None and len(_items(body)) != PAGE:
                error = f"a page of {len(_items(body))} runs, not {PAGE}"
            if error is None and not cursor:
                error = "no cursor to the next page"
            if error:
                cell.errors.append(error)
                return
            cell.latencies.append(elapsed)


class Prefect(Target):
    name = "prefect"

    def __init__(self, client: Any, flow_id: str) -> None:
        self.client = client
        self.flow_id = flow_id
        self.skipped = {"events": "Prefect's server has no server-sent events of a flow run"}

    async def submit(self, index: int) -> tuple[str | None, str | None]:
        response = await self.send(
            "POST", "/api/flow_runs/", json={"flow_id": self.flow_id, "parameters": {"n": index}}
        )
        error = _status(response, 201)
        return (None, error) if error else (str(response.json()["id"]), None)

    async def read(self, run_id: str) -> str | None:
        return _status(await self.send("GET", f"/api/flow_runs/{run_id}"), 200)

    async def page(self, offset: int) -> Any:
        return await self.send(
            "POST",
            "/api/flow_runs/filter",
            json={"limit": PAGE, "offset": offset, "sort": PREFECT_SORT},
        )

    async def first_page(self) -> str | None:
        response = await self.page(0)
        error = _status(response, 200)
        if error is None and len(response.json()) != PAGE:
            error = f"a page of {len(response.json())} runs, not {PAGE}"
        return error

    async def walk(self, pages: int, cell: Cell) -> None:
        for page in range(pages):
            started = time.perf_counter()
            response = await self.page(page * PAGE)
            elapsed = time.perf_counter() - started
            error = _status(response, 200)
            if error is None and len(response.json()) != PAGE:
                error = f"a page of {len(response.json())} runs, not {PAGE}"
            if error:
                cell.errors.append(error)
                return
            cell.latencies.append(elapsed)


# -- processes ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_healthy(url: str, process: subprocess.Popen[bytes], name: str, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out = process.log.read_text(errors="replace")  # type: ignore[attr-defined]
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{out[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not answer {url} within {timeout:.0f} s")


class Processes:
    """The servers this run started; all stopped on exit."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def spawn(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        # Output to a file, never a pipe nobody reads: a full pipe would stall a server.
        log = self.workdir / f"{name}.log"
        self.logs.append(log)
        with log.open("ab") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                cwd=self.workdir,
                start_new_session=True,  # `prefect server start` has children: stop them all
            )
        process.log = log  # type: ignore[attr-defined]
        self.started.append(process)
        return process

    def tidemill(
        self, db: str, *, worker: bool, concurrency: int = 4, stand_in: bool = False
    ) -> tuple[str, Any]:
        port = free_port()
        command = [sys.executable, __file__, "serve", "--db", db, "--port", str(port),
                   "--worker-concurrency", str(concurrency)]  # fmt: skip
        if worker:
            command.append("--worker")
        if stand_in:
            command.append("--stand-in-events")
        process = self.spawn(f"tidemill-{port}", command, {"TIDEMILL_USER": USER})
        url = f"http://127.0.0.1:{port}"
        wait_healthy(f"{url}/health", process, "the Tidemill server", 60)
        return url, process

    def prefect(self) -> tuple[str, Any]:
        executable = shutil.which("prefect", path=str(Path(sys.executable).parent))
        if executable is None:
            raise RuntimeError("Prefect is not installed in this environment")
        home = self.workdir / "prefect"
        home.mkdir()
        port = free_port()
        process = self.spawn(
            "prefect",
            [executable, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            {"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
             "PREFECT_UI_ENABLED": "false", "PREFECT_LOGGING_SERVER_LEVEL": "WARNING"},
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        wait_healthy(f"{url}/api/health", process, "Prefect's server", 120)
        return url, process

    def stop(self) -> None:
        for process in self.started:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 15)
        for process in self.started:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 9)
                process.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children still running (Linux; 0 elsewhere)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pids = [pid]
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc"):
            if task.isdigit():
                with contextlib.suppress(OSError), open(f"/proc/{task}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                    if int(fields[2]) == os.getpgid(pid) and int(task) != pid:
                        pids.append(int(task))
    for each in pids:
        with contextlib.suppress(OSError), open(f"/proc/{each}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def settle(pids: Sequence[int], *, quiet: float = 0.05, most: float = 20.0) -> None:
    """Wait until every server is idle (each under `quiet` of a CPU), at most `most` s."""
    if not os.path.exists("/proc/self/stat"):
        return
    deadline = time.monotonic() + most
    before = [cpu_seconds(pid) for pid in pids]
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = [cpu_seconds(pid) for pid in pids]
        if all(b - a <= quiet * 0.5 for a, b in zip(before, now, strict=True)):
            return
        before = now


# -- seeding -----------------------------------------------------------------------------------


async def seed_tidemill_store(db: str, count: int, ids: list[str]) -> float:
    """`count` more runs of `FLOW_PATH`, as the API submits them, in batches; the seconds taken."""
    from tidemill.engine import AsyncEngine
    from tidemill.workspace import AsyncWorkspace

    started, since = time.perf_counter(), time.time()
    seeded: list[str] = []
    async with AsyncEngine(db) as engine:
        ws = AsyncWorkspace(engine.store, workspace=WORKSPACE, user=USER)
        plan = await ws.run_plan(FLOW_PATH)
        batch = 5000
        for first in range(0, count, batch):
            inputs = [{"n": i} for i in range(first, min(count, first + batch))]
            seeded += await engine.submit_many(
                plan.flow, inputs, run_as=plan.run_as, source=plan.source
            )
    # A batch's runs share one `created_at`; runs submitted one by one each have their own.
    # Spread them 0.1 ms apart, in order, so the list pages over runs as the API makes them.
    connection = sqlite3.connect(db.removeprefix("sqlite:///"), timeout=60)
    try:
        with connection:
            connection.executemany(
                "UPDATE tm_runs SET created_at = ? WHERE id = ?",
                ((since + k * 0.0001, run_id) for k, run_id in enumerate(seeded)),
            )
    finally:
        connection.close()
    ids += seeded
    return time.perf_counter() - started


def seed_prefect_store(database: Path, template_id: str, count: int, ids: list[str]) -> float:
    """`count` copies of flow run `template_id` (and its state), each a millisecond older."""
    started = time.perf_counter()
    connection = sqlite3.connect(database, timeout=60)
    try:
        connection.row_factory = sqlite3.Row
        run = dict(
            connection.execute("SELECT * FROM flow_run WHERE id = ?", (template_id,)).fetchone()
        )
        state = dict(
            connection.execute(
                "SELECT * FROM flow_run_state WHERE id = ?", (run["state_id"],)
            ).fetchone()
        )
        base = dt.datetime.fromisoformat(run["expected_start_time"])
        run_columns, state_columns = list(run), list(state)
        insert_run = (
            f"INSERT INTO flow_run ({', '.join(run_columns)}) "
            f"VALUES ({', '.join('?' * len(run_columns))})"
        )
        insert_state = (
            f"INSERT INTO flow_run_state ({', '.join(state_columns)}) "
            f"VALUES ({', '.join('?' * len(state_columns))})"
        )
        details = json.loads(state["state_details"])
        batch = 5000
        for first in range(0, count, batch):
            runs, states = [], []
            for i in range(first, min(count, first + batch)):
                moment = (base - dt.timedelta(milliseconds=i + 1)).strftime("%Y-%m-%d %H:%M:%S.%f")
                run_id, state_id = str(uuid.uuid4()), str(uuid.uuid4())
                ids.append(run_id)
                runs.append({
                    **run, "id": run_id, "name": f"seed-{i}", "created": moment, "updated": moment,
                    "expected_start_time": moment, "state_timestamp": moment, "state_id": state_id,
                    "parameters": json.dumps({"n": i}),
                })  # fmt: skip
                states.append({
                    **state, "id": state_id, "created": moment, "updated": moment,
                    "timestamp": moment, "flow_run_id": run_id,
                    "state_details": json.dumps({**details, "flow_run_id": run_id}),
                })  # fmt: skip
            with connection:
                connection.executemany(
                    insert_state, [tuple(s[c] for c in state_columns) for s in states]
                )
                connection.executemany(insert_run, [tuple(r[c] for c in run_columns) for r in runs])
    finally:
        connection.close()
    return time.perf_counter() - started


# -- the cells ---------------------------------------------------------------------------------


@dataclass
class Results:
    cells: list[Cell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sse: dict[str, Any] = field(default_factory=dict)

    def find(self, target: str, op: str, concurrency: int) -> Cell | None:
        for cell in self.cells:
            if (cell.target, cell.op, cell.concurrency) == (target, op, concurrency):
                return cell
        return None


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def measure_target(
    target: Target,
    args: argparse.Namespace,
    results: Results,
    pids: Sequence[int],
    seed: Callable[[int, list[str]], Awaitable[str]],
) -> None:
    """The submit, read and list cells of one server, and its seeding to `args.runs` runs."""
    name = target.name
    ids: list[str] = []

    async def submit(index: int) -> str | None:
        run_id, error = await target.submit(index)
        if run_id:
            ids.append(run_id)
        return error

    def skip(op: str, concurrency: int) -> bool:
        if op in target.skipped:
            results.cells.append(Cell(name, op, concurrency, skipped=target.skipped[op]))
            return True
        return False

    if not skip("submit", args.concurrency) and not skip("submit", 1):
        await drive(Cell(name, "warm-up", args.concurrency), args.warmup, submit, target, 20)
        settle(pids)
        cell = await drive(
            Cell(name, "submit", args.concurrency), args.submits, submit, target, args.seconds
        )
        results.cells.append(cell)
        _say(
            f"  {name:<9} submit x{args.concurrency}: {cell.rate:,.0f}/s, "
            f"{len(cell.errors)} errors, {cell.retries} 503s retried"
        )
        settle(pids)
        cell = await drive(Cell(name, "submit", 1), args.sequential, submit, target, args.seconds)
        results.cells.append(cell)
        _say(f"  {name:<9} submit x1: p50 {cell.ms(50):.2f} ms, {len(cell.errors)} errors")
        rate = results.find(name, "submit", args.concurrency)
        api_rate = rate.rate if rate else 0.0
    else:
        api_rate = 0.0

    remaining = max(0, args.runs - len(ids))
    if remaining:
        if args.seed == "api" or (args.seed == "auto" and api_rate * SEED_API_SECONDS >= remaining):
            seeded = Cell(name, "seed", args.concurrency)
            offset = len(ids) + 1_000_000
            await drive(seeded, remaining, lambda i: submit(offset + i), target)
            results.notes.append(
                f"{name}: seeded {remaining:,} more runs through its API "
                f"({seeded.rate:,.0f}/s, {len(seeded.errors)} errors)"
            )
        else:
            how = await seed(remaining, ids)
            results.notes.append(f"{name}: seeded {remaining:,} more runs {how}")
        _say(f"  {name:<9} {results.notes[-1]}")
    settle(pids, most=60)

    if ids and not skip("read", 1):
        rng = random.Random(7)
        picks = [rng.choice(ids) for _ in range(max(args.reads, args.sequential))]
        cell = await drive(
            Cell(name, "read", args.concurrency),
            args.reads,
            lambda i: target.read(picks[i]),
            target,
            args.seconds,
        )
        results.cells.append(cell)
        settle(pids)
        cell = await drive(
            Cell(name, "read", 1),
            args.sequential,
            lambda i: target.read(picks[i]),
            target,
            args.seconds,
        )
        results.cells.append(cell)
        _say(f"  {name:<9} read x1: p50 {cell.ms(50):.2f} ms, {len(cell.errors)} errors")
    elif not ids:
        results.cells.append(Cell(name, "read", 1, skipped="no run ids (submit was skipped)"))
    settle(pids)

    if not skip("list", 1):
        for _ in range(5):  # warm the page's query and caches
            await target.first_page()
        cell = await drive(
            Cell(name, "list", 1), args.pages, lambda i: target.first_page(), target, args.seconds
        )
        results.cells.append(cell)
        _say(f"  {name:<9} list x1: p50 {cell.ms(50):.2f} ms, {len(cell.errors)} errors")
        settle(pids)
        cell = Cell(name, "walk", 1)
        started, retries = time.perf_counter(), target.retries
        await target.walk(args.walk, cell)
        cell.wall = time.perf_counter() - started
        cell.retries = target.retries - retries
        results.cells.append(cell)
        settle(pids)


async def measure_sse(url: str, token: str, args: argparse.Namespace, results: Results) -> None:
    """`args.subscribers` SSE subscribers over `args.live_runs` live runs; lag of each event."""
    import httpx

    runs = args.live_runs
    subscribers = args.subscribers
    limits = httpx.Limits(
        max_connections=subscribers + 32, max_keepalive_connections=subscribers + 32
    )
    headers = {"Authorization": f"Bearer {token}"}
    lags: list[float] = []
    replayed = 0
    errors: list[str] = []
    finished = 0
    connected_at: list[float] = []
    first_live: list[float] = []
    async with httpx.AsyncClient(
        base_url=url, headers=headers, limits=limits, timeout=httpx.Timeout(120.0)
    ) as client:
        ids: list[str] = []
        for _ in range(runs):
            response = await client.post("/api/runs", json={"path": LIVE_PATH, "inputs": {}})
            if response.status_code != 201:
                results.sse["skipped"] = (
                    f"submit failed: HTTP {response.status_code} {response.text[:300]}"
                )
                return
            body = response.json()
            ids.append(str(body.get("id") or body.get("run_id")))
        submitted = time.time()

        async def subscribe(run_id: str) -> None:
            nonlocal replayed, finished
            fields: dict[str, str] = {}
            async with client.stream(
                "GET", f"/api/runs/{run_id}/events", headers={"accept": "text/event-stream"}
            ) as response:
                if response.status_code != 200:
                    errors.append(
                        f"HTTP {response.status_code}: {(await response.aread())[:200]!r}"
                    )
                    return
                connected = time.time()
                connected_at.append(connected - submitted)
                live = False
                async for line in response.aiter_lines():
                    if line:
                        if not line.startswith(":"):
                            key, _, value = line.partition(":")
                            value = value[1:] if value.startswith(" ") else value
                            fields[key] = fields.get(key, "") + value if key == "data" else value
                        continue
                    if "data" not in fields:
                        fields = {}
                        continue
                    now = time.time()
                    data = json.loads(fields["data"])
                    kind = fields.get("event") or data.get("kind")
                    at = data.get("at")
                    fields = {}
                    if not isinstance(at, (int, float)):
                        errors.append(f"an event without a numeric `at`: {data!r:.200}")
                        return
                    if at < connected:
                        replayed += 1
                    else:
                        if not live:
                            first_live.append(at - connected)
                            live = True
                        lags.append(now - at)
                    if kind == "run_finished" and data.get("run_id", run_id) == run_id:
                        finished += 1
                        return

        started = time.perf_counter()
        tasks = [subscribe(ids[i % runs]) for i in range(subscribers)]
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        wall = time.perf_counter() - started
        errors += [f"{type(o).__name__}: {o}" for o in outcomes if isinstance(o, BaseException)]
    results.sse = {
        "subscribers": subscribers,
        "runs": runs,
        "events": len(lags),
        "replayed": replayed,
        "finished": finished,
        "p50": percentile(lags, 50) * 1000,
        "p99": percentile(lags, 99) * 1000,
        "max": max(lags, default=float("nan")) * 1000,
        "connect_p99": percentile(connected_at, 99),
        "wall": wall,
        "errors": errors,
    }


# -- report ------------------------------------------------------------------------------------


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _ms(value: float) -> str:
    return "-" if value != value else f"{value:.2f}"


def report(results: Results, args: argparse.Namespace, speed: tuple[float, float]) -> str:
    load = os.getloadavg()
    lines = [
        f"server runs API: {args.runs:,} runs for the list, concurrency {args.concurrency}; "
        f"python {platform.python_version()}, {os.cpu_count()} cpus, "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        "versions: " + ", ".join(
            f"{p} {_version(p)}" for p in ("tidemill", "prefect", "fastapi", "uvicorn", "httpx")
        ),
        f"host speed: {speed[0]:.0f} ms at the start, {speed[1]:.0f} ms at the end "
        "(benchmarks/agent_loop.py's workload)",
    ]  # fmt: skip
    lines += [f"note: {note}" for note in results.notes]
    lines.append("")
    header = (
        f"{'op':<14} {'target':<9} {'conc':>4} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'per s':>8} {'errors':>6} {'503s':>6}"
    )
    lines += [header, "-" * len(header)]
    labels = {"submit": "submit", "read": "read", "list": "list page 1", "walk": "list, walked"}
    for op in ("submit", "read", "list", "walk"):
        for cell in [c for c in results.cells if c.op == op]:
            if cell.skipped:
                lines.append(
                    f"{labels[op]:<14} {cell.target:<9} {cell.concurrency:>4} "
                    f"skipped: {cell.skipped}"
                )
                continue
            lines.append(
                f"{labels[op]:<14} {cell.target:<9} {cell.concurrency:>4} {len(cell.latencies):>6} "
                f"{_ms(cell.ms(50)):>8} {_ms(cell.ms(99)):>8} {cell.rate:>8,.0f} "
                f"{len(cell.errors):>6} {cell.retries:>6}"
            )
    lines.append("")
    lines.append(
        "Tidemill / Prefect (rates: Tidemill's over Prefect's; latencies: Prefect's over "
        "Tidemill's):"
    )
    for op in ("submit", "read", "list", "walk"):
        for concurrency in sorted({c.concurrency for c in results.cells if c.op == op}):
            ours = results.find("tidemill", op, concurrency)
            theirs = results.find("prefect", op, concurrency)
            if not ours or not theirs or not ours.latencies or not theirs.latencies:
                continue
            parts = [
                f"p50 {theirs.ms(50) / ours.ms(50):.2f}x",
                f"p99 {theirs.ms(99) / ours.ms(99):.2f}x",
            ]
            if op in ("submit", "read") and concurrency > 1:
                parts.insert(0, f"rate {ours.rate / theirs.rate:.2f}x")
            lines.append(f"  {labels[op]:<14} x{concurrency:<3} " + ", ".join(parts))
    lines.append("")
    sse = results.sse
    if sse.get("skipped"):
        lines.append(f"live events: skipped: {sse['skipped']}")
    elif sse:
        if sse.get("stand_in"):
            lines.append(
                "live events: the server has no SSE route yet; measured through "
                "--stand-in-events (AsyncEngine.follow per subscriber, no auth)"
            )
        lines.append(
            f"live events (Tidemill): {sse['subscribers']} subscribers over {sse['runs']} runs, "
            f"{sse['events']:,} live events (+{sse['replayed']:,} replayed from before the "
            f"subscription), {sse['finished']} saw run_finished; lag p50 {_ms(sse['p50'])} ms, "
            f"p99 {_ms(sse['p99'])} ms, max {_ms(sse['max'])} ms; subscribed within "
            f"{sse['connect_p99']:.2f} s (p99) of the submits; {len(sse['errors'])} errors"
        )
    lines.append("")
    lines += targets(results, args)
    for cell in results.cells:
        for error in cell.errors[:3]:
            lines.append(f"error: {cell.target} {cell.op} x{cell.concurrency}: {error}")
    for error in sse.get("errors", [])[:3]:
        lines.append(f"error: live events: {error}")
    return "\n".join(lines)


def targets(results: Results, args: argparse.Namespace) -> list[str]:
    lines = ["targets:"]

    def check(label: str, value: str, passed: bool | None) -> None:
        verdict = "SKIP" if passed is None else "PASS" if passed else "FAIL"
        lines.append(f"  [{verdict}] {label}: {value}")

    ours = results.find("tidemill", "submit", args.concurrency)
    theirs = results.find("prefect", "submit", args.concurrency)
    if ours and theirs and ours.latencies and theirs.latencies:
        ratio = ours.rate / theirs.rate
        check(
            f"submit at least {TARGETS['submit_ratio']:g}x Prefect's rate (x{args.concurrency})",
            f"{ours.rate:,.0f}/s vs {theirs.rate:,.0f}/s ({ratio:.2f}x)",
            ratio >= TARGETS["submit_ratio"],
        )
    else:
        check(f"submit at least {TARGETS['submit_ratio']:g}x Prefect's rate", "not measured", None)
    one = results.find("tidemill", "submit", 1)
    if one and one.latencies:
        check(
            f"submit p50 under {TARGETS['submit_p50_ms']:g} ms on SQLite (one at a time)",
            f"{_ms(one.ms(50))} ms (x{args.concurrency}: {_ms(ours.ms(50)) if ours else '-'} ms)",
            one.ms(50) < TARGETS["submit_p50_ms"],
        )
    else:
        check(f"submit p50 under {TARGETS['submit_p50_ms']:g} ms", "not measured", None)
    page = results.find("tidemill", "list", 1)
    if page and page.latencies:
        check(
            f"run list page under {TARGETS['list_ms']:g} ms at {args.runs:,} runs (p99)",
            f"p50 {_ms(page.ms(50))} ms, p99 {_ms(page.ms(99))} ms",
            page.ms(99) < TARGETS["list_ms"],
        )
    else:
        check(f"run list page under {TARGETS['list_ms']:g} ms", "not measured", None)
    sse = results.sse
    if sse and not sse.get("skipped") and sse["events"]:
        check(
            f"SSE lag p99 under {TARGETS['sse_p99_ms']:g} ms at {sse['subscribers']} subscribers",
            f"{_ms(sse['p99'])} ms",
            sse["p99"] < TARGETS["sse_p99_ms"],
        )
    else:
        check(f"SSE lag p99 under {TARGETS['sse_p99_ms']:g} ms", "not measured", None)
    return lines


# -- main --------------------------------------------------------------------------------------


def host_speed_ms() -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        rows: list[dict[str, Any]] = [
            {"i": i, "s": str(i), "l": [i, i + 1]} for i in range(100_000)
        ]
        rows.sort(key=lambda row: row["s"])
        json.dumps(rows[:20_000])
        best = min(best, time.perf_counter() - started)
    return best * 1000


def make_workspace(db: str, flows: dict[str, dict[str, Any]]) -> str:
    """A new workspace in `db` with `flows`, made by its first user (its admin); their token."""
    from tidemill.workspace import Workspace

    ws = Workspace(db, workspace=WORKSPACE, user=USER, migrate=True)
    try:
        ws.add_folder("bench")
        for path, flow in flows.items():
            ws.write(path, "flow", flow)
        token: str = ws.create_token("bench").text
        return token
    finally:
        ws.close()


def tidemill_routes(url: str) -> dict[tuple[str, str], str]:
    """The server's routes, `(method, path with {} for parameters)`: their operation ids."""
    import re

    import httpx

    answer = httpx.get(f"{url}/openapi.json", timeout=30)
    answer.raise_for_status()
    paths = answer.json().get("paths", {})
    return {
        (method.lower(), re.sub(r"\{[^}]+\}", "{}", path)): str(operation.get("operationId", ""))
        for path, operations in paths.items()
        for method, operation in operations.items()
    }


async def run_bench(args: argparse.Namespace, workdir: Path, procs: Processes) -> Results:
    import httpx

    results = Results()
    limits = httpx.Limits(
        max_connections=args.concurrency, max_keepalive_connections=args.concurrency
    )

    db = f"sqlite:///{workdir}/tidemill.db"
    token = make_workspace(db, {FLOW_PATH: NOOP_FLOW})
    tidemill_url, tidemill_process = procs.tidemill(db, worker=False)
    pids = [tidemill_process.pid]
    prefect_url = ""
    if "prefect" in args.only:
        try:
            prefect_url, prefect_process = procs.prefect()
            pids.append(prefect_process.pid)
        except RuntimeError as exc:
            results.notes.append(f"prefect: skipped ({str(exc).splitlines()[0]})")

    if "tidemill" in args.only:
        async with httpx.AsyncClient(
            base_url=tidemill_url, headers={"Authorization": f"Bearer {token}"}, limits=limits,
            timeout=60.0,
        ) as client:  # fmt: skip
            target: Target = Tidemill(client, tidemill_routes(tidemill_url))

            async def seed_tidemill(count: int, ids: list[str]) -> str:
                seconds = await seed_tidemill_store(db, count, ids)
                return (
                    "straight into its store with AsyncEngine.submit_many, their created_at "
                    f"spread 0.1 ms apart ({seconds:.1f} s)"
                )

            _say("tidemill:")
            await measure_target(target, args, results, pids, seed_tidemill)

    if prefect_url:
        async with httpx.AsyncClient(base_url=prefect_url, limits=limits, timeout=60.0) as client:
            response = await client.post("/api/flows/", json={"name": "noop"})
            response.raise_for_status()
            target = Prefect(client, response.json()["id"])

            async def seed_prefect(count: int, ids: list[str]) -> str:
                seconds = seed_prefect_store(workdir / "prefect" / "prefect.db", ids[0], count, ids)
                return (
                    "as copies of an API-made run, inserted into its SQLite tables "
                    f"({seconds:.1f} s)"
                )

            _say("prefect:")
            await measure_target(target, args, results, pids, seed_prefect)
            count = await client.post("/api/flow_runs/count", json={})
            results.notes.append(f"prefect: {count.json():,} flow runs in its store")

    procs.stop()  # the live-events cell gets the machine to itself
    procs.started.clear()
    return results


async def run_sse(
    args: argparse.Namespace, workdir: Path, procs: Processes, results: Results
) -> None:
    flow = live_flow(args.live_steps, args.lead, args.gap)
    db = f"sqlite:///{workdir}/live.db"
    token = make_workspace(db, {LIVE_PATH: flow})
    url, _ = procs.tidemill(
        db, worker=True, concurrency=max(4, args.live_runs), stand_in=args.stand_in_events
    )
    routes = tidemill_routes(url)
    missing = [
        f"{m.upper()} {p.replace('{}', '{id}')}"
        for m, p in (("post", "/api/runs"), ("get", "/api/runs/{}/events"))
        if (m, p) not in routes
    ]
    if missing:
        results.sse = {"skipped": f"the Tidemill server has no {' or '.join(missing)} yet"}
        return
    await measure_sse(url, token, args, results)
    if routes[("get", "/api/runs/{}/events")].startswith(STAND_IN):
        results.sse["stand_in"] = True


def orchestrate(args: argparse.Namespace) -> int:
    speed_start = host_speed_ms()
    with tempfile.TemporaryDirectory(prefix="tidemill-server-bench-") as tmp:
        workdir = Path(tmp)
        procs = Processes(workdir)
        try:
            results = Results()
            if {"tidemill", "prefect"} & set(args.only):
                results = _run(run_bench(args, workdir, procs))
            if {"tidemill", "live"} & set(args.only) and args.subscribers:
                _say("tidemill, live events:")
                procs = Processes(workdir)
                _run(run_sse(args, workdir, procs, results))
        finally:
            procs.stop()
            if args.logs:  # the servers' output, for a look at their errors
                Path(args.logs).mkdir(parents=True, exist_ok=True)
                for log in workdir.glob("*.log"):
                    shutil.copy(log, Path(args.logs) / log.name)
    print(report(results, args, (speed_start, host_speed_ms())))
    broken = [e for c in results.cells for e in c.errors] + results.sse.get("errors", [])
    return 1 if broken else 0


def serve(args: argparse.Namespace) -> int:
    """The Tidemill server of a run, in its own process (so the load generator's GIL is its own)."""
    import uvicorn

    sys.path.insert(0, str(Path(__file__).parent))  # `server:pause`, the live flow's step
    from tidemill.server import ServerConfig, create_app

    config = ServerConfig(
        db=args.db, workspace=WORKSPACE, worker=args.worker, concurrency=args.worker_concurrency
    )
    app = create_app(config)
    if args.stand_in_events:
        _stand_in_events(app)
    uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on")
    ).run()
    return 0


def _stand_in_events(app: Any) -> None:
    """`GET /api/runs/{run_id}/events` over `AsyncEngine.follow`, where the server has none yet.

    Only with `--stand-in-events`: no auth, one follower per subscriber, each
    event as `id:`, `event:` and `data:` (the event as JSON, with its `at`). It
    measures what the engine's `follow` gives 500 subscribers, not the route
    the server will have; the report says so.
    """
    from dataclasses import asdict

    from fastapi.responses import StreamingResponse

    if any(getattr(r, "path", "") == "/api/runs/{run_id}/events" for r in app.routes):
        return

    async def events(run_id: str) -> StreamingResponse:
        engine = app.state.tidemill.engine

        async def stream() -> Any:
            async for event in engine.follow(run_id):
                data = json.dumps(asdict(event))
                yield f"id: {event.id}\nevent: {event.kind}\ndata: {data}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    app.add_api_route(
        "/api/runs/{run_id}/events", events, methods=["GET"], name=STAND_IN, response_model=None
    )


def _run(coroutine: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", nargs="?", default="bench", choices=("bench", "serve"))
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 5,000 runs, fewer samples"
    )
    parser.add_argument(
        "--runs", type=int, default=None, help="runs in the store for the list (100000)"
    )
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument(
        "--submits", type=int, default=None, help="timed submits at the concurrency"
    )
    parser.add_argument("--sequential", type=int, default=None, help="timed requests one at a time")
    parser.add_argument("--reads", type=int, default=None, help="timed reads at the concurrency")
    parser.add_argument("--pages", type=int, default=None, help="timed first pages of the list")
    parser.add_argument("--walk", type=int, default=None, help="pages walked from the newest")
    parser.add_argument(
        "--seconds", type=float, default=None, help="at most this long per timed cell (30)"
    )
    parser.add_argument("--seed", choices=("auto", "api", "store"), default="auto")
    parser.add_argument("--subscribers", type=int, default=500)
    parser.add_argument("--live-runs", type=int, default=20)
    parser.add_argument("--live-steps", type=int, default=10, help="paced steps of a live run")
    parser.add_argument(
        "--lead", type=float, default=None, help="s of the first step (subscribing)"
    )
    parser.add_argument("--gap", type=float, default=0.2, help="s of each paced step")
    parser.add_argument(
        "--only",
        nargs="*",
        default=["tidemill", "prefect"],
        help="tidemill, prefect, live (the live events alone; tidemill includes them)",
    )
    parser.add_argument("--logs", default="", help="copy the servers' output into this folder")
    # The `serve` role.
    parser.add_argument("--db", default="")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument(
        "--stand-in-events",
        action="store_true",
        help="serve a stand-in SSE route over AsyncEngine.follow when the server has none",
    )
    parser.add_argument("--worker-concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {
        "runs": 5_000 if quick else 100_000,
        "submits": 500 if quick else 5_000,
        "sequential": 100 if quick else 1_000,
        "reads": 500 if quick else 5_000,
        "pages": 50 if quick else 300,
        "walk": 20 if quick else 100,
        "lead": 3.0 if quick else 5.0,
        "seconds": 10.0 if quick else 30.0,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.warmup = 50 if quick else 200
    if quick and args.subscribers == 500:
        args.subscribers, args.live_runs = 100, 5
    return args


def main() -> int:
    args = parse_args()
    if args.role == "serve":
        return serve(args)
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
