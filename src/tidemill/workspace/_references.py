"""`$var:` and `$res:` references: resolved when a job runs, as the run's identity.

A string that is exactly `$var:<path>` becomes the variable's value (a secret
one decrypted, and noted so that the job's logs mask it); one that is exactly
`$res:<path>` becomes the resource's value, with the references inside it
resolved in turn. A reference the identity may not read, or that names
nothing, or a kind it cannot be, is an `UnresolvedReference` naming the
reference and the identity: never a value.

Examples:
    >>> has_references({"to": "$var:f/ops/email", "n": 3}), has_references(["plain"])
    (True, False)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tidemill.errors import UnresolvedReference
from tidemill.workspace._session import Context

__all__ = ["MAX_DEPTH", "REFERENCE", "Resolved", "has_references", "resolve_references"]

REFERENCE = re.compile(r"^\$(var|res):([uf](?:/[a-z0-9][a-z0-9_-]{0,63}){2,})\Z")
"""A whole string that names a variable or a resource by path."""

MAX_DEPTH = 8
"""How deep resources may refer to resources."""


@dataclass(slots=True)
class Resolved:
    """A value with its references replaced, and what resolving them read."""

    value: Any = field(repr=False)
    secrets: set[str] = field(default_factory=set, repr=False)
    """The plaintexts of the secrets it holds: what the job's logs must mask."""
    read: dict[str, int] = field(default_factory=dict)
    """Path to the version read (0 for variables, which are not versioned)."""


def has_references(value: Any) -> bool:
    """Whether `value` holds a `$var:` or `$res:` reference anywhere."""
    if isinstance(value, str):
        return value.startswith("$") and REFERENCE.match(value) is not None
    if isinstance(value, Mapping):
        return any(has_references(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_references(v) for v in value)
    return False


def resolve_references(ctx: Context, value: Any, *, purpose: str = "") -> Resolved:
    """Replace every reference in `value`, reading as `ctx`'s principal.

    Args:
        ctx: The transaction and the identity the references are read as.
        value: Plain JSON data (a step's inputs, a resource's value).
        purpose: What it is for, recorded in the audit row of each secret read
            (`run <id> step <id>`).

    Raises:
        UnresolvedReference: A reference the identity cannot read, or that
            names nothing of its kind, or resources referring in a cycle.
    """
    resolved = Resolved(None)
    resolved.value = _walk(ctx, value, resolved, purpose, ())
    return resolved


def _walk(ctx: Context, value: Any, out: Resolved, purpose: str, chain: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        match = REFERENCE.match(value) if value.startswith("$") else None
        return value if match is None else _one(ctx, match[1], match[2], out, purpose, chain)
    if isinstance(value, Mapping):
        return {k: _walk(ctx, v, out, purpose, chain) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(ctx, v, out, purpose, chain) for v in value]
    return value


def _one(
    ctx: Context, kind: str, path: str, out: Resolved, purpose: str, chain: tuple[str, ...]
) -> Any:
    written = f"${kind}:{path}"
    who = ctx.principal.name
    if path in chain or len(chain) >= MAX_DEPTH:
        trail = " -> ".join((*chain, path))
        raise UnresolvedReference(
            f"{written}: resources refer to each other in a cycle or too deeply ({trail}).",
            hint=f"Resources may nest {MAX_DEPTH} deep; break the cycle.",
            context={"reference": written},
        )
    stored = ctx.q.item(path) if ctx.rules.allows("read", path) else None
    wanted = "variable" if kind == "var" else "resource"
    if stored is None or stored.item.deleted or stored.item.kind != wanted:
        raise UnresolvedReference(
            f"{written} names no {wanted} that {who} may read.",
            hint=f"Check the path, or ask a folder admin to give {who} the viewer role on it.",
            context={"reference": written, "identity": who},
        )
    item = stored.item
    if kind == "var":
        out.read[path] = 0
        if not item.secret:
            return item.value
        plaintext = ctx.data_key().decrypt(json.loads(stored.body), aad=f"{ctx.q.ws}/{path}")
        out.secrets.add(plaintext)
        ctx.audit("secret.decrypt", path, purpose=purpose or "resolve")
        return plaintext
    out.read[path] = item.version
    return _walk(ctx, item.value, out, purpose, (*chain, path))
