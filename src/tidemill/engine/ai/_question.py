"""Questions: an agent asks a person with the built-in tool `ask_person`, and waits.

With `questions` set on an `ai_agent` step, the model gets the tool
`ask_person(question)`. The tool needs approval, so a call pauses the agent
like any call awaiting a decision, but the step parks with an approval row of
kind `question`, whose `details` name the agent `session`, the `turn`, the
`request_id` (tool call id), the `expected_seq` and the `question`.

The answer follows the approvals' protocol (its approvers, its expiry, one
decision, the journal where the question left it). It is stored as an
approval of the call with the answer among its arguments, so the resumed
agent runs the tool, which returns the answer: the model reads it as the
call's result and is not asked again. An expired question is answered with
`NO_ANSWER`.
"""

from __future__ import annotations

from typing import Any

from tidemill.agents.journal import ThreadState
from tidemill.engine.ai._approvals import call_details, check_decision
from tidemill.store import ApprovalRow, Tx
from tidemill.tools import Tool, ToolContext
from tidemill.types import ToolCall

__all__ = [
    "ASK_TOOL",
    "NO_ANSWER",
    "ask_tool",
    "check_answer",
    "expired_answer",
    "question_details",
]

ASK_TOOL = "ask_person"
"""The name of the built-in tool that asks a person."""

NO_ANSWER = "No answer came: nobody answered this question within its timeout."
"""What the model reads when a question expired."""

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "description": "What to ask the person."}},
    "required": ["question"],
}


class _AskTool(Tool):
    """`ask_person`: its result is the answer a person gave (stored with the approval)."""

    def __init__(self) -> None:
        super().__init__(
            name=ASK_TOOL,
            description="Ask a person a question and wait for the answer.",
            parameters=_PARAMETERS,
            requires_approval=True,
        )

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
        """The answer recorded with the call's approval."""
        return str(arguments.get("answer") or NO_ANSWER)


def ask_tool() -> Tool:
    """The `ask_person` tool.

    Examples:
        >>> tool = ask_tool()
        >>> tool.name, tool.requires_approval
        ('ask_person', True)
    """
    return _AskTool()


def question_details(state: ThreadState, call: ToolCall) -> dict[str, Any]:
    """The `details` of the approval row asking the question of `call`.

    Examples:
        >>> state = ThreadState("t", seq=3, iterations=1)
        >>> call = ToolCall(id="c1", name="ask_person", arguments={"question": "Which?"})
        >>> details = question_details(state, call)
        >>> details["request_id"], details["expected_seq"], details["question"]
        ('c1', 3, 'Which?')
    """
    details = call_details(state, call, _PARAMETERS)
    details["question"] = str(call.arguments.get("question", ""))
    return details


def _with_answer(approval: ApprovalRow, text: str) -> dict[str, Any]:
    details = approval.details or {}
    return {**dict(details.get("arguments") or {}), "answer": text}


def check_answer(tx: Tx, approval: ApprovalRow, *, text: str, actor: str | None) -> dict[str, Any]:
    """Check an answer against the agent's journal; return the decision as stored.

    The approval's kind, status, expiry and actor are checked by the caller.

    Raises:
        ApprovalDecisionError: `mismatch` when the journal no longer stands
            where the question left it.
    """
    return check_decision(
        tx,
        approval,
        approve=True,
        actor=actor,
        comment=None,
        edited_arguments=_with_answer(approval, text),
    )


def expired_answer(approval: ApprovalRow) -> dict[str, Any]:
    """The decision stored when a question expires: the model reads `NO_ANSWER`.

    Examples:
        >>> row = ApprovalRow("a1", "r", "r", 1, "s", "", [], "reject", "pending", 0.0,
        ...     None, None, None, None, "question", {"arguments": {"question": "Q?"}})
        >>> expired_answer(row)["arguments"]["answer"] == NO_ANSWER
        True
    """
    return {
        "action": "approve",
        "arguments": _with_answer(approval, NO_ANSWER),
        "feedback": None,
        "actor": None,
    }
