"""`Permissions`: the one place that decides what a principal may do.

Every operation of the workspace asks it, as the acting principal, before it
reads or writes anything, and so does the engine when a run resolves a
`$var:` or `$res:` reference (as the run's identity). The rules:

- A disabled user may do nothing.
- A workspace admin may do everything.
- `u/<user>/...` belongs to that user (admin of it); nobody else reaches it
  without a grant.
- A folder grants roles to users and groups (`g/<group>`); an item may carry
  extra grants of its own. The role on a path is the highest of them.
- `viewer` reads (and runs, and resolves references to) an item; `writer`
  also changes it (writes, drafts, deploys, restores, deletes); `admin` also
  changes who may do what.
- Managing users, groups and folders, reading the audit log and rotating
  keys is for workspace admins.

Examples:
    >>> alice = Principal("alice", groups=frozenset({"support"}))
    >>> rules = Permissions(alice, {"f/support": {"g/support": "writer"}})
    >>> rules.role("f/support/triage"), rules.role("f/ops/deploy"), rules.role("u/alice/x")
    ('writer', None, 'admin')
    >>> rules.allows("write", "f/support/triage"), rules.allows("admin", "f/support/triage")
    (True, False)
    >>> rules.check("read", "f/ops/deploy")
    Traceback (most recent call last):
    ...
    tidemill.errors.PermissionDenied: alice may not read f/ops/deploy. ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from tidemill.errors import PermissionDenied
from tidemill.workspace._models import ROLES, Principal, Role
from tidemill.workspace._paths import ItemPath

__all__ = ["Action", "Grants", "Permissions", "group_grantee"]

Action = Literal["read", "write", "admin"]
"""What is asked of a path: the least role that allows it is viewer, writer, admin."""

Grants = Mapping[str, Mapping[str, Role]]
"""Target (`f/<folder>` or an item's path) to grantee (a user, or `g/<group>`) to role."""

_NEEDS: dict[Action, Role] = {"read": "viewer", "write": "writer", "admin": "admin"}
_RANK = {role: rank for rank, role in enumerate(ROLES)}


def group_grantee(group: str) -> str:
    """How grants name a group: `g/<group>`."""
    return f"g/{group}"


class Permissions:
    """What one principal may do, given the workspace's grants.

    Args:
        principal: Who is acting.
        grants: Every grant of the workspace (folders' and items').
    """

    def __init__(self, principal: Principal, grants: Grants) -> None:
        self.principal = principal
        self._grants = grants
        self._names = {principal.name, *(group_grantee(g) for g in principal.groups)}

    @property
    def is_admin(self) -> bool:
        """Whether the principal is an active workspace admin."""
        return self.principal.is_admin and not self.principal.disabled

    def role(self, path: str | ItemPath) -> Role | None:
        """The principal's role on a path (an item's, or a folder's `f/<folder>`), or None."""
        if self.principal.disabled:
            return None
        if self.principal.is_admin:
            return "admin"
        text = str(path)
        parts = text.split("/")
        prefix = "/".join(parts[:2])
        if parts[0] == "u" and len(parts) > 1 and parts[1] == self.principal.name:
            return "admin"
        best: Role | None = None
        for target in (prefix, text) if text != prefix else (prefix,):
            for grantee, role in self._grants.get(target, {}).items():
                if grantee in self._names and (best is None or _RANK[role] > _RANK[best]):
                    best = role
        return best

    def allows(self, action: Action, path: str | ItemPath) -> bool:
        """Whether the principal may do `action` on `path`."""
        role = self.role(path)
        return role is not None and _RANK[role] >= _RANK[_NEEDS[action]]

    def check(self, action: Action, path: str | ItemPath) -> None:
        """Return when `allows(action, path)`, else raise `PermissionDenied`."""
        if not self.allows(action, path):
            raise PermissionDenied(
                f"{self.principal.name} may not {action} {path}.",
                hint=self._hint(action),
                context={"principal": self.principal.name, "action": action, "path": str(path)},
            )

    def check_active(self, what: str) -> None:
        """Return when the principal is an enabled user, else raise `PermissionDenied`."""
        if self.principal.disabled:
            raise PermissionDenied(
                f"{self.principal.name} may not {what}: the user is disabled.",
                hint="A workspace admin can enable it.",
                context={"principal": self.principal.name, "action": what},
            )

    def check_admin(self, what: str) -> None:
        """Return when the principal is a workspace admin, else raise `PermissionDenied`."""
        if not self.is_admin:
            raise PermissionDenied(
                f"{self.principal.name} may not {what}: it needs a workspace admin.",
                hint="Ask a workspace admin (`tidemill ws users list` shows who is one).",
                context={"principal": self.principal.name, "action": what},
            )

    def _hint(self, action: Action) -> str:
        if self.principal.disabled:
            return "This user is disabled; a workspace admin can enable it."
        needed = _NEEDS[action]
        return f"It needs the {needed} role on the item or its folder; ask a folder admin."
