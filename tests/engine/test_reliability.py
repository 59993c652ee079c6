"""Reliability under failure: SIGKILLed workers, a restarted database, a big queue, bad steps.

The worker processes are `procs/reliability_worker.py`; their in-process
steps live in `procs/reliability_steps.py`. A kill schedule is random but
seeded: set TIDEMILL_RELIABILITY_SEED to replay one (failures print it).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import FlowInputError, FlowValidationError, RunFailed, StoreError
from tidemill.flows import Flow

PROCS = Path(__file__).parent / "procs"
WORKER = PROCS / "reliability_worker.py"
SEED_ENV = "TIDEMILL_RELIABILITY_SEED"

# A script step's side effect: one line "<idempotency key> <attempt> <pid>", then a short nap.
EFFECT = (
    "import os, random, time\n"
    "def main(path, **values):\n"
    "    line = '%s %s %d\\n' % (os.environ['TIDEMILL_IDEMPOTENCY_KEY'],\n"
    "                           os.environ['TIDEMILL_ATTEMPT'], os.getpid())\n"
    "    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)\n"
    "    os.write(fd, line.encode())\n"
    "    os.close(fd)\n"
    "    time.sleep(random.uniform(0.01, 0.15))\n"
    "    return values\n"
)


def expr(text: str) -> dict[str, str]:
    return {"expr": text}


def mixed_flow(effects: Path) -> Flow:
    """Six steps: scripts, an in-process function, a parallel and a for_each."""
    path = str(effects)

    def effect(step_id: str, needs: list[str] | None = None, **inputs: Any) -> dict[str, Any]:
        step = {"id": step_id, "script": EFFECT, "inputs": {"path": path, **inputs}}
        return step if needs is None else {**step, "needs": needs}

    return Flow.model_validate(
        {
            "name": "mixed",
            "steps": [
                effect("first", n=expr("flow_input.n")),
                {"id": "fn", "script": {"function": "reliability_steps:effect",
                                        "in_process": True},
                 "inputs": {"path": path, "n": expr("results.first.n + 1")}},
                {"id": "par", "needs": ["fn"], "parallel": {"branches": [
                    {"steps": [effect("a", n=expr("results.fn * 10"))]},
                    {"steps": [effect("b", n=expr("results.fn * 10 + 1"))]},
                ]}},
                {"id": "each", "needs": ["fn"], "for_each": {
                    "items": expr("flow_input.items"), "parallelism": 2,
                    "steps": [effect("sq", n=expr("iter.value * iter.value"))],
                }},
                {"id": "twice", "needs": ["fn"],
                 "script": {"function": "reliability_steps:effect", "in_process": True},
                 "inputs": {"path": path, "n": expr("results.fn * 2")}},
                effect("last", par=expr("results.par"), each=expr("results.each"),
                       twice=expr("results.twice"), needs=["par", "each", "twice"]),
            ],
        }
    )  # fmt: skip


MIXED_STEPS = {
    "[]": {"first", "fn", "par", "each", "twice", "last"},
    '[["par","branch:0"]]': {"a"},
    '[["par","branch:1"]]': {"b"},
    '[["each","body"]]': {"sq"},
}
"""The steps each kind of run in a mixed run's tree records, by the run's scope."""
CONTAINERS = {"par", "each"}  # they record results but run no code of their own


def mixed_input(n: int) -> dict[str, Any]:
    return {"n": n, "items": [n, n + 1, n + 2]}


def mixed_result(n: int) -> dict[str, Any]:
    fn = n + 1
    return {
        "par": [{"n": fn * 10}, {"n": fn * 10 + 1}],
        "each": [{"n": v * v} for v in (n, n + 1, n + 2)],
        "twice": fn * 2,
    }


# --- worker processes ----------------------------------------------------------------


class Fleet:
    """Worker processes on one store; every one is killed and reaped in `close`."""

    def __init__(self, url: str, logs: Path, **options: Any) -> None:
        self.url = url
        self.logs = logs
        self.options = options
        self.alive: list[subprocess.Popen[bytes]] = []
        self.started: list[subprocess.Popen[bytes]] = []
        self.killed = 0

    def start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PROCS), str(PROCS.parent), env.get("PYTHONPATH")) if p
        )
        args = [sys.executable, str(WORKER), self.url]
        for name, value in self.options.items():
            args += [f"--{name}", str(value)]
        with open(self.log_path(len(self.started)), "wb") as log:
            process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.started.append(process)
        self.alive.append(process)
        return process

    def log_path(self, index: int) -> Path:
        return self.logs / f"worker-{index}.log"

    def ready(self, process: subprocess.Popen[bytes]) -> bool:
        return process.poll() is None and f"ready {process.pid}" in self.output(process)

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.alive.remove(process)
        self.killed += 1

    def terminate(self, process: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
        """SIGTERM one worker and wait for it to finish its jobs and exit."""
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=timeout)
        self.alive.remove(process)
        return code

    def output(self, process: subprocess.Popen[bytes]) -> str:
        return self.log_path(self.started.index(process)).read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> list[int | None]:
        """SIGTERM the live workers; each finishes its jobs in hand and exits (0 expected).

        A worker still starting has no SIGTERM handler yet and would die of the
        signal, so each is first given `timeout` seconds to be ready.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(
            self.ready(p) or p.poll() is not None for p in self.alive
        ):
            time.sleep(0.05)
        for process in self.alive:
            process.send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for process in self.alive:
            try:
                codes.append(process.wait(timeout=timeout))
            except subprocess.TimeoutExpired:
                codes.append(None)
        self.close()
        return codes

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)  # a stopped process dies only when resumed
                process.kill()
            process.wait()
        self.alive = []

    def tail(self, lines: int = 15) -> str:
        """The end of every worker's output, for failure messages."""
        parts = []
        for index, process in enumerate(self.started):
            text = self.log_path(index).read_text(errors="replace").splitlines()[-lines:]
            if text:
                parts.append(f"--- worker {index} (pid {process.pid}) ---\n" + "\n".join(text))
        return "\n".join(parts)


@pytest.fixture
def fleets(store_url: str) -> Iterator[list[Fleet]]:
    """Fleets made by a test; torn down (all workers killed) before the store is dropped."""
    made: list[Fleet] = []
    try:
        yield made
    finally:
        for fleet in made:
            fleet.close()


def new_fleet(fleets: list[Fleet], url: str, logs: Path, **options: Any) -> Fleet:
    logs.mkdir(parents=True, exist_ok=True)
    fleet = Fleet(url, logs, **options)
    fleets.append(fleet)
    return fleet


@pytest.fixture
async def engine(store_url: str) -> AsyncIterator[AsyncEngine]:
    engine = AsyncEngine(store_url, migrate=True)
    try:
        await engine.runs(limit=1)  # migrated, so that workers find the schema current
        yield engine
    finally:
        await engine.close()


async def rows(engine: AsyncEngine, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = await engine.store.transact(lambda tx: tx.all(sql, params))
    return found


async def wait_all(engine: AsyncEngine, run_ids: list[str], within: float) -> dict[str, str]:
    """Each run's status once all have ended, or as they stand at the deadline."""
    deadline = time.monotonic() + within
    while True:
        infos = [await engine.get(run_id) for run_id in run_ids]
        if all(info.done for info in infos) or time.monotonic() > deadline:
            return {info.id: info.status for info in infos}
        await asyncio.sleep(0.2)


# --- SIGKILL trials ------------------------------------------------------------------


def seed_for_trial() -> int:
    chosen = os.environ.get(SEED_ENV)
    return int(chosen) if chosen else random.SystemRandom().randrange(1 << 32)


async def kill_trial(
    engine: AsyncEngine, fleet: Fleet, effects: Path, *, seed: int, runs: int, kills: range
) -> None:
    rng = random.Random(seed)
    print(f"kill trial: {SEED_ENV}={seed}")
    flow = mixed_flow(effects)
    run_ids = await engine.submit_many(flow, [mixed_input(n) for n in range(runs)])
    for _ in range(3):
        fleet.start()
    planned = rng.choice(kills)
    busy_kills = 0
    while fleet.killed < planned:
        await asyncio.sleep(rng.uniform(0.0, 0.3))
        ready = [p for p in fleet.alive if fleet.ready(p)]
        if not ready and rng.random() < 0.8:
            continue  # mostly kill workers that are working; sometimes one that is starting
        victim = rng.choice(ready or fleet.alive)
        held = await rows(
            engine,
            "SELECT COUNT(*) FROM tm_jobs WHERE status = 'running' AND worker LIKE ?",
            f"%:{victim.pid}:%",
        )
        busy_kills += held[0][0] > 0
        fleet.kill(victim)
        fleet.start()
    done = await rows(engine, "SELECT COUNT(*) FROM tm_runs WHERE parent_id IS NULL "
                              "AND status = 'succeeded'")  # fmt: skip
    print(f"kills: {fleet.killed} ({busy_kills} of workers holding jobs); "
          f"{done[0][0]} of {runs} runs done by the last kill")  # fmt: skip
    statuses = await wait_all(engine, run_ids, within=90)
    failed = {k: v for k, v in statuses.items() if v != "succeeded"}
    assert not failed, f"seed {seed}: runs not succeeded: {failed}\n{fleet.tail()}"
    codes = fleet.stop()
    assert codes == [0, 0, 0], f"seed {seed}: survivors exited with {codes}\n{fleet.tail()}"
    for n, run_id in enumerate(run_ids):
        assert (await engine.get(run_id)).result == mixed_result(n), f"seed {seed}"
    await check_exactly_once(engine, run_ids, effects, seed)


def effect_counts(effects: Path) -> Counter[str]:
    """How many times each idempotency key's side effect happened."""
    lines = [line.split() for line in effects.read_text().splitlines()]
    assert all(len(line) == 3 for line in lines), "a torn effect line"
    return Counter(key for key, _attempt, _pid in lines)


async def check_exactly_once(
    engine: AsyncEngine, run_ids: list[str], effects: Path, seed: int
) -> None:
    """One result per step; each step's effect at least once, repeated only if reclaimed."""
    runs = await rows(engine, "SELECT id, root_id, scope, status FROM tm_runs")
    results = await rows(engine, "SELECT run_id, step_id, COUNT(*) FROM tm_results "
                                 "GROUP BY run_id, step_id")  # fmt: skip
    jobs = await rows(engine, "SELECT run_id, step_id, attempt, epoch, status FROM tm_jobs")
    assert {root for _id, root, _s, _st in runs} == set(run_ids), f"seed {seed}"
    assert all(status == "succeeded" for *_, status in runs), f"seed {seed}"
    assert sum(scope == '[["par","branch:0"]]' for _i, _r, scope, _s in runs) == len(run_ids)
    assert sum(scope == '[["each","body"]]' for _i, _r, scope, _s in runs) == 3 * len(run_ids)

    expected = {(run_id, step) for run_id, _root, scope, _s in runs for step in MIXED_STEPS[scope]}
    recorded = {(run_id, step): count for run_id, step, count in results}
    assert set(recorded) == expected, f"seed {seed}: missing or extra results"
    assert set(recorded.values()) == {1}, f"seed {seed}: a step recorded twice"

    claims: dict[str, int] = defaultdict(int)  # how many times each step was claimed
    reclaimed: set[str] = set()
    for run_id, step, attempt, epoch, status in jobs:
        assert status == "succeeded", f"seed {seed}: job {run_id}:{step} left {status}"
        claims[f"{run_id}:{step}"] += epoch
        if epoch > 1 or attempt > 1:
            reclaimed.add(f"{run_id}:{step}")
    seen = effect_counts(effects)
    wanted = {f"{run_id}:{step}" for run_id, step in expected if step not in CONTAINERS}
    assert set(seen) == wanted, f"seed {seed}: effects missing: {sorted(wanted - set(seen))}"
    repeated = {key for key, count in seen.items() if count > 1}
    assert repeated <= reclaimed, f"seed {seed}: re-ran without a reclaim: {repeated - reclaimed}"
    over = {key: n for key, n in seen.items() if n > claims[key]}
    assert not over, f"seed {seed}: more executions than claims: {over}"
    print(f"steps executed twice or more: {len(repeated)}; jobs reclaimed: {len(reclaimed)}")
    return len(reclaimed)


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
async def test_sigkilled_workers_lose_no_run_and_record_each_step_once_postgres(
    engine: AsyncEngine, store_url: str, fleets: list[Fleet], tmp_path: Path
) -> None:
    fleet = new_fleet(fleets, store_url, tmp_path / "logs", concurrency=2, lease=1.0, poll=0.1)
    await kill_trial(
        engine, fleet, tmp_path / "effects", seed=seed_for_trial(), runs=12, kills=range(15, 26)
    )


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_sigkilled_workers_lose_no_run_and_record_each_step_once_sqlite(
    engine: AsyncEngine, store_url: str, fleets: list[Fleet], tmp_path: Path
) -> None:
    fleet = new_fleet(fleets, store_url, tmp_path / "logs", concurrency=2, lease=1.0, poll=0.1)
    await kill_trial(
        engine, fleet, tmp_path / "effects", seed=seed_for_trial(), runs=5, kills=range(6, 11)
    )


# --- a paused worker (a "zombie") comes back -----------------------------------------

PAUSE = (
    "import os, time\n"
    "def main(path):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write('%s %d\\n' % (os.environ['TIDEMILL_ATTEMPT'], os.getpid()))\n"
    "    time.sleep(1.5)\n"
    "    return 'slow'\n"
)


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
async def test_a_paused_workers_late_write_is_fenced(
    engine: AsyncEngine, store_url: str, fleets: list[Fleet], tmp_path: Path
) -> None:
    """SIGSTOP a worker mid-step past its lease; another finishes the run; SIGCONT: refused.

    PostgreSQL only: on SQLite a process paused inside a write transaction
    would hold the file's lock, and every other writer would wait for it.
    """
    effects = tmp_path / "effects"
    flow = Flow.model_validate(
        {"name": "pause", "steps": [
            {"id": "slow", "script": PAUSE, "inputs": {"path": str(effects)}},
            {"id": "after", "identity": {}, "inputs": {"got": expr("results.slow")}},
        ]}
    )  # fmt: skip
    fleet = new_fleet(fleets, store_url, tmp_path / "logs", concurrency=2, lease=1.0, poll=0.1)
    zombie = fleet.start()
    run_id = await engine.submit(flow)
    for _ in range(1500):
        if read_lines(effects):
            break
        await asyncio.sleep(0.01)
    zombie.send_signal(signal.SIGSTOP)
    try:
        (held,) = await engine.jobs(run_id)
        assert (held.status, held.epoch) == ("running", 1)
        rescuer = fleet.start()
        assert await engine.wait(run_id, timeout=60) == {"got": "slow"}
    finally:
        zombie.send_signal(signal.SIGCONT)
    for _ in range(500):  # the zombie notices: a refused renewal or a refused late write
        text = fleet.output(zombie)
        if "no longer held" in text or "lease was lost" in text:
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError(f"the paused worker never noticed\n{fleet.tail()}")
    assert fleet.terminate(rescuer) == 0
    # The zombie is a healthy worker again: alone, it runs the next run.
    assert await engine.wait(await engine.submit(flow), timeout=60) == {"got": "slow"}
    assert fleet.stop() == [0], fleet.tail()

    jobs = await engine.jobs(run_id)
    assert [(j.step_id, j.status, j.epoch) for j in jobs] == [
        ("slow", "succeeded", 2),
        ("after", "succeeded", 1),
    ]
    results = await rows(
        engine, "SELECT step_id, COUNT(*) FROM tm_results WHERE run_id = ? GROUP BY step_id", run_id
    )
    assert dict(results) == {"slow": 1, "after": 1}
    first_run = read_lines(effects)[:2]
    assert [line.split()[0] for line in first_run] == ["1", "1"]  # same attempt, run twice
    assert first_run[0].split()[1] != first_run[1].split()[1]  # by two processes


# --- a worker whose renewals failed for longer than its lease ---------------------------

SLOWER_WHEN_REPEATED = (
    "import os, time\n"
    "def main(path):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write('%s %d\\n' % (os.environ['TIDEMILL_ATTEMPT'], os.getpid()))\n"
    "    with open(path) as f:\n"
    "        executions = len(f.readlines())\n"
    "    time.sleep(1.0 if executions == 1 else 2.5)\n"
    "    return executions\n"
)


@pytest.mark.timeout(60)
async def test_a_worker_whose_renewals_failed_past_its_lease_is_not_stuck(
    engine: AsyncEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renewals fail (the store unreachable for them) for longer than the lease, then recover.

    Nobody else took the job over, so the worker may go on with it; at worst
    it runs the step once more. The run must still finish.
    """
    from tidemill.engine.workers import _leases

    outage = threading.Event()
    renew = _leases._renew

    def failing_renew(tx: Any, **options: Any) -> Any:
        if outage.is_set():
            raise StoreError("simulated: lease renewals cannot reach the store")
        return renew(tx, **options)

    monkeypatch.setattr(_leases, "_renew", failing_renew)
    effects = tmp_path / "effects"
    flow = Flow.model_validate(
        {"steps": [{"id": "long", "script": SLOWER_WHEN_REPEATED,
                    "inputs": {"path": str(effects)}}]}
    )  # fmt: skip
    async with engine.worker(concurrency=2, lease=0.5, poll=0.05, pool_size=2):
        run_id = await engine.submit(flow)
        for _ in range(1500):
            if read_lines(effects):
                break
            await asyncio.sleep(0.01)
        outage.set()
        await asyncio.sleep(0.8)
        outage.clear()
        try:
            assert await engine.wait(run_id, timeout=10) in (1, 2)
        finally:
            executions = len(read_lines(effects))
            (job,) = await engine.jobs(run_id)
            print(f"executions: {executions}; job epoch {job.epoch}, {job.status}")
    assert executions <= 2


# --- a database restart mid-run ------------------------------------------------------

SLEEPY = "import time\ndef main(i):\n    time.sleep(0.1)\n    return i\n"


def postgres_cluster(url: str) -> tuple[str, str]:
    """The local cluster (version, name) serving `url`; skips when it cannot be restarted."""
    if os.geteuid() != 0:
        pytest.skip("restarting PostgreSQL needs root (pg_ctlcluster)")
    if shutil.which("pg_ctlcluster") is None or shutil.which("pg_lsclusters") is None:
        pytest.skip("pg_ctlcluster is not installed; cannot restart PostgreSQL")
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1", None):
        pytest.skip(f"PostgreSQL at {parts.hostname} is not local; cannot restart it")
    port = str(parts.port or 5432)
    listing = subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
    ).stdout
    for line in listing.splitlines():
        version, name, cluster_port, status, *_ = line.split()
        if cluster_port == port and status == "online":
            return version, name
    pytest.skip(f"no online local cluster on port {port} (pg_lsclusters)")


def restart_postgres(cluster: tuple[str, str]) -> None:
    subprocess.run(["pg_ctlcluster", *cluster, "restart"], check=True, timeout=120)


def ensure_postgres_up(cluster: tuple[str, str], url: str, within: float = 60.0) -> None:
    """Start the cluster if it is down; return once it accepts connections."""
    import psycopg

    deadline = time.monotonic() + within
    started = False
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2) as connection:
                connection.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            if not started:
                started = True
                subprocess.run(["pg_ctlcluster", *cluster, "start"], check=False, timeout=120)
            time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
async def test_a_run_survives_a_postgres_restart(engine: AsyncEngine, store_url: str) -> None:
    base = store_url.partition("?")[0]
    cluster = postgres_cluster(base)
    flow = Flow.model_validate(
        {"name": "sleepy", "steps": [
            {"id": f"s{i}", "script": SLEEPY, "inputs": {"i": i}} for i in range(10)]}
    )  # fmt: skip
    try:
        async with engine.worker(concurrency=2, lease=5.0, poll=0.1, pool_size=1):
            run_id = await engine.submit(flow)
            for _ in range(600):
                done = await rows(
                    engine, "SELECT COUNT(*) FROM tm_results WHERE run_id = ?", run_id
                )
                if done[0][0] >= 2:
                    break
                await asyncio.sleep(0.02)
            assert done[0][0] < 10, "the run finished before the restart"
            await asyncio.to_thread(restart_postgres, cluster)
            assert await engine.wait(run_id, timeout=90) == 9
    finally:
        await asyncio.to_thread(ensure_postgres_up, cluster, base)
    results = await rows(
        engine, "SELECT step_id, COUNT(*) FROM tm_results WHERE run_id = ? GROUP BY step_id", run_id
    )
    assert dict(results) == {f"s{i}": 1 for i in range(10)}
    jobs = await engine.jobs(run_id)
    assert [j.step_id for j in jobs] == [f"s{i}" for i in range(10)]
    assert all(j.status == "succeeded" for j in jobs)


# --- a big queue ---------------------------------------------------------------------

NOOP = Flow.model_validate(
    {"name": "noop", "steps": [
        {"id": "noop", "script": {"function": "reliability_steps:noop", "in_process": True}}]}
)  # fmt: skip
QUEUED = 10_000


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_ten_thousand_queued_jobs_drained_by_four_workers(
    engine: AsyncEngine, store_url: str, fleets: list[Fleet], tmp_path: Path
) -> None:
    started = time.monotonic()
    run_ids = await engine.submit_many(NOOP, [{}] * QUEUED)
    submitted = time.monotonic()
    fleet = new_fleet(fleets, store_url, tmp_path / "logs", concurrency=4, lease=10.0, poll=0.2)
    for _ in range(4):
        fleet.start()
    while True:
        counts = await engine.store.transact(lambda tx: tx.counts())
        if counts.get("succeeded", 0) >= QUEUED:
            break
        assert all(p.poll() is None for p in fleet.alive), fleet.tail()
        assert time.monotonic() - submitted < 200, f"only {counts} after 200 s"
        await asyncio.sleep(0.25)
    drained = time.monotonic()
    assert fleet.stop() == [0, 0, 0, 0], fleet.tail()
    print(f"submit {submitted - started:.1f} s, drain {drained - submitted:.1f} s "
          f"({QUEUED / (drained - submitted):.0f} jobs/s with worker start-up)")  # fmt: skip
    assert await engine.store.transact(lambda tx: tx.counts()) == {"succeeded": QUEUED}
    statuses = await rows(engine, "SELECT status, COUNT(*) FROM tm_runs GROUP BY status")
    assert dict(statuses) == {"succeeded": QUEUED}
    (results,) = await rows(engine, "SELECT COUNT(*), COUNT(DISTINCT run_id) FROM tm_results")
    assert results == (QUEUED, QUEUED)
    assert (await engine.get(run_ids[0])).status == (await engine.get(run_ids[-1])).status


# --- bad flows, bad inputs, bad steps (what tests/engine/test_runs.py leaves out) ---------


async def test_a_malformed_flow_file_is_refused_and_nothing_is_stored(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("steps:\n  - id: a\n    identity: {}\n  - id: a\n    needs: [nowhere]\n")
    with pytest.raises(FlowValidationError):
        await engine.submit(path)
    with pytest.raises(FlowValidationError):
        await engine.submit(tmp_path / "missing.yaml")
    assert await engine.runs() == []
    assert await engine.store.transact(lambda tx: tx.counts()) == {}


async def test_one_bad_input_in_a_batch_enqueues_none(engine: AsyncEngine) -> None:
    f = Flow.model_validate(
        {"steps": [{"id": "a", "identity": {}}],
         "inputs": {"type": "object", "properties": {"n": {"type": "integer"}},
                    "required": ["n"]}}
    )  # fmt: skip
    with pytest.raises(FlowInputError):
        await engine.submit_many(f, [{"n": 1}, {"n": 2}, {"n": "three"}, {"n": 4}])
    assert await engine.runs() == []
    assert await engine.store.transact(lambda tx: tx.counts()) == {}


async def test_a_worker_survives_a_script_that_prints_ten_megabytes(engine: AsyncEngine) -> None:
    loud = "import sys\ndef main():\n    sys.stdout.write('x' * 10_000_000)\n    return 'done'\n"
    f = Flow.model_validate(
        {"steps": [{"id": "loud", "script": loud},
                   {"id": "after", "script": "def main(v):\n    return v + '!'\n",
                    "inputs": {"v": expr("previous_result")}}]}
    )  # fmt: skip
    async with engine.worker(concurrency=2, poll=0.1, pool_size=1):
        first = await engine.submit(f)
        assert await engine.wait(first, timeout=90) == "done!"
        second = await engine.submit(f)
        assert await engine.wait(second, timeout=90) == "done!"
    logs = await engine.logs(first)
    # Kept whole: in one row, or in the rows of its live flushes when printing it outlasted one.
    assert {log.stream for log in logs} == {"stdout"}
    assert "".join(log.body for log in logs) == "x" * 10_000_000


async def test_output_before_a_failure_is_kept_in_the_logs(engine: AsyncEngine) -> None:
    """What a step printed survives its failure: a raise, a hang killed at its timeout, an exit."""
    codes = {
        "hangs": "import time\ndef main():\n    print('before hanging', flush=True)\n"
                 "    time.sleep(60)\n",
        "exits": "import os, sys\ndef main():\n    print('before exiting', flush=True)\n"
                 "    print('on stderr', file=sys.stderr, flush=True)\n    os._exit(3)\n",
    }  # fmt: skip
    async with engine.worker(concurrency=2, poll=0.1, pool_size=2):
        ids = {
            name: await engine.submit(
                Flow.model_validate({"steps": [{"id": name, "script": code, "timeout": 1}]})
            )
            for name, code in codes.items()
        }
        errors = {}
        for name, run_id in ids.items():
            with pytest.raises(RunFailed) as caught:
                await engine.wait(run_id, timeout=60)
            errors[name] = caught.value.error["type"]
    assert errors == {"hangs": "Timeout", "exits": "ProcessExited"}
    hung = [(log.stream, log.body) for log in await engine.logs(ids["hangs"])]
    assert hung == [("stdout", "before hanging\n")]
    exited = sorted((log.stream, log.body) for log in await engine.logs(ids["exits"]))
    assert exited == [("stderr", "on stderr\n"), ("stdout", "before exiting\n")]


async def test_logs_of_every_attempt_are_kept(engine: AsyncEngine, tmp_path: Path) -> None:
    code = (
        "import os\n"
        "def main():\n"
        "    attempt = int(os.environ['TIDEMILL_ATTEMPT'])\n"
        "    print('attempt', attempt)\n"
        "    if attempt < 3:\n"
        "        raise RuntimeError('not yet')\n"
        "    return attempt\n"
    )
    f = Flow.model_validate(
        {"steps": [{"id": "flaky", "script": code, "retry": {"attempts": 3, "backoff": 0.01}}]}
    )
    async with engine.worker(poll=0.1, pool_size=1):
        run_id = await engine.submit(f)
        assert await engine.wait(run_id, timeout=60) == 3
    jobs = await engine.jobs(run_id)
    assert [(j.attempt, j.status) for j in jobs] == [(1, "failed"), (2, "failed"), (3, "succeeded")]
    stdout = [(log.job_id, log.body) for log in await engine.logs(run_id) if log.stream == "stdout"]
    assert stdout == [(job.id, f"attempt {job.attempt}\n") for job in jobs]
