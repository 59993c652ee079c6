"""Turning a resume's decisions into journal events, after checking every one."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from pydantic import JsonValue

from tidemill.agents.journal import ApprovalDecided, ThreadState
from tidemill.errors import ApprovalError, ToolArgumentsError
from tidemill.tools import ToolRegistry
from tidemill.types import Decision

__all__ = ["check_flags", "decision_events", "decisions_from_flags"]


def check_flags(decisions: Mapping[str, Decision] | None, approved: bool | None) -> None:
    """Refuse a resume given both `decisions=` and `approved=`.

    Raises:
        ApprovalError: When both are given.
    """
    if decisions is not None and approved is not None:
        raise ApprovalError(
            "Pass decisions= or approved=, not both.",
            hint="decisions= decides calls one by one; approved= decides them all.",
        )


def decisions_from_flags(
    state: ThreadState,
    *,
    approved: bool,
    feedback: str,
    edited_arguments: Mapping[str, dict[str, JsonValue]] | None,
) -> dict[str, Decision]:
    """One decision for every pending call: the `approved=` shorthand."""
    edits = dict(edited_arguments or {})
    if not approved and edits:
        raise ApprovalError(
            "edited_arguments were given with approved=False.",
            hint="Edited arguments only apply to approved calls.",
        )
    if approved:
        return {cid: Decision.approve(edits.get(cid)) for cid in [*state.pending, *edits]}
    return {cid: Decision.reject(feedback) for cid in state.pending}


def decision_events(
    state: ThreadState, decisions: Mapping[str, Decision], tools: ToolRegistry
) -> list[ApprovalDecided]:
    """Check `decisions` against the thread and return the events that record them.

    Raises:
        ApprovalError: When the thread is not paused, a decision names a call
            that is not pending, or edited arguments fail the tool's schema.
    """
    if state.status != "paused":
        raise ApprovalError(
            f"Thread {state.thread_id!r} is not waiting for approval (it is {state.status}).",
            hint="Only a paused thread takes decisions; see pending_approvals().",
            context={"thread_id": state.thread_id, "status": state.status},
        )
    if not decisions:
        raise ApprovalError(
            "No decisions were given.",
            hint="Pass decisions={call_id: Decision.approve()} for the pending calls.",
        )
    unknown = [cid for cid in decisions if cid not in state.pending]
    if unknown:
        raise ApprovalError(
            f"No pending call has the id {', '.join(map(repr, unknown))} "
            "(it may have been decided already).",
            hint="Decide the pending calls: "
            + ", ".join(f"{c.name} ({cid})" for cid, c in state.pending.items()),
            context={"unknown": unknown, "pending": list(state.pending)},
        )
    now = datetime.now(UTC)
    events: list[ApprovalDecided] = []
    for call_id, call in state.pending.items():
        decision = decisions.get(call_id)
        if decision is None:
            continue
        tool = tools.get(call.name)
        if decision.action == "approve" and decision.arguments is not None and tool is not None:
            try:
                tool.validate(decision.arguments)
            except ToolArgumentsError as exc:
                raise ApprovalError(
                    f"The edited arguments for {call.name} ({call_id}) are invalid: "
                    + "; ".join(exc.errors),
                    hint="Fix the arguments; nothing was recorded.",
                    context={"call_id": call_id, "errors": exc.errors},
                ) from exc
        events.append(ApprovalDecided(call_id=call_id, decision=decision, decided_at=now))
    return events
