"""The HTTP server's runs API next to Prefect's server: submit, read, list, and live events.

Both servers run in processes of their own on this machine, in the same run,
each over SQLite in a temporary directory (Prefect's with `--no-services`,
as Tidemill's runs without its worker), and the same load generator (this
process, `httpx.AsyncClient`) drives them alike:

- submit: `POST /api/runs` (Tidemill, a workspace flow `f/bench/noop` of one
  identity step) against `POST /api/flow_runs/` (Prefect, after one
  `POST /api/flows/`; the run is recorded as Pending): runs per second at a
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

Each timed cell is measured in `ROUNDS` parts, the two servers taking turns,
so that a shared machine's drifting load falls on both alike; beside each
cell's latencies is the server's CPU per answered request, which that load
inflates far less. The runs beyond those the submit cells made are seeded
untimed: through the API when its rate would do it in under a minute and a
half, or else straight into the store (Tidemill: `AsyncEngine.submit_many` of
the flow's run plan, as `POST /api/runs` would submit it, without its audit
row; Prefect: copies of a run the API made, inserted into its SQLite tables).
The report says which.

    .venv-bench/bin/python benchmarks/server.py [--quick] [--runs 100000] [--profile DIR]

A measurement whose route the Tidemill server lacks is skipped, saying so
(the routes are read from its `/openapi.json`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from server_targets import (
    FLOW_PATH,
    WORKSPACE,
    Cell,
    Prefect,
    Processes,
    Target,
    Tidemill,
    cpu_seconds,
    drive,
    make_workspace,
    percentile,
    seed_prefect_store,
    seed_tidemill_store,
    settle,
    sse_messages,
    tidemill_routes,
)

CONCURRENCY = 16
LIVE_PATH = "f/bench/paced"
NOOP_FLOW = {
    "summary": "Nothing to do",
    "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "steps": [{"id": "a", "identity": {}, "inputs": {"n": "flow_input.n"}}],
}
ROUNDS = 4
"""Each timed cell is measured in this many parts, the peers taking turns."""
SEED_API_SECONDS = 90.0
"""Seed through the API when its measured rate would take at most this long."""
TARGETS = {
    "submit_ratio": 3.0,
    "submit_p50_ms": 5.0,
    "list_ms": 20.0,
    "sse_p99_ms": 100.0,
}


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


@dataclass
class Peer:
    """One server under test in this run: its client, the runs it made, how to seed more."""

    target: Target
    seed: Callable[[int, list[str]], Awaitable[str]]
    pid: int
    """The server's process (with its children: Prefect's server starts some)."""
    ids: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.target.name

    async def submit(self, index: int) -> str | None:
        run_id, error = await self.target.submit(index)
        if run_id:
            self.ids.append(run_id)
        return error

    def skip(self, results: Results, op: str, concurrency: int) -> bool:
        if op in self.target.skipped:
            results.cells.append(Cell(self.name, op, concurrency, skipped=self.target.skipped[op]))
            return True
        return False


async def in_rounds(
    peers: Sequence[Peer],
    results: Results,
    args: argparse.Namespace,
    pids: Sequence[int],
    cell: tuple[str, int, int],
    call_of: Callable[[Peer], Callable[[int], Awaitable[str | None]]],
) -> None:
    """One cell (`op`, concurrency, calls) of every peer, in `ROUNDS` turns that alternate.

    A noisy machine's load drifts; measured a part of each in turn, both
    peers' cells see the same stretches of it.
    """
    op, concurrency, count = cell
    cells = {
        peer.name: Cell(peer.name, op, concurrency)
        for peer in peers
        if not peer.skip(results, op, concurrency)
    }
    live = [peer for peer in peers if peer.name in cells]
    part = max(1, count // ROUNDS)
    for turn in range(ROUNDS):
        for peer in live if turn % 2 == 0 else live[::-1]:
            settle(pids)
            cpu = cpu_seconds(peer.pid)
            await drive(
                cells[peer.name], part, call_of(peer), peer.target, args.seconds / ROUNDS,
                first=turn * part,
            )  # fmt: skip
            cells[peer.name].cpu += cpu_seconds(peer.pid) - cpu
    for peer in live:
        done = cells[peer.name]
        results.cells.append(done)
        _say(
            f"  {peer.name:<9} {op} x{concurrency}: {done.rate:,.0f}/s, p50 {done.ms(50):.2f} ms, "
            f"{len(done.errors)} errors, {done.retries} 503s retried"
        )


async def phase_submit(
    peers: Sequence[Peer],
    args: argparse.Namespace,
    results: Results,
    pids: Sequence[int],
) -> None:
    """Submits at `args.concurrency` (their rate), then one at a time (their latency)."""
    for peer in peers:
        warm = Cell(peer.name, "warm-up", args.concurrency)
        await drive(warm, args.warmup, peer.submit, peer.target, 20, first=10_000_000)
    for concurrency, count in ((args.concurrency, args.submits), (1, args.sequential)):
        await in_rounds(
            peers,
            results,
            args,
            pids,
            ("submit", concurrency, count),
            lambda p: p.submit,
        )


async def phase_seed(
    peers: Sequence[Peer],
    args: argparse.Namespace,
    results: Results,
    pids: Sequence[int],
) -> None:
    """More runs, untimed, up to `args.runs` in each store."""
    for peer in peers:
        remaining = max(0, args.runs - len(peer.ids))
        if not remaining:
            continue
        measured = results.find(peer.name, "submit", args.concurrency)
        api_rate = measured.rate if measured and measured.latencies else 0.0
        if args.seed == "api" or (args.seed == "auto" and api_rate * SEED_API_SECONDS >= remaining):
            seeded = Cell(peer.name, "seed", args.concurrency)
            await drive(seeded, remaining, peer.submit, peer.target, first=20_000_000)
            note = (
                f"seeded {remaining:,} more runs through its API "
                f"({seeded.rate:,.0f}/s, {len(seeded.errors)} errors)"
            )
        else:
            note = f"seeded {remaining:,} more runs {await peer.seed(remaining, peer.ids)}"
        results.notes.append(f"{peer.name}: {note}")
        _say(f"  {peer.name:<9} {note}")
    settle(pids, most=60)


async def phase_read(
    peers: Sequence[Peer],
    args: argparse.Namespace,
    results: Results,
    pids: Sequence[int],
) -> None:
    """Random runs of each read, at `args.concurrency` and one at a time."""
    rng = random.Random(7)
    picks = {
        peer.name: [rng.choice(peer.ids) for _ in range(max(args.reads, args.sequential))]
        for peer in peers
        if peer.ids
    }
    for peer in peers:
        if not peer.ids:
            skipped = "no run ids (submit was skipped)"
            results.cells.append(Cell(peer.name, "read", 1, skipped=skipped))
    readers = [peer for peer in peers if peer.ids]

    def reader(peer: Peer) -> Callable[[int], Awaitable[str | None]]:
        return lambda i: peer.target.read(picks[peer.name][i])

    for concurrency, count in ((args.concurrency, args.reads), (1, args.sequential)):
        await in_rounds(readers, results, args, pids, ("read", concurrency, count), reader)


async def phase_list(
    peers: Sequence[Peer],
    args: argparse.Namespace,
    results: Results,
    pids: Sequence[int],
) -> None:
    """The newest page of the run list, again and again; then pages walked from it."""
    for peer in peers:
        for _ in range(5):  # warm the page's query and caches
            await peer.target.first_page()
    await in_rounds(
        peers, results, args, pids, ("list", 1, args.pages),
        lambda p: lambda i: p.target.first_page(),
    )  # fmt: skip
    for peer in peers:
        if "list" in peer.target.skipped:
            continue
        settle(pids)
        cell = Cell(peer.name, "walk", 1)
        started, retries = time.perf_counter(), peer.target.retries
        await peer.target.walk(args.walk, cell)
        cell.wall = time.perf_counter() - started
        cell.retries = peer.target.retries - retries
        results.cells.append(cell)


PHASES = (phase_submit, phase_seed, phase_read, phase_list)


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
            path = f"/api/runs/{run_id}/events"
            connected = 0.0
            async for now, message in sse_messages(url, path, token):
                if not connected:  # the first message is the stream's `retry:` hint
                    connected = now
                    connected_at.append(connected - submitted)
                body = next(
                    (ln[5:] for ln in message.split(b"\n") if ln.startswith(b"data:")), None
                )
                if body is None:
                    continue  # the retry hint, a keep-alive comment
                data = json.loads(body)
                at = data.get("at")
                if not isinstance(at, (int, float)):
                    errors.append(f"an event without a numeric `at`: {data!r:.200}")
                    return
                if at < connected:
                    replayed += 1
                else:
                    lags.append(now - at)
                if data.get("kind") == "run_finished" and data.get("run_id") == run_id:
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
        f"{'per s':>8} {'cpu ms':>7} {'errors':>6} {'503s':>6}"
    )
    lines += [header, "-" * len(header)]
    labels = {
        "submit": "submit",
        "read": "read",
        "list": "list page 1",
        "walk": "list, walked",
    }
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
                f"{_ms(cell.cpu_ms):>7} {len(cell.errors):>6} {cell.retries:>6}"
            )
    lines.append(
        "(cpu ms: the server's CPU per answered request, its processes' user + system time "
        "over the cell)"
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
            if ours.cpu and theirs.cpu:
                parts.append(f"server CPU per request {theirs.cpu_ms / ours.cpu_ms:.2f}x")
            lines.append(f"  {labels[op]:<14} x{concurrency:<3} " + ", ".join(parts))
    lines.append("")
    sse = results.sse
    if sse.get("skipped"):
        lines.append(f"live events: skipped: {sse['skipped']}")
    elif sse:
        lines.append(
            f"live events (Tidemill): {sse['subscribers']} subscribers over {sse['runs']} runs, "
            f"{sse['events']:,} live events (+{sse['replayed']:,} replayed from before the "
            f"subscription), {sse['finished']} saw run_finished; lag p50 {_ms(sse['p50'])} ms, "
            f"p99 {_ms(sse['p99'])} ms, max {_ms(sse['max'])} ms; subscribed within "
            f"{sse['connect_p99']:.2f} s (p99) of the submits; {len(sse['errors'])} errors; "
            f"CPU over its {sse['wall']:.1f} s: server {sse['server_cpu']:.1f} s, "
            f"client {sse['client_cpu']:.1f} s"
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
        check(
            f"submit at least {TARGETS['submit_ratio']:g}x Prefect's rate",
            "not measured",
            None,
        )
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


async def run_bench(args: argparse.Namespace, workdir: Path, procs: Processes) -> Results:
    """Both servers up at once; each phase measured on one, then the other, in turns."""
    import httpx

    results = Results()
    limits = httpx.Limits(
        max_connections=args.concurrency, max_keepalive_connections=args.concurrency
    )
    db = f"sqlite:///{workdir}/tidemill.db"
    token = make_workspace(db, {FLOW_PATH: NOOP_FLOW})
    peers: list[Peer] = []
    pids: list[int] = []
    async with contextlib.AsyncExitStack() as stack:
        if "tidemill" in args.only:
            url, process = procs.tidemill(db, worker=False)
            pids.append(process.pid)
            client = await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=url, headers={"Authorization": f"Bearer {token}"}, limits=limits,
                    timeout=60.0,
                )
            )  # fmt: skip

            async def seed_tidemill(count: int, ids: list[str]) -> str:
                seconds = await seed_tidemill_store(db, count, ids)
                return (
                    "straight into its store with AsyncEngine.submit_many, their created_at "
                    f"spread 0.1 ms apart ({seconds:.1f} s)"
                )

            peers.append(Peer(Tidemill(client, tidemill_routes(url)), seed_tidemill, process.pid))
        if "prefect" in args.only:
            try:
                url, process = procs.prefect()
            except RuntimeError as exc:
                results.notes.append(f"prefect: skipped ({str(exc).splitlines()[0]})")
            else:
                pids.append(process.pid)
                client = await stack.enter_async_context(
                    httpx.AsyncClient(base_url=url, limits=limits, timeout=60.0)
                )
                response = await client.post("/api/flows/", json={"name": "noop"})
                response.raise_for_status()

                async def seed_prefect(count: int, ids: list[str]) -> str:
                    seconds = seed_prefect_store(
                        workdir / "prefect" / "prefect.db", ids[0], count, ids
                    )
                    return (
                        "as copies of an API-made run, inserted into its SQLite tables "
                        f"({seconds:.1f} s)"
                    )

                peers.append(
                    Peer(
                        Prefect(client, response.json()["id"]),
                        seed_prefect,
                        process.pid,
                    )
                )
        for phase in PHASES:
            await phase(peers, args, results, pids)
        for peer in peers:
            if isinstance(peer.target, Prefect):
                count = await peer.target.client.post("/api/flow_runs/count", json={})
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
    url, process = procs.tidemill(db, worker=True, concurrency=max(4, args.live_runs))
    routes = tidemill_routes(url)
    missing = [
        f"{m.upper()} {p.replace('{}', '{id}')}"
        for m, p in (("post", "/api/runs"), ("get", "/api/runs/{}/events"))
        if (m, p) not in routes
    ]
    if missing:
        results.sse = {"skipped": f"the Tidemill server has no {' or '.join(missing)} yet"}
        return
    server_cpu, client_cpu = cpu_seconds(process.pid), time.process_time()
    await measure_sse(url, token, args, results)
    results.sse["server_cpu"] = cpu_seconds(process.pid) - server_cpu
    results.sse["client_cpu"] = time.process_time() - client_cpu


def orchestrate(args: argparse.Namespace) -> int:
    speed_start = host_speed_ms()
    with tempfile.TemporaryDirectory(prefix="tidemill-server-bench-") as tmp:
        workdir = Path(tmp)
        procs = Processes(workdir, args.profile)
        try:
            results = Results()
            if {"tidemill", "prefect"} & set(args.only):
                results = _run(run_bench(args, workdir, procs))
            if {"tidemill", "live"} & set(args.only) and args.subscribers:
                _say("tidemill, live events:")
                procs = Processes(workdir, args.profile)
                _run(run_sse(args, workdir, procs, results))
        finally:
            procs.stop()
            if args.logs:  # the servers' output, for a look at their errors
                Path(args.logs).mkdir(parents=True, exist_ok=True)
                for log in workdir.glob("*.log"):
                    shutil.copy(log, Path(args.logs) / log.name)
    print(report(results, args, (speed_start, host_speed_ms())))
    # Tidemill's errors fail the run; Prefect's refusals under load are among its figures.
    ours = [e for c in results.cells if c.target == "tidemill" for e in c.errors]
    return 1 if ours or results.sse.get("errors") else 0


def serve(args: argparse.Namespace) -> int:
    """The Tidemill server of a run, in its own process (so the load generator's GIL is its own)."""
    import uvicorn

    sys.path.insert(0, str(Path(__file__).parent))  # `server:pause`, the live flow's step
    from tidemill.server import ServerConfig, create_app

    config = ServerConfig(
        db=args.db,
        workspace=WORKSPACE,
        worker=args.worker,
        concurrency=args.worker_concurrency,
    )
    app = create_app(config)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on")
    )
    if not args.profile:
        server.run()
        return 0
    import signal

    from pyinstrument import Profiler

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    # uvicorn raises the SIGTERM it stopped on again once it is done: exit, writing the profile.
    signal.signal(signal.SIGTERM, stop)
    profiler = Profiler(interval=0.001)
    profiler.start()
    try:
        server.run()
    finally:
        profiler.stop()
        Path(args.profile).parent.mkdir(parents=True, exist_ok=True)
        Path(args.profile).write_text(profiler.output_text(show_all=False, color=False))
    return 0


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
        "--seconds",
        type=float,
        default=None,
        help="at most this long per timed cell (30)",
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
    parser.add_argument(
        "--profile",
        default="",
        help="profile the Tidemill servers with pyinstrument (a file each, in this folder; "
        "in the serve role: the file)",
    )
    # The `serve` role.
    parser.add_argument("--db", default="")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--worker", action="store_true")
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
