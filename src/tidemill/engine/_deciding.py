"""`Deciding`: `AsyncEngine`'s decisions on approvals, each audited in its transaction.

Approve or reject an approval step or an agent's tool call, answer an
agent's question, extend its budget, reconcile a call cut short by a crash;
and list the approval requests.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tidemill.engine._engine_core import EngineCore
from tidemill.engine.runs._decisions import audit_decision
from tidemill.engine.runs._transition import Transition
from tidemill.store import ApprovalRow

__all__ = ["Deciding"]


class Deciding(EngineCore):
    """The approval requests of the engine's runs, and the decisions on them."""

    async def approvals(
        self, run_id: str | None = None, *, status: str | None = "pending"
    ) -> list[ApprovalRow]:
        """Approval requests (pending ones by default), oldest first."""
        rows: list[ApprovalRow] = await self._transact(
            lambda tx: tx.approvals(status=status, root_id=run_id)
        )
        return rows

    async def approve(
        self,
        approval_id: str,
        *,
        actor: str | None = None,
        comment: str | None = None,
        edited_arguments: Mapping[str, Any] | None = None,
    ) -> ApprovalRow:
        """Approve: the approval step succeeds and the run goes on.

        For a tool call of an `ai_agent` step (kind `tool_call`), the call
        runs once every call of the pause is decided, with `edited_arguments`
        instead of the model's when given (checked against the tool's schema).

        Raises:
            ApprovalDecisionError: See `Transition.decide` (`reason` says why).
        """
        return await self._decide(approval_id, True, actor, comment, edited_arguments)

    async def reject(
        self, approval_id: str, *, actor: str | None = None, comment: str | None = None
    ) -> ApprovalRow:
        """Reject: the approval step fails, and with it the run.

        For a tool call of an `ai_agent` step, the call does not run: the
        model is told it was rejected, with `comment` as the feedback, and
        the agent goes on.
        """
        return await self._decide(approval_id, False, actor, comment, None)

    async def reconcile(
        self,
        approval_id: str,
        happened: bool,
        *,
        actor: str | None = None,
        result: str | None = None,
    ) -> ApprovalRow:
        """Answer a reconciliation (kind `reconcile`): did a call cut short by a crash take effect?

        A worker died while a call of a tool with `idempotent: false` ran, so
        the agent step waits for a person to say. `happened=True`: the call
        is recorded as finished with `result` (default: `the call completed
        (confirmed by <actor>)`), the model sees that, and it does not run
        again. `happened=False`: it runs again with the same idempotency key.

        Raises:
            ApprovalDecisionError: See `Transition.reconcile` (`reason` says why).
        """
        now = time.time()
        row: ApprovalRow = await self._transact(
            lambda tx: audit_decision(
                tx,
                Transition(tx, self.defs, now).reconcile(
                    approval_id, happened=happened, actor=actor, result=result
                ),
                "approval.reconcile",
                actor,
                happened=happened,
            )
        )
        self._wake_workers()
        return row

    async def answer(self, approval_id: str, text: str, *, actor: str | None = None) -> ApprovalRow:
        """Answer an agent's question (kind `question`, a call of `ask_person`).

        `text` becomes the result of the model's `ask_person` call; the agent
        goes on from there (nothing is asked again).

        Raises:
            ApprovalDecisionError: See `Transition.answer` (`reason` says why).
        """
        now = time.time()
        row: ApprovalRow = await self._transact(
            lambda tx: audit_decision(
                tx,
                Transition(tx, self.defs, now).answer(approval_id, text=text, actor=actor),
                "approval.answer",
                actor,
            )
        )
        self._wake_workers()
        return row

    async def extend(
        self, approval_id: str, new_limit: int | None, *, actor: str | None = None
    ) -> ApprovalRow:
        """Decide a budget approval (kind `budget`): raise the bound, or stop with None.

        A larger limit lets the agent continue from its journal; None fails
        the step with `LimitExceeded`.

        Raises:
            ApprovalDecisionError: See `Transition.extend` (`reason` says why).
        """
        now = time.time()
        row: ApprovalRow = await self._transact(
            lambda tx: audit_decision(
                tx,
                Transition(tx, self.defs, now).extend(
                    approval_id, new_limit=new_limit, actor=actor
                ),
                "approval.extend",
                actor,
                new_limit=new_limit,
            )
        )
        self._wake_workers()
        return row

    async def _decide(
        self,
        approval_id: str,
        approve: bool,
        actor: str | None,
        comment: str | None,
        edited_arguments: Mapping[str, Any] | None,
    ) -> ApprovalRow:
        now = time.time()
        row: ApprovalRow = await self._transact(
            lambda tx: audit_decision(
                tx,
                Transition(tx, self.defs, now).decide(
                    approval_id,
                    approve=approve,
                    actor=actor,
                    comment=comment,
                    edited_arguments=edited_arguments,
                ),
                "approval.approve" if approve else "approval.reject",
                actor,
                edited=edited_arguments is not None,
            )
        )
        self._wake_workers()
        return row
