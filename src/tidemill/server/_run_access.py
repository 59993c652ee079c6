"""Who may see a run, act on it, and decide what it waits for: the server's one place for it.

The workspace's permission module (`Permissions`, asked as the caller)
decides, on the run's own facts (`RunInfo.run_as`, `RunInfo.source`):

- a workspace admin sees, cancels and retries every run of the workspace,
  and the runs with no source (submitted from Python, not from a path);
- the user a run runs as sees, cancels and retries it;
- whoever may read the run's path sees it; whoever may write it cancels and
  retries it;
- a wait is decided by the users its `approvers` name; with none named, by
  whoever sees the run; a step with `allow_self_approval: false` is never
  decided by the user the run runs as.

A token's scopes narrow this: a run of a path outside every `runs` scope's
glob is invisible to it, and a run with no path is visible only to a
scope with no glob. A run the caller may not see is answered as missing
(404), so its id tells nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidemill.errors import PermissionDenied, RunNotFound
from tidemill.server._caller import Caller
from tidemill.store import ApprovalRow, RunReach
from tidemill.workspace import Permissions

if TYPE_CHECKING:
    from tidemill.workspace._session import Context

__all__ = ["RunAccess", "run_path", "scope_allows"]

_GLOB = "*?["


def run_path(workspace: str, source: Mapping[str, Any] | None) -> str | None:
    """A run's workspace path, when it ran one of `workspace`'s flows (None otherwise)."""
    if not source or source.get("workspace") != workspace:
        return None
    path = source.get("path")
    return path if isinstance(path, str) and path else None


def scope_allows(who: Caller, domain: str, action: str, path: str | None) -> bool:
    """Whether the caller's scopes reach `path`.

    None is a run with no path, which only a scope with no glob reaches.
    """
    if who.user is None:
        return False
    if who.scopes is None:
        return True
    return any(
        s.allows(domain, action, path) and (path is not None or s.glob is None) for s in who.scopes
    )


def _glob_prefix(glob: str) -> str:
    """What every path a glob matches starts with (`u/max/*` → `u/max/`)."""
    cut = min((glob.index(c) for c in _GLOB if c in glob), default=len(glob))
    return glob[:cut]


@dataclass(frozen=True, slots=True)
class RunAccess:
    """What one caller may see and do to the runs of the served workspace."""

    who: Caller
    rules: Permissions
    workspace: str
    targets: tuple[str, ...]
    """Every grant target of the workspace (`f/<folder>` or an item path)."""

    @classmethod
    async def of(cls, who: Caller) -> RunAccess:
        """Ask the caller's workspace (as the caller) for its rules."""
        ws = who.ws

        def read(ctx: Context) -> tuple[Permissions, tuple[str, ...]]:
            return ctx.rules, tuple(sorted(ctx.q.grants()))

        rules, targets = await ws.transact(read)
        return cls(who, rules, ws.name, targets)

    @property
    def user(self) -> str:
        """The caller's name."""
        return self.rules.principal.name

    # --- runs -----------------------------------------------------------

    def may_see(self, run_as: str | None, source: Mapping[str, Any] | None) -> bool:
        """Whether the caller sees a run (of its facts)."""
        path = run_path(self.workspace, source)
        if source and source.get("workspace") not in (None, self.workspace):
            return False  # another workspace's run, in the same store
        if not scope_allows(self.who, "runs", "read", path):
            return False
        if self.rules.is_admin:
            return True
        if path is None:
            return False
        return run_as == self.user or self.rules.allows("read", path)

    def may_act(self, run_as: str | None, source: Mapping[str, Any] | None) -> bool:
        """Whether the caller may cancel or retry a run it sees."""
        path = run_path(self.workspace, source)
        if not scope_allows(self.who, "runs", "write", path):
            return False
        if self.rules.is_admin:
            return True
        return path is not None and (run_as == self.user or self.rules.allows("write", path))

    def check_see(self, run_id: str, run_as: str | None, source: Mapping[str, Any] | None) -> None:
        """Return when the caller sees the run, else raise `RunNotFound`."""
        if not self.may_see(run_as, source):
            raise RunNotFound(
                f"No run {run_id} that {self.user} may see.",
                hint="List the runs you may see: GET /api/runs.",
                context={"run_id": run_id},
            )

    def check_act(self, run_id: str, run_as: str | None, source: Mapping[str, Any] | None) -> None:
        """Return when the caller may cancel or retry the run (it sees), else `PermissionDenied`."""
        self.check_see(run_id, run_as, source)
        if not self.may_act(run_as, source):
            path = run_path(self.workspace, source)
            raise PermissionDenied(
                f"{self.user} may not cancel or retry run {run_id}.",
                hint="It needs the writer role on "
                + (path or "the workspace (a run with no path: an admin)")
                + ", or to be who the run runs as"
                + ("; and a token scope runs:write on it." if self.who.scopes else "."),
                context={"run_id": run_id, "path": path},
            )

    def reach(self) -> RunReach:
        """The runs a page of `GET /api/runs` may hold, for the store to filter in SQL."""
        within: tuple[str, ...] | None = None
        if self.who.scopes is not None:
            globs = [s.glob for s in self.who.scopes if s.allows("runs", "read")]
            within = None if None in globs else tuple(_glob_prefix(g) for g in globs if g)
        if self.rules.is_admin:
            return RunReach(self.workspace, everything=True, unsourced=True, within=within)
        folders = tuple(
            t for t in self.targets if t.count("/") == 1 and self.rules.allows("read", t)
        )
        paths = tuple(t for t in self.targets if t.count("/") > 1 and self.rules.allows("read", t))
        return RunReach(
            self.workspace,
            run_as=self.user,
            folders=(f"u/{self.user}", *folders),
            paths=paths,
            within=within,
        )

    # --- waits ----------------------------------------------------------

    def may_decide(self, approval: ApprovalRow, run_as: str | None) -> bool:
        """Whether the caller may decide a wait (of a run it sees, or that names it)."""
        if (approval.details or {}).get("allow_self_approval") is False and run_as == self.user:
            return False
        if approval.approvers:
            return self.user in approval.approvers
        return True

    def check_decide(
        self, approval: ApprovalRow, run_as: str | None, source: Mapping[str, Any] | None
    ) -> None:
        """Return when the caller may decide `approval`.

        Raises:
            RunNotFound: The caller may not see it.
            PermissionDenied: The caller sees it but may not decide it.
        """
        named = self.user in approval.approvers
        if not named or (source and source.get("workspace") not in (None, self.workspace)):
            self.check_see(approval.root_id, run_as, source)
        path = run_path(self.workspace, source)
        if not scope_allows(self.who, "approvals", "write", path):
            raise PermissionDenied(
                f"This token may not decide approvals of {path or 'a run with no path'}.",
                hint="Use a token with a scope like approvals:write"
                + (f":{path}" if path else "")
                + ".",
                context={"approval_id": approval.id, "path": path},
            )
        if (approval.details or {}).get("allow_self_approval") is False and run_as == self.user:
            raise PermissionDenied(
                f"{self.user} started run {approval.root_id} and may not decide its approval "
                f"{approval.id}: the step {approval.step_id} forbids self-approval.",
                hint="Ask another approver to decide it.",
                context={"approval_id": approval.id, "reason": "self"},
            )
        if approval.approvers and not named:
            raise PermissionDenied(
                f"{self.user} may not decide approval {approval.id}; its approvers are "
                f"{', '.join(approval.approvers)}.",
                hint="Ask one of its approvers to decide it.",
                context={"approval_id": approval.id, "reason": "actor"},
            )

    def may_list(self, approval: ApprovalRow, run_as: str | None, source: Any) -> bool:
        """Whether `GET /api/approvals` shows the wait to the caller.

        A pending wait when the caller may decide it; a decided one when the
        caller sees its run (or is one of its approvers).
        """
        path = run_path(self.workspace, source)
        if not scope_allows(self.who, "approvals", "read", path):
            return False
        if source and source.get("workspace") not in (None, self.workspace):
            return False
        named = self.user in approval.approvers
        if not named and not self.may_see(run_as, source):
            return False
        return approval.status != "pending" or self.may_decide(approval, run_as)
