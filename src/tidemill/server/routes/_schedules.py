"""Schedules: list them, show one with its next fires, pause and resume it, read its fires.

A schedule is a workspace item of kind `schedule` (made and changed like
any item: `PUT /api/items/{path}` with `kind: schedule`); these routes are
`AsyncWorkspace`'s schedule operations as the caller, with a token's
`items` scopes on the schedule's path. Reading needs the viewer role on it,
pausing and resuming the writer role (who resumes it becomes its owner, so
must be allowed to run its target and handlers).

The routes with a suffix (`/pause`, `/resume`, `/fires`) come before the
plain `GET /api/schedules/{path}`, whose path converter would take the
suffix in; a schedule whose last path segment is one of those words is
read at `/api/items/{path}`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel

from tidemill.server._caller import Caller, SignedIn, requires
from tidemill.server._run_access import scope_allows
from tidemill.server.routes._times import iso_time
from tidemill.workspace import ItemPath, ScheduleFire, ScheduleInfo

__all__ = ["FireOut", "ScheduleOut", "router"]

router = APIRouter(prefix="/api/schedules", tags=["schedules"], dependencies=[requires("items")])

SchedulePath = Annotated[
    str, Path(min_length=1, max_length=500, description="The schedule's path.")
]


class ScheduleOut(BaseModel):
    """A schedule as it stands: its settings, whom it runs as, and its next fires."""

    path: str
    cron: str
    """`min hour dom month dow`, with the seconds first (6 fields), or `@daily`, ...."""
    timezone: str
    """The IANA time zone `cron`'s times are in."""
    target: str
    """The workspace flow or script each fire runs."""
    inputs: dict[str, Any]
    enabled: bool
    """False: paused (it fires nothing)."""
    catch_up: str
    """What it does with fires missed while nothing ran: `latest`, `all` or `skip`."""
    on_failure: str | None
    """The flow run when a fired run fails."""
    on_recovery: str | None
    """The flow run on the first success after failures."""
    owner: str
    """Whom it runs as: the user who saved it last."""
    version: int
    updated_at: str
    """ISO 8601, UTC."""
    next_fires: list[str]
    """Its next fires (ISO 8601, UTC); none while paused."""

    @classmethod
    def of(cls, info: ScheduleInfo) -> ScheduleOut:
        spec = info.spec
        return cls(
            path=info.path, cron=spec.cron, timezone=spec.timezone, target=spec.target,
            inputs=dict(spec.inputs), enabled=spec.enabled, catch_up=spec.catch_up,
            on_failure=spec.on_failure, on_recovery=spec.on_recovery, owner=info.owner,
            version=info.version, updated_at=iso_time(info.updated_at),
            next_fires=[iso_time(at) for at in info.next_fires],
        )  # fmt: skip


class FireOut(BaseModel):
    """One fire of a schedule."""

    fire_at: str
    """When it was due (ISO 8601, UTC)."""
    status: str
    """`started` (its run is `run_id`), `skipped` (missed, and not caught up) or `failed`
    (no run could start: `error` says why)."""
    run_id: str | None
    outcome: str | None
    """How its run ended (`succeeded`, `failed`, `cancelled`); None until it does."""
    handler_id: str | None
    """The run of `on_failure` or `on_recovery` its outcome started."""
    error: str | None

    @classmethod
    def of(cls, fire: ScheduleFire) -> FireOut:
        return cls(
            fire_at=iso_time(fire.fire_at), status=fire.status, run_id=fire.run_id,
            outcome=fire.outcome, handler_id=fire.handler_id, error=fire.error,
        )  # fmt: skip


def _checked(who: Caller, text: str, action: str) -> str:
    """`text` as an item path (else `InvalidPath`: 422), once the token's scopes allow `action`."""
    path = str(ItemPath.parse(text))
    who.require("items", action, path)
    return path


@router.get("", response_model=list[ScheduleOut])
async def list_schedules(
    who: SignedIn,
    under: Annotated[str | None, Query(max_length=255)] = None,
) -> list[ScheduleOut]:
    """The schedules the caller may read (under a prefix such as `f/ops/`), by path."""
    who.require("items", "read")
    found = await who.ws.schedules(under or None)
    return [ScheduleOut.of(s) for s in found if scope_allows(who, "items", "read", s.path)]


@router.post("/{path:path}/pause", response_model=ScheduleOut)
async def pause(path: SchedulePath, who: SignedIn) -> ScheduleOut:
    """Stop the schedule firing (from its next fire on); its settings stay. Writer role."""
    return ScheduleOut.of(await who.ws.pause_schedule(_checked(who, path, "write")))


@router.post("/{path:path}/resume", response_model=ScheduleOut)
async def resume(path: SchedulePath, who: SignedIn) -> ScheduleOut:
    """Start it firing again, as the caller (who becomes its owner), from its next time on.

    Fires missed while it was paused are not caught up. Writer role on the schedule, and the
    right to run its target and handlers.
    """
    return ScheduleOut.of(await who.ws.resume_schedule(_checked(who, path, "write")))


@router.get("/{path:path}/fires", response_model=list[FireOut])
async def fires(
    path: SchedulePath,
    who: SignedIn,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[FireOut]:
    """The schedule's fires, newest first (a deleted schedule's too)."""
    found = await who.ws.schedule_fires(_checked(who, path, "read"), limit=limit)
    return [FireOut.of(f) for f in found]


@router.get("/{path:path}", response_model=ScheduleOut)
async def show(path: SchedulePath, who: SignedIn) -> ScheduleOut:
    """The schedule, with its next fires."""
    return ScheduleOut.of(await who.ws.schedule(_checked(who, path, "read")))
