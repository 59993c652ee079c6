"""What `pull` and `push` answer: the files written, and each change a push makes.

A `PushPlan` is shown before a push is applied (and is all a dry run does):
each item and folder of the directory, and whether the push creates it,
updates it (with a diff of the value's text) or leaves it unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tidemill.workspace._models import ItemKind, Role

__all__ = ["DIFF_LINES", "Change", "FolderChange", "ItemChange", "PullReport", "PushPlan"]

Change = Literal["create", "update", "unchanged"]
"""What a push does to an item or a folder."""

DIFF_LINES = 40
"""The most lines of an update's diff a plan keeps; the rest is counted, not shown."""


# --- what pull and push answer ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PullReport:
    """What `pull` wrote.

    Attributes:
        root: The directory.
        files: The files written, relative to `root`, sorted.
        counts: How many of each kind were written (`folder` for folder.meta.yaml files).
        secrets: The secret variables, written without their values.
    """

    root: str
    files: tuple[str, ...]
    counts: dict[str, int]
    secrets: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "root": self.root,
            "files": list(self.files),
            "counts": dict(self.counts),
            "secrets_without_value": list(self.secrets),
        }


@dataclass(frozen=True, slots=True)
class ItemChange:
    """What a push does to one item.

    Attributes:
        path: The item's path.
        kind: Its kind.
        file: The file it comes from.
        change: `create`, `update` or `unchanged`.
        fields: For an update, what differs (`value`, `summary`, `description`,
            `type`, `secret`, `kind`).
        diff: For an update of the value, a unified diff of it (never of a
            secret), cut after `DIFF_LINES` lines.
        repinned: Each pin of the item to an item of the push that the push
            stores re-pinned to the version it writes (`old -> new`; see
            `tidemill.workspace._sync_pins`).
    """

    path: str
    kind: ItemKind
    file: str
    change: Change
    fields: tuple[str, ...] = ()
    diff: str = ""
    repinned: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "path": self.path,
            "kind": self.kind,
            "file": self.file,
            "change": self.change,
            "fields": list(self.fields),
            "diff": self.diff,
            "repinned": list(self.repinned),
        }


@dataclass(frozen=True, slots=True)
class FolderChange:
    """What a push does to one folder.

    Attributes:
        folder: The folder's name.
        file: Its folder.meta.yaml.
        change: `create`, `update` or `unchanged`.
        fields: For an update, what differs (`summary`, `roles`).
        roles: For a create or a change of roles, the roles it will have.
    """

    folder: str
    file: str
    change: Change
    fields: tuple[str, ...] = ()
    roles: Mapping[str, Role] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "folder": self.folder,
            "file": self.file,
            "change": self.change,
            "fields": list(self.fields),
            "roles": dict(self.roles),
        }


@dataclass(frozen=True, slots=True)
class PushPlan:
    """What a push does (or, for a dry run, would do).

    Attributes:
        folders: Each folder of the directory, by name.
        items: Each item of the directory, by path.
        applied: Whether the changes were written (False for a dry run).
        message: The message of the versions written.
        problem: For a dry run, why the push would fail (None: it would succeed).
    """

    folders: tuple[FolderChange, ...] = ()
    items: tuple[ItemChange, ...] = ()
    applied: bool = False
    message: str = ""
    problem: str | None = None

    @property
    def changes(self) -> tuple[FolderChange | ItemChange, ...]:
        """The folders and items that are created or updated."""
        found: list[FolderChange | ItemChange] = [*self.folders, *self.items]
        return tuple(change for change in found if change.change != "unchanged")

    def counts(self) -> dict[str, int]:
        """How many folders and items are created, updated and unchanged."""
        counts = {"create": 0, "update": 0, "unchanged": 0}
        found: list[FolderChange | ItemChange] = [*self.folders, *self.items]
        for change in found:
            counts[change.change] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "applied": self.applied,
            "message": self.message,
            "counts": self.counts(),
            "problem": self.problem,
            "folders": [change.to_dict() for change in self.folders],
            "items": [change.to_dict() for change in self.items],
        }
