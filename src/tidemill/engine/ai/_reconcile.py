"""Reconciliation: a person says whether a non-idempotent tool call cut short by a crash ran.

When a worker dies between a tool call's start and its result, the agent's
journal holds a `ToolStarted` without a `ToolFinished`. A call of an
idempotent tool then simply runs again with the same idempotency key. A call
of a tool with `idempotent: false` does not: the step parks with one approval
row of kind `reconcile` per such call, whose `details` name the agent
`session` (thread id), the `turn`, the `request_id` (tool call id), the
`attempt` that was cut short, the `expected_seq` (the journal entry the
question was asked at), the `tool`, its `arguments` and the `question`.

The answer follows the approvals' protocol (its approvers, its expiry, one
decision, the journal where the question left it) and is stored in
`details["decision"]` as `{"happened": ..., "result": ..., "actor": ...}`.
When the step resumes, a call that happened is recorded as finished with
that result (the model sees it; the tool does not run again); a call that
did not happen runs again, once, with the same idempotency key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tidemill.agents.journal import ThreadState, ToolFinished
from tidemill.engine.ai._approvals import call_message, matching_state
from tidemill.errors import ApprovalDecisionError
from tidemill.flows import AIAgent
from tidemill.store import ApprovalRow, Tx
from tidemill.types import ToolCall, ToolResult

__all__ = [
    "QUESTION",
    "check_reconcile",
    "confirmed_results",
    "reconcile_answers",
    "reconcile_details",
    "reconcile_message",
    "unsafe_in_flight",
]

QUESTION = "Did this call take effect?"
"""What a reconciliation asks."""


def unsafe_in_flight(state: ThreadState, agent: AIAgent) -> list[ToolCall]:
    """Calls started and never finished whose tool is not idempotent, as they ran.

    Examples:
        >>> from tidemill.agents.journal import ToolStarted
        >>> agent = AIAgent(model="fake", tools=[
        ...     {"name": "pay", "script": "def main(): ...", "idempotent": False}])
        >>> state = ThreadState("t")
        >>> call = ToolCall(id="c1", name="pay")
        >>> state.open_calls["c1"] = call
        >>> state.apply(2, ToolStarted(call=call))
        >>> [c.id for c in unsafe_in_flight(state, agent)]
        ['c1']
    """
    unsafe = {tool.name for tool in agent.tools if not tool.idempotent and tool.mcp is None}
    servers = tuple(f"{tool.name}__" for tool in agent.tools if not tool.idempotent and tool.mcp)
    return [
        state.approved.get(call_id, call)
        for call_id, call in state.open_calls.items()
        if call_id in state.attempts and (call.name in unsafe or call.name.startswith(servers))
    ]


def reconcile_details(state: ThreadState, call: ToolCall) -> dict[str, Any]:
    """The `details` of the reconciliation asking whether `call` took effect.

    Examples:
        >>> state = ThreadState("t", seq=5, iterations=2, attempts={"c1": 1})
        >>> details = reconcile_details(state, ToolCall(id="c1", name="pay"))
        >>> details["expected_seq"], details["attempt"], details["question"]
        (5, 1, 'Did this call take effect?')
    """
    return {
        "session": state.thread_id,
        "turn": state.iterations,
        "request_id": call.id,
        "attempt": state.attempts.get(call.id, 1),
        "expected_seq": state.seq,
        "tool": call.name,
        "arguments": dict(call.arguments),
        "question": QUESTION,
        "decision": None,
    }


def reconcile_message(call: ToolCall) -> str:
    """The reconciliation's one-line message: the question, and the call.

    Examples:
        >>> reconcile_message(ToolCall(name="pay", arguments={"n": 1}))
        'Did this call take effect? pay {"n": 1}'
    """
    return f"{QUESTION} {call_message(call)}"


def check_reconcile(
    tx: Tx, approval: ApprovalRow, *, happened: bool, actor: str | None, result: str | None
) -> dict[str, Any]:
    """Check an answer to a reconciliation against the agent's journal; return it as stored.

    The approval's kind, status, expiry and actor are checked by the caller.

    Raises:
        ApprovalDecisionError: `mismatch` when the journal no longer stands
            where the question left it (another entry was written, the call
            finished, the turn differs); `result` when a result is given for
            a call that did not happen.
    """
    attempt = (approval.details or {}).get("attempt")

    def unfinished(state: ThreadState, call: str) -> bool:  # the attempt the question was about
        return call in state.open_calls and state.attempts.get(call) == attempt

    matching_state(tx, approval, holds=unfinished, expected="unfinished")
    if result is not None and not happened:
        raise ApprovalDecisionError(
            "A result applies to a call that happened; one that did not happen runs again.",
            reason="result",
        )
    if result is None and happened:
        result = f"the call completed (confirmed by {actor or 'an unnamed person'})"
    return {"happened": happened, "result": result, "actor": actor}


def reconcile_answers(
    rows: Iterable[ApprovalRow], state: ThreadState
) -> dict[str, Mapping[str, Any]]:
    """The answered reconciliations of a job for calls still unfinished, by call id.

    An answer counts for the attempt it was asked about: a call that ran
    again and was cut short again is asked about again.

    Examples:
        >>> state = ThreadState("t", attempts={"c1": 1})
        >>> row = ApprovalRow("a1", "r", "r", 1, "s", "", [], "reject", "approved", 0.0,
        ...     None, 1.0, "ann", None, "reconcile",
        ...     {"session": "t", "request_id": "c1", "attempt": 1,
        ...      "decision": {"happened": True, "result": "done", "actor": "ann"}})
        >>> reconcile_answers([row], state)["c1"]["result"]
        'done'
    """
    found: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        details = row.details or {}
        decision = details.get("decision")
        request = details.get("request_id")
        if (
            row.kind != "reconcile"
            or not decision
            or details.get("session") != state.thread_id
            or request is None
            or state.attempts.get(request) != details.get("attempt")
        ):
            continue
        found[request] = decision
    return found


def confirmed_results(
    calls: Iterable[ToolCall], answers: Mapping[str, Mapping[str, Any]]
) -> list[ToolFinished]:
    """The results to journal for the calls a person confirmed happened.

    Examples:
        >>> answers = {"c1": {"happened": True, "result": "paid"}, "c2": {"happened": False}}
        >>> calls = [ToolCall(id="c1", name="pay"), ToolCall(id="c2", name="pay")]
        >>> [event.result.content for event in confirmed_results(calls, answers)]
        ['paid']
    """
    events = []
    for call in calls:
        answer = answers.get(call.id)
        if answer is None or not answer.get("happened"):
            continue
        content = str(answer.get("result") or "the call completed")
        events.append(
            ToolFinished(result=ToolResult(call_id=call.id, name=call.name, content=content))
        )
    return events
