"""`EventHub`: one store poller per server process for every live subscriber to runs' events.

Each subscriber to `GET /api/runs/{id}/events` following the store on its
own would cost one transaction per look: 500 subscribers looking every 50 ms
are 10,000 transactions a second, which the store's one SQLite thread
cannot serve, so every event waits in its queue. The hub looks instead: one
feed per followed run, all due feeds read in one transaction per tick, each
new event encoded once and handed to every subscriber of its run.

A subscriber that resumes from before the feed's place (`Last-Event-ID`)
reads the gap from the store first, then takes the feed's events after it:
nothing missed, nothing twice. One that falls `BEHIND` events behind (a slow
client) is let go of and catches up from the store the same way, so a slow
reader never holds the others up nor makes the hub keep its backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from tidemill.engine import RunEvent
from tidemill.errors import RunNotFound
from tidemill.server._mailbox import END as _END
from tidemill.server._mailbox import LET_GO as _LET_GO
from tidemill.server._mailbox import Mailbox
from tidemill.store import FINISHED_RUN, EventRow, Tx

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine

__all__ = ["BEHIND", "IDLE", "POLL", "EventHub"]

POLL = 0.02
"""Seconds between a feed's looks while its run's events come."""

IDLE = 0.05
"""The longest a feed waits between looks once its run has been quiet for `QUIET` s."""

QUIET = 1.0
"""Seconds without an event before a feed looks less often than every `POLL` s."""

STATUS_EVERY = 1.0
"""Seconds between looks at a quiet run's status (a run that ended before `after`)."""

BEHIND = 1000
"""Events a subscriber may have waiting before it is let go of to catch up from the store."""

PAGE = 500
"""Events read per look (a feed with more waiting looks again at once)."""

RECENT = 1000
"""A feed's latest events kept for subscribers who join later (a gap further back: the store)."""

Delivery = tuple[RunEvent, bytes]
"""An event and its encoding (an SSE message), shared by all its subscribers."""


def _finishes(event: RunEvent, run_id: str) -> bool:
    return event.kind == "run_finished" and event.run_id == run_id


@dataclass(eq=False, slots=True, kw_only=True)
class _Subscriber(Mailbox):
    after: int
    """Events up to this id it has (or reads from the store itself)."""


@dataclass(eq=False, slots=True)
class _Feed:
    run_id: str
    last: int
    """The last event id looked past."""
    base: int
    """Every event after this one, up to `last`, is in `recent`."""
    recent: deque[Delivery] = field(default_factory=lambda: deque(maxlen=RECENT))
    root: str | None = None
    own: str | None = None
    """The run's id when it is a child run (only its own events), else None."""
    subscribers: set[_Subscriber] = field(default_factory=set)
    due: float = 0.0
    wait: float = POLL
    status_due: float = 0.0
    heard: float = 0.0
    """When it last had events (loop time)."""


@dataclass(frozen=True, slots=True)
class _Look:
    root: str
    own: str | None
    status: str | None
    """The run's status when it was read this look (None: not read)."""
    rows: list[EventRow]


@dataclass(frozen=True, slots=True)
class _Ask:
    run_id: str
    root: str | None
    own: str | None
    after: int
    status: bool


def _look(tx: Tx, *, asks: Sequence[_Ask]) -> list[_Look | RunNotFound]:
    """Each feed's new events (and, when asked, its run's status), in one transaction."""
    found: list[_Look | RunNotFound] = []
    for ask in asks:
        root, own, status = ask.root, ask.own, None
        if root is None or ask.status:
            run = tx.run(ask.run_id)
            if run is None:
                found.append(RunNotFound(f"No run {ask.run_id} in this store."))
                continue
            root, own, status = run.root_id, None if run.parent_id is None else run.id, run.status
        rows = tx.events(root, after=ask.after, limit=PAGE, run_id=own)
        found.append(_Look(root, own, status, rows))
    return found


class EventHub:
    """The live events of the runs an engine's store holds, for many subscribers at once.

    Args:
        engine: The engine whose store holds the events.
        encode: An event's message, made once for all of its subscribers.
    """

    def __init__(self, engine: AsyncEngine, encode: Callable[[RunEvent], bytes]) -> None:
        self._engine = engine
        self._encode = encode
        self._feeds: dict[str, _Feed] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    @property
    def engine(self) -> AsyncEngine:
        """The engine it follows runs in."""
        return self._engine

    async def follow(
        self, run_id: str, *, after: int = 0, idle: float | None = None
    ) -> AsyncIterator[list[Delivery]]:
        """A run's events after `after` as they are written, until its `run_finished`.

        They come in batches: all that had come when the subscriber took
        them. With `idle`, an empty batch after that many seconds without one
        (a keep-alive).

        Raises:
            RunNotFound: There is no such run.
        """
        while True:
            feed = self._feeds.get(run_id)
            if feed is None:
                feed = _Feed(run_id, after, base=after, heard=asyncio.get_running_loop().time())
                self._feeds[run_id] = feed
            upto = feed.last
            subscriber = _Subscriber(after=max(after, upto))
            feed.subscribers.add(subscriber)
            self._start()
            try:
                if after < upto:  # the gap before the feed's place
                    async for batch in self._gap(feed, after, upto):
                        yield batch
                        after = batch[-1][0].id
                        if _finishes(batch[-1][0], run_id):
                            return
                while True:
                    items = await subscriber.take(idle)
                    batch = [item for item in items if isinstance(item, tuple)]
                    if batch or not items:
                        yield batch
                    if batch:
                        after = batch[-1][0].id
                    last = items[-1] if items else None
                    if last is _END:
                        return
                    if isinstance(last, BaseException):
                        raise last
                    if last is _LET_GO:
                        break  # catch up, then join again
            finally:
                self._leave(feed, subscriber)

    async def _gap(self, feed: _Feed, after: int, upto: int) -> AsyncIterator[list[Delivery]]:
        """The events after `after` up to `upto`: from the feed's memory, or else the store."""
        if after >= feed.base:
            batch = [d for d in feed.recent if after < d[0].id <= upto]
            if batch:
                yield batch
            return
        while after < upto:
            page = await self._engine.events(feed.run_id, after=after, limit=PAGE)
            batch = [(e, self._encode(e)) for e in page if e.id <= upto]
            if batch:
                yield batch
                after = batch[-1][0].id
            if len(batch) < PAGE:
                return

    def _leave(self, feed: _Feed, subscriber: _Subscriber) -> None:
        feed.subscribers.discard(subscriber)
        if not feed.subscribers and self._feeds.get(feed.run_id) is feed:
            del self._feeds[feed.run_id]

    def _start(self) -> None:
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._poll()
        except Exception as exc:  # pragma: no cover - a bug: end every stream, saying why
            for feed in list(self._feeds.values()):
                self._end(feed, exc)
            raise

    async def _poll(self) -> None:
        loop = asyncio.get_running_loop()
        while self._feeds:
            now = loop.time()
            due = [f for f in self._feeds.values() if f.due <= now]
            if due:
                asks = [
                    _Ask(f.run_id, f.root, f.own, f.last, f.root is None or f.status_due <= now)
                    for f in due
                ]
                try:
                    looks = await self._engine.store.transact(partial(_look, asks=asks))
                except Exception as exc:  # the store is closing, or unreachable for long
                    for feed in due:
                        self._end(feed, exc)
                    continue
                now = loop.time()
                for feed, ask, look in zip(due, asks, looks, strict=True):
                    self._take(feed, ask, look, now)
            if not self._feeds:
                break
            self._wake.clear()
            pause = min(f.due for f in self._feeds.values()) - loop.time()
            if pause > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), pause)

    def _take(self, feed: _Feed, ask: _Ask, look: _Look | RunNotFound, now: float) -> None:
        if isinstance(look, RunNotFound):
            self._end(feed, look)
            return
        feed.root, feed.own = look.root, look.own
        if ask.status:
            feed.status_due = now + STATUS_EVERY
        for row in look.rows:
            event = RunEvent.of(row)
            feed.last = event.id
            delivery = (event, self._encode(event))
            if len(feed.recent) == RECENT:
                feed.base = feed.recent[0][0].id
            feed.recent.append(delivery)
            for subscriber in list(feed.subscribers):
                if event.id > subscriber.after and subscriber.attached:
                    if len(subscriber.pending) >= BEHIND:
                        subscriber.attached = False
                        subscriber.put(_LET_GO)
                    else:
                        subscriber.put(delivery)
            if _finishes(event, feed.run_id):
                self._end(feed, None)
                return
        if look.rows:
            feed.wait, feed.heard = POLL, now
            feed.due = now if len(look.rows) == PAGE else now + POLL
        elif look.status in FINISHED_RUN:
            self._end(feed, None)  # it ended before `after`
        else:
            if now - feed.heard > QUIET:
                feed.wait = min(feed.wait * 1.5, IDLE)
            feed.due = now + feed.wait

    def _end(self, feed: _Feed, error: BaseException | None) -> None:
        for subscriber in feed.subscribers:
            if subscriber.attached:
                subscriber.put(_END if error is None else error)
        if self._feeds.get(feed.run_id) is feed:
            del self._feeds[feed.run_id]
