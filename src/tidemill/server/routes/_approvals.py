"""Approvals and the other waits for a person: list what the caller may decide, and decide.

An approval step is approved or rejected; an agent's tool call is approved
(maybe with edited arguments) or rejected with feedback; an agent's question
is answered; a budget is extended or stopped; a tool call cut short by a
crash is reconciled. The decider is always the signed-in caller, whom the
wait must allow (`tidemill.server._run_access`); the engine checks again.
An approver `g/<group>` allows every member of the group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, Field

from tidemill.engine._run_pages import approval_with_run, approvals_with_runs
from tidemill.errors import ApprovalDecisionError, PermissionDenied
from tidemill.server._caller import Caller, SignedIn, requires
from tidemill.server._run_access import RunAccess, run_path
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._body import Body
from tidemill.store import ApprovalRow, RunRow

__all__ = ["router"]

router = APIRouter(
    prefix="/api/approvals", tags=["approvals"], dependencies=[requires("approvals")]
)

State = Annotated[ServerState, Depends(state_of)]
ApprovalId = Annotated[str, Path(min_length=1, max_length=100)]
Comment = Annotated[str | None, Field(default=None, max_length=20_000)]


class ApprovalOut(BaseModel):
    """A wait for a person's decision."""

    id: str
    kind: str
    """`step` (an approval step), or an agent step's: `tool_call`, `question`, `budget`,
    `reconcile`."""
    run_id: str
    """The run (or the branch, loop or sub-flow run in it) the step belongs to."""
    root_id: str
    """The top-level run (`/api/runs/{root_id}`)."""
    step_id: str
    path: str | None
    """The workspace flow the run ran."""
    run_as: str | None
    """Who the run runs as (who started it)."""
    message: str
    approvers: list[str]
    """Who may decide it: users, and `g/<group>` for a group's members; empty: whoever may see
    the run."""
    allow_self_approval: bool
    """False: `run_as` may not decide it."""
    status: str
    """`pending`, `approved`, `rejected`, `expired` or `cancelled`."""
    on_timeout: str
    created_at: float
    expires_at: float | None
    decided_at: float | None
    decided_by: str | None
    comment: str | None
    details: dict[str, Any] | None
    """What an agent's request is about: the tool and its arguments, the question, the bound."""

    @classmethod
    def of(cls, row: ApprovalRow, run: RunRow, workspace: str) -> ApprovalOut:
        details = row.details or {}
        return cls(
            id=row.id, kind=row.kind, run_id=row.run_id, root_id=row.root_id,
            step_id=row.step_id, path=run_path(workspace, run.source), run_as=run.run_as,
            message=row.message, approvers=list(row.approvers),
            allow_self_approval=details.get("allow_self_approval") is not False,
            status=row.status, on_timeout=row.on_timeout, created_at=row.created_at,
            expires_at=row.expires_at, decided_at=row.decided_at, decided_by=row.decided_by,
            comment=row.comment, details=row.details,
        )  # fmt: skip


class ApproveIn(Body):
    """Approve, with a comment; a tool call's approval may replace the model's arguments."""

    comment: Comment = None
    edited_arguments: dict[str, Any] | None = None
    """For a tool call: the arguments to call it with instead (checked against its schema)."""


class RejectIn(Body):
    """Reject; for a tool call, the comment is the model's feedback."""

    comment: Comment = None


class AnswerIn(Body):
    """The answer to an agent's question."""

    text: str = Field(min_length=1, max_length=100_000)


class ExtendIn(Body):
    """A budget's new limit, larger than the current one; null stops the agent."""

    new_limit: int | None = Field(ge=1, le=10**12)


class ReconcileIn(Body):
    """Whether a tool call cut short by a crash took effect, and what it answered if so."""

    happened: bool
    result: str | None = Field(default=None, max_length=100_000)
    """For a call that happened: its result, as the model is told (default: it completed)."""


def _naming(access: RunAccess, row: ApprovalRow) -> ApprovalRow:
    """`row` as the permission checks see it, with the caller named in a group's stead.

    The caller is named when a `g/<group>` of its approvers is one of the
    caller's groups in the served workspace.
    """
    groups = access.rules.principal.groups
    if access.user in row.approvers or not any(
        name.startswith("g/") and name[2:] in groups for name in row.approvers
    ):
        return row
    return dataclasses.replace(row, approvers=[*row.approvers, access.user])


async def _decide(
    who: Caller,
    state: ServerState,
    approval_id: str,
    decide: Callable[[str | None], Awaitable[ApprovalRow]],
) -> ApprovalOut:
    """Decide a wait as the caller, once it may (else 404 or 403), and answer the decided wait.

    `decide(actor)` asks the engine, which checks the wait again: who may
    decide is a permission (403); the engine's other refusals stay 409s.
    """
    who.require("approvals", "write")
    access = await RunAccess.of(who)
    approval, run = await approval_with_run(state.engine, approval_id)
    access.check_decide(_naming(access, approval), run.run_as, run.source)
    try:
        row = await decide(who.user)
    except ApprovalDecisionError as exc:
        if exc.reason in ("actor", "self"):
            raise PermissionDenied(exc.message, hint=exc.hint, context=exc.context) from exc
        raise
    return ApprovalOut.of(row, run, access.workspace)


_PAGE = 500
"""How many approvals `GET /api/approvals` reads at a time, as it looks for the caller's."""


@router.get("", response_model=list[ApprovalOut])
async def list_approvals(
    who: SignedIn,
    state: State,
    status: Literal["pending", "approved", "rejected", "expired", "cancelled", "any"] = "pending",
    run_id: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[ApprovalOut]:
    """Waits for a person, oldest first.

    By default the pending ones the caller may decide; with `status`, decided
    ones of runs the caller sees (`any`: both); `run_id` keeps one run's.
    """
    who.require("approvals", "read")
    access = await RunAccess.of(who)
    found: list[ApprovalOut] = []
    after: tuple[float, str] | None = None
    while len(found) < limit:  # a page at a time, until the caller's are found
        rows = await approvals_with_runs(
            state.engine, status=None if status == "any" else status, run_id=run_id,
            limit=_PAGE, after=after,
        )  # fmt: skip
        for row, run in rows:
            if access.may_list(_naming(access, row), run.run_as, run.source):
                found.append(ApprovalOut.of(row, run, access.workspace))
        if len(rows) < _PAGE:
            break
        after = (rows[-1][0].created_at, rows[-1][0].id)
    return found[:limit]


@router.get("/{approval_id}", response_model=ApprovalOut)
async def show_approval(approval_id: ApprovalId, who: SignedIn, state: State) -> ApprovalOut:
    """One wait (of a run the caller sees, or that names the caller an approver)."""
    who.require("approvals", "read")
    access = await RunAccess.of(who)
    row, run = await approval_with_run(state.engine, approval_id)
    if access.user not in _naming(access, row).approvers:
        access.check_see(row.root_id, run.run_as, run.source)
    return ApprovalOut.of(row, run, access.workspace)


@router.post("/{approval_id}/approve", response_model=ApprovalOut)
async def approve(
    approval_id: ApprovalId, body: ApproveIn, who: SignedIn, state: State
) -> ApprovalOut:
    """Approve: the approval step succeeds (or the agent's tool call runs) and the run goes on."""
    return await _decide(
        who, state, approval_id,
        lambda actor: state.engine.approve(
            approval_id, actor=actor, comment=body.comment, edited_arguments=body.edited_arguments
        ),
    )  # fmt: skip


@router.post("/{approval_id}/reject", response_model=ApprovalOut)
async def reject(
    approval_id: ApprovalId, body: RejectIn, who: SignedIn, state: State
) -> ApprovalOut:
    """Reject: the approval step fails with its run (an agent is told, and goes on)."""
    return await _decide(
        who, state, approval_id,
        lambda actor: state.engine.reject(approval_id, actor=actor, comment=body.comment),
    )  # fmt: skip


@router.post("/{approval_id}/answer", response_model=ApprovalOut)
async def answer(
    approval_id: ApprovalId, body: AnswerIn, who: SignedIn, state: State
) -> ApprovalOut:
    """Answer an agent's question (kind `question`); the agent goes on with the answer."""
    return await _decide(
        who, state, approval_id,
        lambda actor: state.engine.answer(approval_id, body.text, actor=actor),
    )  # fmt: skip


@router.post("/{approval_id}/extend", response_model=ApprovalOut)
async def extend(
    approval_id: ApprovalId, body: ExtendIn, who: SignedIn, state: State
) -> ApprovalOut:
    """Decide a budget (kind `budget`): raise its limit to `new_limit`, or stop with null."""
    return await _decide(
        who, state, approval_id,
        lambda actor: state.engine.extend(approval_id, body.new_limit, actor=actor),
    )  # fmt: skip


@router.post("/{approval_id}/reconcile", response_model=ApprovalOut)
async def reconcile(
    approval_id: ApprovalId, body: ReconcileIn, who: SignedIn, state: State
) -> ApprovalOut:
    """Say whether a tool call cut short by a crash took effect (kind `reconcile`)."""
    return await _decide(
        who, state, approval_id,
        lambda actor: state.engine.reconcile(
            approval_id, body.happened, actor=actor, result=body.result
        ),
    )  # fmt: skip
