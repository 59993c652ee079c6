"""The server benchmark's parts: timing, the two servers' clients and processes, seeding.

`benchmarks/server.py` runs them; see its docstring for what is measured and how.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SERVER_SCRIPT = Path(__file__).with_name("server.py")
"""The benchmark's script, whose `serve` role is a Tidemill server process."""
FLOW_PATH = "f/bench/noop"
WORKSPACE = "bench"
USER = "bench"
PAGE = 50
PREFECT_SORT = "EXPECTED_START_TIME_DESC"


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
    cpu: float = 0.0
    """CPU seconds the server's processes spent meanwhile (user + system)."""

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall else float("nan")

    @property
    def cpu_ms(self) -> float:
        """The server's CPU per answered request, in ms: what a busy host does not inflate."""
        if not self.cpu or not self.latencies:
            return float("nan")  # not measured (the walk), or nothing answered
        return self.cpu / len(self.latencies) * 1000

    def ms(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000.0


Call = Callable[[int], Awaitable[str | None]]
"""One request, by its index; an error's description, or None."""


async def drive(
    cell: Cell,
    count: int,
    call: Call,
    target: Target | None = None,
    seconds: float = 0.0,
    first: int = 0,
) -> Cell:
    """Make `count` calls (indexes from `first`), `cell.concurrency` at a time (closed loop).

    Each call's time is added to `cell`, as are the wall time and the 503s
    retried (a cell can be driven in parts). With `seconds`, no call starts
    after that long (a slow server makes fewer).
    """
    counter = iter(range(first, first + count))
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
    cell.wall += time.perf_counter() - started
    if target:
        cell.retries += target.retries - retries
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
            "POST",
            "/api/flow_runs/",
            json={"flow_id": self.flow_id, "parameters": {"n": index}},
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


# -- live events -------------------------------------------------------------------------------


async def sse_messages(url: str, path: str, token: str) -> AsyncIterator[tuple[float, bytes]]:
    """A `text/event-stream`'s messages over a bare HTTP/1.1 connection, each with when it came.

    A much lighter client than httpx's streams: 500 of them in one process
    spend little of the machine, so the lag measured is the server's rather
    than this client's. The clock is read once per read from the socket.
    """
    host, _, port = url.removeprefix("http://").partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\nConnection: close\r\n\r\n".encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {(head + await reader.read(300))[-300:]!r}")
        chunked = b"transfer-encoding: chunked" in head.lower()
        raw = body = b""
        while data := await reader.read(65536):
            now = time.time()
            if chunked:
                raw += data
                while (eol := raw.find(b"\r\n")) >= 0:
                    size = int(raw[:eol].split(b";")[0], 16)
                    if len(raw) < eol + size + 4:
                        break
                    body += raw[eol + 2 : eol + 2 + size]
                    raw = raw[eol + size + 4 :]
            else:
                body += data
            *messages, body = body.split(b"\n\n")
            for message in messages:
                yield now, message
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


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

    def __init__(self, workdir: Path, profile: str = "") -> None:
        self.workdir = workdir
        self.profile = profile
        """A folder for the Tidemill servers' profiles (pyinstrument), or nothing."""
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

    def tidemill(self, db: str, *, worker: bool, concurrency: int = 4) -> tuple[str, Any]:
        port = free_port()
        command = [sys.executable, str(SERVER_SCRIPT), "serve", "--db", db, "--port", str(port),
                   "--worker-concurrency", str(concurrency)]  # fmt: skip
        if worker:
            command.append("--worker")
        if self.profile:
            command += [
                "--profile",
                str(Path(self.profile).resolve() / f"tidemill-{port}.txt"),
            ]
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
            # Its API alone, as Tidemill's server runs here without its worker: the
            # scheduler and its other loops would contend for SQLite's one writer too.
            [executable, "server", "start", "--host", "127.0.0.1", "--port", str(port),
             "--no-services"],
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


# -- the Tidemill side's setup ----------------------------------------------------------------


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
