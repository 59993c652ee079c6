"""Runs: submit, list, show, cancel, retry, and read what a run did.

Submit a workspace flow (deployed, or a draft); read a run's jobs, logs,
model usage, agents' transcripts, linked agents and waits.

Who may see and act on which run is `tidemill.server._run_access`'s; every
route here asks it, then the engine (`AsyncEngine`), which does the work
for the CLI and Python alike.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field

from tidemill.engine import RunInfo, Wait
from tidemill.engine._run_pages import RunCost, RunFilters, run_input, runs_page, waiting_for
from tidemill.server._caller import Caller, SignedIn, requires
from tidemill.server._run_access import RunAccess, run_path
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._body import Body
from tidemill.server.routes._params import After
from tidemill.server.routes._times import StartAt
from tidemill.store import JobRow, LogRow
from tidemill.types import Message

__all__ = ["RunOut", "router"]

router = APIRouter(prefix="/api/runs", tags=["runs"], dependencies=[requires("runs")])

State = Annotated[ServerState, Depends(state_of)]
RunId = Annotated[str, Path(min_length=1, max_length=100)]
ShownStatus = Literal["queued", "running", "waiting", "succeeded", "failed", "cancelled"]


class SubmitIn(Body):
    """A workspace flow to run, as the caller (who needs the viewer role on it)."""

    path: str = Field(min_length=1, max_length=500)
    """The flow's path, e.g. `f/support/triage`."""
    inputs: dict[str, Any] = Field(default_factory=dict)
    """The flow's input (checked against its input schema)."""
    draft: bool = False
    """Run the caller's draft of the flow (and of the items it names), not what is deployed."""
    memory_id: str | None = Field(default=None, min_length=1, max_length=200)
    """The run's memory id (its window-memory agent steps recall and extend it)."""
    start_at: StartAt | None = None
    """Run later: when its first steps are due (ISO 8601 with an offset, or seconds since
    the epoch); until then it is `queued`. A time past starts it now."""


class RunOut(BaseModel):
    """A run as it stands."""

    id: str
    flow: str
    """The flow's name."""
    status: str
    """`queued`, `running`, `waiting` (only people's decisions are left), or how it ended."""
    result: Any = None
    """The flow's result, once it succeeded."""
    error: dict[str, Any] | None = None
    """For a failed run: the failed `step`, the error's `type` and `message`."""
    created_at: float
    finished_at: float | None = None
    run_as: str | None = None
    """The user it runs as (who started it)."""
    path: str | None = None
    """The workspace flow it ran (None: submitted from Python)."""
    version: int | None = None
    """The flow's version it ran (0: a draft)."""
    draft: bool = False
    """Whether it ran drafts."""
    items: dict[str, Any] | None = None
    """The version of each workspace script and flow it included."""
    memory_id: str | None = None
    inputs: dict[str, Any] | None = None
    """The flow's input as submitted, its `$var:`/`$res:` references unresolved
    (only in `GET /api/runs/{id}`)."""

    @classmethod
    def of(cls, info: RunInfo, workspace: str) -> RunOut:
        source = info.source or {}
        version = source.get("version")
        items = source.get("items")
        return cls(
            id=info.id, flow=info.flow, status=info.status,
            result=info.shown_result, error=info.error, created_at=info.created_at,
            finished_at=info.finished_at, run_as=info.run_as,
            path=run_path(workspace, info.source),
            version=version if isinstance(version, int) else None,
            draft=bool(source.get("draft")), items=items if isinstance(items, dict) else None,
            memory_id=info.memory_id,
        )  # fmt: skip


class RunItem(RunOut):
    """A run in a page of `GET /api/runs`, with what its model calls cost."""

    cost_usd: float | None = None
    """USD, summed over its (and its child runs') priced model calls, as
    `GET /api/runs/{id}/usage` lists them; None: none was priced."""
    model_calls: int = 0
    unpriced_calls: int = 0
    """Model calls with no price, left out of `cost_usd`."""
    waiting_for: str | None = None
    """For a `waiting` run with a step asleep or waiting for an event: what, in a few
    words (`sleeping until <time>`, `event 'paid' with key 'A-1'`); see its waits."""

    @classmethod
    def costed(cls, info: RunInfo, cost: RunCost | None, workspace: str) -> RunItem:
        item = cls.of(info, workspace)
        assert isinstance(item, RunItem)
        if cost is not None:
            item.cost_usd, item.model_calls, item.unpriced_calls = (
                cost.cost_usd, cost.calls, cost.unpriced
            )  # fmt: skip
        return item


class RunPage(BaseModel):
    """A page of runs, newest first; pass `next_cursor` as `cursor` for the next one."""

    runs: list[RunItem]
    next_cursor: str | None
    """None: this is the last page."""


class JobOut(BaseModel):
    """One attempt of one step (of the run, or of a branch, loop or sub-flow in it)."""

    id: int
    run_id: str
    step_id: str
    attempt: int
    status: str
    run_at: float
    worker: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    error: dict[str, Any] | None

    @classmethod
    def of(cls, job: JobRow) -> JobOut:
        return cls(
            id=job.id, run_id=job.run_id, step_id=job.step_id, attempt=job.attempt,
            status=job.status, run_at=job.run_at, worker=job.worker, created_at=job.created_at,
            started_at=job.started_at, finished_at=job.finished_at, error=job.error,
        )  # fmt: skip


class LogOut(BaseModel):
    """One chunk of what a step printed."""

    id: int
    """Pass the last one read as `after` to read only later chunks."""
    run_id: str
    job_id: int
    stream: str
    """`stdout` or `stderr`."""
    body: str
    at: float

    @classmethod
    def of(cls, row: LogRow) -> LogOut:
        return cls(
            id=row.id, run_id=row.run_id, job_id=row.job_id, stream=row.stream, body=row.body,
            at=row.at,
        )  # fmt: skip


class UsageOut(BaseModel):
    """One model call of an AI step."""

    run_id: str
    step_id: str
    job_id: int
    attempt: int
    model: str
    provider: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = None
    """None: the model is not priced."""
    latency_ms: float
    error: str | None = None
    """None: the call succeeded."""
    experiment_id: str | None = None
    exposure_id: str | None = None
    at: float


class AgentOut(BaseModel):
    """The workspace agent a linked step's job ran."""

    run_id: str
    step_id: str
    job_id: int
    attempt: int
    path: str | None
    version: int | None
    """0: a draft."""
    draft: bool


class WaitOut(BaseModel):
    """What one unfinished step waits for (see `tidemill runs why`)."""

    kind: str
    """`approval`, `tool_call`, `question`, `budget`, `reconcile`, `children`, `queued`,
    `retry`, `running`, `stalled`, `concurrency` or `waiting`."""
    step: str | None
    run_id: str
    reason: str
    job_id: int | None = None
    approval_id: str | None = None
    """The wait to decide at `/api/approvals/{approval_id}/...`, for a person's decision."""
    approvers: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    since: float | None = None
    until: float | None = None
    then: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    children: list[WaitOut] = Field(default_factory=list)

    @classmethod
    def of(cls, wait: Wait) -> WaitOut:
        return cls(
            kind=wait.kind, step=wait.step, run_id=wait.run_id, reason=wait.reason,
            job_id=wait.job_id, approval_id=wait.approval_id, approvers=list(wait.approvers),
            commands=list(wait.commands), since=wait.since, until=wait.until, then=wait.then,
            details=dict(wait.details), children=[cls.of(c) for c in wait.children],
        )  # fmt: skip


# --- cursors ------------------------------------------------------------


def encode_cursor(info: RunInfo) -> str:
    """The opaque cursor after `info`: its `(created_at, id)`."""
    raw = json.dumps([info.created_at, info.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """The `(created_at, id)` a cursor holds; a 422 for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, run_id = json.loads(raw)
        if isinstance(created_at, bool) or not isinstance(created_at, int | float):
            raise TypeError(created_at)
        if not isinstance(run_id, str):
            raise TypeError(run_id)
        return float(created_at), run_id
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise RequestValidationError(
            [
                {
                    "loc": ("query", "cursor"),
                    "msg": "not a cursor of this API: pass a next_cursor as it was answered",
                    "type": "value_error",
                }
            ]
        ) from exc


# --- the routes ---------------------------------------------------------


async def _visible(who: Caller, state: ServerState, run_id: str) -> tuple[RunAccess, RunInfo]:
    """The run, when the caller may see it (else `RunNotFound`)."""
    who.require("runs", "read")
    # Both reads at once: the store runs them back to back, with one wait between.
    access, info = await asyncio.gather(RunAccess.of(who), state.engine.get(run_id))
    access.check_see(run_id, info.run_as, info.source)
    return access, info


@router.post("", response_model=RunOut, status_code=201)
async def submit(body: SubmitIn, who: SignedIn, state: State) -> RunOut:
    """Run the workspace flow at `path` as the caller; answers the queued run.

    The caller needs the viewer role on the flow (scope `runs:write` on its path).
    With `start_at`, the run waits (queued, holding no worker) until then.
    """
    who.require("runs", "write", body.path)
    run_id = await state.engine.submit_path(
        who.ws, body.path, body.inputs, draft=body.draft, memory_id=body.memory_id,
        start_at=body.start_at,
    )  # fmt: skip
    return RunOut.of(await state.engine.get(run_id), who.ws.name)


@router.get("", response_model=RunPage)
async def list_runs(
    who: SignedIn,
    state: State,
    status: ShownStatus | None = None,
    path: Annotated[str | None, Query(min_length=1, max_length=500)] = None,
    flow: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    path_prefix: Annotated[
        str | None, Query(min_length=3, max_length=500, pattern=r"^[a-z]/[^/]+(/.*)?$")
    ] = None,
    started_after: Annotated[float | None, Query(ge=0)] = None,
    started_before: Annotated[float | None, Query(ge=0)] = None,
    started_by: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(min_length=1, max_length=400)] = None,
) -> RunPage:
    """The top-level runs the caller may see, newest first, a page at a time.

    Filter by `status` (as shown), workspace `path`, `flow` name, `path_prefix`
    (a folder, `f/team/`, optionally with more of the path), submission time
    (`started_after` inclusive, `started_before` exclusive, in seconds since
    the epoch) and `started_by` (the user it runs as); pass the answer's
    `next_cursor` as `cursor` for the next page. Each run has its model cost.
    """
    who.require("runs", "read")
    before = None if cursor is None else decode_cursor(cursor)
    filters = RunFilters(path_prefix, started_after, started_before, started_by)
    access = await RunAccess.of(who)
    rows = await runs_page(
        state.engine, access.reach(), limit=limit, before=before, status=status, flow=flow,
        path=path, filters=filters,
    )  # fmt: skip
    next_cursor = encode_cursor(rows[-1][0]) if len(rows) == limit else None
    # The store filtered on what SQL can tell; the permission module has the last word.
    shown = [
        RunItem.costed(i, cost, access.workspace)
        for i, cost in rows
        if access.may_see(i.run_as, i.source)
    ]
    waiting = [item.id for item in shown if item.status == "waiting"]
    if waiting:
        lines = await waiting_for(state.engine, waiting)
        for item in shown:
            item.waiting_for = lines.get(item.id)
    return RunPage(runs=shown, next_cursor=next_cursor)


@router.get("/{run_id}", response_model=RunOut)
async def show(run_id: RunId, who: SignedIn, state: State) -> RunOut:
    """The run as it stands (its result once it succeeded), with its `inputs`."""
    access, info = await _visible(who, state, run_id)
    shown = RunOut.of(info, access.workspace)
    shown.inputs = await run_input(state.engine, run_id)
    return shown


@router.post("/{run_id}/cancel", response_model=RunOut)
async def cancel(run_id: RunId, who: SignedIn, state: State) -> RunOut:
    """Cancel the run: queued steps never start, running ones are stopped.

    For a workspace admin, who the run runs as, or a writer of its flow.
    """
    access, info = await _visible(who, state, run_id)
    access.check_act(run_id, info.run_as, info.source)
    return RunOut.of(await state.engine.cancel(run_id), access.workspace)


@router.post("/{run_id}/retry", response_model=RunOut)
async def retry(run_id: RunId, who: SignedIn, state: State) -> RunOut:
    """Run a failed run again from its failed steps (finished steps are kept).

    For a workspace admin, who the run runs as, or a writer of its flow.
    """
    access, info = await _visible(who, state, run_id)
    access.check_act(run_id, info.run_as, info.source)
    return RunOut.of(await state.engine.retry(run_id), access.workspace)


@router.get("/{run_id}/jobs", response_model=list[JobOut])
async def jobs(run_id: RunId, who: SignedIn, state: State) -> list[JobOut]:
    """Every job (step attempt) of the run and of its branches and loops, oldest first."""
    await _visible(who, state, run_id)
    return [JobOut.of(j) for j in await state.engine.jobs(run_id)]


@router.get("/{run_id}/logs", response_model=list[LogOut])
async def logs(
    run_id: RunId,
    who: SignedIn,
    state: State,
    after: After = 0,
) -> list[LogOut]:
    """What the run's steps printed, in order, after the chunk `after` (0: from the start)."""
    await _visible(who, state, run_id)
    return [LogOut.of(row) for row in await state.engine.logs(run_id, after=after)]


@router.get("/{run_id}/usage", response_model=list[UsageOut])
async def usage(run_id: RunId, who: SignedIn, state: State) -> list[UsageOut]:
    """Every model call of the run's AI steps (and of its branches, loops, sub-flows)."""
    await _visible(who, state, run_id)
    return [UsageOut.model_validate(row) for row in await state.engine.usage(run_id)]


@router.get("/{run_id}/agents", response_model=list[AgentOut])
async def agents(run_id: RunId, who: SignedIn, state: State) -> list[AgentOut]:
    """The workspace agents the run's linked steps ran, one record per job."""
    await _visible(who, state, run_id)
    return [AgentOut.model_validate(row) for row in await state.engine.linked_agents(run_id)]


@router.get("/{run_id}/waits", response_model=list[WaitOut])
async def waits(run_id: RunId, who: SignedIn, state: State) -> list[WaitOut]:
    """What each unfinished step of the run waits for (empty once it finished)."""
    await _visible(who, state, run_id)
    return [WaitOut.of(w) for w in await state.engine.waits(run_id)]


@router.get("/{run_id}/steps/{step_id}/transcript", response_model=list[Message])
async def transcript(
    run_id: RunId,
    step_id: Annotated[str, Path(min_length=1, max_length=200)],
    who: SignedIn,
    state: State,
) -> list[Message]:
    """The conversation of an `ai_agent` step (empty before it starts)."""
    await _visible(who, state, run_id)
    return await state.engine.transcript(run_id, step_id)
