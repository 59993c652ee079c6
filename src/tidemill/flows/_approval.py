"""`Approval`: a step that waits for a person to approve or reject."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tidemill.flows._base import StepKind
from tidemill.flows._duration import Duration

__all__ = ["Approval"]


class Approval(StepKind):
    """Pause the run until someone approves or rejects.

    Examples:
        >>> Approval(message="Refund?", timeout="3d", approvers=["alice"]).timeout
        259200.0
    """

    message: str = ""
    """What the approver is asked."""

    timeout: Duration | None = None
    """How long to wait for a decision (seconds, or `30m`, `3d`); None waits forever."""

    approvers: list[str] = Field(default_factory=list)
    """Who may decide: users, or `g/<group>` for every member of a workspace group; empty
    means anyone."""

    on_timeout: Literal["reject", "approve"] = "reject"
    """The decision taken when the timeout passes."""

    allow_self_approval: bool = True
    """Whether the user the run runs as (who started it) may decide it.

    False: someone else must (four eyes), even when that user is one of the
    `approvers` or a workspace admin."""
