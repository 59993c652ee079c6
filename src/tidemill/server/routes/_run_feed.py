"""The runs list's live changes over server-sent events, resumable with `Last-Event-ID`.

`GET /api/runs/feed` sends one message per change of a top-level run's
status as shown (queued, started, waiting for a person, a decision,
finished), only of the runs the caller may see (as `GET /api/runs` lists
them), from after `Last-Event-ID` (or `?after=`; neither: from now). Each
is `id: <the feed's place>` (the event's id, unless it came late: see
`tidemill.server._run_feed`), `event: <kind>`, `data: <RunChangeOut JSON>`. It never
ends by itself (until the server stops): a comment line every `KEEPALIVE`
seconds keeps it open through proxies. It is mounted before the runs' own
routes, so `feed` is never taken for a run id (which are UUIDs).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from tidemill.server._caller import Caller, SignedIn, requires
from tidemill.server._run_access import RunAccess
from tidemill.server._run_feed import RunChange, RunFeed
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._events import KEEPALIVE
from tidemill.server.routes._params import BIGINT_MAX

__all__ = ["ACCESS_EVERY", "RunChangeOut", "router"]

router = APIRouter(prefix="/api/runs", tags=["runs"], dependencies=[requires("runs")])

ACCESS_EVERY = 30.0
"""Seconds a stream goes on with the caller's permissions as read, before reading them again."""


class RunChangeOut(BaseModel):
    """One change of a run, as each message's `data` of `GET /api/runs/feed`."""

    id: int
    """The event's id (also the message's `id`)."""
    run_id: str
    """The top-level run that changed: read it again (`GET /api/runs/{id}`, or the list)."""
    kind: str
    """`run_queued`, `run_started`, `run_finished`, `wait_requested` or `wait_decided`."""
    status: str | None
    """The run's stored status for a `run_*` kind (`queued`, `running`, `succeeded`,
    `failed`, `cancelled`); None for a wait's, which the run's status as shown reflects."""
    at: float


def _frame(change: RunChange, place: int) -> bytes:
    out = RunChangeOut(
        id=change.id, run_id=change.run_id, kind=change.kind, status=change.status, at=change.at
    )
    body = json.dumps(out.model_dump(), separators=(",", ":"))
    return f"id: {place}\nevent: {change.kind}\ndata: {body}\n\n".encode()


def feed_of(request: Request, state: ServerState) -> RunFeed:
    """The app's run feed (one per server process: one store tail for every subscriber)."""
    feed: RunFeed | None = getattr(request.app.state, "tidemill_run_feed", None)
    if feed is None or feed.engine is not state.engine:  # a new lifespan has a new engine
        feed = RunFeed(state.engine, _frame)
        if getattr(request.app.state, "tidemill_stopping", False):
            feed.stop()
        request.app.state.tidemill_run_feed = feed
    return feed


class _Seer:
    """Whether the caller sees a change's run, its permissions read again now and then."""

    def __init__(self, who: Caller, access: RunAccess) -> None:
        self.who, self.access = who, access
        self.read_at = asyncio.get_running_loop().time()

    def __call__(self, change: RunChange) -> bool:
        return self.access.may_see(change.run_as, change.source)

    async def refresh(self) -> None:
        now = asyncio.get_running_loop().time()
        if now - self.read_at >= ACCESS_EVERY:
            self.access, self.read_at = await RunAccess.of(self.who), now


async def _stream(feed: RunFeed, seer: _Seer, after: int | None) -> AsyncIterator[bytes]:
    yield b"retry: 1000\n\n"
    async for batch in feed.follow(after, seer, idle=KEEPALIVE):
        yield b"".join(frame for _, frame in batch) if batch else b": keep-alive\n\n"
        await seer.refresh()


@router.get(
    "/feed",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "The changes of the runs the caller sees; each `data` a RunChangeOut.",
        }
    },
)
async def feed(
    request: Request,
    who: SignedIn,
    state: Annotated[ServerState, Depends(state_of)],
    after: Annotated[
        int | None, Query(ge=0, le=BIGINT_MAX, description="Only changes after this event id.")
    ] = None,
    last_event_id: Annotated[str | None, Header(max_length=40)] = None,
) -> StreamingResponse:
    """Stream the changes of the runs the caller may see (server-sent events).

    From after `Last-Event-ID` (a reconnect) or `after`; with neither, only
    changes from now. A message's `data` is a `RunChangeOut`: the run to
    read again. The stream lasts until the client closes it or the server stops.
    """
    who.require("runs", "read")
    start = after
    if last_event_id is not None and last_event_id.strip().isdigit():
        start = max(start or 0, min(int(last_event_id.strip()), BIGINT_MAX))
    seer = _Seer(who, await RunAccess.of(who))
    return StreamingResponse(
        _stream(feed_of(request, state), seer, start),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
