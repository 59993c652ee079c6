r"""Schedules: items that run a flow or script at the times of a cron expression.

A schedule is an item of kind `schedule` at a path (written with `write`,
checked by `tidemill.workspace._schedule_content`), and it runs as its
owner: the user who saved it last. These are the operations on schedules
as such: reading them with their next fires, pausing and resuming them, and
their history of fires (which `tidemill.engine.triggers.Scheduler` writes).
A script target runs as a one-step flow of it (`script_flow`).

Examples:
    >>> import asyncio, tempfile
    >>> from tidemill.workspace import AsyncWorkspace
    >>> async def main():
    ...     ws = AsyncWorkspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada")
    ...     await ws.add_folder("ops")
    ...     code = "def main(name: str = 'x'):\n    return name\n"
    ...     await ws.write("f/ops/hello", "script", code)
    ...     nightly = {"cron": "0 2 * * *", "target": "f/ops/hello"}
    ...     await ws.write("f/ops/nightly", "schedule", nightly)
    ...     paused = await ws.pause_schedule("f/ops/nightly")
    ...     info = await ws.schedule("f/ops/nightly")
    ...     await ws.close()
    ...     return paused.spec.enabled, info.owner, info.version, info.next_fires
    >>> asyncio.run(main())
    (False, 'ada', 2, ())
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidemill.flows import Schedule
from tidemill.workspace._content import Content
from tidemill.workspace._items import check_readable, item_path, not_found, store_content
from tidemill.workspace._models import Item
from tidemill.workspace._paths import InvalidPath
from tidemill.workspace._schedule_content import check_schedule
from tidemill.workspace._scripts import script_metadata
from tidemill.workspace._session import Context, Session

__all__ = ["NEXT_FIRES", "ScheduleFire", "ScheduleInfo", "ScheduleMethods", "script_flow"]

NEXT_FIRES = 5
"""How many next fires `ScheduleInfo.next_fires` shows."""


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A schedule item as it stands: its settings, whom it runs as, and when it fires next."""

    path: str
    spec: Schedule
    """Its settings."""
    owner: str
    """Whom it runs as: the user who saved it last."""
    version: int
    updated_at: float
    next_fires: tuple[float, ...]
    """Its next fires (seconds since the epoch), `NEXT_FIRES` of them; none while paused."""


@dataclass(frozen=True, slots=True)
class ScheduleFire:
    """One fire of a schedule: recorded once, whichever scheduler got to it first."""

    path: str
    fire_at: float
    """The time it was due (seconds since the epoch)."""
    status: str
    """`started` (its run is `run_id`), `skipped` (a missed fire its catch-up policy
    did not run) or `failed` (no run could start: `error` says why)."""
    run_id: str | None
    outcome: str | None
    """How its run ended (`succeeded`, `failed`, `cancelled`); None until it does."""
    handler_id: str | None
    """The run of `on_failure` or `on_recovery` its outcome started."""
    error: str | None
    created_at: float
    version: int | None = None
    """The schedule's version that fired."""


def script_flow(path: str, code: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    r"""The one-step flow document that runs the workspace script at `path`.

    Its input schema is the script's; `main` gets the inputs `inputs` names,
    each from the run's input.

    Examples:
        >>> flow = script_flow("f/ops/hello", "def main(name: str):\n    return name\n",
        ...                    {"name": "ada"})
        >>> flow["steps"][0]["script"], flow["steps"][0]["inputs"]
        ({'path': 'f/ops/hello'}, {'name': {'expr': 'flow_input["name"]'}})
    """
    meta = script_metadata(code, path=path)
    named = {name: {"expr": f"flow_input[{json.dumps(name)}]"} for name in inputs}
    step = {"id": "script", "script": {"path": path}, "inputs": named}
    return {"summary": meta.summary, "inputs": meta.schema, "steps": [step]}


def _info(item: Item, now: float) -> ScheduleInfo:
    spec = Schedule.model_validate(item.value)
    fires = tuple(spec.cron_schedule().next_fires(now, NEXT_FIRES)) if spec.enabled else ()
    return ScheduleInfo(item.path, spec, item.updated_by, item.version, item.updated_at, fires)


def _stored(ctx: Context, path: str) -> Item:
    check_readable(ctx, path, "schedule")
    stored = ctx.q.item(path)
    if stored is None or stored.item.deleted or stored.item.kind != "schedule":
        raise not_found(ctx, path, "schedule")
    return stored.item


class ScheduleMethods(Session):
    """The schedule operations of `AsyncWorkspace`."""

    async def schedules(self, under: str | None = None) -> builtins.list[ScheduleInfo]:
        """The schedules the principal may read, by path (under a prefix such as `f/ops/`)."""

        def read(ctx: Context) -> builtins.list[ScheduleInfo]:
            found: builtins.list[ScheduleInfo] = []
            cursor: str | None = None
            while True:
                page = ctx.q.items(
                    under or "", after=cursor, limit=200, kind="schedule", deleted=False
                )
                for item in page:
                    if ctx.rules.allows("read", item.path):
                        found.append(_info(_stored(ctx, item.path), ctx.now))
                if len(page) < 200:
                    return found
                cursor = page[-1].path

        return await self.transact(read)

    async def schedule(self, path: str) -> ScheduleInfo:
        """The schedule at `path`, with its next fires.

        Raises:
            ItemNotFound: No schedule there that the principal may read.
        """
        path = item_path(path)
        return await self.transact(lambda ctx: _info(_stored(ctx, path), ctx.now))

    async def pause_schedule(self, path: str) -> ScheduleInfo:
        """Stop the schedule firing (a new version, "paused"); its settings stay.

        It takes effect at its next fire; a paused schedule is already so.
        The principal (who needs the writer role) becomes its owner.

        Raises:
            ItemNotFound: No schedule there that the principal may read.
            PermissionDenied: The principal may not write it.
        """
        return await self._set_enabled(path, enabled=False)

    async def resume_schedule(self, path: str) -> ScheduleInfo:
        """Start the schedule firing again (a new version, "resumed"), as the principal.

        The fires missed while it was paused are not caught up: it fires
        next at its first time after now. The principal (who needs the
        writer role, and may run its target and handlers: it runs as them
        from now on) becomes its owner.

        Raises:
            ItemNotFound: No schedule there that the principal may read.
            PermissionDenied: The principal may not write it.
            InvalidValue: The principal may not run its target or a handler.
        """
        return await self._set_enabled(path, enabled=True)

    async def _set_enabled(self, path: str, *, enabled: bool) -> ScheduleInfo:
        path = item_path(path)
        message = "resumed" if enabled else "paused"

        def put(ctx: Context) -> ScheduleInfo:
            ctx.rules.check("write", path)
            item = _stored(ctx, path)
            if bool(item.value.get("enabled", True)) is enabled:
                return _info(item, ctx.now)
            value = {**item.value, "enabled": enabled}
            if enabled:  # it runs as the principal from now on: the rule holds for them
                value = check_schedule(ctx, path, value)
            content = Content("schedule", value, item.summary, item.description)
            action = f"schedule.{message}"
            stored = store_content(ctx, path, content, message=message, action=action)
            return _info(stored, ctx.now)

        return await self.transact(put)

    async def schedule_fires(self, path: str, *, limit: int = 50) -> builtins.list[ScheduleFire]:
        """The schedule's fires, newest first (a deleted schedule's too).

        Raises:
            ItemNotFound: No schedule there that the principal may read.
        """
        path = item_path(path)
        if limit < 1:
            raise InvalidPath("limit must be at least 1.")

        def read(ctx: Context) -> builtins.list[ScheduleFire]:
            check_readable(ctx, path, "schedule")
            stored = ctx.q.item(path)
            if stored is None or stored.item.kind != "schedule":
                raise not_found(ctx, path, "schedule")
            return [
                ScheduleFire(
                    path=str(row[0]),
                    fire_at=float(row[1]),
                    status=str(row[2]),
                    run_id=row[3],
                    outcome=row[5],
                    handler_id=row[6],
                    error=row[7],
                    created_at=float(row[8]),
                    version=None if row[4] is None else int(row[4]),
                )
                for row in ctx.q.tx.fires(ctx.q.ws, path, limit=limit)
            ]

        return await self.transact(read)
