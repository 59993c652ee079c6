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
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from tidemill.engine import RunEvent
from tidemill.server._caller import SignedIn, requires
from tidemill.server._run_access import RunAccess, run_path
from tidemill.server._state import ServerState, state_of

__all__ = ["KEEPALIVE", "EventOut", "router"]

router = APIRouter(prefix="/api/runs", tags=["runs"], dependencies=[requires("runs")])

KEEPALIVE = 15.0
"""Seconds between keep-alive comments while a run is quiet."""


class EventOut(BaseModel):
    """One event of a run, as each SSE message's `data` (and in `GET .../events?stream=false`)."""

    id: int
    run_id: str
    step_id: str | None
    kind: str
    data: dict[str, Any]
    at: float

    @classmethod
    def of(cls, event: RunEvent) -> EventOut:
        return cls(
            id=event.id, run_id=event.run_id, step_id=event.step_id, kind=event.kind,
            data=event.data, at=event.at,
        )  # fmt: skip


def _frame(event: RunEvent) -> bytes:
    body = json.dumps(EventOut.of(event).model_dump(), separators=(",", ":"), default=str)
    return f"id: {event.id}\nevent: {event.kind}\ndata: {body}\n\n".encode()


async def _stream(state: ServerState, run_id: str, after: int) -> AsyncIterator[bytes]:
    queue: asyncio.Queue[RunEvent | None] = asyncio.Queue(maxsize=1000)

    async def pump() -> None:
        try:
            async for event in state.engine.follow(run_id, after=after):
                await queue.put(event)
        finally:
            await queue.put(None)

    task = asyncio.create_task(pump())
    try:
        yield b"retry: 1000\n\n"
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), KEEPALIVE)
            except TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if event is None:
                break
            yield _frame(event)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


@router.get(
    "/{run_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "The run's events."}},
)
async def events(
    run_id: Annotated[str, Path(min_length=1, max_length=100)],
    who: SignedIn,
    state: Annotated[ServerState, Depends(state_of)],
    after: Annotated[int, Query(ge=0)] = 0,
    last_event_id: Annotated[str | None, Header(max_length=40)] = None,
) -> StreamingResponse:
    """Stream the run's events (server-sent events) after `Last-Event-ID` (or `after`).

    The stream ends after the run's `run_finished`. Each message's `data` is an `EventOut`.
    """
    access = await RunAccess.of(who)
    info = await state.engine.get(run_id)
    access.check_see(run_id, info.run_as, info.source)
    who.require("runs", "read", run_path(access.workspace, info.source))
    start = after
    if last_event_id is not None and last_event_id.strip().isdigit():
        start = max(start, int(last_event_id.strip()))
    return StreamingResponse(
        _stream(state, run_id, start),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.get("/{run_id}/events/page", response_model=list[EventOut])
async def event_page(
    run_id: Annotated[str, Path(min_length=1, max_length=100)],
    who: SignedIn,
    state: Annotated[ServerState, Depends(state_of)],
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 500,
) -> list[EventOut]:
    """Up to `limit` of the run's events after the event `after`, without waiting for more."""
    access = await RunAccess.of(who)
    info = await state.engine.get(run_id)
    access.check_see(run_id, info.run_as, info.source)
    who.require("runs", "read", run_path(access.workspace, info.source))
    return [EventOut.of(e) for e in await state.engine.events(run_id, after=after, limit=limit)]
