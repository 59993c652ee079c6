"""`AgentPause`: an agent step waits for decisions on some of its tool calls.

It is the approval plan of an `ai_agent` step. The worker records it in one
transaction: the step's usage so far, the job parked as `waiting`, and one
approval row per request: of kind `tool_call` per pending call (`question`
for a call of `ask_person`), or of kind
`reconcile` per call of a non-idempotent tool a crashed worker left
unfinished. Once every one of them is decided (or expired), the job is
queued again and a worker resumes the agent with the decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tidemill.agents.journal import ThreadState
from tidemill.engine._step_env import ApprovalPlan
from tidemill.engine.ai._approvals import call_details, call_message
from tidemill.engine.ai._budget import budget_details
from tidemill.engine.ai._question import ASK_TOOL, question_details
from tidemill.engine.ai._reconcile import reconcile_details, reconcile_message
from tidemill.flows import AIAgent
from tidemill.types import ToolCall

__all__ = ["AgentPause", "ToolCallRequest", "budget_pause", "pause_for", "reconcile_pause"]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One pending tool call, as its approval row records it.

    Attributes:
        message: The call in one line (tool name and arguments).
        approvers: Who may decide it; empty means anyone.
        details: The session, turn, request id, expected journal entry, tool,
            arguments and argument schema (see `call_details`).
        kind: The approval's kind: `tool_call` (may it run?), `question` (a
            call of `ask_person`, see `_question`), or `reconcile` (did a
            call cut short by a crash take effect? see `_reconcile`).
    """

    message: str
    approvers: list[str]
    details: dict[str, Any]
    kind: str = "tool_call"


@dataclass(frozen=True, slots=True)
class AgentPause(ApprovalPlan):
    """An agent step's pause: the calls to decide, and what the step spent and printed so far."""

    requests: tuple[ToolCallRequest, ...] = ()
    usage: tuple[dict[str, Any], ...] = ()
    logs: tuple[tuple[str, str], ...] = field(default=())


def _question(state: ThreadState, call: ToolCall, agent: AIAgent) -> ToolCallRequest:
    """The request for a call of `ask_person`: a question to the agent's `questions.approvers`."""
    details = question_details(state, call)
    approvers = [] if agent.questions is None else list(agent.questions.approvers)
    return ToolCallRequest(details["question"], approvers, details, kind="question")


def pause_for(
    state: ThreadState,
    agent: AIAgent,
    schemas: Mapping[str, Mapping[str, Any]],
    *,
    usage: tuple[dict[str, Any], ...] = (),
    logs: tuple[tuple[str, str], ...] = (),
) -> AgentPause:
    """The pause of a thread waiting for decisions on `state.pending`.

    Examples:
        >>> from tidemill.agents.journal import ApprovalRequested
        >>> from tidemill.types import ToolCall
        >>> agent = AIAgent(model="fake", approval_timeout=60, tools=[
        ...     {"name": "pay", "script": "def main(n: int): ...", "approvers": ["ann"]}])
        >>> state = ThreadState("t")
        >>> state.apply(1, ApprovalRequested(calls=(ToolCall(id="c1", name="pay"),)))
        >>> pause = pause_for(state, agent, {"pay": {"type": "object"}})
        >>> pause.timeout, pause.requests[0].approvers, pause.requests[0].details["expected_seq"]
        (60.0, ['ann'], 1)
    """
    approvers = {tool.name: list(tool.approvers) for tool in agent.tools}
    requests = tuple(
        _question(state, call, agent)
        if call.name == ASK_TOOL and agent.questions is not None
        else ToolCallRequest(
            call_message(call),
            approvers.get(call.name, []),
            call_details(state, call, schemas.get(call.name, {"type": "object"})),
        )
        for call in state.pending.values()
    )
    first = requests[0].message if requests else ""
    return AgentPause(
        message=first,
        approvers=sorted({name for request in requests for name in request.approvers}),
        timeout=agent.approval_timeout,
        on_timeout="reject",
        requests=requests,
        usage=usage,
        logs=logs,
    )


def reconcile_pause(
    state: ThreadState,
    agent: AIAgent,
    calls: Iterable[ToolCall],
    *,
    usage: tuple[dict[str, Any], ...] = (),
    logs: tuple[tuple[str, str], ...] = (),
) -> AgentPause:
    """The pause asking whether each of `calls` (cut short by a crash) took effect.

    Examples:
        >>> agent = AIAgent(model="fake", approval_timeout=60, tools=[
        ...     {"name": "pay", "script": "def main(): ...", "approvers": ["ann"]}])
        >>> state = ThreadState("t", seq=3, iterations=1, attempts={"c1": 1})
        >>> pause = reconcile_pause(state, agent, [ToolCall(id="c1", name="pay")])
        >>> request = pause.requests[0]
        >>> request.kind, request.approvers, request.message
        ('reconcile', ['ann'], 'Did this call take effect? pay {}')
    """
    approvers = {tool.name: list(tool.approvers) for tool in agent.tools}
    requests = tuple(
        ToolCallRequest(
            reconcile_message(call),
            approvers.get(call.name, []),
            reconcile_details(state, call),
            kind="reconcile",
        )
        for call in calls
    )
    return AgentPause(
        message=requests[0].message if requests else "",
        approvers=sorted({name for request in requests for name in request.approvers}),
        timeout=agent.approval_timeout,
        on_timeout="reject",
        requests=requests,
        usage=usage,
        logs=logs,
    )


def budget_pause(
    state: ThreadState,
    agent: AIAgent,
    bound: str,
    limit: float,
    used: float,
    *,
    usage: tuple[dict[str, Any], ...] = (),
    logs: tuple[tuple[str, str], ...] = (),
) -> AgentPause:
    """The pause asking for more of a used-up bound (kind `budget`, see `_budget`).

    Its approvers are the union of the tools' approvers; none means anyone.

    Examples:
        >>> agent = AIAgent(model="fake", approval_timeout=60)
        >>> pause = budget_pause(ThreadState("t", seq=2), agent, "max_requests", 2, 2)
        >>> pause.requests[0].kind, pause.requests[0].details["limit"]
        ('budget', 2)
    """
    approvers = sorted({name for tool in agent.tools for name in tool.approvers})
    message = f"The agent used its {bound} limit of {limit} ({used} used); extend it or stop."
    request = ToolCallRequest(
        message, approvers, budget_details(state, bound, limit, used), kind="budget"
    )
    return AgentPause(
        message=message,
        approvers=approvers,
        timeout=agent.approval_timeout,
        on_timeout="reject",
        requests=(request,),
        usage=usage,
        logs=logs,
    )
