"""`EventHub` against a real engine and worker, on SQLite and PostgreSQL.

The store's own reading of a run's events (`engine.events`) is the ground
truth: every subscriber gets exactly it (or exactly the part after its
`after`), in order, each event once, ending with the run's `run_finished`,
however many follow, however late they join, however slowly they read.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from tidemill.engine import AsyncEngine, RunEvent
from tidemill.errors import RunNotFound
from tidemill.flows import Flow
from tidemill.server import _event_hub
from tidemill.server._event_hub import Delivery, EventHub

pytestmark = pytest.mark.timeout(60)

HANG = 30.0
"""Seconds before a wait that should end counts as a hang (only ever reached on failure)."""


def flow(steps: list[dict[str, Any]]) -> Flow:
    return Flow.model_validate({"steps": steps})


def chain(n: int) -> Flow:
    """`n` identity steps one after the other: run_queued, n x (started, finished), run_finished."""
    return flow([{"id": f"s{i}", "identity": {}, "inputs": {"v": i}} for i in range(n)])


def with_sub_flow() -> Flow:
    """A step running a child flow: the child's own `run_finished` comes before the root's."""
    child = {"steps": [{"id": "inner", "identity": {}, "inputs": {"v": 1}}]}
    return flow(
        [
            {"id": "first", "identity": {}, "inputs": {"v": 0}},
            {"id": "sub", "flow": {"flow": child}, "inputs": {}},
            {"id": "last", "identity": {}, "inputs": {"v": 2}},
        ]
    )


def with_approval() -> Flow:
    """Pauses at `ask` (after `wait_requested`) until approved, then two more steps."""
    return flow(
        [
            {"id": "a", "identity": {}, "inputs": {"v": 1}},
            {"id": "ask", "approval": {"message": "Go on?", "approvers": ["alice"]}},
            {"id": "b", "identity": {}, "inputs": {"v": 2}},
            {"id": "c", "identity": {}, "inputs": {"v": 3}},
        ]
    )


class Encoder:
    """An SSE-like frame per event, counting how often it is asked for one."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, event: RunEvent) -> bytes:
        self.calls += 1
        return frame(event)


def frame(event: RunEvent) -> bytes:
    return f"id: {event.id}\nevent: {event.kind}\n\n".encode()


@pytest.fixture
async def engine(store_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on the `store_url` backend, opened (migrated) as a server's is; closed after."""
    async with AsyncEngine(store_url, migrate=True) as engine:
        yield engine


@pytest.fixture
def encoder() -> Encoder:
    return Encoder()


@pytest.fixture
def hub(engine: AsyncEngine, encoder: Encoder) -> EventHub:
    return EventHub(engine, encoder)


def worker(engine: AsyncEngine) -> contextlib.AbstractAsyncContextManager[Any]:
    return engine.worker(concurrency=2, poll=0.05, pool_size=1)


async def until(check: Callable[[], bool], what: str) -> None:
    """Wait (yielding to the loop) until `check()` holds; fail after `HANG` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG
    while not check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


class Follower:
    """A subscriber reading `hub.follow(...)` to its end in a task of its own; its batches kept."""

    def __init__(self, hub: EventHub, run_id: str, *, after: int = 0) -> None:
        self.batches: list[list[Delivery]] = []
        self.task = asyncio.create_task(self._read(hub, run_id, after))

    async def _read(self, hub: EventHub, run_id: str, after: int) -> None:
        async with contextlib.aclosing(hub.follow(run_id, after=after)) as batches:
            async for batch in batches:
                self.batches.append(batch)

    @property
    def deliveries(self) -> list[Delivery]:
        return [d for batch in self.batches for d in batch]

    @property
    def events(self) -> list[RunEvent]:
        return [event for event, _ in self.deliveries]

    def seen(self, kind: str) -> bool:
        return any(e.kind == kind for e in self.events)

    async def finished(self) -> list[RunEvent]:
        await asyncio.wait_for(self.task, HANG)
        return self.events


async def read_all(hub: EventHub, run_id: str, *, after: int = 0) -> list[Delivery]:
    """All of `hub.follow(run_id, after=after)`; fails if it does not end within `HANG` s."""

    async def read() -> list[Delivery]:
        async with contextlib.aclosing(hub.follow(run_id, after=after)) as batches:
            return [d async for batch in batches for d in batch]

    return await asyncio.wait_for(read(), HANG)


def check_sequence(got: Sequence[Delivery], truth: Sequence[RunEvent], run_id: str) -> None:
    """`got` is exactly `truth`, in order, each with its frame, ending with `run_id`'s end."""
    ids = [event.id for event, _ in got]
    assert ids == [e.id for e in truth]
    assert all(a < b for a, b in itertools.pairwise(ids))
    assert [event for event, _ in got] == list(truth)
    assert all(data == frame(event) for event, data in got)
    assert got[-1][0].kind == "run_finished" and got[-1][0].run_id == run_id


async def approve_when_asked(engine: AsyncEngine, run_id: str) -> None:
    await until_async(lambda: engine.approvals(run_id), "the approval request")
    (row,) = await engine.approvals(run_id)
    await engine.approve(row.id, actor="alice")


async def until_async(check: Callable[[], Awaitable[Any]], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG
    while not await check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


# --- 1. many subscribers, two runs ---------------------------------------------------------


async def test_many_subscribers_of_two_live_runs_each_get_exactly_their_run(
    engine: AsyncEngine, hub: EventHub, encoder: Encoder
) -> None:
    plain = await engine.submit(chain(4))
    nested = await engine.submit(with_sub_flow())
    many = [Follower(hub, plain) for _ in range(50)]
    others = [Follower(hub, nested) for _ in range(20)]
    # Every one has its first batch (run_queued) before anything runs: all follow live.
    await until(lambda: all(f.batches for f in many + others), "every subscriber's first batch")
    assert all(f.events == [f.events[0]] for f in many + others)
    async with worker(engine):
        await engine.wait(plain, timeout=HANG)
        await engine.wait(nested, timeout=HANG)
        for follower in many + others:
            await follower.finished()
    truth = {plain: await engine.events(plain), nested: await engine.events(nested)}
    assert len(truth[plain]) == 2 + 2 * 4
    # The child run's run_finished comes first: the stream goes on to the root's.
    assert [e.kind for e in truth[nested]].count("run_finished") == 2
    for run_id, followers in ((plain, many), (nested, others)):
        for follower in followers:
            check_sequence(follower.deliveries, truth[run_id], run_id)
        # One frame per event, made once and handed to every subscriber of its run.
        sample = followers[0].deliveries
        for other in followers:
            assert all(a[1] is b[1] for a, b in zip(sample, other.deliveries, strict=True))
    assert encoder.calls == len(truth[plain]) + len(truth[nested])
    assert hub._feeds == {}  # no public view of the feeds; both runs ended, so none is left


# --- 2. late joiners --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recent", "page"),
    [(None, None), (2, None), (2, 2)],
    ids=["gap-in-memory", "gap-in-store", "gap-in-store-paged"],
)
async def test_a_late_subscriber_gets_exactly_the_events_after_its_id(
    engine: AsyncEngine,
    monkeypatch: pytest.MonkeyPatch,
    recent: int | None,
    page: int | None,
) -> None:
    if recent is not None:
        monkeypatch.setattr(_event_hub, "RECENT", recent)
    if page is not None:
        monkeypatch.setattr(_event_hub, "PAGE", page)
    hub = EventHub(engine, frame)
    store_events = engine.events
    reads: list[int] = []

    async def spy(run_id: str, *, after: int = 0, limit: int = 500) -> list[RunEvent]:
        reads.append(after)
        return await store_events(run_id, after=after, limit=limit)

    monkeypatch.setattr(engine, "events", spy)  # only the hub's reads of gaps go through it
    run_id = await engine.submit(with_approval())
    leader = Follower(hub, run_id)
    async with worker(engine):
        await until(lambda: leader.seen("wait_requested"), "the run to pause")
        so_far = await store_events(run_id)
        assert so_far[-1].kind == "wait_requested"
        assert leader.events == so_far
        cuts = [0, *(e.id for e in so_far)]
        late = {cut: Follower(hub, run_id, after=cut) for cut in cuts}
        # Each has joined, and all but the one at the feed's place have read their gap.
        for cut, follower in late.items():
            if cut != so_far[-1].id:
                await until(lambda f=follower: f.events[-1:] == so_far[-1:], f"the gap after {cut}")
        await approve_when_asked(engine, run_id)
        await engine.wait(run_id, timeout=HANG)
        await leader.finished()
        for follower in late.values():
            await follower.finished()
    truth = await store_events(run_id)
    assert len(truth) > len(so_far) + 2
    check_sequence(leader.deliveries, truth, run_id)
    for cut, follower in late.items():
        check_sequence(follower.deliveries, [e for e in truth if e.id > cut], run_id)
    if recent is None:
        assert reads == []  # every gap was in the feed's memory
    else:
        # The feed keeps only the latest `recent` events: gaps further back come from the store.
        # Each subscriber whose gap starts before them reads it page by page, once.
        base, upto, size = so_far[-recent - 1].id, so_far[-1].id, page or _event_hub.PAGE
        expected = []
        for i, cut in enumerate(cuts):
            if cut < base:
                expected += [after for after in cuts[i::size] if after < upto]
        assert 0 in expected
        assert sorted(reads) == sorted(expected)
    assert hub._feeds == {}


async def test_a_gap_read_from_the_store_while_the_run_goes_on_is_not_repeated(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_event_hub, "RECENT", 2)
    hub = EventHub(engine, frame)
    store_events = engine.events
    gate = asyncio.Event()

    async def held(run_id: str, *, after: int = 0, limit: int = 500) -> list[RunEvent]:
        await gate.wait()  # the gap is read only once the run has gone on past the feed's place
        return await store_events(run_id, after=after, limit=limit)

    monkeypatch.setattr(engine, "events", held)
    twice = flow(
        [
            {"id": "one", "approval": {"message": "Go on?", "approvers": ["alice"]}},
            {"id": "a", "identity": {}, "inputs": {"v": 1}},
            {"id": "two", "approval": {"message": "Go on?", "approvers": ["alice"]}},
            {"id": "b", "identity": {}, "inputs": {"v": 2}},
        ]
    )
    run_id = await engine.submit(twice)
    leader = Follower(hub, run_id)

    def paused(follower: Follower, times: int) -> Callable[[], bool]:
        return lambda: [e.kind for e in follower.events].count("wait_requested") >= times

    async with worker(engine):
        await until(paused(leader, 1), "the run to pause")
        late = Follower(hub, run_id)  # its gap (from the start) is further back than RECENT
        await asyncio.sleep(0)
        await approve_when_asked(engine, run_id)
        await until(paused(leader, 2), "the run to pause again")
        gate.set()
        await until(paused(late, 2), "the late one to catch up")
        await approve_when_asked(engine, run_id)
        await engine.wait(run_id, timeout=HANG)
        await leader.finished()
    truth = await store_events(run_id)
    check_sequence(leader.deliveries, truth, run_id)
    # Its page from the store holds events the feed handed it too: each comes once.
    await late.finished()
    check_sequence(late.deliveries, truth, run_id)
    assert hub._feeds == {}


# --- 3. a slow subscriber --------------------------------------------------------------


async def test_a_slow_subscriber_is_let_go_and_catches_up_from_the_store(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_event_hub, "BEHIND", 3)
    looks: list[tuple[str, int]] = []
    look = _event_hub._look

    def spy(tx: Any, *, asks: Sequence[Any]) -> Any:
        looks.extend((ask.run_id, ask.after) for ask in asks)
        return look(tx, asks=asks)

    monkeypatch.setattr(_event_hub, "_look", spy)
    hub = EventHub(engine, frame)
    run_id = await engine.submit(chain(6))
    slow = hub.follow(run_id)
    try:
        first = await asyncio.wait_for(anext(slow), HANG)
        assert [e.kind for e, _ in first] == ["run_queued"]
        fast = Follower(hub, run_id)
        async with worker(engine):
            await engine.wait(run_id, timeout=HANG)
            # The fast one reads to the end while the slow one reads nothing.
            await fast.finished()
        truth = await engine.events(run_id)
        assert len(truth) == 2 + 2 * 6
        check_sequence(fast.deliveries, truth, run_id)
        before = len(looks)
        rest: list[Delivery] = []

        async def read_rest() -> None:
            async for batch in slow:
                rest.extend(batch)

        await asyncio.wait_for(read_rest(), HANG)
    finally:
        await slow.aclose()
    check_sequence(first + rest, truth, run_id)
    # It had been let go (the hub kept no backlog for it): it read the rest from the store.
    # It was handed `BEHIND` events, then read on from the store after the last of them.
    assert [after for rid, after in looks[before:] if rid == run_id][:1] == [truth[3].id]
    assert hub._feeds == {}


# --- 4. a run that has finished --------------------------------------------------------


async def test_following_a_finished_run_yields_its_history_then_ends(
    engine: AsyncEngine, hub: EventHub
) -> None:
    async with worker(engine):
        run_id = await engine.submit(with_sub_flow())
        await engine.wait(run_id, timeout=HANG)
    truth = await engine.events(run_id)
    check_sequence(await read_all(hub, run_id), truth, run_id)
    # After its run_finished: nothing, and it ends rather than waiting for more.
    assert await read_all(hub, run_id, after=truth[-1].id) == []
    for event in truth[:-1]:
        check_sequence(
            await read_all(hub, run_id, after=event.id),
            [e for e in truth if e.id > event.id],
            run_id,
        )
    # A child run: only its own events, ending with its own run_finished.
    child = next(e.run_id for e in truth if e.run_id != run_id)
    check_sequence(await read_all(hub, child), await engine.events(child), child)
    assert hub._feeds == {}


# --- 5. no such run --------------------------------------------------------------------


async def test_a_run_that_does_not_exist(engine: AsyncEngine, hub: EventHub) -> None:
    for idle in (None, 0.05):
        with pytest.raises(RunNotFound):
            await read_all_idle(hub, "nope", idle=idle)
    # Two at once, while a real run is followed beside them: each fails, the real one does not.
    run_id = await engine.submit(chain(1))
    real = Follower(hub, run_id)
    results = await asyncio.wait_for(
        asyncio.gather(read_all(hub, "nope"), read_all(hub, "nope"), return_exceptions=True),
        HANG,
    )
    assert all(isinstance(r, RunNotFound) for r in results)
    async with worker(engine):
        await engine.wait(run_id, timeout=HANG)
        await real.finished()
    check_sequence(real.deliveries, await engine.events(run_id), run_id)
    assert hub._feeds == {}


async def read_all_idle(hub: EventHub, run_id: str, *, idle: float | None) -> None:
    async def read() -> None:
        async with contextlib.aclosing(hub.follow(run_id, idle=idle)) as batches:
            async for _ in batches:
                pass

    await asyncio.wait_for(read(), HANG)


# --- 6. keep-alives --------------------------------------------------------------------


async def test_a_quiet_run_gets_empty_batches_as_keep_alives(
    engine: AsyncEngine, hub: EventHub
) -> None:
    run_id = await engine.submit(chain(1))  # no worker: it stays queued
    (queued,) = await engine.events(run_id)
    async with contextlib.aclosing(hub.follow(run_id, idle=0.05)) as batches:
        first = await asyncio.wait_for(anext(batches), HANG)
        assert [e for e, _ in first] == [queued]
        for _ in range(3):
            assert await asyncio.wait_for(anext(batches), HANG) == []
    async with contextlib.aclosing(hub.follow(run_id, after=queued.id, idle=0.05)) as batches:
        assert await asyncio.wait_for(anext(batches), HANG) == []
    # Without `idle` there is no keep-alive: it waits for the next event.
    async with contextlib.aclosing(hub.follow(run_id, after=queued.id)) as batches:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(batches), 0.3)
    assert hub._feeds == {}


# --- 7. leaving ------------------------------------------------------------------------


async def test_the_hub_drops_a_feed_once_its_last_subscriber_leaves(
    engine: AsyncEngine, hub: EventHub
) -> None:
    # The feeds and the poll task are private: there is no public way to see them.
    run_id = await engine.submit(chain(2))  # no worker: it stays queued
    closed = hub.follow(run_id, idle=0.05)
    staying = hub.follow(run_id, idle=0.05)
    assert await asyncio.wait_for(anext(closed), HANG)
    assert await asyncio.wait_for(anext(staying), HANG)
    await closed.aclose()
    assert len(hub._feeds[run_id].subscribers) == 1  # the other one still follows it

    async def break_out() -> None:
        async for _ in hub.follow(run_id, idle=0.05):
            break

    await asyncio.wait_for(break_out(), HANG)
    await staying.aclose()
    # The iterator left by `break` is closed by the loop's finalizer, soon after.
    await until(lambda: run_id not in hub._feeds, "the feed to be dropped")
    task = hub._task
    assert task is not None
    await asyncio.wait_for(asyncio.shield(task), HANG)  # the poller ends with no feeds
    # A new subscriber afterwards starts it again and follows the run to its end.
    again = Follower(hub, run_id)
    async with worker(engine):
        await engine.wait(run_id, timeout=HANG)
        await again.finished()
    check_sequence(again.deliveries, await engine.events(run_id), run_id)
    assert hub._feeds == {}
