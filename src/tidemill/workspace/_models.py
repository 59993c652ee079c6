"""What the workspace hands back: items, versions, drafts, principals, grants, audit rows.

Plain frozen dataclasses, read from the store. A secret variable's value is
never in one of them unless the caller asked to read it (`Item.value` is
None then, and `repr` never shows a value of a secret).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "KINDS",
    "ROLES",
    "AuditEntry",
    "Draft",
    "Folder",
    "Grant",
    "Group",
    "Item",
    "ItemKind",
    "Principal",
    "Role",
    "User",
    "Version",
]

ItemKind = Literal["script", "flow", "resource", "variable", "resource_type", "schedule"]
"""What an item is."""

KINDS: tuple[ItemKind, ...] = (
    "script",
    "flow",
    "resource",
    "variable",
    "resource_type",
    "schedule",
)

Role = Literal["viewer", "writer", "admin"]
"""A role on a folder or an item: viewers read and run, writers change, admins grant."""

ROLES: tuple[Role, ...] = ("viewer", "writer", "admin")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is acting: a user, with the groups it belongs to.

    Every workspace operation is asked as one, and the permission module
    decides from it alone.
    """

    name: str
    """The user's name."""
    is_admin: bool = False
    """A workspace admin may do everything."""
    groups: frozenset[str] = frozenset()
    """The groups the user is a member of."""
    disabled: bool = False
    """A disabled user may do nothing."""


@dataclass(frozen=True, slots=True)
class User:
    """A user of a workspace."""

    name: str
    is_admin: bool
    disabled: bool
    groups: tuple[str, ...]
    created_at: float


@dataclass(frozen=True, slots=True)
class Group:
    """A named set of users that grants can name (`g/<group>`)."""

    name: str
    summary: str
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Folder:
    """A folder: the items under `f/<name>/`, and who may do what with them."""

    name: str
    summary: str
    roles: dict[str, Role]
    """Grantee (a user name, or `g/<group>`) to role."""
    created_by: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Grant:
    """One role given on a folder (`f/<folder>`) or an item's path to a user or group."""

    target: str
    grantee: str
    role: Role


@dataclass(frozen=True, slots=True)
class Item:
    """An item as deployed: what runs when someone runs it by path."""

    path: str
    kind: ItemKind
    summary: str
    description: str
    version: int
    """The current version (0 for items that are not versioned: variables, resource types)."""
    updated_by: str
    updated_at: float
    value: Any = field(repr=False)
    """Script: its code; flow: its document; resource: its JSON value; variable: its
    value (None for a secret unless it was read with `reveal=True`); resource type: its schema."""
    resource_type: str | None = None
    """A resource's type."""
    secret: bool = False
    """A variable whose value is encrypted and never shown."""
    deleted: bool = False
    """Deleted: its history stays readable."""

    def __repr__(self) -> str:
        shown = "<secret>" if self.secret else repr(self.value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return f"Item({self.path!r}, kind={self.kind!r}, version={self.version}, value={shown})"


@dataclass(frozen=True, slots=True)
class Version:
    """One version of a script, flow or resource: append-only."""

    path: str
    version: int
    kind: ItemKind
    summary: str
    description: str
    value: Any = field(repr=False)
    message: str = ""
    created_by: str = ""
    created_at: float = 0.0
    resource_type: str | None = None


@dataclass(frozen=True, slots=True)
class Draft:
    """A user's unsaved change to an item: nothing others run changes until it is deployed."""

    path: str
    owner: str
    kind: ItemKind
    summary: str
    description: str
    value: Any = field(repr=False)
    updated_at: float = 0.0
    resource_type: str | None = None


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audited action: who did what to which item, when."""

    id: int
    at: float
    actor: str
    action: str
    path: str | None
    details: dict[str, Any]
