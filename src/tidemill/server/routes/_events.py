"""A run's live events over server-sent events, resumable with `Last-Event-ID`.

`GET /api/runs/{run_id}/events` streams the run's events (and its child
runs'), in order, from after `Last-Event-ID` (or `?after=`), then new ones as
they are written, and ends after the run's `run_finished`. Each event is
`id: <event id>`, `event: <kind>`, `data: <JSON>`: a client that reconnects
with the last id it saw misses nothing and sees nothing twice. A comment
line every `KEEPALIVE` seconds keeps idle connections open through proxies.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from tidemill.engine import RunEvent
from tidemill.engine._run_pages import tail_start
from tidemill.server._caller import SignedIn, requires
from tidemill.server._event_hub import EventHub
from tidemill.server._run_access import RunAccess, run_path
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._params import BIGINT_MAX, After

__all__ = ["KEEPALIVE", "EventOut", "router"]

router = APIRouter(prefix="/api/runs", tags=["runs"], dependencies=[requires("runs")])

KEEPALIVE = 15.0
"""Seconds between keep-alive comments while a run is quiet."""


class EventOut(BaseModel):
    """One event of a run, as each SSE message's `data` (and in `GET .../events?stream=false`)."""

    id: int
    run_id: str
    step_id: str | None
    job_id: int | None = None
    """The job (step attempt) it is about, if any: a step's attempts tell apart."""
    kind: str
    data: dict[str, Any]
    at: float

    @classmethod
    def of(cls, event: RunEvent) -> EventOut:
        return cls(
            id=event.id, run_id=event.run_id, step_id=event.step_id, job_id=event.job_id,
            kind=event.kind, data=event.data, at=event.at,
        )  # fmt: skip


def _frame(event: RunEvent) -> bytes:
    body = json.dumps(EventOut.of(event).model_dump(), separators=(",", ":"), default=str)
    return f"id: {event.id}\nevent: {event.kind}\ndata: {body}\n\n".encode()


def hub_of(request: Request, state: ServerState) -> EventHub:
    """The app's event hub (one per server process: one store poller for every subscriber)."""
    hub: EventHub | None = getattr(request.app.state, "tidemill_event_hub", None)
    if hub is None or hub.engine is not state.engine:  # a new lifespan has a new engine
        hub = EventHub(state.engine, _frame)
        request.app.state.tidemill_event_hub = hub
    return hub


async def _stream(hub: EventHub, run_id: str, after: int) -> AsyncIterator[bytes]:
    yield b"retry: 1000\n\n"
    async for batch in hub.follow(run_id, after=after, idle=KEEPALIVE):
        yield b"".join(frame for _, frame in batch) if batch else b": keep-alive\n\n"


@router.get(
    "/{run_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "The run's events."}},
)
async def events(
    request: Request,
    run_id: Annotated[str, Path(min_length=1, max_length=100)],
    who: SignedIn,
    state: Annotated[ServerState, Depends(state_of)],
    after: After = 0,
    tail: Annotated[int | None, Query(ge=0, le=1000)] = None,
    last_event_id: Annotated[str | None, Header(max_length=40)] = None,
) -> StreamingResponse:
    """Stream the run's events (server-sent events) after `Last-Event-ID` (or `after`).

    `tail=N` starts with the run's last N events instead (`tail=0`: only new
    ones), so opening a long run does not replay its history; a reconnect's
    `Last-Event-ID` wins over it. The stream ends after the run's
    `run_finished`. Each message's `data` is an `EventOut`.
    """
    # Both reads at once: the store runs them back to back, with one wait between.
    access, info = await asyncio.gather(RunAccess.of(who), state.engine.get(run_id))
    access.check_see(run_id, info.run_as, info.source)
    who.require("runs", "read", run_path(access.workspace, info.source))
    start = after
    if last_event_id is not None and last_event_id.strip().isdigit():
        start = max(start, min(int(last_event_id.strip()), BIGINT_MAX))
    elif tail is not None:
        start = max(start, await tail_start(state.engine, run_id, tail))
    return StreamingResponse(
        _stream(hub_of(request, state), run_id, start),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.get("/{run_id}/events/page", response_model=list[EventOut])
async def event_page(
    run_id: Annotated[str, Path(min_length=1, max_length=100)],
    who: SignedIn,
    state: Annotated[ServerState, Depends(state_of)],
    after: After = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 500,
) -> list[EventOut]:
    """Up to `limit` of the run's events after the event `after`, without waiting for more."""
    access = await RunAccess.of(who)
    info = await state.engine.get(run_id)
    access.check_see(run_id, info.run_as, info.source)
    who.require("runs", "read", run_path(access.workspace, info.source))
    return [EventOut.of(e) for e in await state.engine.events(run_id, after=after, limit=limit)]
