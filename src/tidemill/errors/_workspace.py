"""Errors of the workspace (`tidemill.workspace`): permissions, items, references.

A `PermissionDenied` says the acting principal may not do what it asked; an
`ItemNotFound` that nothing the principal may read is at that path (the two
look alike to someone who may not read the path, so a refusal never tells
whether an item exists); a `ReferenceError` that a `$var:` or `$res:`
reference inside a step's inputs could not be resolved as the run's identity.
"""

from __future__ import annotations

from tidemill.errors._base import TidemillError

__all__ = [
    "ItemNotFound",
    "PermissionDenied",
    "SignInFailed",
    "SignInThrottled",
    "UnresolvedReference",
    "VersionConflict",
    "WorkspaceError",
]


class WorkspaceError(TidemillError):
    """A workspace operation could not be done; nothing was changed."""


class PermissionDenied(WorkspaceError):
    """The acting principal may not do this (a disabled user may do nothing).

    Examples:
        >>> str(PermissionDenied("alice may not write f/ops/deploy.", hint="Ask a folder admin."))
        'alice may not write f/ops/deploy. Hint: Ask a folder admin.'
    """


class ItemNotFound(WorkspaceError):
    """No item, version, draft, user, group or folder the principal may see by that name."""


class VersionConflict(WorkspaceError):
    """The item changed since the version the write was based on."""


class UnresolvedReference(WorkspaceError):
    """A `$var:` or `$res:` reference names nothing the run's identity may read.

    The step fails with this error and no value; the message names the
    reference and the identity, never a secret.
    """


class SignInFailed(WorkspaceError):
    """A user name and password, a token or a session signs no one in.

    The message never says which part was wrong (an unknown user and a wrong
    password read alike); a token that expired or was revoked says so.
    """


class SignInThrottled(SignInFailed):
    """Too many failed sign-ins for this user or address; `context["retry_after"]` says when."""
