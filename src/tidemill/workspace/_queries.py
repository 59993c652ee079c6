"""`Queries`: the workspace's SQL, one method per statement, inside one store transaction.

It asks no permission question: `AsyncWorkspace` asks `Permissions` first and
calls these only for what it allowed. Values are stored as JSON text; a secret
variable's value as the ciphertext its data key made, never as plaintext.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from tidemill.store import Tx, dumps
from tidemill.workspace._models import (
    AuditEntry,
    Draft,
    Folder,
    Group,
    Item,
    ItemKind,
    Principal,
    Role,
    User,
    Version,
)

__all__ = ["MAX_VERSIONS", "Queries", "StoredItem", "record_audit"]

MAX_VERSIONS = 100
"""Superseded versions kept per item; older ones are dropped as new ones are written."""

_ITEM = (
    "path, kind, summary, description, version, updated_by, updated_at, body, "
    "resource_type, secret, deleted_at"
)
_VERSION = (
    "path, version, kind, summary, description, body, message, created_by, created_at, "
    "resource_type"
)
_DRAFT = "path, owner, kind, summary, description, body, updated_at, resource_type"


class StoredItem:
    """An item's row as stored: its body is still JSON text (ciphertext for a secret)."""

    __slots__ = ("body", "item")

    def __init__(self, item: Item, body: str) -> None:
        self.item = item
        self.body = body


def _item(row: Sequence[Any], *, with_value: bool = True) -> StoredItem:
    secret = bool(row[9])
    body = str(row[7])
    value = json.loads(body) if with_value and not secret else None
    item = Item(
        path=row[0],
        kind=cast(ItemKind, row[1]),
        summary=row[2],
        description=row[3],
        version=int(row[4]),
        updated_by=row[5],
        updated_at=float(row[6]),
        value=value,
        resource_type=row[8],
        secret=secret,
        deleted=row[10] is not None,
    )
    return StoredItem(item, body)


def _version(row: Sequence[Any]) -> Version:
    return Version(
        path=row[0],
        version=int(row[1]),
        kind=cast(ItemKind, row[2]),
        summary=row[3],
        description=row[4],
        value=json.loads(row[5]),
        message=row[6],
        created_by=row[7],
        created_at=float(row[8]),
        resource_type=row[9],
    )


def _draft(row: Sequence[Any]) -> Draft:
    return Draft(
        path=row[0],
        owner=row[1],
        kind=cast(ItemKind, row[2]),
        summary=row[3],
        description=row[4],
        value=json.loads(row[5]),
        updated_at=float(row[6]),
        resource_type=row[7],
    )


class Queries:
    """The statements of one workspace, over one transaction."""

    def __init__(self, tx: Tx, workspace: str) -> None:
        self.tx = tx
        self.ws = workspace

    # The workspace itself.

    def data_key(self) -> str | None:
        row = self.tx.one("SELECT data_key FROM tm_ws_workspaces WHERE name = ?", (self.ws,))
        return None if row is None else str(row[0])

    def create_workspace(self, data_key: str, now: float) -> None:
        self.tx.execute(
            "INSERT INTO tm_ws_workspaces (name, data_key, generation, created_at) "
            "VALUES (?, ?, 0, ?)",
            (self.ws, data_key, now),
        )

    def set_data_key(self, data_key: str) -> None:
        self.tx.execute(
            "UPDATE tm_ws_workspaces SET data_key = ? WHERE name = ?", (data_key, self.ws)
        )

    def generation(self) -> int:
        row = self.tx.one("SELECT generation FROM tm_ws_workspaces WHERE name = ?", (self.ws,))
        return 0 if row is None else int(row[0])

    def bump(self) -> None:
        """Mark the items changed (search indexes built before are stale)."""
        self.tx.execute(
            "UPDATE tm_ws_workspaces SET generation = generation + 1 WHERE name = ?", (self.ws,)
        )

    # Users, groups, grants.

    def principal(self, name: str) -> Principal | None:
        rows = self.tx.all(
            "SELECT u.is_admin, u.disabled, m.group_name FROM tm_ws_users u "
            "LEFT JOIN tm_ws_members m ON m.workspace = u.workspace AND m.user_name = u.name "
            "WHERE u.workspace = ? AND u.name = ?",
            (self.ws, name),
        )
        if not rows:
            return None
        groups = frozenset(str(row[2]) for row in rows if row[2] is not None)
        return Principal(name, bool(rows[0][0]), groups, bool(rows[0][1]))

    def count_users(self) -> int:
        row = self.tx.one("SELECT COUNT(*) FROM tm_ws_users WHERE workspace = ?", (self.ws,))
        return 0 if row is None else int(row[0])

    def add_user(self, name: str, *, is_admin: bool, now: float) -> None:
        self.tx.execute(
            "INSERT INTO tm_ws_users (workspace, name, is_admin, disabled, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (self.ws, name, is_admin, False, now),
        )

    def update_user(self, name: str, *, is_admin: bool, disabled: bool) -> None:
        self.tx.execute(
            "UPDATE tm_ws_users SET is_admin = ?, disabled = ? WHERE workspace = ? AND name = ?",
            (is_admin, disabled, self.ws, name),
        )

    def users(self) -> list[User]:
        members: dict[str, list[str]] = {}
        for group, user in self.tx.all(
            "SELECT group_name, user_name FROM tm_ws_members WHERE workspace = ? "
            "ORDER BY group_name",
            (self.ws,),
        ):
            members.setdefault(user, []).append(group)
        return [
            User(name, bool(admin), bool(disabled), tuple(members.get(name, ())), float(at))
            for name, admin, disabled, at in self.tx.all(
                "SELECT name, is_admin, disabled, created_at FROM tm_ws_users "
                "WHERE workspace = ? ORDER BY name",
                (self.ws,),
            )
        ]

    def group_exists(self, name: str) -> bool:
        return (
            self.tx.one(
                "SELECT 1 FROM tm_ws_groups WHERE workspace = ? AND name = ?", (self.ws, name)
            )
            is not None
        )

    def add_group(self, name: str, summary: str, now: float) -> None:
        self.tx.execute(
            "INSERT INTO tm_ws_groups (workspace, name, summary, created_at) VALUES (?, ?, ?, ?)",
            (self.ws, name, summary, now),
        )

    def delete_group(self, name: str) -> None:
        self.tx.execute(
            "DELETE FROM tm_ws_members WHERE workspace = ? AND group_name = ?", (self.ws, name)
        )
        self.tx.execute(
            "DELETE FROM tm_ws_grants WHERE workspace = ? AND grantee = ?", (self.ws, f"g/{name}")
        )
        self.tx.execute(
            "DELETE FROM tm_ws_groups WHERE workspace = ? AND name = ?", (self.ws, name)
        )

    def set_member(self, group: str, user: str, *, member: bool) -> None:
        self.tx.execute(
            "DELETE FROM tm_ws_members WHERE workspace = ? AND group_name = ? AND user_name = ?",
            (self.ws, group, user),
        )
        if member:
            self.tx.execute(
                "INSERT INTO tm_ws_members (workspace, group_name, user_name) VALUES (?, ?, ?)",
                (self.ws, group, user),
            )

    def groups(self) -> list[Group]:
        members: dict[str, list[str]] = {}
        for group, user in self.tx.all(
            "SELECT group_name, user_name FROM tm_ws_members WHERE workspace = ? "
            "ORDER BY user_name",
            (self.ws,),
        ):
            members.setdefault(group, []).append(user)
        return [
            Group(name, summary, tuple(members.get(name, ())))
            for name, summary in self.tx.all(
                "SELECT name, summary FROM tm_ws_groups WHERE workspace = ? ORDER BY name",
                (self.ws,),
            )
        ]

    def grants(self) -> dict[str, dict[str, Role]]:
        found: dict[str, dict[str, Role]] = {}
        for target, grantee, role in self.tx.all(
            "SELECT target, grantee, role FROM tm_ws_grants WHERE workspace = ?", (self.ws,)
        ):
            found.setdefault(target, {})[grantee] = cast(Role, role)
        return found

    def set_grant(self, target: str, grantee: str, role: Role | None) -> None:
        self.tx.execute(
            "DELETE FROM tm_ws_grants WHERE workspace = ? AND target = ? AND grantee = ?",
            (self.ws, target, grantee),
        )
        if role is not None:
            self.tx.execute(
                "INSERT INTO tm_ws_grants (workspace, target, grantee, role) VALUES (?, ?, ?, ?)",
                (self.ws, target, grantee, role),
            )

    # Folders.

    def folder(self, name: str) -> Folder | None:
        row = self.tx.one(
            "SELECT name, summary, created_by, created_at FROM tm_ws_folders "
            "WHERE workspace = ? AND name = ?",
            (self.ws, name),
        )
        if row is None:
            return None
        roles = self.grants().get(f"f/{name}", {})
        return Folder(row[0], row[1], dict(roles), row[2], float(row[3]))

    def folders(self) -> list[Folder]:
        grants = self.grants()
        return [
            Folder(name, summary, dict(grants.get(f"f/{name}", {})), by, float(at))
            for name, summary, by, at in self.tx.all(
                "SELECT name, summary, created_by, created_at FROM tm_ws_folders "
                "WHERE workspace = ? ORDER BY name",
                (self.ws,),
            )
        ]

    def add_folder(self, name: str, summary: str, by: str, now: float) -> None:
        self.tx.execute(
            "INSERT INTO tm_ws_folders (workspace, name, summary, created_by, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (self.ws, name, summary, by, now),
        )

    def set_folder_summary(self, name: str, summary: str) -> None:
        self.tx.execute(
            "UPDATE tm_ws_folders SET summary = ? WHERE workspace = ? AND name = ?",
            (summary, self.ws, name),
        )

    # Items and versions.

    def item(self, path: str) -> StoredItem | None:
        row = self.tx.one(
            f"SELECT {_ITEM} FROM tm_ws_items WHERE workspace = ? AND path = ?", (self.ws, path)
        )
        return None if row is None else _item(row)

    def items(
        self,
        prefix: str,
        *,
        after: str | None,
        limit: int,
        kind: ItemKind | None,
        deleted: bool,
    ) -> list[Item]:
        # Byte order on both databases (SQLite's default; "C" on PostgreSQL, with an
        # index of its own), so pages follow one order and a prefix is a key range.
        path = 'path COLLATE "C"' if self.tx.dialect == "postgres" else "path"
        sql = f"SELECT {_ITEM} FROM tm_ws_items WHERE workspace = ? AND {path} > ?"
        params: list[Any] = [self.ws, after or ""]
        if prefix:
            # Path characters sort below '~': [prefix, prefix + '~') holds every path
            # under it; substr makes it exact for any prefix text.
            sql += f" AND {path} >= ? AND {path} < ? AND substr(path, 1, ?) = ?"
            params += [prefix, prefix + "~", len(prefix), prefix]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        if not deleted:
            sql += " AND deleted_at IS NULL"
        sql += f" ORDER BY {path} LIMIT ?"
        params.append(limit)
        return [_item(row, with_value=False).item for row in self.tx.all(sql, params)]

    def search_entries(self) -> list[tuple[str, str, str, str]]:
        """(path, kind, summary, description) of every live item."""
        return [
            (str(p), str(k), str(s), str(d))
            for p, k, s, d in self.tx.all(
                "SELECT path, kind, summary, description FROM tm_ws_items "
                "WHERE workspace = ? AND deleted_at IS NULL ORDER BY path",
                (self.ws,),
            )
        ]

    def put_item(self, item: Item, body: str, *, exists: bool) -> None:
        values = (
            item.kind,
            item.summary,
            item.description,
            item.resource_type,
            item.secret,
            body,
            item.version,
            item.updated_by,
            item.updated_at,
        )
        if exists:
            self.tx.execute(
                "UPDATE tm_ws_items SET kind = ?, summary = ?, description = ?, "
                "resource_type = ?, secret = ?, body = ?, version = ?, updated_by = ?, "
                "updated_at = ?, deleted_at = NULL WHERE workspace = ? AND path = ?",
                (*values, self.ws, item.path),
            )
        else:
            self.tx.execute(
                "INSERT INTO tm_ws_items (kind, summary, description, resource_type, secret, "
                "body, version, updated_by, updated_at, workspace, path) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, self.ws, item.path),
            )
        self.bump()

    def mark_deleted(self, path: str, now: float) -> None:
        self.tx.execute(
            "UPDATE tm_ws_items SET deleted_at = ? WHERE workspace = ? AND path = ?",
            (now, self.ws, path),
        )
        self.bump()

    def add_version(self, version: Version) -> None:
        self.tx.execute(
            f"INSERT INTO tm_ws_versions (workspace, {_VERSION}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.ws,
                version.path,
                version.version,
                version.kind,
                version.summary,
                version.description,
                dumps(version.value),
                version.message,
                version.created_by,
                version.created_at,
                version.resource_type,
            ),
        )
        # Keep the current version and at most MAX_VERSIONS superseded ones.
        self.tx.execute(
            "DELETE FROM tm_ws_versions WHERE workspace = ? AND path = ? AND version <= ?",
            (self.ws, version.path, version.version - MAX_VERSIONS - 1),
        )

    def versions(self, path: str) -> list[Version]:
        return [
            _version(row)
            for row in self.tx.all(
                f"SELECT {_VERSION} FROM tm_ws_versions WHERE workspace = ? AND path = ? "
                "ORDER BY version DESC",
                (self.ws, path),
            )
        ]

    def last_version(self, path: str) -> int:
        """The highest version kept for a path (0: none)."""
        row = self.tx.one(
            "SELECT MAX(version) FROM tm_ws_versions WHERE workspace = ? AND path = ?",
            (self.ws, path),
        )
        return 0 if row is None or row[0] is None else int(row[0])

    def version(self, path: str, number: int) -> Version | None:
        row = self.tx.one(
            f"SELECT {_VERSION} FROM tm_ws_versions WHERE workspace = ? AND path = ? "
            "AND version = ?",
            (self.ws, path, number),
        )
        return None if row is None else _version(row)

    def clear_versions(self, path: str, keep: int) -> int:
        cursor = self.tx.execute(
            "DELETE FROM tm_ws_versions WHERE workspace = ? AND path = ? AND version <> ?",
            (self.ws, path, keep),
        )
        return max(0, int(cursor.rowcount))

    # Drafts.

    def draft(self, path: str, owner: str) -> Draft | None:
        row = self.tx.one(
            f"SELECT {_DRAFT} FROM tm_ws_drafts WHERE workspace = ? AND path = ? AND owner = ?",
            (self.ws, path, owner),
        )
        return None if row is None else _draft(row)

    def drafts(self, owner: str) -> list[Draft]:
        return [
            _draft(row)
            for row in self.tx.all(
                f"SELECT {_DRAFT} FROM tm_ws_drafts WHERE workspace = ? AND owner = ? "
                "ORDER BY path",
                (self.ws, owner),
            )
        ]

    def put_draft(self, draft: Draft) -> None:
        self.drop_draft(draft.path, draft.owner)
        self.tx.execute(
            f"INSERT INTO tm_ws_drafts (workspace, {_DRAFT}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.ws,
                draft.path,
                draft.owner,
                draft.kind,
                draft.summary,
                draft.description,
                dumps(draft.value),
                draft.updated_at,
                draft.resource_type,
            ),
        )

    def drop_draft(self, path: str, owner: str) -> bool:
        cursor = self.tx.execute(
            "DELETE FROM tm_ws_drafts WHERE workspace = ? AND path = ? AND owner = ?",
            (self.ws, path, owner),
        )
        return int(cursor.rowcount) > 0

    # The audit log.

    def audit(
        self, actor: str, action: str, path: str | None, details: dict[str, Any], now: float
    ) -> None:
        self.tx.execute(
            "INSERT INTO tm_ws_audit (workspace, at, actor, action, path, details) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (self.ws, now, actor, action, path, dumps(details)),
        )

    def audit_entries(
        self,
        *,
        actor: str | None,
        action: str | None,
        path: str | None,
        after: int,
        limit: int,
    ) -> list[AuditEntry]:
        sql = (
            "SELECT id, at, actor, action, path, details FROM tm_ws_audit "
            "WHERE workspace = ? AND id > ?"
        )
        params: list[Any] = [self.ws, after]
        for column, value in (("actor", actor), ("action", action)):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        if path is not None:
            sql += " AND substr(path, 1, ?) = ?"
            params += [len(path), path]
        sql += " ORDER BY id LIMIT ?"
        params.append(limit)
        return [
            AuditEntry(int(i), float(at), who, what, where, json.loads(details))
            for i, at, who, what, where, details in self.tx.all(sql, params)
        ]

    def paths(self, paths: Iterable[str]) -> dict[str, StoredItem]:
        """The stored items at these paths (those that exist)."""
        found: dict[str, StoredItem] = {}
        for path in paths:
            stored = self.item(path)
            if stored is not None:
                found[path] = stored
        return found


def record_audit(
    tx: Tx,
    *,
    workspace: str,
    actor: str,
    action: str,
    path: str | None = None,
    details: dict[str, Any] | None = None,
    now: float | None = None,
) -> None:
    """Add an audit row from outside the workspace's own operations, in `tx`.

    The engine records what happens to a workspace's runs with it (an
    approval decided, an answer given), in the transaction that does it.
    """
    import time

    Queries(tx, workspace).audit(actor, action, path, details or {}, now or time.time())
