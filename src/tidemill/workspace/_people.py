"""Users, groups, folders and grants; the audit log; rotating the master key.

Managing users, groups and folders, reading the audit log and rotating keys
need a workspace admin; changing a folder's or an item's grants needs the
admin role on it. Every change is an audit row.
"""

from __future__ import annotations

from typing import get_args

from tidemill.errors import ItemNotFound, PermissionDenied, WorkspaceError
from tidemill.workspace._crypto import Keyring, MasterKey
from tidemill.workspace._models import ROLES, AuditEntry, Folder, Group, Principal, Role, User
from tidemill.workspace._paths import InvalidPath, ItemPath, check_name
from tidemill.workspace._session import Context, Session

__all__ = ["PeopleMethods"]


def _grantee(ctx: Context, grantee: str) -> str:
    """Check a grantee (a user's name, or `g/<group>`) exists."""
    if grantee.startswith("g/"):
        group = check_name(grantee[2:], what="group")
        if not ctx.q.group_exists(group):
            raise ItemNotFound(f"There is no group {group!r}.", hint="tidemill ws groups list")
        return grantee
    check_name(grantee, what="user")
    if ctx.q.principal(grantee) is None:
        raise ItemNotFound(f"There is no user {grantee!r}.", hint="tidemill ws users list")
    return grantee


def _target(text: str) -> str:
    """A grant's target: a folder (`f/<folder>`) or an item's path."""
    parts = text.split("/")
    if len(parts) == 2 and parts[0] == "f":
        return f"f/{check_name(parts[1], what='folder')}"
    parsed = ItemPath.parse(text)
    return str(parsed)


def _role(role: str) -> Role:
    if role not in get_args(Role):
        raise InvalidPath(f"{role!r} is not a role.", hint=f"Use one of {', '.join(ROLES)}.")
    return role  # type: ignore[return-value]


def _active(ctx: Context, what: str) -> None:
    if ctx.principal.disabled:
        raise PermissionDenied(
            f"{ctx.principal.name} may not {what}: the user is disabled.",
            hint="A workspace admin can enable it.",
            context={"principal": ctx.principal.name},
        )


class PeopleMethods(Session):
    """The user, group, folder, grant, audit and key operations of `AsyncWorkspace`."""

    async def whoami(self) -> Principal:
        """The acting principal, as the store knows it now."""
        return await self.transact(lambda ctx: ctx.principal)

    async def add_user(self, name: str, *, admin: bool = False) -> User:
        """Add a user (workspace admins only)."""
        name = check_name(name, what="user")

        def add(ctx: Context) -> User:
            ctx.rules.check_admin("add users")
            if ctx.q.principal(name) is not None:
                raise WorkspaceError(f"There is already a user {name!r}.")
            ctx.q.add_user(name, is_admin=admin, now=ctx.now)
            ctx.audit("user.add", None, user=name, admin=admin)
            return next(u for u in ctx.q.users() if u.name == name)

        return await self.transact(add)

    async def set_user(
        self, name: str, *, admin: bool | None = None, disabled: bool | None = None
    ) -> User:
        """Make a user an admin or not, enabled or disabled (workspace admins only).

        The last active admin cannot be demoted or disabled: someone must be
        able to manage the workspace.
        """
        name = check_name(name, what="user")

        def change(ctx: Context) -> User:
            ctx.rules.check_admin("change users")
            found = ctx.q.principal(name)
            if found is None:
                raise ItemNotFound(f"There is no user {name!r}.", hint="tidemill ws users list")
            is_admin = found.is_admin if admin is None else admin
            is_disabled = found.disabled if disabled is None else disabled
            active_admins = [
                u for u in ctx.q.users() if u.is_admin and not u.disabled and u.name != name
            ]
            if (not is_admin or is_disabled) and not active_admins:
                raise WorkspaceError(
                    f"{name} is the last active admin of the workspace.",
                    hint="Make another user an admin first.",
                )
            ctx.q.update_user(name, is_admin=is_admin, disabled=is_disabled)
            ctx.audit("user.change", None, user=name, admin=is_admin, disabled=is_disabled)
            return next(u for u in ctx.q.users() if u.name == name)

        return await self.transact(change)

    async def users(self) -> list[User]:
        """Every user of the workspace (any active user may list them, to share with)."""

        def read(ctx: Context) -> list[User]:
            _active(ctx, "list users")
            return ctx.q.users()

        return await self.transact(read)

    async def add_group(self, name: str, *, summary: str = "") -> Group:
        """Add a group (workspace admins only)."""
        name = check_name(name, what="group")

        def add(ctx: Context) -> Group:
            ctx.rules.check_admin("add groups")
            if ctx.q.group_exists(name):
                raise WorkspaceError(f"There is already a group {name!r}.")
            ctx.q.add_group(name, summary, ctx.now)
            ctx.audit("group.add", None, group=name)
            return Group(name, summary, ())

        return await self.transact(add)

    async def delete_group(self, name: str) -> None:
        """Delete a group, its memberships and its grants (workspace admins only)."""
        name = check_name(name, what="group")

        def drop(ctx: Context) -> None:
            ctx.rules.check_admin("delete groups")
            if not ctx.q.group_exists(name):
                raise ItemNotFound(f"There is no group {name!r}.")
            ctx.q.delete_group(name)
            ctx.audit("group.delete", None, group=name)

        await self.transact(drop)

    async def set_member(self, group: str, user: str, *, member: bool = True) -> None:
        """Add a user to a group (or, with `member=False`, remove it); workspace admins only."""
        group, user = check_name(group, what="group"), check_name(user, what="user")

        def change(ctx: Context) -> None:
            ctx.rules.check_admin("change groups")
            if not ctx.q.group_exists(group):
                raise ItemNotFound(f"There is no group {group!r}.")
            _grantee(ctx, user)
            ctx.q.set_member(group, user, member=member)
            ctx.audit("group.member", None, group=group, user=user, member=member)

        await self.transact(change)

    async def groups(self) -> list[Group]:
        """Every group, with its members (any active user may list them)."""

        def read(ctx: Context) -> list[Group]:
            _active(ctx, "list groups")
            return ctx.q.groups()

        return await self.transact(read)

    async def add_folder(
        self, name: str, *, summary: str = "", roles: dict[str, Role] | None = None
    ) -> Folder:
        """Create a folder (workspace admins only), with its first grants."""
        name = check_name(name, what="folder")

        def add(ctx: Context) -> Folder:
            ctx.rules.check_admin("create folders")
            if ctx.q.folder(name) is not None:
                raise WorkspaceError(f"There is already a folder {name!r}.")
            ctx.q.add_folder(name, summary, ctx.principal.name, ctx.now)
            for grantee, role in (roles or {}).items():
                ctx.q.set_grant(f"f/{name}", _grantee(ctx, grantee), _role(role))
            ctx.audit("folder.add", f"f/{name}", roles=dict(roles or {}))
            found = ctx.q.folder(name)
            assert found is not None
            return found

        return await self.transact(add)

    async def set_folder(self, name: str, *, summary: str) -> Folder:
        """Change a folder's summary (its admins)."""
        name = check_name(name, what="folder")

        def change(ctx: Context) -> Folder:
            ctx.rules.check("admin", f"f/{name}")
            if ctx.q.folder(name) is None:
                raise ItemNotFound(f"There is no folder {name!r}.")
            ctx.q.set_folder_summary(name, summary)
            ctx.audit("folder.change", f"f/{name}", summary=summary)
            found = ctx.q.folder(name)
            assert found is not None
            return found

        return await self.transact(change)

    async def folders(self) -> list[Folder]:
        """The folders the principal may read something in (every one, for an admin)."""

        def read(ctx: Context) -> list[Folder]:
            if ctx.principal.disabled:
                return []
            grants = ctx.q.grants()
            mine = {ctx.principal.name, *(f"g/{g}" for g in ctx.principal.groups)}
            reach = {
                target.split("/")[1]
                for target, g in grants.items()
                if target.startswith("f/") and mine & set(g)
            }
            return [f for f in ctx.q.folders() if ctx.rules.is_admin or f.name in reach]

        return await self.transact(read)

    async def grant(self, target: str, grantee: str, role: Role | None) -> None:
        """Give `grantee` (a user, or `g/<group>`) a role on a folder or an item; None revokes.

        Args:
            target: `f/<folder>`, or an item's path for an extra grant on it.
            grantee: A user's name, or `g/<group>`.
            role: `viewer`, `writer` or `admin`; None removes the grant.
        """
        target = _target(target)

        def change(ctx: Context) -> None:
            ctx.rules.check("admin", target)
            if target.count("/") == 1 and ctx.q.folder(target[2:]) is None:
                raise ItemNotFound(f"There is no folder {target[2:]!r}.")
            who = _grantee(ctx, grantee)
            ctx.q.set_grant(target, who, None if role is None else _role(role))
            ctx.audit("grant.set", target, grantee=who, role=role)

        await self.transact(change)

    async def audit(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        path: str | None = None,
        after: int = 0,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """Audit rows, oldest first, filtered (workspace admins only).

        Args:
            actor: Only what this user did.
            action: Only this action (`item.write`, `secret.decrypt`, `run.start`, ...).
            path: Only rows about paths starting with this.
            after: Only rows after this id (the last one of the previous page).
            limit: The most rows to return.
        """

        def read(ctx: Context) -> list[AuditEntry]:
            ctx.rules.check_admin("read the audit log")
            return ctx.q.audit_entries(
                actor=actor, action=action, path=path, after=after, limit=limit
            )

        return await self.transact(read)

    async def rotate_key(self, new: MasterKey) -> None:
        """Wrap the workspace's data key with a new master key (workspace admins only).

        The secrets themselves stay as they are; after this, `new` opens them.
        Give every process the new key (`TIDEMILL_MASTER_KEY`) with the old one
        in `TIDEMILL_MASTER_KEY_PREVIOUS` before rotating, so none is locked out
        while the change rolls out; drop the old one afterwards.
        """

        def rotate(ctx: Context) -> None:
            ctx.rules.check_admin("rotate keys")
            old = ctx.keys()
            wrapped = ctx.q.data_key()
            if wrapped:
                rotating = Keyring(new, previous=[old.master, *old.previous])
                ctx.q.set_data_key(rotating.rewrap(wrapped, workspace=ctx.q.ws))
            ctx.audit("key.rotate", None, key_id=new.key_id)

        await self.transact(rotate)
        self._keyring = Keyring(new)
