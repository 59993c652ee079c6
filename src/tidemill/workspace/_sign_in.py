"""Signing in: passwords, personal access tokens and browser sessions, stored hashed.

`SignInMethods` are the operations a principal asks (set a password, make,
list and revoke its tokens); `Authenticator` is what a front door asks before
anyone is signed in: does this password, or this token, sign a user in?
Revoking a token takes effect on the next request that presents it.
"""

from __future__ import annotations

import hmac
import json
import secrets
import time
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from tidemill.errors import ItemNotFound, SignInFailed
from tidemill.store import Store, Tx
from tidemill.workspace._credentials import (
    Identity,
    NewToken,
    Token,
    TokenKind,
    check_password,
    digest,
    hash_password,
    new_token,
    parse_scopes,
    parse_token,
    verify_password,
)
from tidemill.workspace._paths import ItemPath, check_name
from tidemill.workspace._queries import Queries
from tidemill.workspace._session import DEFAULT_WORKSPACE, Context, Session
from tidemill.workspace._values import InvalidValue

__all__ = ["DEFAULT_TOKEN_DAYS", "SESSION_HOURS", "Authenticator", "SignInMethods"]

DEFAULT_TOKEN_DAYS = 90
"""How long a personal access token lives unless told otherwise."""

SESSION_HOURS = 12
"""How long a browser session lives."""

_TOKEN = (
    "id, kind, user_name, name, scopes, created_at, expires_at, last_used_at, revoked_at, "
    "hash, csrf_hash"
)
_TOUCH_EVERY = 60.0  # seconds between writes of a token's last-used time


def _token(row: Sequence[Any]) -> Token:
    kind: TokenKind = "session" if row[1] == "session" else "pat"
    return Token(
        id=str(row[0]),
        kind=kind,
        user=str(row[2]),
        name=str(row[3]),
        prefix=f"tm_{kind}_{row[0]}",
        scopes=tuple(json.loads(row[4])),
        created_at=float(row[5]),
        expires_at=None if row[6] is None else float(row[6]),
        last_used_at=None if row[7] is None else float(row[7]),
        revoked_at=None if row[8] is None else float(row[8]),
    )


def _insert(
    tx: Tx,
    ws: str,
    kind: TokenKind,
    user: str,
    name: str,
    scopes: Iterable[str],
    now: float,
    expires_at: float | None,
    csrf: str | None = None,
) -> NewToken:
    token_id, secret, text = new_token(kind)
    scope_list = list(scopes)
    tx.execute(
        "INSERT INTO tm_ws_tokens (id, workspace, kind, user_name, name, hash, scopes, csrf_hash, "
        "created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            token_id, ws, kind, user, name, digest(secret), json.dumps(scope_list),
            None if csrf is None else digest(csrf), now, expires_at,
        ),
    )  # fmt: skip
    token = Token(
        token_id, kind, user, name, f"tm_{kind}_{token_id}", tuple(scope_list), now,
        expires_at, None, None,
    )  # fmt: skip
    return NewToken(token, text, csrf)


def _find(tx: Tx, ws: str, token_id: str) -> tuple[Token, str, str | None] | None:
    row = tx.one(
        f"SELECT {_TOKEN} FROM tm_ws_tokens WHERE workspace = ? AND id = ?", (ws, token_id)
    )
    return None if row is None else (_token(row), str(row[9]), row[10])


class SignInMethods(Session):
    """The password and token operations of `AsyncWorkspace`."""

    async def set_password(self, user: str, password: str) -> None:
        """Set `user`'s password (its own, or any user's for a workspace admin).

        Raises:
            InvalidValue: The password is too short (`MIN_PASSWORD`) or too long.
            PermissionDenied: Another user's password, and the principal is no admin.
        """
        user = check_name(user, what="user")
        stored = hash_password(check_password(password))

        def put(ctx: Context) -> None:
            if user != ctx.principal.name or ctx.principal.disabled:
                ctx.rules.check_admin(f"set the password of {user}")
            if ctx.q.principal(user) is None:
                raise ItemNotFound(f"There is no user {user!r}.", hint="tidemill ws users list")
            ctx.q.tx.execute(
                "DELETE FROM tm_ws_passwords WHERE workspace = ? AND user_name = ?",
                (ctx.q.ws, user),
            )
            ctx.q.tx.execute(
                "INSERT INTO tm_ws_passwords (workspace, user_name, hash, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (ctx.q.ws, user, stored, ctx.now),
            )
            ctx.audit("user.password", None, user=user)

        await self.transact(put)

    async def create_token(
        self,
        name: str,
        *,
        scopes: Iterable[str] = ("*",),
        expires_in_days: float | None = DEFAULT_TOKEN_DAYS,
    ) -> NewToken:
        """Make a personal access token for the principal; its text is in the answer, once.

        Args:
            name: What it is for, shown when tokens are listed.
            scopes: What it may do, each `{domain}:{action}[:{path glob}]`
                (`*`: everything its user may do). Scopes narrow its user's
                rights; they never add to them.
            expires_in_days: Its lifetime; None: it never expires.

        Raises:
            InvalidValue: A scope is malformed, or the lifetime is not positive.
        """
        texts = [str(scope) for scope in parse_scopes(scopes)]
        if expires_in_days is not None and not expires_in_days > 0:
            raise InvalidValue(
                f"A token's lifetime must be positive, not {expires_in_days} days.",
                hint="Give a number of days, or None for a token that never expires.",
            )
        label = name.strip()[:200]

        def put(ctx: Context) -> NewToken:
            ctx.rules.check_active("make tokens")
            until = None if expires_in_days is None else ctx.now + expires_in_days * 86400
            made = _insert(
                ctx.q.tx, ctx.q.ws, "pat", ctx.principal.name, label, texts, ctx.now, until
            )
            ctx.audit("token.create", None, token=made.token.prefix, scopes=texts)
            return made

        return await self.transact(put)

    async def create_hook_token(
        self, path: str, *, name: str | None = None, expires_in: float | None = None
    ) -> NewToken:
        """Make a token that may only start the flow at `path` by webhook (`POST /hooks/<path>`).

        Its one scope is `hooks:write:<path>`, that path exactly: it reads
        nothing, and starts no other flow. The run it starts runs as the
        principal, who must be allowed to run the flow (the viewer role on it)
        now and when each call comes.

        Args:
            path: The flow's path, e.g. `f/support/triage`.
            name: What it is for, shown when tokens are listed (default: `webhook <path>`).
            expires_in: Its lifetime in seconds; None: it never expires.

        Raises:
            ItemNotFound: No flow at `path` the principal may run.
            InvalidValue: `path` is no workspace path, or the lifetime is not positive.
            PermissionDenied: The principal is disabled.
        """
        path = str(ItemPath.parse(path))
        if expires_in is not None and not expires_in > 0:
            raise InvalidValue(
                f"A token's lifetime must be positive, not {expires_in} seconds.",
                hint="Give a number of seconds, or None for a token that never expires.",
            )
        scope = f"hooks:write:{path}"
        label = (name or f"webhook {path}").strip()[:200]

        def put(ctx: Context) -> NewToken:
            ctx.rules.check_active("make tokens")
            stored = ctx.q.item(path) if ctx.rules.allows("read", path) else None
            if stored is None or stored.item.deleted or stored.item.kind != "flow":
                raise ItemNotFound(
                    f"No flow at {path} that {ctx.principal.name} may run: "
                    "a webhook token is made for a deployed flow.",
                    hint=f"List the flows: tidemill ws list {path.rsplit('/', 1)[0]} --kind flow",
                    context={"path": path},
                )
            until = None if expires_in is None else ctx.now + expires_in
            made = _insert(
                ctx.q.tx, ctx.q.ws, "pat", ctx.principal.name, label, [scope], ctx.now, until
            )
            ctx.audit("token.create", path, token=made.token.prefix, scopes=[scope])
            return made

        return await self.transact(put)

    async def tokens(self, *, user: str | None = None) -> list[Token]:
        """The principal's personal access tokens (a workspace admin may name another user)."""
        owner = self.user if user is None else check_name(user, what="user")

        def read(ctx: Context) -> list[Token]:
            ctx.rules.check_active("list tokens")
            if owner != ctx.principal.name:
                ctx.rules.check_admin(f"list the tokens of {owner}")
            rows = ctx.q.tx.all(
                f"SELECT {_TOKEN} FROM tm_ws_tokens WHERE workspace = ? AND user_name = ? "
                "AND kind = 'pat' ORDER BY created_at, id",
                (ctx.q.ws, owner),
            )
            return [_token(row) for row in rows]

        return await self.transact(read)

    async def revoke_token(self, token_id: str) -> Token:
        """Revoke a token (the principal's own, or any for a workspace admin).

        The next request that presents it is refused. `token_id` may also be
        its prefix (`tm_pat_<id>`) or the whole token.
        """
        parsed = parse_token(token_id + ("_x" if token_id.count("_") == 2 else ""))
        wanted = parsed[1] if parsed else token_id

        def revoke(ctx: Context) -> Token:
            ctx.rules.check_active("revoke tokens")
            found = _find(ctx.q.tx, ctx.q.ws, wanted)
            if found is None or (found[0].user != ctx.principal.name and not ctx.rules.is_admin):
                raise ItemNotFound(
                    f"There is no token {wanted!r} of {ctx.principal.name}.",
                    hint="tidemill ws tokens list shows the ids.",
                )
            token = found[0]
            if token.revoked_at is None:
                ctx.q.tx.execute(
                    "UPDATE tm_ws_tokens SET revoked_at = ? WHERE id = ?", (ctx.now, token.id)
                )
                ctx.audit("token.revoke", None, token=token.prefix, user=token.user)
            return _token_revoked(token, ctx.now)

        return await self.transact(revoke)


def _token_revoked(token: Token, now: float) -> Token:
    if token.revoked_at is not None:
        return token
    return Token(
        token.id, token.kind, token.user, token.name, token.prefix, token.scopes,
        token.created_at, token.expires_at, token.last_used_at, now,
    )  # fmt: skip


class Authenticator:
    """What a front door asks before anyone is signed in.

    Args:
        store: The store the workspace is in.
        workspace: The workspace's name.

    Examples:
        >>> import asyncio, tempfile
        >>> from tidemill.workspace import AsyncWorkspace
        >>> async def main():
        ...     async with AsyncWorkspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada") as ws:
        ...         await ws.set_password("ada", "correct horse battery")
        ...         made = await ws.create_token("ci", scopes=["runs:read"])
        ...         auth = Authenticator(ws.store)
        ...         who = await auth.authenticate(made.text)
        ...         session = await auth.sign_in("ada", "correct horse battery")
        ...         return who.user, [str(s) for s in who.scopes], session.token.kind
        >>> asyncio.run(main())
        ('ada', ['runs:read'], 'session')
    """

    def __init__(self, store: Store, workspace: str = DEFAULT_WORKSPACE) -> None:
        self.store = store
        self.workspace = check_name(workspace, what="workspace")

    async def is_new(self) -> bool:
        """Whether the workspace has no users yet (its first user becomes its admin)."""

        def read(tx: Tx) -> bool:
            return Queries(tx, self.workspace).count_users() == 0

        fresh: bool = await self.store.transact(read)
        return fresh

    async def sign_in(
        self, user: str, password: str, *, hours: float = SESSION_HOURS, csrf: str = ""
    ) -> NewToken:
        """A browser session for `user`, when `password` is theirs.

        The answer's `text` goes in an HttpOnly cookie, its `csrf` back in a
        header of each state-changing request (`csrf`: the one to use, else a
        new one).

        Raises:
            SignInFailed: No such user, no password set, a wrong one, or a disabled user.
        """
        token = csrf or secrets.token_urlsafe(24)
        now = time.time()

        def check(tx: Tx) -> str | None:
            q = Queries(tx, self.workspace)
            principal = q.principal(user)
            row = tx.one(
                "SELECT hash FROM tm_ws_passwords WHERE workspace = ? AND user_name = ?",
                (self.workspace, user),
            )
            if principal is None or principal.disabled or row is None:
                return None
            return str(row[0])

        stored = await self.store.transact(check)
        # A made-up hash for an unknown user, so both take the same time.
        if not verify_password(stored or _dummy_hash(), password) or stored is None:
            raise SignInFailed(
                "The user name or the password is wrong.",
                hint="Check both; a workspace admin can set a new password.",
            )

        def put(tx: Tx) -> NewToken:
            made = _insert(
                tx,
                self.workspace,
                "session",
                user,
                "browser",
                ["*"],
                now,
                now + hours * 3600,
                token,
            )
            Queries(tx, self.workspace).audit(user, "user.sign_in", None, {}, now)
            return made

        made: NewToken = await self.store.transact(put)
        return made

    async def authenticate(self, text: str) -> Identity:
        """Who the token `text` stands for.

        Raises:
            SignInFailed: It is malformed, unknown, expired or revoked, or its user is disabled.
        """
        parsed = parse_token(text.strip())
        if parsed is None:
            raise SignInFailed(
                "That is not a Tidemill token.",
                hint="A token starts with tm_pat_ (make one with tidemill ws tokens create).",
            )
        kind, token_id, secret = parsed
        now = time.time()

        def check(tx: Tx) -> Identity:
            found = _find(tx, self.workspace, token_id)
            if (
                found is None
                or found[0].kind != kind
                or not hmac.compare_digest(found[1], digest(secret))
            ):
                raise SignInFailed(
                    "The token is not valid.", hint="Sign in again, or make a new token."
                )
            token, _, csrf_digest = found
            if token.revoked_at is not None:
                raise SignInFailed(
                    f"The token {token.prefix} was revoked.",
                    hint="Sign in again, or make a new token.",
                )
            if token.expires_at is not None and token.expires_at <= now:
                raise SignInFailed(
                    f"The token {token.prefix} expired.", hint="Sign in again, or make a new token."
                )
            principal = Queries(tx, self.workspace).principal(token.user)
            if principal is None or principal.disabled:
                raise SignInFailed(
                    f"The user of {token.prefix} is disabled.",
                    hint="A workspace admin can enable it.",
                )
            if token.last_used_at is None or now - token.last_used_at > _TOUCH_EVERY:
                tx.execute("UPDATE tm_ws_tokens SET last_used_at = ? WHERE id = ?", (now, token.id))
            scopes = None if kind == "session" else parse_scopes(token.scopes)
            return Identity(token.user, kind, token.id, scopes, csrf_digest)

        identity: Identity = await self.store.transact(check)
        return identity

    async def sign_out(self, text: str) -> None:
        """End the session (or revoke the token) `text`; an unknown one is ignored."""
        parsed = parse_token(text.strip())
        if parsed is None:
            return
        now = time.time()
        _, token_id, secret = parsed

        def revoke(tx: Tx) -> None:
            found = _find(tx, self.workspace, token_id)
            if found is not None and hmac.compare_digest(found[1], digest(secret)):
                tx.execute(
                    "UPDATE tm_ws_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                    (now, token_id),
                )

        await self.store.transact(revoke)


@cache
def _dummy_hash() -> str:
    """A hash no password matches, checked for an unknown user so both take as long."""
    return hash_password(secrets.token_urlsafe(16))
