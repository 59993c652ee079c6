"""Who is asking: the signed-in user (by session cookie or bearer token), or no one.

`caller` reads the `Authorization: Bearer <token>` header or the session
cookie; a cookie-signed request that changes anything must also send the
session's CSRF token in `X-CSRF-Token`. `signed_in` refuses anonymous
callers; `Caller.require` checks a token's scopes before a route asks the
workspace (which asks its permission module as the user): a scope narrows
what the user may do, never widens it.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, Request

from tidemill.errors import PermissionDenied, SignInFailed
from tidemill.server._state import ServerState, state_of
from tidemill.workspace import AsyncWorkspace, Scope
from tidemill.workspace._credentials import allowed_by, digest

__all__ = [
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "Caller",
    "SignedIn",
    "caller",
    "requires",
    "signed_in",
]

SESSION_COOKIE = "tidemill_session"
CSRF_COOKIE = "tidemill_csrf"
CSRF_HEADER = "X-CSRF-Token"
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request is from."""

    user: str | None
    """The signed-in user; None: anonymous."""
    via: Literal["anonymous", "session", "token"]
    scopes: tuple[Scope, ...] | None = None
    """A token's scopes; None: the user's full rights."""
    token_id: str | None = None
    workspace: AsyncWorkspace | None = None
    """The workspace as this user (None for an anonymous caller)."""

    def allows(self, domain: str, action: str, path: str | None = None) -> bool:
        """Whether the caller's scopes allow it (the workspace then asks its own rules)."""
        return self.user is not None and allowed_by(self.scopes, domain, action, path)

    def require(self, domain: str, action: str, path: str | None = None) -> None:
        """Return when the scopes allow it, else raise `PermissionDenied`."""
        if not self.allows(domain, action, path):
            where = f" on {path}" if path else ""
            raise PermissionDenied(
                f"This token may not {action} {domain}{where}.",
                hint=f"Use a token with a scope like {domain}:{action}"
                + (f":{path}" if path else "")
                + " (tidemill ws tokens create --scope ...).",
                context={"domain": domain, "action": action, "path": path},
            )

    @property
    def ws(self) -> AsyncWorkspace:
        """The workspace as the caller; only for a signed-in caller."""
        if self.workspace is None:
            raise SignInFailed(
                "Sign in first.", hint="Send a token: Authorization: Bearer tm_pat_..."
            )
        return self.workspace


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


async def caller(request: Request, state: Annotated[ServerState, Depends(state_of)]) -> Caller:
    """The request's caller (anonymous when it presents nothing)."""
    token = _bearer(request)
    from_cookie = False
    if token is None:
        token = request.cookies.get(SESSION_COOKIE)
        from_cookie = token is not None
    if token is None:
        if request.headers.get("authorization"):
            raise SignInFailed(
                "The Authorization header is not a bearer token.",
                hint="Send Authorization: Bearer tm_pat_...",
            )
        return Caller(None, "anonymous")
    identity = await state.authenticator.authenticate(token)
    if from_cookie and request.method not in _SAFE:
        sent = request.headers.get(CSRF_HEADER, "")
        if not identity.csrf_digest or not hmac.compare_digest(digest(sent), identity.csrf_digest):
            raise PermissionDenied(
                "This request changes something but has no valid CSRF token.",
                hint=f"Send the session's CSRF token (from sign-in) in the {CSRF_HEADER} header.",
            )
    via: Literal["session", "token"] = "session" if identity.kind == "session" else "token"
    return Caller(
        identity.user,
        via,
        identity.scopes,
        identity.token_id,
        state.workspace.signed_in(identity.user),
    )


async def signed_in(who: Annotated[Caller, Depends(caller)]) -> Caller:
    """The caller, who must be signed in."""
    if who.user is None:
        raise SignInFailed(
            "This route needs a signed-in caller.",
            hint="Send a token (Authorization: Bearer tm_pat_...) or sign in at /api/auth/sign-in.",
        )
    return who


SignedIn = Annotated[Caller, Depends(signed_in)]
"""A route parameter: the signed-in caller."""


def requires(domain: str) -> Any:
    """A dependency for a router or route: the caller signed in, with a scope in `domain`.

    The action is the request's: `read` for GET and HEAD, `write` otherwise.
    A route about one path checks that path too (`Caller.require`); this one
    refuses a token whose scopes are all elsewhere before anything is read.
    """

    async def check(request: Request, who: Annotated[Caller, Depends(signed_in)]) -> Caller:
        who.require(domain, "read" if request.method in ("GET", "HEAD") else "write")
        return who

    dependency: Callable[..., Awaitable[Caller]] = check
    return Depends(dependency)
