"""Tool-call approvals: what an agent step's pause records, how a decision is checked.

When an agent step pauses because a tool call needs a person's decision, one
approval row of kind `tool_call` is stored per pending call. Its `details`
name exactly what is being decided: the agent session (thread id), the turn
(the model call that asked for it), the request id (the tool call's id), the
journal entry the pause was written at, the tool and its arguments, and the
schema edited arguments must meet. A decision is refused (`mismatch`) unless
the journal still stands where the pause left it with that call pending.
The decision is stored in `details["decision"]`; the worker that resumes the
step reads it back as the agent library's `Decision`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jsonschema.validators import validator_for

from tidemill.agents.checkpoint import decode_event
from tidemill.agents.journal import ThreadState
from tidemill.engine._journal import thread_id
from tidemill.errors import ApprovalDecisionError
from tidemill.store import ApprovalRow, Tx
from tidemill.types import Decision, ToolCall

__all__ = [
    "EXPIRED_FEEDBACK",
    "call_details",
    "call_message",
    "check_decision",
    "decisions_for",
    "expired_decision",
    "matching_state",
]

EXPIRED_FEEDBACK = "expired: nobody decided on this call within its approval timeout."
"""What the model is told when a tool call's approval expired."""


_KINDS = ("tool_call", "question")
"""Approval kinds whose decision is the agent library's `Decision` on a pending call."""


def call_details(
    state: ThreadState, call: ToolCall, parameters: Mapping[str, Any]
) -> dict[str, Any]:
    """The `details` of the approval row for one pending call of a paused thread.

    Examples:
        >>> state = ThreadState("tidemill:r1:agent", seq=4, iterations=2)
        >>> call = ToolCall(id="call_1", name="refund", arguments={"order": "A1"})
        >>> details = call_details(state, call, {"type": "object"})
        >>> details["session"], details["turn"], details["request_id"], details["expected_seq"]
        ('tidemill:r1:agent', 2, 'call_1', 4)
    """
    return {
        "session": state.thread_id,
        "turn": state.iterations,
        "request_id": call.id,
        "expected_seq": state.seq,
        "tool": call.name,
        "arguments": dict(call.arguments),
        "parameters": dict(parameters),
        "decision": None,
    }


def call_message(call: ToolCall) -> str:
    """The approval's one-line message: the call, as the model made it.

    Examples:
        >>> call_message(ToolCall(name="refund", arguments={"order": "A1", "amount": 20}))
        'refund {"order": "A1", "amount": 20}'
    """
    return f"{call.name} {json.dumps(call.arguments, ensure_ascii=False)}"


def _journal_state(tx: Tx, thread: str) -> ThreadState:
    state = ThreadState(thread)
    for seq, payload in tx.journal(thread):
        state.apply(seq, decode_event(payload, thread_id=thread, seq=seq))
    return state


def matching_state(
    tx: Tx,
    approval: ApprovalRow,
    *,
    holds: Callable[[ThreadState, str], bool],
    expected: str,
) -> ThreadState:
    """The agent's journal state, if it still stands where `approval`'s pause left it.

    It must be the step's session, at the expected journal entry and turn,
    and `holds(state, request_id)` must be true (the call still pending,
    still unfinished, ...; `expected` says which, for the error).

    Raises:
        ApprovalDecisionError: `mismatch`, saying where the journal is now.
    """
    details = approval.details or {}
    session = details.get("session")
    thread = thread_id(approval.run_id, approval.step_id)
    state = _journal_state(tx, thread) if session == thread else None
    request = str(details.get("request_id"))
    if (
        state is None
        or state.seq != details.get("expected_seq")
        or state.iterations != details.get("turn")
        or not holds(state, request)
    ):
        where = "missing" if state is None else f"at entry {state.seq}"
        raise ApprovalDecisionError(
            f"Approval {approval.id} no longer matches its agent: it expects session "
            f"{session!r}, turn {details.get('turn')}, request {request!r} {expected} at "
            f"journal entry {details.get('expected_seq')}; the journal is {where}.",
            reason="mismatch",
            hint="The agent moved on; list the pending approvals again.",
        )
    return state


def check_decision(
    tx: Tx,
    approval: ApprovalRow,
    *,
    approve: bool,
    actor: str | None,
    comment: str | None,
    edited_arguments: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Check a decision on a tool-call approval against the agent's journal; return it as stored.

    The approval's status, expiry and actor are checked by the caller.

    Raises:
        ApprovalDecisionError: `mismatch` when the journal no longer stands
            where the pause left it (another entry was written, the call is
            no longer pending, the turn differs); `arguments` when edited
            arguments are given with a rejection or fail the tool's schema.
    """
    details = approval.details or {}
    matching_state(
        tx, approval, holds=lambda state, call: call in state.pending, expected="pending"
    )
    if edited_arguments is not None:
        if not approve:
            raise ApprovalDecisionError(
                "Edited arguments apply to an approval, not a rejection.", reason="arguments"
            )
        schema = details.get("parameters") or {"type": "object"}
        problems = sorted(
            f"{'.'.join(str(p) for p in error.absolute_path) or '(arguments)'}: {error.message}"
            for error in validator_for(schema)(schema).iter_errors(dict(edited_arguments))
        )
        if problems:
            raise ApprovalDecisionError(
                f"The edited arguments of {details.get('tool')} are invalid: {'; '.join(problems)}",
                reason="arguments",
                hint="Fix the arguments; nothing was recorded.",
            )
    return {
        "action": "approve" if approve else "reject",
        "arguments": None if edited_arguments is None else dict(edited_arguments),
        "feedback": comment,
        "actor": actor,
    }


def expired_decision() -> dict[str, Any]:
    """The decision stored when a tool call's approval expires: a rejection the model sees.

    Examples:
        >>> expired_decision()["action"]
        'reject'
    """
    return {"action": "reject", "arguments": None, "feedback": EXPIRED_FEEDBACK, "actor": None}


def decisions_for(rows: Iterable[ApprovalRow], state: ThreadState) -> dict[str, Decision]:
    """The decided tool-call approvals of a job that answer calls still pending in `state`.

    Examples:
        >>> from tidemill.agents.journal import ApprovalRequested
        >>> state = ThreadState("t")
        >>> state.apply(1, ApprovalRequested(calls=(ToolCall(id="c1", name="pay"),)))
        >>> row = ApprovalRow("a1", "r", "r", 1, "s", "", [], "reject", "rejected", 0.0,
        ...     None, 1.0, "ann", "no", "tool_call",
        ...     {"request_id": "c1", "decision": {"action": "reject", "feedback": "no"}})
        >>> decisions_for([row], state)["c1"].feedback
        'no'
    """
    found: dict[str, Decision] = {}
    for row in rows:
        details = row.details or {}
        decision = details.get("decision")
        request = details.get("request_id")
        if row.kind not in _KINDS or not decision or request not in state.pending:
            continue
        if decision.get("action") == "approve":
            arguments = decision.get("arguments")
            found[request] = Decision.approve(arguments, actor=decision.get("actor"))
        else:
            found[request] = Decision.reject(
                decision.get("feedback") or "", actor=decision.get("actor")
            )
    return found
