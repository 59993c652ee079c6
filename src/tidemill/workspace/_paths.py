"""Workspace paths: `u/<user>/<name>` and `f/<folder>/<name>`, where every item lives.

A path has a root (`u` for a user's own items, `f` for a folder's), an owner
(the user or the folder) and a name of one or more segments
(`f/support/agents/triage`). Segments are lower case letters, digits, `_` and
`-`, starting with a letter or a digit, so a path is also a safe relative file
name in a synced directory.

Examples:
    >>> path = ItemPath.parse("f/support/agents/triage")
    >>> path.root, path.owner, path.name, path.folder
    ('f', 'support', 'agents/triage', 'support')
    >>> ItemPath.parse("u/alice/notes").user
    'alice'
    >>> ItemPath.parse("f/Support/x")
    Traceback (most recent call last):
    ...
    tidemill.workspace._paths.InvalidPath: 'f/Support/x' is not a workspace path: ...
    >>> is_item_path("f/support/triage"), is_item_path("child.yaml")
    (True, False)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tidemill.errors import ConfigurationError

__all__ = ["NAME", "InvalidPath", "ItemPath", "check_name", "is_item_path"]

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}\Z")
"""One segment of a path, and the form of user, group and folder names."""

_SHAPE = "u/<user>/<name> or f/<folder>/<name>, segments of a-z, 0-9, '_' and '-'"


class InvalidPath(ConfigurationError, ValueError):
    """A path, or a user, group or folder name, that the workspace cannot hold."""


def check_name(name: str, *, what: str) -> str:
    """Return `name` when it is a valid user, group or folder name, else raise `InvalidPath`.

    Examples:
        >>> check_name("ops-team", what="group")
        'ops-team'
    """
    if not isinstance(name, str) or not NAME.match(name):
        raise InvalidPath(
            f"{name!r} is not a valid {what} name.",
            hint="Use 1 to 64 characters: a-z, 0-9, '_' and '-', starting with a letter or digit.",
        )
    return name


def is_item_path(text: str) -> bool:
    """Whether `text` reads as a workspace path (rather than, say, a file name)."""
    try:
        ItemPath.parse(text)
    except InvalidPath:
        return False
    return True


@dataclass(frozen=True, slots=True, order=True)
class ItemPath:
    """Where an item lives in a workspace."""

    root: Literal["u", "f"]
    """`u`: a user's own items; `f`: a folder's."""
    owner: str
    """The user (under `u/`) or the folder (under `f/`)."""
    name: str
    """The rest of the path: one or more segments joined by `/`."""

    @classmethod
    def parse(cls, text: str) -> ItemPath:
        """Read a path, raising `InvalidPath` with the expected shape when it is not one."""
        parts = text.split("/") if isinstance(text, str) else []
        if (
            len(parts) < 3
            or parts[0] not in ("u", "f")
            or len(text) > 255
            or not all(NAME.match(part) for part in parts[1:])
        ):
            raise InvalidPath(
                f"{text!r} is not a workspace path: write {_SHAPE}.",
                hint="For example f/support/triage or u/alice/notes.",
            )
        root: Literal["u", "f"] = "u" if parts[0] == "u" else "f"
        return cls(root, parts[1], "/".join(parts[2:]))

    @property
    def folder(self) -> str | None:
        """The folder of an `f/` path; None for a user's path."""
        return self.owner if self.root == "f" else None

    @property
    def user(self) -> str | None:
        """The user of a `u/` path; None for a folder's path."""
        return self.owner if self.root == "u" else None

    @property
    def prefix(self) -> str:
        """`f/<folder>` or `u/<user>`: what grants on the owner are keyed by."""
        return f"{self.root}/{self.owner}"

    def __str__(self) -> str:
        return f"{self.root}/{self.owner}/{self.name}"
