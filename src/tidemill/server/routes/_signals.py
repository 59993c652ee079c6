"""Events: send one to the runs that wait for it, and list the events kept for runs to come.

`POST /api/events` is `AsyncEngine.send_event` as the caller: every
`wait_for_event` step waiting for the event's name and key (in the runs of
the workspace flow at `path`) ends with its payload as result; when none
waits, the event is kept (`keep`, seven days by default) for the first step
to come. Sending is asked like running the flow: the caller needs the
viewer role on it (`AsyncWorkspace.check_event_target`) and a token scope
`runs:write` on its path; an event with no path (for runs of flows from
files or Python) is a workspace admin's, with a scope on no path. Each
send is audited (`event.send`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field, field_validator

from tidemill.engine import EVENT_KEEP
from tidemill.errors import PermissionDenied
from tidemill.flows import parse_duration
from tidemill.server._caller import Caller, SignedIn, requires
from tidemill.server._run_access import RunAccess, scope_allows
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._body import Body
from tidemill.server.routes._times import iso_time
from tidemill.store import SignalRow

__all__ = ["MAX_KEEP", "DeliveryOut", "EventIn", "KeptEventOut", "router"]

MAX_KEEP = 366 * 86400.0
"""The longest `keep` the API takes: a year (and a day)."""

router = APIRouter(prefix="/api/events", tags=["events"], dependencies=[requires("runs")])

State = Annotated[ServerState, Depends(state_of)]


class EventIn(Body):
    """An event to send to the steps that wait for it."""

    name: str = Field(min_length=1, max_length=128)
    """The event's name, as the `wait_for_event` steps name it (`order_paid`)."""
    key: str = Field(default="", max_length=512)
    """Its key: what the steps' `key` expression gives (an order id, say)."""
    payload: Any = None
    """JSON data: the result of each step it ends."""
    path: str | None = Field(default=None, max_length=500)
    """The workspace flow whose runs it is for (`f/shop/checkout`); none: runs of flows from
    files or Python (a workspace admin's)."""
    dedupe_id: str | None = Field(default=None, min_length=1, max_length=200)
    """The sender's id for it: a second send with the same id, while the first is kept,
    does nothing (`duplicate`)."""
    keep: float | str | None = None
    """How long to keep it when no step waits for it yet: seconds, or 30m, 12h, 7d
    (default 7 days, at most 366)."""

    @field_validator("keep", mode="before")
    @classmethod
    def _check_keep(cls, value: Any) -> float | None:
        if value is None:
            return None
        seconds = parse_duration(value)
        if seconds > MAX_KEEP:
            raise ValueError(f"keep is at most {MAX_KEEP / 86400:.0f} days ({MAX_KEEP:.0f} s)")
        return seconds


class DeliveryOut(BaseModel):
    """What sending an event did."""

    event_id: int | None
    """The event's id (None: a resend with a known `dedupe_id`, ignored)."""
    delivered_to: list[str]
    """The runs whose waiting steps it ended."""
    kept_until: str | None
    """When no step waited: until when (ISO 8601, UTC) it is kept for one to come."""
    duplicate: bool
    """True: an event with the same `dedupe_id` had been sent, and nothing was done."""


class KeptEventOut(BaseModel):
    """An event sent that no step has taken yet."""

    event_id: int
    name: str
    key: str
    path: str | None
    """The workspace flow whose runs it is for (None: runs of no path)."""
    payload: Any = None
    dedupe_id: str | None
    sent_by: str | None
    sent_at: str
    """ISO 8601, UTC."""
    kept_until: str
    """ISO 8601, UTC: when it is dropped if no step takes it."""

    @classmethod
    def of(cls, row: SignalRow) -> KeptEventOut:
        return cls(
            event_id=row.id, name=row.name, key=row.key, path=row.path or None,
            payload=row.payload, dedupe_id=row.dedupe_id, sent_by=row.sent_by,
            sent_at=iso_time(row.sent_at), kept_until=iso_time(row.keep_until),
        )  # fmt: skip


def _check_scope(who: Caller, path: str) -> None:
    """A token's scopes must reach the flow (`runs:write` on it, or on no path for none)."""
    if path:
        who.require("runs", "write", path)
    elif not scope_allows(who, "runs", "write", None):
        raise PermissionDenied(
            "This token may not send an event to the runs of no path: its runs scopes are "
            "for some paths only.",
            hint="Send it to a flow's path, or use a token with the scope runs:write.",
            context={"domain": "runs", "action": "write"},
        )


@router.post("", response_model=DeliveryOut, status_code=202)
async def send(body: EventIn, who: SignedIn, state: State) -> DeliveryOut:
    """Send an event: it ends each step waiting for its name and key, or is kept for one to come.

    The caller needs the viewer role on the flow at `path` (no path: a workspace admin)
    and a token scope `runs:write` on it.
    """
    _check_scope(who, body.path or "")
    ws = who.ws
    target = await ws.check_event_target(body.path)
    _check_scope(who, target)
    delivery = await state.engine.send_event(
        body.name,
        body.key,
        body.payload,
        workspace=ws.name if target else "",
        path=target,
        dedupe_id=body.dedupe_id,
        sent_by=who.user,
        keep=EVENT_KEEP if body.keep is None else float(body.keep),
    )
    if not delivery.duplicate:
        await ws.record_event_sent(
            target,
            name=body.name,
            key=body.key,
            event_id=delivery.event_id,
            delivered_to=delivery.delivered_to,
        )
    return DeliveryOut(
        event_id=delivery.event_id,
        delivered_to=list(delivery.delivered_to),
        kept_until=None if delivery.kept_until is None else iso_time(delivery.kept_until),
        duplicate=delivery.duplicate,
    )


_PAGE = 1000
"""How many kept events `GET /api/events/kept` reads at a time, as it looks for visible ones."""


@router.get("/kept", response_model=list[KeptEventOut])
async def kept(
    who: SignedIn,
    state: State,
    name: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    after: Annotated[int, Query(ge=0, description="An event id: the events after it.")] = 0,
) -> list[KeptEventOut]:
    """Events kept for steps to come (oldest first) that the caller may see.

    Those for a flow the caller may read (and its token's `runs` scopes reach);
    those of no path for workspace admins. The next page is `after=<the last
    event_id>`.
    """
    who.require("runs", "read")
    access = await RunAccess.of(who)
    admin = access.rules.is_admin and scope_allows(who, "runs", "read", None)
    workspaces = [access.workspace, ""] if admin else [access.workspace]
    shown: list[KeptEventOut] = []
    while len(shown) < limit:
        rows = await state.engine.kept_events(
            name=name, limit=_PAGE, after=after, workspaces=workspaces
        )
        for row in rows:
            after = row.id
            if row.workspace or row.path:
                visible = (
                    row.workspace == access.workspace
                    and access.rules.allows("read", row.path)
                    and scope_allows(who, "runs", "read", row.path)
                )
            else:
                visible = admin
            if visible:
                shown.append(KeptEventOut.of(row))
                if len(shown) == limit:
                    break
        if len(rows) < _PAGE:
            break
    return shown
