"""Approvals: parking a job until people decide, and recording their decisions.

An approval step parks for one approval (`park_for_approval`); an agent step
for its pending tool calls, questions, budgets and reconciliations
(`park_for_tool_calls`). A decision (`decide`, `reconcile`, `answer`,
`extend`) or a timeout (`expire_approvals`) moves the run on: the approval
step succeeds or fails, the agent step is queued again once none of its
requests is pending. An approver is a user, or `g/<group>` for the members of
that group in the run's workspace. What a decision on an agent's request
must match in its journal is checked by the agent host (`tidemill.engine.ai`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tidemill.engine._ids import new_id
from tidemill.engine.ai._approvals import check_decision, expired_decision
from tidemill.engine.ai._budget import check_extend
from tidemill.engine.ai._question import check_answer, expired_answer
from tidemill.engine.ai._reconcile import check_reconcile
from tidemill.engine.runs._progress import Progress, lease_lost
from tidemill.errors import ApprovalDecisionError, LeaseLost, RunNotFound
from tidemill.store import ApprovalRow, JobRow, Tx
from tidemill.workspace import DEFAULT_WORKSPACE, record_audit
from tidemill.workspace._queries import Queries

if TYPE_CHECKING:
    from tidemill.engine.ai._pause import AgentPause

__all__ = ["Decisions", "audit_decision"]


class Decisions(Progress):
    """Park jobs for people's decisions; record the decisions and timeouts."""

    def park_for_approval(
        self,
        job: JobRow,
        *,
        message: str,
        approvers: list[str],
        timeout: float | None,
        on_timeout: str,
        allow_self_approval: bool = True,
    ) -> ApprovalRow:
        """Park an approval step's job until a person decides (or the timeout passes).

        `allow_self_approval=False` is kept in the approval's `details`: the
        run's `run_as` user may then not decide it (`_check_pending`).
        """
        run = self._fetch_locked(job.run_id)
        if run is None:
            raise RunNotFound(f"Run {job.run_id} is gone.")
        if not self.tx.park_job(job.id, job.epoch):
            raise LeaseLost(f"Job {job.id} ({job.step_id}) is no longer held.")
        approval = ApprovalRow(
            new_id(), run.id, run.root_id, job.id, job.step_id, message, approvers, on_timeout,
            "pending", self.now, None if timeout is None else self.now + timeout, None, None, None,
            details=None if allow_self_approval else {"allow_self_approval": False},
        )  # fmt: skip
        self.tx.insert_approval(approval)
        return approval

    def park_for_tool_calls(self, job: JobRow, pause: AgentPause) -> list[ApprovalRow]:
        """Park an agent step's job until its pending tool calls are decided.

        Records what the step spent and printed so far, then one approval row
        of kind `tool_call` per pending call. Raises `LeaseLost` when fenced.
        """
        run = self._fetch_locked(job.run_id)
        if run is None:
            raise RunNotFound(f"Run {job.run_id} is gone.")
        if not self.tx.park_job(job.id, job.epoch):
            raise lease_lost(job)
        if pause.logs:
            self.tx.append_logs(run.id, job.id, pause.logs, self.now)
        for usage in pause.usage:
            self.tx.insert_usage(run, job, usage, self.now)
        expires = None if pause.timeout is None else self.now + pause.timeout
        rows = []
        for request in pause.requests:
            approval = ApprovalRow(
                new_id(), run.id, run.root_id, job.id, job.step_id, request.message,
                request.approvers, pause.on_timeout, "pending", self.now, expires, None, None,
                None, request.kind, request.details,
            )  # fmt: skip
            self.tx.insert_approval(approval)
            rows.append(approval)
        return rows

    def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        actor: str | None,
        comment: str | None,
        edited_arguments: Mapping[str, Any] | None = None,
    ) -> ApprovalRow:
        """Record a person's decision and move the run on.

        A tool call's approval (kind `tool_call`) must still match the agent's
        journal; deciding it queues the agent step again once all its pending
        calls are decided. `edited_arguments` (approvals of tool calls only)
        replace the model's arguments.

        Raises:
            RunNotFound: No such approval.
            ApprovalDecisionError: A reconciliation (`kind`: see `reconcile`),
                already decided, expired, cancelled, `actor` is not one of its
                approvers, the agent moved on (`mismatch`), or the edited
                arguments are refused (`arguments`).
        """
        approval = self._approval(approval_id)
        other = _DECIDED_OTHERWISE.get(approval.kind)
        if other is not None:
            what, hint = other
            raise ApprovalDecisionError(
                f"Approval {approval_id} {what}, not approved or rejected.",
                reason="kind",
                hint=hint.format(id=approval_id),
            )
        self._check_pending(approval, actor)
        status = "approved" if approve else "rejected"
        if approval.kind == "tool_call":
            decision = check_decision(
                self.tx,
                approval,
                approve=approve,
                actor=actor,
                comment=comment,
                edited_arguments=edited_arguments,
            )
            self._resolve_tool_call(approval, status, actor, comment, decision)
        else:
            if edited_arguments is not None:
                raise ApprovalDecisionError(
                    f"Approval {approval_id} is an approval step's; only a tool call's "
                    "approval takes edited arguments.",
                    reason="arguments",
                )
            self._resolve(approval, status, actor, comment)
        approval.status, approval.decided_by, approval.comment = status, actor, comment
        return approval

    def _approval(self, approval_id: str) -> ApprovalRow:
        """An approval, locked; `RunNotFound` when there is none."""
        approval = self.tx.approval(approval_id, lock=True)
        if approval is None:
            raise RunNotFound(
                f"No approval {approval_id} in this store.",
                hint="List pending approvals with `tidemill approvals list`.",
            )
        return approval

    def _check_pending(self, approval: ApprovalRow, actor: str | None) -> None:
        """Refuse a decision on an approval that is not pending, expired, or not `actor`'s."""
        approval_id = approval.id
        if approval.status != "pending":
            reason = {"cancelled": "cancelled", "expired": "expired"}.get(
                approval.status, "decided"
            )
            raise ApprovalDecisionError(
                f"Approval {approval_id} is already {approval.status}"
                + (f" by {approval.decided_by}." if approval.decided_by else "."),
                reason=reason,
            )
        if approval.expires_at is not None and approval.expires_at <= self.now:
            raise ApprovalDecisionError(
                f"Approval {approval_id} expired; it is resolved by its on_timeout "
                f"({approval.on_timeout}).",
                reason="expired",
            )
        if approval.approvers and not self._is_approver(approval, actor):
            raise ApprovalDecisionError(
                f"{actor or 'An anonymous actor'} may not decide approval {approval_id}; "
                f"its approvers are {', '.join(approval.approvers)}.",
                reason="actor",
                hint="Decide as one of the approvers (--as NAME).",
            )
        if (approval.details or {}).get("allow_self_approval") is False:
            run = self.tx.run(approval.root_id)
            if run is not None and run.run_as is not None and actor == run.run_as:
                raise ApprovalDecisionError(
                    f"{actor} started run {approval.root_id} and may not decide its approval "
                    f"{approval_id}: the step {approval.step_id} forbids self-approval.",
                    reason="self",
                    hint="Ask another approver to decide it.",
                )

    def _is_approver(self, approval: ApprovalRow, actor: str | None) -> bool:
        """Whether `actor` is named in the approvers, or is a member of a `g/<group>` there.

        Groups are those of the workspace the run ran from (the default one for
        a run with no workspace); a disabled user is a member of none.
        """
        if actor is None:
            return False
        if actor in approval.approvers:
            return True
        groups = {name[2:] for name in approval.approvers if name.startswith("g/")}
        if not groups:
            return False
        run = self.tx.run(approval.root_id)
        workspace = str(((run.source if run else None) or {}).get("workspace") or DEFAULT_WORKSPACE)
        principal = Queries(self.tx, workspace).principal(actor)
        return principal is not None and not principal.disabled and bool(groups & principal.groups)

    def reconcile(
        self,
        approval_id: str,
        *,
        happened: bool,
        actor: str | None,
        result: str | None = None,
    ) -> ApprovalRow:
        """Answer a reconciliation: did a tool call cut short by a crash take effect?

        The call's journal must still stand where the question left it. The
        agent step is queued again once none of its questions is pending:
        a call that happened is recorded as finished with `result` (default:
        `the call completed (confirmed by <actor>)`) and not run again; a call
        that did not happen runs again with the same idempotency key.

        Raises:
            RunNotFound: No such approval.
            ApprovalDecisionError: Not a reconciliation (`kind`), already
                decided, expired, cancelled, `actor` is not one of its
                approvers, the agent moved on (`mismatch`), or a `result` for
                a call that did not happen (`result`).
        """
        approval = self._approval(approval_id)
        if approval.kind != "reconcile":
            what = _WHAT.get(approval.kind, "an approval step")
            raise ApprovalDecisionError(
                f"Approval {approval_id} is {what}, not a reconciliation.",
                reason="kind",
                hint=f"tidemill approvals answer {approval_id} --text TEXT"
                if approval.kind == "question"
                else f"tidemill approvals approve {approval_id} (or reject)",
            )
        self._check_pending(approval, actor)
        decision = check_reconcile(self.tx, approval, happened=happened, actor=actor, result=result)
        status = "approved" if happened else "rejected"
        comment = "it took effect" if happened else "it did not take effect"
        self._resolve_tool_call(approval, status, actor, comment, decision)
        approval.status, approval.decided_by, approval.comment = status, actor, comment
        return approval

    def answer(self, approval_id: str, *, text: str, actor: str | None) -> ApprovalRow:
        """Answer an agent's question (kind `question`); the answer is its call's result.

        The agent's journal must still stand where the question left it. The
        agent step is queued again once none of its requests is pending.

        Raises:
            RunNotFound: No such approval.
            ApprovalDecisionError: Not a question (`kind`), already decided,
                expired, cancelled, `actor` is not one of its approvers, or
                the agent moved on (`mismatch`).
        """
        approval = self._approval(approval_id)
        if approval.kind != "question":
            raise ApprovalDecisionError(
                f"Approval {approval_id} is {_WHAT.get(approval.kind, 'an approval step')}, "
                "not a question; it is not answered with text.",
                reason="kind",
            )
        self._check_pending(approval, actor)
        decision = check_answer(self.tx, approval, text=text, actor=actor)
        self._resolve_tool_call(approval, "approved", actor, text, decision)
        approval.status, approval.decided_by, approval.comment = "approved", actor, text
        return approval

    def extend(self, approval_id: str, *, new_limit: int | None, actor: str | None) -> ApprovalRow:
        """Decide a budget approval: raise the bound to `new_limit`, or stop (None).

        A raised bound is stored with the decision; the agent step is queued
        again and continues from its journal. Stopping fails the step with
        `LimitExceeded`.

        Raises:
            RunNotFound: No such approval.
            ApprovalDecisionError: Not a budget (`kind`), already decided,
                expired, cancelled, `actor` is not one of its approvers, a
                limit not larger than the current one (`arguments`), or the
                agent moved on (`mismatch`).
        """
        approval = self._approval(approval_id)
        if approval.kind != "budget":
            raise ApprovalDecisionError(
                f"Approval {approval_id} is {_WHAT.get(approval.kind, 'an approval step')}, "
                "not a budget; it is not extended.",
                reason="kind",
            )
        self._check_pending(approval, actor)
        decision = check_extend(self.tx, approval, new_limit=new_limit, actor=actor)
        if new_limit is None:
            self._stop_budget(approval, "rejected", actor, "stopped")
            approval.status, approval.decided_by, approval.comment = "rejected", actor, "stopped"
            return approval
        comment = f"extended to {new_limit}"
        self._resolve_tool_call(approval, "approved", actor, comment, decision)
        approval.status, approval.decided_by, approval.comment = "approved", actor, comment
        return approval

    def _stop_budget(
        self, approval: ApprovalRow, status: str, actor: str | None, comment: str
    ) -> None:
        """Fail a budget approval's step with `LimitExceeded` (stopped or expired)."""
        run = self._fetch_locked(approval.run_id)
        details = approval.details or {}
        decision = {"action": "stop", "limit": None, "actor": actor}
        if not self.tx.decide_approval(
            approval.id, status=status, by=actor, comment=comment, now=self.now,
            details={**details, "decision": decision},
        ):  # fmt: skip
            raise ApprovalDecisionError(
                f"Approval {approval.id} was decided meanwhile.", reason="decided"
            )
        job = self.tx.job(approval.job_id)
        if run is None or job is None or job.status != "waiting":
            return
        bound, limit = details.get("bound"), details.get("limit")
        error = {
            "type": "LimitExceeded",
            "message": f"The agent stopped at its {bound} limit of {limit} ({comment}).",
            "limit": bound,
            "value": limit,
        }
        self.tx.finish_job(
            job.id, status="failed", now=self.now, epoch=None, expect="waiting", error=error
        )
        self._fail_run(run, job.step_id, error)
        self.flush()

    def expire_approvals(self, limit: int = 20) -> int:
        """Resolve pending approvals whose timeout passed, by their `on_timeout`.

        An expired tool call's approval is a rejection the agent's model is told
        about; an expired reconciliation fails the step (and its run).
        """
        expired = self.tx.expired_approvals(self.now, limit)
        for approval in expired:
            if approval.kind == "tool_call":
                self._resolve_tool_call(approval, "expired", None, "timed out", expired_decision())
                continue
            if approval.kind == "question":  # the model is told no answer came
                self._resolve_tool_call(
                    approval, "expired", None, "timed out", expired_answer(approval)
                )
                continue
            if approval.kind == "budget":  # nobody extended the bound: it was crossed
                self._stop_budget(approval, "expired", None, "nobody extended it in time")
                continue
            if approval.kind == "reconcile":  # nobody knows whether it ran: the step fails
                self._resolve(approval, "expired", None, "nobody said whether the call ran")
                continue
            status = "approved" if approval.on_timeout == "approve" else "expired"
            self._resolve(approval, status, None, "timed out")
        return len(expired)

    def _resolve_tool_call(
        self,
        approval: ApprovalRow,
        status: str,
        actor: str | None,
        comment: str | None,
        decision: dict[str, Any],
    ) -> None:
        """Store a tool call's decision; queue the agent step again once none is pending."""
        run = self._fetch_locked(approval.run_id)
        details = {**(approval.details or {}), "decision": decision}
        if not self.tx.decide_approval(
            approval.id, status=status, by=actor, comment=comment, now=self.now, details=details
        ):
            raise ApprovalDecisionError(
                f"Approval {approval.id} was decided meanwhile.", reason="decided"
            )
        approval.details = details
        job = self.tx.job(approval.job_id)
        if run is None or run.status != "running" or job is None or job.status != "waiting":
            return
        if any(row.status == "pending" for row in self.tx.job_approvals(job.id)):
            return  # the step resumes once every call of its pause is decided
        if self.tx.requeue_job(job.id, self.now):
            self._notify = True
        self.flush()

    def _resolve(
        self, approval: ApprovalRow, status: str, actor: str | None, comment: str | None
    ) -> None:
        run = self._fetch_locked(approval.run_id)
        if not self.tx.decide_approval(
            approval.id, status=status, by=actor, comment=comment, now=self.now
        ):
            raise ApprovalDecisionError(
                f"Approval {approval.id} was decided meanwhile.", reason="decided"
            )
        job = self.tx.job(approval.job_id)
        if run is None or job is None or job.status != "waiting":
            return
        if status == "approved":
            value = {"approved": True, "by": actor, "comment": comment}
            self.tx.finish_job(
                job.id, status="succeeded", now=self.now, epoch=None, expect="waiting"
            )
            self._recorded(run, job.step_id, job.id, "succeeded", value, False)
        else:
            kind = "ApprovalRejected" if status == "rejected" else "ApprovalExpired"
            who = f" by {actor}" if actor else ""
            error = {
                "type": kind,
                "message": f"{status}{who}" + (f": {comment}" if comment else ""),
            }
            self.tx.finish_job(
                job.id, status="failed", now=self.now, epoch=None, expect="waiting", error=error
            )
            self._fail_run(run, job.step_id, error)
        self.flush()


_DECIDED_OTHERWISE = {
    "budget": (
        "asks for more of an agent's budget; it is extended or stopped",
        "tidemill approvals extend {id} --to N (or --stop)",
    ),
    "question": (
        "is an agent's question to a person; it is answered",
        "tidemill approvals answer {id} --text TEXT",
    ),
    "reconcile": (
        "asks whether a tool call took effect; it is answered",
        "tidemill approvals reconcile {id} --happened (or --not-happened)",
    ),
}
"""Approval kinds that are not approved or rejected: what they are, and the command instead."""

_WHAT = {
    "tool_call": "a tool call's approval",
    "question": "an agent's question",
    "reconcile": "a reconciliation",
    "budget": "a budget approval",
}
"""What each approval kind is, for refusals."""


def audit_decision(
    tx: Tx, row: ApprovalRow, action: str, actor: str | None, **details: Any
) -> ApprovalRow:
    """Record a decision on a workspace run's wait in that workspace's audit log."""
    run = tx.run(row.run_id)
    source = run.source if run is not None else None
    if source and source.get("workspace"):
        record_audit(
            tx,
            workspace=str(source["workspace"]),
            actor=actor or "anonymous",
            action=action,
            path=source.get("path"),
            details={
                "run_id": row.run_id,
                "approval_id": row.id,
                "step_id": row.step_id,
                **details,
            },
        )
    return row
