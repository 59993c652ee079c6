"""Human decisions on tool calls, and how they are recorded."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

__all__ = ["ApprovalRecord", "Decision"]


class Decision(BaseModel):
    """A person's decision on one tool call that waits for approval.

    Build one with `Decision.approve()` (optionally with edited arguments) or
    `Decision.reject(feedback)`.

    Examples:
        >>> Decision.approve().action
        'approve'
        >>> Decision.approve(arguments={"env": "staging"}).arguments
        {'env': 'staging'}
        >>> Decision.reject("Not on a Friday.").feedback
        'Not on a Friday.'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Literal["approve", "reject"]
    """`approve` lets the call run; `reject` answers it with an error result instead."""
    arguments: dict[str, JsonValue] | None = None
    """Replacement arguments: approve the intent, fix the parameters."""
    feedback: str | None = None
    """For a rejection: what the model is told, so it can try something else."""
    actor: str | None = None
    """Who decided, for the audit trail."""

    @classmethod
    def approve(
        cls, arguments: dict[str, JsonValue] | None = None, *, actor: str | None = None
    ) -> Decision:
        """Approve the call, as it is or with `arguments` in place of the model's."""
        return cls(action="approve", arguments=arguments, actor=actor)

    @classmethod
    def reject(cls, feedback: str = "", *, actor: str | None = None) -> Decision:
        """Reject the call; the model sees `feedback` as the call's error result."""
        return cls(action="reject", feedback=feedback or None, actor=actor)


class ApprovalRecord(BaseModel):
    """How one tool call's approval was decided, for the audit trail."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    """The id of the tool call that was decided."""
    tool: str
    """The name of the called tool."""
    outcome: Literal["approved", "edited", "rejected"]
    """Approved as asked, approved with other arguments (`edited`), or rejected."""
    arguments: dict[str, JsonValue]
    """The arguments the model asked for."""
    edited_arguments: dict[str, JsonValue] | None = None
    """The arguments the approver substituted, when the outcome is `edited`."""
    feedback: str | None = None
    """The decision's feedback; for a rejection, what the model was told."""
    actor: str | None = None
    """Who decided, when the decision named them."""
    decided_at: datetime
    """When the decision was recorded."""
