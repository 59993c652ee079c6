"""Passwords, tokens and scopes: what signing in is made of, with no store behind it.

A password is kept as its scrypt hash (random salt, parameters in the text). A
token is `tm_<kind>_<id>_<secret>`: the id is its visible prefix and its key
in the store, the secret is kept only as a SHA-256 digest (it is 256 random
bits, so a slow hash would add nothing), and both are compared in constant
time. A scope is `{domain}:{action}[:{path glob}]`; a token's scopes narrow
what its user may do, never widen it.

Examples:
    >>> stored = hash_password("correct horse")
    >>> verify_password(stored, "correct horse"), verify_password(stored, "wrong horse")
    (True, False)
    >>> scope = Scope.parse("runs:write:f/support/*")
    >>> scope.allows("runs", "read", "f/support/triage"), scope.allows("runs", "write", "f/ops/x")
    (True, False)
    >>> Scope.parse("runs:delete")
    Traceback (most recent call last):
    ...
    tidemill.workspace._values.InvalidValue: The scope 'runs:delete' has the action 'delete'. ...
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from tidemill.workspace._values import InvalidValue

__all__ = [
    "DOMAINS",
    "MIN_PASSWORD",
    "Identity",
    "NewToken",
    "Scope",
    "Token",
    "TokenKind",
    "allowed_by",
    "check_password",
    "digest",
    "hash_password",
    "new_token",
    "parse_scopes",
    "parse_token",
    "verify_password",
]

MIN_PASSWORD = 10
"""The fewest characters a password may have."""

DOMAINS = ("items", "runs", "approvals", "people", "audit", "proxy", "hooks")
"""What a scope can be about: workspace items (and variables), runs, approvals and
the other waits, users/groups/folders/grants, the audit log, the proxy's models,
and webhooks (`hooks:write:<path>`: start the flow at that path by `POST /hooks/<path>`)."""

_ACTIONS = ("read", "write")
TokenKind = Literal["pat", "session"]
_SCRYPT = (2**14, 8, 1)  # n, r, p: about 16 MiB and tens of milliseconds per check


def check_password(password: str) -> str:
    """`password` when it is acceptable, else `InvalidValue` saying what is wrong."""
    if len(password) < MIN_PASSWORD:
        raise InvalidValue(
            f"The password has {len(password)} characters; it needs at least {MIN_PASSWORD}.",
            hint="Choose a longer password (a few words work well).",
        )
    if len(password) > 1024:
        raise InvalidValue(
            "The password is longer than 1024 characters.", hint="Choose a shorter one."
        )
    return password


def hash_password(password: str) -> str:
    """The text a password is stored as: `scrypt$n$r$p$salt$hash` (base64 parts)."""
    n, r, p = _SCRYPT
    salt = secrets.token_bytes(16)
    key = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32)
    return f"scrypt${n}${r}${p}${_b64(salt)}${_b64(key)}"


def verify_password(stored: str, password: str) -> bool:
    """Whether `password` is the one `stored` was made from (constant time)."""
    try:
        scheme, n, r, p, salt, key = stored.split("$")
        if scheme != "scrypt":
            return False
        found = hashlib.scrypt(
            password.encode(), salt=_unb64(salt), n=int(n), r=int(r), p=int(p), dklen=32
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(found, _unb64(key))


def digest(secret: str) -> str:
    """How a token's secret part is stored: its SHA-256, hex."""
    return hashlib.sha256(secret.encode()).hexdigest()


def new_token(kind: TokenKind) -> tuple[str, str, str]:
    """A new token: `(id, secret, text)`, where `text` is what its holder presents."""
    token_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return token_id, secret, f"tm_{kind}_{token_id}_{secret}"


def parse_token(text: str) -> tuple[TokenKind, str, str] | None:
    """`(kind, id, secret)` of a token's text; None when it is not shaped like one."""
    parts = text.split("_", 3)
    if len(parts) != 4 or parts[0] != "tm" or parts[1] not in ("pat", "session"):
        return None
    kind: TokenKind = "pat" if parts[1] == "pat" else "session"
    if not parts[2] or not parts[3]:
        return None
    return kind, parts[2], parts[3]


@dataclass(frozen=True, slots=True)
class Scope:
    """One scope of a token: a domain (or `*`), an action (or `*`), an optional path glob.

    `write` includes `read`; a scope without a glob covers every path.
    """

    domain: str
    action: str
    glob: str | None = None

    @classmethod
    def parse(cls, text: str) -> Scope:
        """A scope from its text, `{domain}:{action}[:{path glob}]` (or `*` for everything)."""
        if text == "*":
            return cls("*", "*")
        parts = text.split(":", 2)
        hint = (
            f"Write {{domain}}:{{action}}[:{{path glob}}], with a domain of {', '.join(DOMAINS)} "
            "(or *) and an action of read, write (or *): for example runs:write:f/support/*."
        )
        if len(parts) < 2:
            raise InvalidValue(f"The scope {text!r} has no action.", hint=hint)
        domain, action = parts[0], parts[1]
        if domain not in (*DOMAINS, "*"):
            raise InvalidValue(f"The scope {text!r} has the domain {domain!r}.", hint=hint)
        if action not in (*_ACTIONS, "*"):
            raise InvalidValue(f"The scope {text!r} has the action {action!r}.", hint=hint)
        glob = parts[2] if len(parts) == 3 else None
        if glob is not None and (not glob or not glob.startswith(("u/", "f/", "*"))):
            raise InvalidValue(
                f"The scope {text!r} has the path glob {glob!r}.",
                hint="A path glob starts with u/ or f/ (for example f/support/*).",
            )
        return cls(domain, action, glob)

    def allows(self, domain: str, action: str, path: str | None = None) -> bool:
        """Whether this scope lets a token do `action` in `domain` (on `path`, when given).

        With no path (a list, say) a path-scoped scope allows it, and what is
        listed is then narrowed to the paths it covers.
        """
        if self.domain not in ("*", domain):
            return False
        if self.action not in ("*", action) and not (self.action == "write" and action == "read"):
            return False
        return self.glob is None or path is None or fnmatchcase(path, self.glob)

    def __str__(self) -> str:
        if self.domain == "*" and self.action == "*" and self.glob is None:
            return "*"
        return f"{self.domain}:{self.action}" + (f":{self.glob}" if self.glob else "")


def parse_scopes(texts: Iterable[str]) -> tuple[Scope, ...]:
    """Each scope of `texts`, parsed; at least one is needed."""
    scopes = tuple(Scope.parse(text.strip()) for text in texts)
    if not scopes:
        raise InvalidValue(
            "A token needs at least one scope.",
            hint="Give * for everything its user may do, or e.g. runs:read.",
        )
    return scopes


def allowed_by(
    scopes: Iterable[Scope] | None, domain: str, action: str, path: str | None = None
) -> bool:
    """Whether any of `scopes` allows it; None (a password or browser session) allows all."""
    return scopes is None or any(s.allows(domain, action, path) for s in scopes)


@dataclass(frozen=True, slots=True)
class Token:
    """A token as listed: never its secret."""

    id: str
    kind: TokenKind
    user: str
    name: str
    prefix: str
    """What it starts with, to recognise it by: `tm_<kind>_<id>`."""
    scopes: tuple[str, ...]
    created_at: float
    expires_at: float | None
    last_used_at: float | None
    revoked_at: float | None


@dataclass(frozen=True, slots=True)
class NewToken:
    """A token just made: `text` is shown this once and never stored."""

    token: Token
    text: str
    csrf: str | None = None
    """For a browser session: the CSRF token its state-changing requests send back."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a presented token stands for."""

    user: str
    kind: TokenKind
    token_id: str
    scopes: tuple[Scope, ...] | None
    """A personal access token's scopes; None for a browser session (its user's full rights)."""
    csrf_digest: str | None = None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
