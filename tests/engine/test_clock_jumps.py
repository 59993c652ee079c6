"""A worker whose wall clock is wrong or jumps neither takes a lease early nor keeps one late.

Leases are set and judged on the database's clock (SQLite's own, read from
the operating system, or PostgreSQL's `now()`), and a worker counts the lease
it holds on its monotonic clock. So a worker's `time.time` may jump by an
hour either way, while it runs a step or while it waits for one, and no job
is taken over while its holder keeps it, none is kept past its end by a
holder that died, and nothing runs twice. On SQLite and PostgreSQL.

Each worker runs in a thread of its own (see `test_stalled_worker`), and
`time.time` is replaced by a clock that adds an offset to the real time for
the threads of the worker whose clock jumped, and none for the others.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_stalled_worker import STEP, WorkerThread, freeze, lines, until

from tidemill.engine import AsyncEngine
from tidemill.flows import Flow
from tidemill.store import JobRow, Store

pytestmark = pytest.mark.timeout(90)

HOUR = 3600.0

SLOW = (
    "import os, time\n"
    "def main(path: str, gate: str):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(os.environ['TIDEMILL_STEP_ID'] + '\\n')\n"
    "    while not os.path.exists(gate):\n"
    "        time.sleep(0.02)\n"
    "    return 'done'\n"
)
"""A step that records that it started, then runs until the test opens its gate."""


class Clocks:
    """`time.time` for this process: the real time, plus an offset for some threads."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.owners: dict[int, list[float]] = {}

    def __call__(self) -> float:
        offset = self.owners.get(threading.get_ident())
        return float(self.real()) + (offset[0] if offset else 0.0)

    def of(self, offset: list[float]) -> Any:
        """A `WorkerThread` patch: that worker's clock reads the real time plus `offset[0]`.

        The offset is read at each call, so a test makes the clock jump by
        changing it. It applies to the worker's event loop thread and to each
        of its store threads (which compute a transaction's `now`).
        """

        def patch(worker: Any) -> None:
            self.owners[threading.get_ident()] = offset
            executor = worker.store._executor
            count = executor._max_workers
            together = threading.Barrier(count)

            def own() -> None:
                self.owners[threading.get_ident()] = offset
                together.wait(10)  # so that each task gets a thread of its own

            for done in [executor.submit(own) for _ in range(count)]:
                done.result(10)

        return patch


@pytest.fixture
def clocks(monkeypatch: pytest.MonkeyPatch) -> Clocks:
    found = Clocks(time.time)
    monkeypatch.setattr(time, "time", found)
    return found


def gated(effects: Path, gate: Path, name: str = "slow") -> Flow:
    step = {"id": name, "script": SLOW, "inputs": {"path": str(effects), "gate": str(gate)}}
    return Flow.model_validate({"steps": [step]})


async def job_of(engine: AsyncEngine, run_id: str) -> JobRow:
    (job,) = await engine.store.transact(lambda tx: tx.run_jobs(run_id))
    return job


def counting(worker: Any, name: str, seen: list[int]) -> None:
    """Count the calls of `worker.<name>` (an async method) in `seen`."""
    inner = getattr(worker, name)

    async def counted(*args: Any, **kwargs: Any) -> Any:
        seen.append(1)
        return await inner(*args, **kwargs)

    setattr(worker, name, counted)


# --- the store: leases on the database's clock ---------------------------------------


async def test_a_claimant_whose_clock_runs_ahead_takes_no_live_lease_over(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    run_id = await engine.submit(gated(tmp_path / "e", tmp_path / "g"))
    store: Store = await engine._open()
    (a,) = await store.transact(lambda tx: tx.claim("A", 1, now=time.time(), lease=60.0))
    ahead = time.time() + HOUR  # B's clock: an hour ahead
    assert await store.transact(lambda tx: tx.claim("B", 1, now=ahead, lease=60.0)) == []
    job = await job_of(engine, run_id)
    assert (job.worker, job.epoch) == ("A", a.epoch)


async def test_a_holder_whose_clock_runs_behind_still_holds_its_lease(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    run_id = await engine.submit(gated(tmp_path / "e", tmp_path / "g"))
    store: Store = await engine._open()
    behind = time.time() - HOUR  # A's clock: an hour behind, at its claim and renewal
    (a,) = await store.transact(lambda tx: tx.claim("A", 1, now=behind, lease=60.0))
    # A takes the job (due by the database's clock), leased on the database's clock.
    assert a.lease_until is not None and a.lease_until > time.time() + 30
    assert await store.transact(lambda tx: tx.claim("B", 1, now=time.time(), lease=60.0)) == []
    assert await store.transact(lambda tx: tx.renew("A", {a.id: a.epoch}, lease=60.0)) == {a.id}
    job = await job_of(engine, run_id)
    assert (job.worker, job.epoch) == ("A", a.epoch)
    assert job.lease_until is not None and job.lease_until > time.time() + 30


async def test_a_holder_whose_clock_runs_ahead_keeps_its_lease_no_longer(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    """A claims with its clock an hour ahead, then dies: B takes the job once the lease ends."""
    run_id = await engine.submit(gated(tmp_path / "e", tmp_path / "g"))
    store: Store = await engine._open()
    ahead = time.time() + HOUR
    (a,) = await store.transact(lambda tx: tx.claim("A", 1, now=ahead, lease=0.2))
    taken: list[JobRow] = []

    async def b_claims() -> bool:
        taken.extend(await store.transact(lambda tx: tx.claim("B", 1, now=time.time(), lease=60)))
        return bool(taken)

    deadline = time.monotonic() + 30  # the lease is 0.2 s; A's clock would keep it an hour
    while not await b_claims():
        assert time.monotonic() < deadline, "the lease was kept past its end"
    assert (taken[0].id, taken[0].epoch) == (a.id, a.epoch + 1)
    assert (await job_of(engine, run_id)).worker == "B"


async def test_explicit_lease_ends_stay_on_the_callers_clock(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    """A claim with `lease_until` (tests, tools) is set and judged by the `now` it is given.

    B takes the job over by its clock, while by the database's the lease has
    ten seconds left.
    """
    await engine.submit(gated(tmp_path / "e", tmp_path / "g"))
    store: Store = await engine._open()
    t0 = time.time() + 10  # a clock ahead: the job is due by it
    (a,) = await store.transact(lambda tx: tx.claim("A", 1, now=t0, lease_until=t0 + 1))
    assert a.lease_until == t0 + 1
    assert await store.transact(lambda tx: tx.claim("B", 1, now=t0 + 0.5, lease_until=t0 + 9)) == []
    (b,) = await store.transact(lambda tx: tx.claim("B", 1, now=t0 + 2, lease_until=t0 + 9))
    assert (b.id, b.epoch, b.lease_until) == (a.id, a.epoch + 1, t0 + 9)


# --- workers whose clocks jump ------------------------------------------------------


async def test_a_waiting_worker_whose_clock_jumps_ahead_takes_nothing_over(
    engine: AsyncEngine, store_url: str, tmp_path: Path, clocks: Clocks
) -> None:
    effects, gate = tmp_path / "effects", tmp_path / "gate"
    run_id = await engine.submit(gated(effects, gate))
    b_offset = [0.0]
    b_claims: list[int] = []
    b_patch = clocks.of(b_offset)

    def patch_b(worker: Any) -> None:
        b_patch(worker)
        counting(worker, "_claim", b_claims)

    with WorkerThread(store_url, "P") as p:
        await until(lambda: lines(effects) == ["slow"])
        with WorkerThread(store_url, "Q", patch=patch_b) as q:
            b_offset[0] = HOUR  # Q's clock jumps an hour ahead while P runs the step
            seen = len(b_claims)
            await until(lambda: len(b_claims) > seen + 40)  # Q looked for expired leases
            gate.touch()
            assert await engine.wait(run_id, timeout=20) == "done"
        assert p.finished("slow") and ("claimed", "slow") not in q.events
    assert lines(effects) == ["slow"]  # ran once: P's
    job = await job_of(engine, run_id)
    assert (job.worker, job.epoch, job.status) == ("P", 1, "succeeded")


async def test_a_running_worker_whose_clock_jumps_back_keeps_its_job(
    engine: AsyncEngine, store_url: str, tmp_path: Path, clocks: Clocks
) -> None:
    effects, gate = tmp_path / "effects", tmp_path / "gate"
    run_id = await engine.submit(gated(effects, gate))
    a_offset = [0.0]
    renewals: list[int] = []
    a_patch = clocks.of(a_offset)

    def patch_a(worker: Any) -> None:
        a_patch(worker)
        counting(worker._leases, "renew", renewals)

    with WorkerThread(store_url, "P", patch=patch_a) as p:
        await until(lambda: lines(effects) == ["slow"])
        a_offset[0] = -HOUR  # P's clock jumps an hour back while it runs the step
        with WorkerThread(store_url, "Q") as q:
            seen = len(renewals)
            await until(lambda: len(renewals) > seen + 4)  # P renewed with its clock back
            gate.touch()
            assert await engine.wait(run_id, timeout=20) == "done"
        assert p.finished("slow") and ("claimed", "slow") not in q.events
    assert lines(effects) == ["slow"]
    job = await job_of(engine, run_id)
    assert (job.worker, job.epoch, job.status) == ("P", 1, "succeeded")


async def test_a_stalled_worker_whose_clock_ran_ahead_loses_its_job_on_time(
    engine: AsyncEngine, store_url: str, tmp_path: Path, clocks: Clocks
) -> None:
    """A claims `e1` an hour ahead, then stalls for good: B takes it after the lease, not later."""
    effects = tmp_path / "effects"
    steps = [{"id": "e1", "script": STEP, "inputs": {"path": str(effects)}}]
    frozen, thaw = threading.Event(), threading.Event()

    def stall(name: str, job: JobRow) -> None:
        if name == "claimed" and not frozen.is_set():
            freeze(frozen, thaw)

    run_id = await engine.submit(Flow.model_validate({"steps": steps}))
    try:
        with WorkerThread(store_url, "P", on_event=stall, patch=clocks.of([HOUR])) as p:
            await until(frozen.is_set)
            with WorkerThread(store_url, "Q") as q:
                await until(lambda: q.finished("e1"), within=30)  # the lease is 1 s
                await engine.wait(run_id, timeout=10)
                thaw.set()
                await until(lambda: p.finished("e1"))
    finally:
        thaw.set()
    assert lines(effects) == ["e1"]  # Q's run only: P, awake, started nothing
    job = await job_of(engine, run_id)
    assert (job.worker, job.epoch, job.status) == ("Q", 2, "succeeded")


async def test_a_stalled_worker_whose_clock_jumped_back_starts_nothing(
    engine: AsyncEngine, store_url: str, tmp_path: Path, clocks: Clocks
) -> None:
    """A records `e1`, claims `e2`, stalls; its clock jumps back; B runs `e2`; A wakes.

    Its lease, counted on its wall clock, would seem an hour from its end: A
    counts it on its monotonic clock, finds it over, asks the store, and
    starts nothing.
    """
    effects = tmp_path / "effects"
    steps = [{"id": n, "script": STEP, "inputs": {"path": str(effects)}} for n in ("e1", "e2")]
    frozen, thaw = threading.Event(), threading.Event()
    a_offset = [0.0]

    def stall_on_e2(name: str, job: JobRow) -> None:
        if name == "claimed" and job.step_id == "e2" and not frozen.is_set():
            freeze(frozen, thaw)

    run_id = await engine.submit(Flow.model_validate({"steps": steps}))
    try:
        with WorkerThread(store_url, "A", on_event=stall_on_e2, patch=clocks.of(a_offset)) as a:
            await until(frozen.is_set)
            a_offset[0] = -HOUR  # while A is frozen
            with WorkerThread(store_url, "B") as b:
                await until(lambda: b.finished("e2"))
                await engine.wait(run_id, timeout=10)
                thaw.set()
                await until(lambda: a.finished("e2"))
    finally:
        thaw.set()
    assert lines(effects) == ["e1", "e2"]  # e2 ran once: B's


async def test_a_worker_whose_clock_fell_behind_still_takes_due_jobs(
    engine: AsyncEngine, store_url: str, tmp_path: Path, clocks: Clocks
) -> None:
    """Jobs queued on the right clock are due by the database's, though not yet by P's."""
    effects = tmp_path / "effects"
    steps = [{"id": "e1", "script": STEP, "inputs": {"path": str(effects)}}]
    await engine._open()  # the schema, before the worker
    with WorkerThread(store_url, "P", patch=clocks.of([-HOUR])):
        run_id = await engine.submit(Flow.model_validate({"steps": steps}))
        await engine.wait(run_id, timeout=20)
    assert lines(effects) == ["e1"]
