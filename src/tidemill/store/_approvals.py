"""`ApprovalQueries`: approval requests, for approval steps and agents' tool calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidemill.store._events import EventQueries
from tidemill.store._rows import ApprovalRow
from tidemill.store._statements import dumps

__all__ = ["ApprovalQueries"]

_APPROVAL = ApprovalRow.COLUMNS


class ApprovalQueries(EventQueries):
    """The statements that add, find, decide, expire and cancel approvals."""

    def insert_approval(self, approval: ApprovalRow) -> None:
        """Add an approval request."""
        self.execute(
            f"INSERT INTO tm_approvals ({_APPROVAL}) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                approval.id,
                approval.run_id,
                approval.root_id,
                approval.job_id,
                approval.step_id,
                approval.message,
                dumps(approval.approvers),
                approval.on_timeout,
                approval.status,
                approval.created_at,
                approval.expires_at,
                approval.decided_at,
                approval.decided_by,
                approval.comment,
                approval.kind,
                None if approval.details is None else dumps(approval.details),
            ),
        )
        data = {
            "approval_id": approval.id,
            "kind": approval.kind,
            "message": approval.message,
            "approvers": approval.approvers,
            "expires_at": approval.expires_at,
            "details": approval.details,
        }
        self.add_event(
            approval.run_id, "wait_requested", data, now=approval.created_at,
            root_id=approval.root_id, job_id=approval.job_id, step_id=approval.step_id,
        )  # fmt: skip

    def approval(self, approval_id: str, *, lock: bool = False) -> ApprovalRow | None:
        """An approval by id."""
        suffix = self._lock if lock else ""
        row = self.one(f"SELECT {_APPROVAL} FROM tm_approvals WHERE id = ?{suffix}", (approval_id,))
        return None if row is None else ApprovalRow.of(row)

    def approval_ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        """The ids of approvals that start with `prefix` (hex digits and dashes), in order."""
        rows = self.all(
            "SELECT id FROM tm_approvals WHERE id LIKE ? ORDER BY id LIMIT ?", (prefix + "%", limit)
        )
        return [str(row[0]) for row in rows]

    def approvals(
        self,
        *,
        status: str | None = "pending",
        root_id: str | None = None,
        limit: int | None = None,
        after: tuple[float, str] | None = None,
    ) -> list[ApprovalRow]:
        """Approvals, oldest first, filtered by status and run.

        `limit` and `after` (the `(created_at, id)` of the last one of the page
        before) read them a page at a time, in the order of the index on
        `(status, created_at, id)`.
        """
        where: list[str] = ["1 = 1"]
        params: list[object] = []
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if root_id is not None:
            where.append("root_id = ?")
            params.append(root_id)
        if after is not None:
            where.append("(created_at > ? OR (created_at = ? AND id > ?))")
            params += [after[0], after[0], after[1]]
        page = ""
        if limit is not None:
            page = " LIMIT ?"
            params.append(limit)
        rows = self.all(
            f"SELECT {_APPROVAL} FROM tm_approvals WHERE {' AND '.join(where)} "
            f"ORDER BY created_at, id{page}",
            params,
        )
        return [ApprovalRow.of(row) for row in rows]

    def decide_approval(
        self,
        approval_id: str,
        *,
        status: str,
        by: str | None,
        comment: str | None,
        now: float,
        details: Mapping[str, Any] | None = None,
    ) -> bool:
        """Close a pending approval (replacing its `details` when given); False when not pending."""
        back = " RETURNING root_id, run_id, job_id, step_id, kind"
        if details is None:
            row = self.one(
                "UPDATE tm_approvals SET status = ?, decided_by = ?, comment = ?, decided_at = ? "
                "WHERE id = ? AND status = 'pending'" + back,
                (status, by, comment, now, approval_id),
            )
        else:
            row = self.one(
                "UPDATE tm_approvals SET status = ?, decided_by = ?, comment = ?, decided_at = ?, "
                "details = ? WHERE id = ? AND status = 'pending'" + back,
                (status, by, comment, now, dumps(details), approval_id),
            )
        if row is None:
            return False
        root_id, run_id, job_id, step_id, kind = row
        data: dict[str, Any] = {
            "approval_id": approval_id,
            "kind": kind,
            "status": status,
            "decided_by": by,
            "comment": comment,
        }
        if details is not None and "decision" in details:
            data["decision"] = details["decision"]
        self.add_event(
            run_id, "wait_decided", data, now=now, root_id=root_id, job_id=job_id, step_id=step_id
        )
        return True

    def job_approvals(self, job_id: int) -> list[ApprovalRow]:
        """Every approval a job asked for, oldest first (an agent step may ask several)."""
        rows = self.all(
            f"SELECT {_APPROVAL} FROM tm_approvals WHERE job_id = ? ORDER BY created_at, id",
            (job_id,),
        )
        return [ApprovalRow.of(row) for row in rows]

    def expired_approvals(self, now: float, limit: int = 20) -> list[ApprovalRow]:
        """Pending approvals whose time is up."""
        rows = self.all(
            f"SELECT {_APPROVAL} FROM tm_approvals WHERE status = 'pending' "
            f"AND expires_at < ? ORDER BY expires_at LIMIT ?{self._skip_locked}",
            (now, limit),
        )
        return [ApprovalRow.of(row) for row in rows]

    def cancel_approvals(self, run_id: str, now: float) -> None:
        """Close a run's pending approvals as cancelled."""
        self.execute(
            "UPDATE tm_approvals SET status = 'cancelled', decided_at = ? "
            "WHERE run_id = ? AND status = 'pending'",
            (now, run_id),
        )
