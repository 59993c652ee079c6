"""What a run executes: `GET /api/runs/{run_id}/flow`, its flow definition as stored with it.

The engine stores each run's flow definition by content digest when the run
is submitted (`tm_definitions`): for a workspace path, the version it ran
(a draft's too), with the scripts and flows it includes; for a run submitted
from Python, the flow it was given. What a run executes never changes after
it was submitted, whatever is deployed since. Whoever may see the run
(`tidemill.server._run_access`) may read it: no `items:read` is needed.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel

from tidemill.engine._run_pages import run_definition
from tidemill.server._caller import SignedIn, requires
from tidemill.server._run_access import run_path
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._runs import _visible

__all__ = ["RunFlowOut", "router"]

router = APIRouter(prefix="/api/runs", tags=["runs"], dependencies=[requires("runs")])


class RunFlowOut(BaseModel):
    """The flow definition a run executes, as stored with it."""

    run_id: str
    flow: str
    """The flow's name."""
    digest: str
    """The definition's content digest (runs of the same definition share it)."""
    path: str | None = None
    """The workspace flow it ran (None: submitted from Python)."""
    version: int | None = None
    """The flow's version it ran (0: a draft)."""
    draft: bool = False
    definition: dict[str, Any]
    """The flow (`steps`, `inputs`, ...) as the engine executes it (`schemas/flow.schema.json`)."""


@router.get("/{run_id}/flow", response_model=RunFlowOut)
async def run_flow(
    run_id: Annotated[str, Path(min_length=1, max_length=100)],
    who: SignedIn,
    state: Annotated[ServerState, Depends(state_of)],
) -> RunFlowOut:
    """The flow definition the run executes (a child run: its top-level run's flow).

    For whoever may see the run, as `GET /api/runs/{run_id}`.
    """
    access, info = await _visible(who, state, run_id)
    run, definition = await run_definition(state.engine, run_id)
    source = info.source or {}
    version = source.get("version")
    return RunFlowOut(
        run_id=info.id, flow=info.flow, digest=run.digest,
        path=run_path(access.workspace, info.source),
        version=version if isinstance(version, int) else None, draft=bool(source.get("draft")),
        definition=definition,
    )  # fmt: skip
