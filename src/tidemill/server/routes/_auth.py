"""Signing in and out, who am I, passwords and personal access tokens."""

from __future__ import annotations

import hmac
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field

from tidemill.errors import PermissionDenied, SignInFailed, SignInThrottled
from tidemill.server._caller import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    Caller,
    SignedIn,
    caller,
    requires,
)
from tidemill.server._errors import error_responses
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._body import Body
from tidemill.workspace import Token
from tidemill.workspace._credentials import digest
from tidemill.workspace._sign_in import DEFAULT_TOKEN_DAYS, SESSION_HOURS, _find

__all__ = ["router"]

router = APIRouter(prefix="/api/auth", tags=["auth"])


class SignIn(Body):
    """A user name and password."""

    user: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=1024)


class Session(BaseModel):
    """A signed-in browser session: the cookie is set; send `csrf` in `X-CSRF-Token`."""

    user: str
    csrf: str
    expires_at: float


class Me(BaseModel):
    """The caller as the workspace knows it."""

    user: str
    is_admin: bool
    groups: list[str]
    via: str
    scopes: list[str] | None
    expires_at: float | None
    """When the caller's session or token expires (null: a token that never does)."""
    csrf: str | None
    """For a browser session signed in by its cookie: its CSRF token, to send in
    `X-CSRF-Token` (null for a token caller, which needs none)."""


class TokenOut(BaseModel):
    """A token as listed (never its secret)."""

    id: str
    prefix: str
    name: str
    scopes: list[str]
    created_at: float
    expires_at: float | None
    last_used_at: float | None
    revoked_at: float | None

    @classmethod
    def of(cls, token: Token) -> TokenOut:
        return cls(
            id=token.id, prefix=token.prefix, name=token.name, scopes=list(token.scopes),
            created_at=token.created_at, expires_at=token.expires_at,
            last_used_at=token.last_used_at, revoked_at=token.revoked_at,
        )  # fmt: skip


class NewTokenIn(Body):
    """A token to make."""

    name: str = Field(min_length=1, max_length=200)
    scopes: list[str] = Field(default_factory=lambda: ["*"], min_length=1, max_length=50)
    expires_in_days: float | None = Field(default=DEFAULT_TOKEN_DAYS, gt=0, le=3650)


class NewTokenOut(BaseModel):
    """A token just made: `token` is shown this once."""

    token: str
    info: TokenOut


class PasswordIn(Body):
    """A new password."""

    password: str = Field(min_length=1, max_length=1024)


@router.post("/sign-in", response_model=Session, responses=error_responses(401, 429))
async def sign_in(
    body: SignIn,
    request: Request,
    response: Response,
    state: Annotated[ServerState, Depends(state_of)],
) -> Session:
    """Sign in with a password: sets the session cookie, answers the CSRF token."""
    address = request.client.host if request.client else "-"
    key = f"{body.user}|{address}"
    wait = state.limiter.wait(key)
    if wait > 0:
        raise SignInThrottled(
            "Too many failed sign-ins; try again later.",
            hint=f"Wait {round(wait)} s.",
            context={"retry_after": wait},
        )
    try:
        made = await state.authenticator.sign_in(body.user, body.password)
    except SignInFailed:
        state.limiter.failed(key)
        raise
    state.limiter.succeeded(key)
    secure = state.config.secure_cookies
    max_age = SESSION_HOURS * 3600
    response.set_cookie(
        SESSION_COOKIE, made.text, max_age=max_age, httponly=True, samesite="strict",
        secure=secure, path="/",
    )  # fmt: skip
    response.set_cookie(
        CSRF_COOKIE, made.csrf or "", max_age=max_age, httponly=False, samesite="strict",
        secure=secure, path="/",
    )  # fmt: skip
    expires = made.token.expires_at or time.time() + max_age
    return Session(user=body.user, csrf=made.csrf or "", expires_at=expires)


@router.post("/sign-out", status_code=204)
async def sign_out(
    request: Request,
    response: Response,
    who: Annotated[Caller, Depends(caller)],
    state: Annotated[ServerState, Depends(state_of)],
) -> Response:
    """End the browser session (its cookie is cleared); nothing for a token."""
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie and who.via == "session":
        await state.authenticator.sign_out(cookie)
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(CSRF_COOKIE, path="/")
    return response


async def _credential(
    request: Request, who: Caller, state: ServerState
) -> tuple[float | None, str | None]:
    """When the caller's credential expires, and its CSRF token if it is the session cookie.

    The server keeps only the CSRF token's digest: the token is the session's
    readable cookie, answered only when it is the one the session was given.
    """
    token_id = who.token_id
    if token_id is None:
        return None, None
    found = await state.engine.store.transact(
        lambda tx: _find(tx, state.config.workspace, token_id)
    )
    if found is None:
        return None, None
    token, _, csrf_digest = found
    sent = request.cookies.get(CSRF_COOKIE)
    by_cookie = who.via == "session" and "authorization" not in request.headers
    if by_cookie and sent and csrf_digest and hmac.compare_digest(digest(sent), csrf_digest):
        return token.expires_at, sent
    return token.expires_at, None


@router.get("/me", response_model=Me)
async def me(
    request: Request, who: SignedIn, state: Annotated[ServerState, Depends(state_of)]
) -> Me:
    """Who the caller is, when its session or token expires, and a session's CSRF token."""
    principal = await who.ws.whoami()
    expires_at, csrf = await _credential(request, who, state)
    return Me(
        user=principal.name,
        is_admin=principal.is_admin,
        groups=sorted(principal.groups),
        via=who.via,
        scopes=None if who.scopes is None else [str(s) for s in who.scopes],
        expires_at=expires_at,
        csrf=csrf,
    )


@router.put("/password", status_code=204, dependencies=[requires("people")])
async def set_own_password(body: PasswordIn, who: SignedIn) -> Response:
    """Set the caller's own password (a token needs the `people:write` scope)."""
    await who.ws.set_password(who.user or "", body.password)
    return Response(status_code=204)


@router.get("/tokens", response_model=list[TokenOut], dependencies=[requires("people")])
async def list_tokens(who: SignedIn, user: str | None = None) -> list[TokenOut]:
    """The caller's personal access tokens (an admin may name another `user`)."""
    return [TokenOut.of(t) for t in await who.ws.tokens(user=user)]


@router.post(
    "/tokens", response_model=NewTokenOut, status_code=201, dependencies=[requires("people")]
)
async def create_token(body: NewTokenIn, who: SignedIn) -> NewTokenOut:
    """Make a personal access token; its text is in this answer only."""
    if who.scopes is not None and "*" not in {str(s) for s in who.scopes}:
        # A scoped token may not mint a token that reaches further than itself.
        raise PermissionDenied(
            "A token with narrowed scopes may not make tokens.",
            hint="Make tokens signed in with a password, or with an unscoped token.",
        )
    made = await who.ws.create_token(
        body.name, scopes=body.scopes, expires_in_days=body.expires_in_days
    )
    return NewTokenOut(token=made.text, info=TokenOut.of(made.token))


@router.delete("/tokens/{token_id}", response_model=TokenOut, dependencies=[requires("people")])
async def revoke_token(token_id: str, who: SignedIn) -> TokenOut:
    """Revoke a token: the next request that presents it is refused."""
    return TokenOut.of(await who.ws.revoke_token(token_id))
