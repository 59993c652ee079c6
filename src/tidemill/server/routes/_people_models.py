"""The JSON shapes of the people routes: users, groups, folders and grants."""

from __future__ import annotations

from pydantic import BaseModel, Field

from tidemill.server.routes._body import Body
from tidemill.workspace import Folder, Group, Role, User

__all__ = [
    "FolderChangeIn",
    "FolderIn",
    "FolderOut",
    "GrantIn",
    "GrantOut",
    "GroupIn",
    "GroupOut",
    "PasswordIn",
    "UserChangeIn",
    "UserIn",
    "UserOut",
]

_NAME = Field(min_length=1, max_length=64)
_SUMMARY = Field(default="", max_length=10_000)


class UserOut(BaseModel):
    """A user of the workspace."""

    name: str
    is_admin: bool
    disabled: bool
    groups: list[str]
    created_at: float

    @classmethod
    def of(cls, user: User) -> UserOut:
        return cls(
            name=user.name, is_admin=user.is_admin, disabled=user.disabled,
            groups=list(user.groups), created_at=user.created_at,
        )  # fmt: skip


class UserIn(Body):
    """A user to add (workspace admins)."""

    name: str = _NAME
    admin: bool = False


class UserChangeIn(Body):
    """What to change of a user; a field left out stays as it is."""

    admin: bool | None = None
    disabled: bool | None = None


class PasswordIn(Body):
    """A new password (never shown again)."""

    password: str = Field(min_length=1, max_length=1024)


class GroupOut(BaseModel):
    """A group and its members."""

    name: str
    summary: str
    members: list[str]

    @classmethod
    def of(cls, group: Group) -> GroupOut:
        return cls(name=group.name, summary=group.summary, members=list(group.members))


class GroupIn(Body):
    """A group to add (workspace admins)."""

    name: str = _NAME
    summary: str = _SUMMARY


class FolderOut(BaseModel):
    """A folder and who may do what in it."""

    name: str
    summary: str
    roles: dict[str, Role]
    """Grantee (a user name, or `g/<group>`) to role."""
    created_by: str
    created_at: float

    @classmethod
    def of(cls, folder: Folder) -> FolderOut:
        return cls(
            name=folder.name, summary=folder.summary, roles=dict(folder.roles),
            created_by=folder.created_by, created_at=folder.created_at,
        )  # fmt: skip


class FolderIn(Body):
    """A folder to create (workspace admins), with its first grants."""

    name: str = _NAME
    summary: str = _SUMMARY
    roles: dict[str, Role] = Field(default_factory=dict[str, Role], max_length=1000)


class FolderChangeIn(Body):
    """A folder's new summary (its admins)."""

    summary: str = Field(max_length=10_000)


class GrantIn(Body):
    """A role on a folder (`f/<folder>`) or an item's path for a user or `g/<group>`."""

    target: str = Field(min_length=1, max_length=255)
    grantee: str = Field(min_length=1, max_length=66)
    role: Role | None
    """`viewer`, `writer` or `admin`; null revokes the grant."""


class GrantOut(BaseModel):
    """The grant as it now is (role null: none)."""

    target: str
    grantee: str
    role: Role | None
