"""`RunFeed`: one tail of the store's run changes per server process, for every subscriber.

`GET /api/runs/feed` tells a runs list when to read itself again. Each
subscriber reading `tm_events` on its own would cost a transaction per look
per open list; the feed looks instead, once per tick for the whole server,
reads only the kinds that change a top-level run's status as shown
(`KINDS`), encodes each change once, and hands it to every subscriber whose
filter keeps it (the caller's visibility rule).

A subscriber that resumes from before the feed's place (`Last-Event-ID`)
reads the gap from the store first, then takes the feed's changes after
it: nothing missed, nothing twice. One that falls `BEHIND` changes behind
(a slow client) is let go of and catches up from the store the same way,
so a slow reader never holds the others up nor makes the feed keep a
backlog. `stop` ends every stream: a server stopping gracefully waits for
open responses, and this one would never end by itself.

On PostgreSQL an event's id is handed out when it is written, not when its
transaction commits, so the feed can read event 11 before event 10 exists
for it. It moves past every event (not only changes), notes each id it
skipped, and looks for those again for `HOLD` s: a change that comes late
is sent then, under the feed's place (the message's `id`), so a client's
`Last-Event-ID` only ever grows. (A rolled-back transaction's ids never come.)
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from tidemill.server._mailbox import END as _END
from tidemill.server._mailbox import LET_GO as _LET_GO
from tidemill.server._mailbox import Mailbox
from tidemill.store import Tx

if TYPE_CHECKING:
    from fastapi import FastAPI

    from tidemill.engine import AsyncEngine

__all__ = ["BEHIND", "KINDS", "POLL", "Delivery", "RunChange", "RunFeed", "changes", "stop_feed"]

KINDS = ("run_queued", "run_started", "run_finished", "wait_requested", "wait_decided")
"""The event kinds that change a top-level run's status as shown: its own queued, started
(let through its limit, retried), finished (succeeded, failed, cancelled), and a wait for a
person in it or in one of its child runs (`waiting`) and its decision."""

POLL = 0.05
"""Seconds between the feed's looks while changes come."""

IDLE = 0.5
"""The longest the feed waits between looks once the store has been quiet for `QUIET` s."""

QUIET = 2.0
"""Seconds without a change before the feed looks less often than every `POLL` s."""

BEHIND = 1000
"""Changes a subscriber may have waiting before it is let go of to catch up from the store."""

PAGE = 500
"""Changes read per look (a feed with more waiting looks again at once)."""

_NO_END = 2**63 - 1

RECENT = 1000
"""The latest changes kept for subscribers who resume a little way back (further: the store)."""

HOLD = 30.0
"""Seconds an id the feed looked past but could not read (PostgreSQL) is looked for again."""

HOLES = 1000
"""The most such ids looked for at once (the newest)."""

_ALL = ", ".join(f"'{k}'" for k in KINDS)
_WAITS = ", ".join(f"'{k}'" for k in KINDS if k.startswith("wait_"))
_MATCH = f"e.kind IN ({_ALL}) AND (e.run_id = e.root_id OR e.kind IN ({_WAITS}))"
"""A top-level run's own `run_*` events, and every wait's in its tree."""
_COLUMNS = "e.id, e.root_id, e.kind, {data}, e.at, r.run_as, r.source"
_CHANGES = (
    f"SELECT {_COLUMNS.format(data='e.data')} FROM tm_events e "
    "LEFT JOIN tm_runs r ON r.id = e.root_id "
    f"WHERE e.id > ? AND e.id <= ? AND {_MATCH} ORDER BY e.id LIMIT ?"
)
_LOOK = (
    f"SELECT {_COLUMNS.format(data=f'CASE WHEN {_MATCH} THEN e.data END')} FROM tm_events e "
    f"LEFT JOIN tm_runs r ON r.id = e.root_id AND {_MATCH} WHERE {{where}} ORDER BY e.id LIMIT ?"
)
"""Every event's id (to move past it), with a change's facts (else a null `data`)."""


@dataclass(frozen=True, slots=True)
class RunChange:
    """A change of a top-level run's status, as `tm_events` recorded it."""

    id: int
    """The event's id: the feed's place after it."""
    run_id: str
    """The top-level run (a wait's event is about its run, or one of its child runs)."""
    kind: str
    """One of `KINDS`."""
    status: str | None
    """The run's status its `run_*` event names; None for a wait's."""
    at: float
    run_as: str | None
    source: dict[str, Any] | None
    """Who it runs as and what it ran: what the visibility rule reads (never sent)."""


Delivery = tuple[RunChange, bytes]
"""A change and its encoding (an SSE message), shared by all its subscribers."""

Encode = Callable[[RunChange, int], bytes]
"""A change's message, with the feed's place after it (its id, unless it came late)."""


def _change(row: tuple[Any, ...]) -> RunChange | None:
    id_, root, kind, data, at, run_as, source = row
    if data is None:
        return None  # an event that changes no run's status
    status = json.loads(data).get("status") if kind.startswith("run_") else None
    return RunChange(
        int(id_), str(root), str(kind), status if isinstance(status, str) else None,
        float(at), run_as, None if source is None else json.loads(source),
    )  # fmt: skip


def changes(tx: Tx, *, after: int, upto: int = _NO_END, limit: int = PAGE) -> list[RunChange]:
    """The run changes after the event `after` up to `upto`, in order (at most `limit`)."""
    found = (_change(row) for row in tx.all(_CHANGES, (after, upto, limit)))
    return [change for change in found if change is not None]


@dataclass(frozen=True, slots=True)
class _Look:
    ids: list[int]
    """Every event id after the feed's place, in order (the changes' and the rest's)."""
    changes: list[RunChange]
    filled: list[int]
    """The ids looked for again that are there now."""
    late: list[RunChange]
    """The changes among them."""


def _look(tx: Tx, *, after: int, holes: tuple[int, ...]) -> _Look:
    """The events after `after`, and those of `holes` there now, each in one statement."""
    rows = tx.all(_LOOK.format(where="e.id > ?"), (after, PAGE))
    filled: list[tuple[Any, ...]] = []
    if holes:
        marks = ", ".join("?" for _ in holes)
        filled = tx.all(_LOOK.format(where=f"e.id IN ({marks})"), (*holes, len(holes)))
    found = [c for c in map(_change, rows) if c is not None]
    late = [c for c in map(_change, filled) if c is not None]
    return _Look([int(r[0]) for r in rows], found, [int(r[0]) for r in filled], late)


def _latest(tx: Tx) -> int:
    row = tx.one("SELECT COALESCE(MAX(id), 0) FROM tm_events")
    return 0 if row is None else int(row[0])


@dataclass(eq=False, slots=True, kw_only=True)
class _Subscriber(Mailbox):
    after: int
    """Changes up to this id it has, or was not to have (its filter left them out)."""
    keep: Callable[[RunChange], bool]


class RunFeed:
    """The run changes an engine's store records, for many subscribers at once.

    Args:
        engine: The engine whose store holds the events.
        encode: A change's message, made once for all of its subscribers.
    """

    def __init__(self, engine: AsyncEngine, encode: Encode) -> None:
        self._engine = engine
        self._encode = encode
        self._subscribers: set[_Subscriber] = set()
        self._last: int | None = None
        """The last event id looked past (None: not looked yet)."""
        self._base = 0
        """Every change after this id, up to `_last`, is in `_recent`."""
        self._recent: deque[Delivery] = deque(maxlen=RECENT)
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._holes: dict[int, float] = {}
        """Ids looked past but not read, and until when (loop time) to look for them again."""
        # PostgreSQL hands out ids as events are written, not as their transactions commit:
        # an id the feed looked past may still come (SQLite writes one transaction at a time).
        self._track = engine.store.dialect == "postgres"

    @property
    def engine(self) -> AsyncEngine:
        """The engine it follows."""
        return self._engine

    def stop(self) -> None:
        """End every stream now, and each later one at once (the server is stopping)."""
        self._stopped = True
        for subscriber in self._subscribers:
            subscriber.put(_END)

    async def follow(
        self,
        after: int | None,
        keep: Callable[[RunChange], bool],
        *,
        idle: float | None = None,
    ) -> AsyncIterator[list[Delivery]]:
        """The changes `keep` keeps after the event `after` (None: from now), as they come.

        They come in batches: all that had come when the subscriber took
        them. With `idle`, an empty batch after that many seconds without one
        (a keep-alive). It ends when the feed stops.
        """
        if not self._subscribers and (self._task is None or self._task.done()):
            # Nobody follows: place the feed now, not where it stopped (maybe long ago).
            latest = await self._engine.store.transact(_latest)
            if not self._subscribers:  # nor did one join meanwhile
                self._last = self._base = latest
                self._recent.clear()
                self._holes.clear()
        assert self._last is not None
        while not self._stopped:
            upto = self._last
            start = upto if after is None else after
            subscriber = _Subscriber(after=max(start, upto), keep=keep)
            self._subscribers.add(subscriber)
            self._start()
            try:
                if start < upto:  # the gap before the feed's place
                    async for batch in self._gap(start, upto, keep):
                        yield batch
                while True:
                    items = await subscriber.take(idle)
                    batch = [item for item in items if isinstance(item, tuple)]
                    if batch or not items:
                        yield batch
                    last = items[-1] if items else None
                    if last is _END:
                        return
                    if isinstance(last, BaseException):
                        raise last
                    if last is _LET_GO:
                        after = subscriber.after
                        break  # catch up, then join again
            finally:
                self._leave(subscriber)

    async def _gap(
        self, after: int, upto: int, keep: Callable[[RunChange], bool]
    ) -> AsyncIterator[list[Delivery]]:
        """The changes kept after `after` up to `upto`: from the feed's memory, or the store."""
        if after >= self._base:
            batch = [d for d in self._recent if after < d[0].id <= upto and keep(d[0])]
            if batch:
                yield batch
            return
        while after < upto:
            page = await self._engine.store.transact(partial(changes, after=after, upto=upto))
            batch = [(c, self._encode(c, c.id)) for c in page if keep(c)]
            if batch:
                yield batch
            if len(page) < PAGE:
                return
            after = page[-1].id

    def _leave(self, subscriber: _Subscriber) -> None:
        self._subscribers.discard(subscriber)

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        loop = asyncio.get_running_loop()
        wait, heard = POLL, loop.time()
        while self._subscribers and not self._stopped:
            assert self._last is not None
            look_for = partial(_look, after=self._last, holes=tuple(self._holes))
            try:
                look = await self._engine.store.transact(look_for)
            except Exception as exc:  # the store is closing, or unreachable for long
                for subscriber in list(self._subscribers):
                    if subscriber.attached:
                        subscriber.put(exc)
                self._subscribers.clear()
                return
            now = loop.time()
            if self._track:
                self._mind_holes(look, now)
            for change in look.changes:
                self._take(change, self._encode(change, change.id), late=False)
            if look.ids:
                self._last = max(self._last, look.ids[-1])
            for change in look.late:
                self._take(change, self._encode(change, self._last), late=True)
            if look.changes or look.late:
                wait, heard = POLL, now
            elif now - heard > QUIET:
                wait = min(wait * 1.5, IDLE)
            if len(look.ids) < PAGE:
                await asyncio.sleep(wait)

    def _mind_holes(self, look: _Look, now: float) -> None:
        """Note the ids skipped over; forget those that came, and those looked for long enough."""
        assert self._last is not None
        expected = self._last + 1
        for id_ in look.ids:
            for missing in range(max(expected, id_ - HOLES), id_):
                self._holes[missing] = now + HOLD
            expected = id_ + 1
        for id_ in look.filled:
            self._holes.pop(id_, None)
        for id_, until in list(self._holes.items()):
            if until < now:
                del self._holes[id_]
        while len(self._holes) > HOLES:
            del self._holes[min(self._holes)]

    def _take(self, change: RunChange, frame: bytes, *, late: bool) -> None:
        """Hand a change to each subscriber that keeps it; a late one to every attached one."""
        delivery = (change, frame)
        if not late:
            if len(self._recent) == RECENT:
                self._base = self._recent[0][0].id
            self._recent.append(delivery)
        for subscriber in list(self._subscribers):
            if not subscriber.attached or (not late and change.id <= subscriber.after):
                continue
            if subscriber.keep(change):
                if len(subscriber.pending) >= BEHIND:
                    subscriber.attached = False
                    subscriber.put(_LET_GO)
                    continue
                subscriber.put(delivery)
            if not late:
                subscriber.after = change.id


def stop_feed(app: FastAPI) -> None:
    """End the app's feed streams (a server about to stop waits for its open responses)."""
    app.state.tidemill_stopping = True
    feed: RunFeed | None = getattr(app.state, "tidemill_run_feed", None)
    if feed is not None:
        feed.stop()
