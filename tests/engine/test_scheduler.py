"""The scheduler: each fire of a schedule starts exactly one run, whoever races for it.

Most tests drive `Scheduler.tick` with a clock of their own (ahead of the
real one: a schedule counts its fires from when it was saved), on SQLite
and PostgreSQL; the last one runs a worker, whose scheduler fires a
schedule every second in real time.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine.triggers import ON_TIME, Scheduler
from tidemill.store import Tx
from tidemill.workspace import AsyncWorkspace, ScheduleFire

pytestmark = pytest.mark.timeout(120)

ECHO = {"steps": [{"id": "echo", "identity": {}, "inputs": {"n": {"expr": "flow_input.n"}}}]}
NOTE = {"steps": [{"id": "note", "identity": {}, "inputs": {"at": {"expr": "flow_input.fire_at"}}}]}
FLAKY = "def main(fail: bool):\n    if fail:\n        raise ValueError('boom')\n    return 'ok'\n"
DOUBLE = "'''Double a number.'''\ndef main(x: int):\n    return x * 2\n"


class Clock:
    """A clock the test moves."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass
class World:
    engine: AsyncEngine
    ada: AsyncWorkspace
    clock: Clock

    def scheduler(self, engine: AsyncEngine | None = None) -> Scheduler:
        engine = engine or self.engine
        return Scheduler(engine.store, engine.defs, clock=self.clock)


@pytest.fixture
async def world(engine: AsyncEngine) -> World:
    ada = AsyncWorkspace(engine.store, user="ada", migrate=True)
    await ada.add_folder("ops", summary="Operations")
    await ada.write("f/ops/echo", "flow", ECHO)
    await ada.write("f/ops/note", "flow", NOTE)
    await ada.write("f/ops/flaky", "script", FLAKY)
    await ada.write("f/ops/double", "script", DOUBLE)
    return World(engine, ada, Clock(time.time()))


async def schedule(ws: AsyncWorkspace, path: str, cron: str, **settings: Any) -> float:
    """Write a schedule of f/ops/echo (by default); the time it was saved."""
    value = {"cron": cron, "target": "f/ops/echo", "inputs": {"n": 1}, **settings}
    return (await ws.write(path, "schedule", value)).updated_at


async def tick_all(schedulers: Iterable[Scheduler]) -> None:
    await asyncio.gather(*(s.tick() for s in schedulers))


async def fires(ws: AsyncWorkspace, path: str) -> list[ScheduleFire]:
    """Oldest first."""
    return list(reversed(await ws.schedule_fires(path, limit=1000)))


async def run_ids(engine: AsyncEngine, path: str) -> list[str]:
    """The top-level runs a schedule started, by the source they record."""

    def read(tx: Tx) -> list[str]:
        rows = tx.all("SELECT id, source FROM tm_runs WHERE parent_id IS NULL")
        return [str(i) for i, source in rows if source and f'"schedule":"{path}"' in source]

    return list(await engine.store.transact(read))


async def test_three_schedulers_in_three_engines_start_each_fire_once(
    world: World, store_url: str
) -> None:
    saved = await schedule(world.ada, "f/ops/every-second", "* * * * * *", catch_up="all")
    engines = [world.engine] + [AsyncEngine(store_url) for _ in range(2)]
    try:
        schedulers = [world.scheduler(e) for e in engines]
        start = math.floor(saved)
        for second in range(1, 31):
            world.clock.t = start + second + 0.01
            await tick_all(schedulers)
    finally:
        for other in engines[1:]:
            await other.close()
    got = await fires(world.ada, "f/ops/every-second")
    assert [f.fire_at for f in got] == [float(start + s) for s in range(1, 31)]
    assert {f.status for f in got} == {"started"}
    assert len({f.run_id for f in got}) == 30
    assert sum(s.fired for s in schedulers) == 30
    assert sorted(await run_ids(world.engine, "f/ops/every-second")) == sorted(
        str(f.run_id) for f in got
    )


async def test_schedulers_racing_in_threads_start_each_fire_once(
    world: World, store_url: str
) -> None:
    """Each scheduler on an event loop and a store of its own, ticking at once."""
    saved = await schedule(world.ada, "f/ops/raced", "* * * * * *", catch_up="all")
    start = math.floor(saved)

    def race() -> int:
        async def main() -> int:
            engine = AsyncEngine(store_url)
            try:
                scheduler = Scheduler(engine.store, engine.defs, clock=world.clock)
                for _ in range(40):
                    await scheduler.tick()
                    await asyncio.sleep(0.005)
                return scheduler.fired
            finally:
                await engine.close()

        return asyncio.run(main())

    world.clock.t = start + 20.5
    counts = await asyncio.gather(*(asyncio.to_thread(race) for _ in range(3)))
    got = await fires(world.ada, "f/ops/raced")
    assert [f.fire_at for f in got] == [float(start + s) for s in range(1, 21)]
    assert sum(counts) == 20 and len({f.run_id for f in got}) == 20


@pytest.mark.parametrize("catch_up", ["latest", "all", "skip", None])
async def test_fires_missed_while_nothing_ran_follow_catch_up(
    world: World, catch_up: str | None
) -> None:
    settings = {} if catch_up is None else {"catch_up": catch_up}
    saved = await schedule(world.ada, "f/ops/minutely", "* * * * *", **settings)
    expected = [(math.floor(saved / 60) + k) * 60.0 for k in range(1, 4)]
    world.clock.t = expected[-1] + ON_TIME + 5  # the latest fire is missed too
    await world.scheduler().tick()
    got = await fires(world.ada, "f/ops/minutely")
    assert [f.fire_at for f in got] == expected
    statuses = [f.status for f in got]
    if catch_up in ("latest", None):  # the default is latest
        assert statuses == ["skipped", "skipped", "started"]
    elif catch_up == "all":
        assert statuses == ["started"] * 3
    else:
        assert statuses == ["skipped"] * 3
    assert len(await run_ids(world.engine, "f/ops/minutely")) == statuses.count("started")


async def test_skip_still_runs_a_fire_that_is_on_time(world: World) -> None:
    saved = await schedule(world.ada, "f/ops/on-time", "* * * * *", catch_up="skip")
    first = (math.floor(saved / 60) + 1) * 60.0
    world.clock.t = first + 1.5
    await world.scheduler().tick()
    assert [(f.fire_at, f.status) for f in await fires(world.ada, "f/ops/on-time")] == [
        (first, "started")
    ]


async def test_pause_and_resume_take_effect_at_the_next_fire(world: World) -> None:
    path = "f/ops/pausable"
    saved = await schedule(world.ada, path, "* * * * * *", catch_up="all")
    start = math.floor(saved)
    scheduler = world.scheduler()
    for second in range(1, 4):
        world.clock.t = start + second + 0.01
        await scheduler.tick()
    paused = await world.ada.pause_schedule(path)
    assert paused.spec.enabled is False and paused.next_fires == ()
    for second in range(4, 8):
        world.clock.t = start + second + 0.01
        await scheduler.tick()
    resumed = await world.ada.resume_schedule(path)
    assert resumed.spec.enabled and len(resumed.next_fires) == 5
    for second in range(8, 11):
        world.clock.t = start + second + 0.01
        await scheduler.tick()
    got = [f.fire_at - start for f in await fires(world.ada, path)]
    assert got == [1, 2, 3, 8, 9, 10]  # nothing while paused, nothing of it caught up
    history = await world.ada.history(path)
    assert [v.message for v in history[:2]] == ["resumed", "paused"]


async def test_an_edited_cron_takes_effect_at_its_next_fire(world: World) -> None:
    path = "f/ops/edited"
    saved = await schedule(world.ada, path, "* * * * * *", catch_up="all")
    start = math.floor(saved)
    scheduler = world.scheduler()
    for second in range(1, 5):
        world.clock.t = start + second + 0.01
        await scheduler.tick()
    await schedule(world.ada, path, "*/10 * * * * *", catch_up="all")
    for second in range(5, 41):
        world.clock.t = start + second + 0.01
        await scheduler.tick()
    got = [f.fire_at - start for f in await fires(world.ada, path)]
    tens = [t - start for t in range(start + 5, start + 41) if t % 10 == 0]
    assert got == [1, 2, 3, 4, *tens]
    assert [f.version for f in await fires(world.ada, path)] == [1] * 4 + [2] * len(tens)


async def test_a_fire_planned_ahead_runs_the_flow_as_deployed_at_its_time(world: World) -> None:
    """Each tick plans the next fire's run; a deploy in between is seen by the fire all the same."""
    path = "f/ops/planned"
    saved = await schedule(world.ada, path, "* * * * * *")
    start = math.floor(saved)
    scheduler = world.scheduler()
    world.clock.t = start + 1.01
    await scheduler.tick()  # fires second 1, plans second 2
    known = scheduler.schedules.by_path[path]
    assert known.planned is not None and known.planned[0] == start + 2
    changed = {**ECHO, "summary": "changed"}
    assert (await world.ada.write("f/ops/echo", "flow", changed)).version == 2
    world.clock.t = start + 2.01
    await scheduler.tick()  # the plan is stale: planned again, in time
    world.clock.t = start + 3.01
    await scheduler.tick()  # planned ahead, and still current
    runs = [await world.engine.get(run_id) for run_id in await run_ids(world.engine, path)]
    versions = (
        sorted((r.source or {})["fire_at"] - start for r in runs),
        sorted((r.source or {})["version"] for r in runs),
    )
    assert versions == ([1, 2, 3], [1, 2, 2])


def _next_transition(zone: ZoneInfo, spring: bool) -> datetime:
    """The next day (UTC midnight) on which `zone` moves its clocks forward (or back)."""
    day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    while True:
        before = (day + timedelta(hours=0)).astimezone(zone).utcoffset()
        after = (day + timedelta(hours=23)).astimezone(zone).utcoffset()
        assert before is not None and after is not None
        if before != after and (after > before) == spring:
            return day
        day += timedelta(days=1)


@pytest.mark.parametrize("spring", [True, False], ids=["spring-forward", "fall-back"])
async def test_a_daily_schedule_in_paris_fires_once_a_day_across_daylight_saving(
    world: World, spring: bool
) -> None:
    """02:30 in Paris: on the night it does not exist, at 03:00 CEST; when repeated, once."""
    path = "f/ops/paris"
    await schedule(world.ada, path, "30 2 * * *", timezone="Europe/Paris")
    day = _next_transition(ZoneInfo("Europe/Paris"), spring)
    scheduler = world.scheduler()
    world.clock.t = (day - timedelta(hours=12)).timestamp()
    await scheduler.tick()  # everything since it was saved: the latest fire runs
    seen = len(await fires(world.ada, path))
    moment = day - timedelta(hours=12)
    while moment < day + timedelta(days=1, hours=12):
        moment += timedelta(minutes=10)
        world.clock.t = moment.timestamp()
        await scheduler.tick()
    new = [datetime.fromtimestamp(f.fire_at, UTC) for f in (await fires(world.ada, path))[seen:]]
    if spring:  # 02:30 CET does not exist: 03:00 CEST (01:00 UTC), then 02:30 CEST
        expected = [day + timedelta(hours=1), day + timedelta(days=1, minutes=30)]
    else:  # 02:30 CEST (00:30 UTC), not again at 02:30 CET; then 02:30 CET (01:30 UTC)
        expected = [day + timedelta(minutes=30), day + timedelta(days=1, hours=1, minutes=30)]
    assert new == expected


async def test_an_owner_who_lost_access_gets_a_failed_fire_once(world: World) -> None:
    await world.ada.add_user("bob")
    await world.ada.grant("f/ops", "bob", "writer")
    bob = await world.ada.acting_as("bob")
    saved = await schedule(bob, "f/ops/bobs", "* * * * * *")
    assert (await world.ada.schedule("f/ops/bobs")).owner == "bob"
    await world.ada.grant("f/ops", "bob", None)
    schedulers = [world.scheduler() for _ in range(3)]
    world.clock.t = math.floor(saved) + 1.01
    await tick_all(schedulers)
    await tick_all(schedulers)
    (fire,) = await fires(world.ada, "f/ops/bobs")
    assert fire.status == "failed" and fire.run_id is None
    assert fire.error is not None and "No flow at f/ops/echo that bob may run" in fire.error
    assert await run_ids(world.engine, "f/ops/bobs") == []


async def _wait_for(check: Any, within: float = 30.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        found = await check()
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.05)


async def test_on_failure_and_on_recovery_each_start_once(world: World) -> None:
    path = "f/ops/flaky-nightly"
    handlers = {"on_failure": "f/ops/note", "on_recovery": "f/ops/note"}
    value = {"cron": "* * * * * *", "target": "f/ops/flaky", "catch_up": "all", **handlers}
    saved = (
        await world.ada.write(path, "schedule", {**value, "inputs": {"fail": True}})
    ).updated_at
    schedulers = [world.scheduler() for _ in range(3)]
    start = math.floor(saved)

    async def ended(count: int) -> bool:
        got = await fires(world.ada, path)
        return len(got) >= count and all(f.outcome is not None for f in got[:count])

    async with world.engine.worker(schedules=False):
        world.clock.t = start + 1.01
        await tick_all(schedulers)
        assert await _wait_for(lambda: _tick_then(schedulers, ended(1)))
        edited = await world.ada.write(path, "schedule", {**value, "inputs": {"fail": False}})
        second = max(start + 2, math.floor(edited.updated_at) + 1)
        for t in (second, second + 1):
            world.clock.t = t + 0.01
            await tick_all(schedulers)
        assert await _wait_for(lambda: _tick_then(schedulers, ended(3)))
        got = await fires(world.ada, path)
        handler_ids = [f.handler_id for f in got]
        assert [f.outcome for f in got] == ["failed", "succeeded", "succeeded"]
        assert handler_ids[0] is not None and handler_ids[1] is not None
        assert handler_ids[2] is None  # a success after a success: no recovery
        for handler_id, fire in zip(handler_ids[:2], got[:2], strict=True):
            assert handler_id is not None
            assert await world.engine.wait(handler_id, timeout=30) == {"at": fire.fire_at}
    assert sum(s._handlers.started for s in schedulers) == 2
    failure = await world.engine.get(str(handler_ids[0]))
    assert failure.source is not None and failure.source["handler"] == "on_failure"


async def _tick_then(schedulers: list[Scheduler], check: Any) -> bool:
    await tick_all(schedulers)
    return bool(await check)


async def test_a_script_target_runs_as_a_one_step_flow(world: World) -> None:
    path = "f/ops/doubling"
    value = {"cron": "* * * * * *", "target": "f/ops/double", "inputs": {"x": 21}}
    saved = (await world.ada.write(path, "schedule", value)).updated_at
    world.clock.t = math.floor(saved) + 1.01
    await world.scheduler().tick()
    (fire,) = await fires(world.ada, path)
    assert fire.status == "started" and fire.run_id is not None
    async with world.engine.worker(schedules=False):
        assert await world.engine.wait(fire.run_id, timeout=60) == 42
    info = await world.engine.get(fire.run_id)
    assert info.run_as == "ada" and info.source is not None
    assert info.source["path"] == "f/ops/double" and info.source["schedule"] == path
    audit = await world.ada.audit(action="run.start")
    assert [entry.details["run_id"] for entry in audit] == [fire.run_id]


async def test_a_worker_fires_a_schedule_every_second_and_the_runs_finish(
    world: World,
) -> None:
    path = "f/ops/heartbeat"
    await schedule(world.ada, path, "* * * * * *")

    async def finished() -> list[ScheduleFire]:
        done = [f for f in await fires(world.ada, path) if f.outcome == "succeeded"]
        return done if len(done) >= 3 else []

    async with world.engine.worker():
        done = await _wait_for(finished)
    assert len(done) >= 3
    assert all(f.status == "started" and f.run_id for f in done)
    assert [f.fire_at for f in done] == sorted({f.fire_at for f in done})
