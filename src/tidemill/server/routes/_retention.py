"""Retention: delete the workspace's ended runs older than an age.

`POST /api/runs/prune` is `AsyncEngine.prune_runs` for the server's
workspace, as the caller: every top-level run started from the workspace's
items that ended (succeeded, failed or cancelled) longer ago than
`older_than` goes, with the runs under it and all they own; a queued,
running or waiting run stays, however old, and so do runs of other
workspaces in the store and runs submitted from Python. It deletes the runs
of every flow and user, so it is a workspace admin's
(`AsyncWorkspace.check_prune_runs`), with a token scope `runs:write` on no
path; each prune, a dry run too, is audited (`runs.prune`).

Examples:
    >>> PruneIn.model_validate({"older_than": "30d"}).older_than
    2592000.0
    >>> PruneIn.model_validate({"older_than": 3600, "dry_run": True}).dry_run
    True
    >>> import pydantic
    >>> try:
    ...     PruneIn.model_validate({"older_than": "soon"})
    ... except pydantic.ValidationError as exc:
    ...     print(exc.errors()[0]["msg"][:42])
    Value error, 'soon' is not a duration; use
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, BeforeValidator, WithJsonSchema

from tidemill.errors import PermissionDenied
from tidemill.flows import parse_duration
from tidemill.flows._duration import DURATION_PATTERN
from tidemill.server._caller import SignedIn, requires
from tidemill.server._run_access import scope_allows
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._body import Body

__all__ = ["MAX_OLDER_THAN", "PruneIn", "PrunedOut", "router"]

MAX_OLDER_THAN = 36525 * 86400.0
"""The longest `older_than` the API takes: a hundred years (36525 days)."""

router = APIRouter(prefix="/api/runs", tags=["runs"], dependencies=[requires("runs")])

State = Annotated[ServerState, Depends(state_of)]


def _older_than(value: object) -> float:
    """Seconds, from a positive number of seconds or a duration string, at most a century."""
    seconds = parse_duration(value)
    if seconds > MAX_OLDER_THAN:
        raise ValueError(
            f"older_than is at most {MAX_OLDER_THAN / 86400:.0f} days "
            f"({MAX_OLDER_THAN:.0f} s); use 30d, 12h or seconds"
        )
    return seconds


OlderThan = Annotated[
    float,
    BeforeValidator(_older_than),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_OLDER_THAN},
                {"type": "string", "pattern": DURATION_PATTERN},
            ],
            "description": "Seconds, or a number with a unit: 12h, 30d (at most 36525 days).",
        }
    ),
]
"""A prune's age: seconds as a float, from seconds or `500ms`, `30s`, `5m`, `2h`, `3d`."""


class PruneIn(Body):
    """Which ended runs of the workspace to delete."""

    older_than: OlderThan
    """Runs that ended longer ago than this go: seconds, or 30m, 12h, 30d."""
    dry_run: bool = False
    """Delete nothing: `runs` counts what would go."""


class PrunedOut(BaseModel):
    """What a prune deleted (or, for a dry run, would delete)."""

    runs: int
    """Top-level runs deleted, each with every run under it (a dry run: that would be)."""
    rows: dict[str, int]
    """Rows deleted, by table (`tm_runs`, `tm_jobs`, ...); empty for a dry run."""
    before: float
    """The cutoff, in seconds since the epoch: runs that ended before it went."""
    dry_run: bool
    """True: nothing was deleted."""


@router.post("/prune", response_model=PrunedOut)
async def prune(body: PruneIn, who: SignedIn, state: State) -> PrunedOut:
    """Delete the workspace's top-level runs that ended more than `older_than` ago.

    Each goes with the runs under it and all they own; queued, running and
    waiting runs stay, and so do runs of other workspaces and runs submitted
    from Python. For a workspace admin, with a token scope `runs:write` on no path.
    """
    if not scope_allows(who, "runs", "write", None):
        raise PermissionDenied(
            "This token may not prune runs: its runs scopes are for some paths only, and a "
            "prune deletes the ended runs of every path.",
            hint="Use a token with the scope runs:write.",
            context={"domain": "runs", "action": "write"},
        )
    ws = who.ws
    await ws.check_prune_runs()
    pruned = await state.engine.prune_runs(body.older_than, workspace=ws.name, dry_run=body.dry_run)
    await ws.record_runs_pruned(runs=pruned.runs, before=pruned.before, dry_run=pruned.dry_run)
    return PrunedOut(
        runs=pruned.runs, rows=dict(pruned.rows), before=pruned.before, dry_run=pruned.dry_run
    )
