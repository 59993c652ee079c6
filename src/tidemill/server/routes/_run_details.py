"""What a run executes and what its agent steps did, read apart from the run's list routes.

`GET /api/runs/{run_id}/flow`: its flow definition as stored with it.
`GET /api/runs/{run_id}/steps/{step_id}/journal`: an `ai_agent` step's
journal, each entry marked replayed (written by an earlier execution of the
step: before a pause, a crash or a takeover) or live.
`GET /api/runs/{run_id}/jobs/{job_id}`: one job with its step's inputs and
result as the job recorded them for showing, the secrets it resolved masked
(results are stored unmasked, for the steps after it; the run's result is
shown from the masked copies, `RunInfo.shown_result`).

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

from tidemill.engine._run_pages import job_view, run_definition
from tidemill.engine._step_journal import JournalEntry
from tidemill.server._caller import SignedIn, requires
from tidemill.server._run_access import run_path
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._params import BIGINT_MAX
from tidemill.server.routes._runs import JobOut, _visible

__all__ = ["JobDetailOut", "JournalEntryOut", "RunFlowOut", "router"]

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


class JournalEntryOut(BaseModel):
    """One event of an `ai_agent` step's journal."""

    seq: int
    """Its position in the step's thread (1, 2, ...)."""
    kind: str
    """`user_message`, `model_response`, `tool_started`, `tool_finished`,
    `approval_requested`, `approval_decided`, `finished`, `failed`, ..."""
    at: float
    """When it was written, in seconds since the epoch."""
    replayed: bool
    """Written by an earlier execution of the step than the latest one, which read
    it back from the journal instead of doing it again."""
    data: dict[str, Any]
    """The journal event as stored (its `kind`, and e.g. a model response's
    message and usage, a tool call and its result, an approval's decision)."""

    @classmethod
    def of(cls, entry: JournalEntry) -> JournalEntryOut:
        return cls(
            seq=entry.seq, kind=entry.kind, at=entry.at, replayed=entry.replayed, data=entry.data
        )


@router.get("/{run_id}/steps/{step_id}/journal", response_model=list[JournalEntryOut])
async def step_journal(
    run_id: Annotated[str, Path(min_length=1, max_length=100)],
    step_id: Annotated[str, Path(min_length=1, max_length=200)],
    who: SignedIn,
    state: Annotated[ServerState, Depends(state_of)],
) -> list[JournalEntryOut]:
    """An `ai_agent` step's journal entries, oldest first (empty before it starts).

    `replayed` marks an entry written before the latest execution of the
    step started (the latest claim of its latest job), which read it back.
    For whoever may see the run, as `GET /api/runs/{run_id}`.
    """
    await _visible(who, state, run_id)
    return [JournalEntryOut.of(entry) for entry in await state.engine.journal(run_id, step_id)]


class JobDetailOut(JobOut):
    """One job, with what its step was given and gave, the job's secrets masked."""

    inputs: dict[str, Any] | None = None
    """The inputs the step was called with, its `$var:`/`$res:` references resolved
    and each secret the job resolved shown as `***`. None: nothing was recorded (the
    job has not ended, was skipped, is of a container or approval step, or ended
    before this was recorded)."""
    result: Any = None
    """For a succeeded leaf step: its result, masked the same way."""


@router.get("/{run_id}/jobs/{job_id}", response_model=JobDetailOut)
async def job_detail(
    run_id: Annotated[str, Path(min_length=1, max_length=100)],
    job_id: Annotated[int, Path(ge=1, le=BIGINT_MAX)],
    who: SignedIn,
    state: Annotated[ServerState, Depends(state_of)],
) -> JobDetailOut:
    """A job of the run (or of its branches, loops, sub-flows), with its masked inputs and result.

    For whoever may see the run, as `GET /api/runs/{run_id}`; 404 for a job
    that is not the run's.
    """
    await _visible(who, state, run_id)
    job, shown = await job_view(state.engine, run_id, job_id)
    detail = JobDetailOut(**JobOut.of(job).model_dump())
    if isinstance(shown, dict):
        detail.inputs, detail.result = shown.get("inputs"), shown.get("result")
    return detail
