"""The OpenAI-compatible proxy, mounted at `/v1` of the server, with Tidemill tokens.

`mount_proxy(app)` serves `tidemill.llm.proxy`'s app under `/v1` (`POST
/v1/chat/completions`, `POST /v1/messages` for Anthropic's clients, `GET
/v1/models`, `GET /v1/models/{id}`) behind
`ProxyDoor`, and adds `GET /api/proxy/usage`. The door reads the caller's
token from `Authorization: Bearer tm_pat_...` (what the `openai` SDK sends
as its `api_key`) or `x-api-key` (what the `anthropic` SDK sends), signs it
in on every request (a revoked token is refused at once) and answers a
missing or bad one with a 401 in OpenAI's error shape. `ProxyRouting`
(`_proxy_routing`) then routes the request's `model` to a provider resource
read as that user; when the answer has gone out, the door records the call
with the user and the token (`_proxy_usage`).

Scopes: a token needs `proxy:read` to list models and `proxy:write` to call
one (`proxy:write:f/team/*` for the resources under `f/team/` only); `*`
allows both. A browser session cookie is not accepted here: the proxy is for
programs, and a cookie would let any page a user visits spend on their keys.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query
from pydantic import BaseModel
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidemill.errors import SignInFailed
from tidemill.llm import new_http_client
from tidemill.llm.proxy import ProxyError, create_app, track
from tidemill.server._caller import SignedIn
from tidemill.server._proxy_routing import ALIASES_PATH, ProxyCaller, ProxyRouting, admit
from tidemill.server._proxy_usage import ProxyCall, proxy_calls, record_call
from tidemill.server._state import ServerState, state_of

__all__ = ["PROXY_PREFIX", "ProxyDoor", "mount_proxy", "router"]

PROXY_PREFIX = "/v1"
"""Where the proxy is mounted."""

_log = logging.getLogger("tidemill.server.proxy")
_CALLS = frozenset({f"{PROXY_PREFIX}/chat/completions", f"{PROXY_PREFIX}/messages"})
"""The paths of model calls, which are recorded."""


def mount_proxy(app: FastAPI, *, aliases_path: str = ALIASES_PATH) -> None:
    """Serve the OpenAI-compatible proxy at `/v1` of `app`, and `GET /api/proxy/usage`.

    Its upstream connection pool is closed with the app's lifespan.

    Args:
        app: The server's app (`create_app`), whose `app.state.tidemill` the proxy uses.
        aliases_path: The workspace variable holding admin-configured aliases.
    """
    client = new_http_client()
    proxy = create_app(routing=ProxyRouting(client, aliases_path=aliases_path), access_log=True)
    app.mount(PROXY_PREFIX, ProxyDoor(proxy, app), name="proxy")
    app.include_router(router)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(owner: FastAPI) -> AsyncIterator[Any]:
        try:
            async with inner(owner) as state:
                yield state
        finally:
            await client.aclose()

    app.router.lifespan_context = lifespan


def _token(scope: Scope) -> str | None:
    """The token of `Authorization: Bearer ...`, else of `x-api-key`."""
    bearer: str | None = None
    api_key: str | None = None
    for name, value in scope["headers"]:
        if name == b"authorization" and bearer is None:
            scheme, _, given = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and given.strip():
                bearer = given.strip()
        elif name == b"x-api-key" and api_key is None and value.strip():
            api_key = value.decode("latin-1").strip()
    return bearer or api_key


class ProxyDoor:
    """ASGI: signs the caller of a proxy request in, then passes it to the proxy app.

    Args:
        proxy: The proxy app (`tidemill.llm.proxy.create_app` with `ProxyRouting`).
        server: The server's app, whose `state.tidemill` is read per request.
    """

    def __init__(self, proxy: ASGIApp, server: FastAPI) -> None:
        self.proxy = proxy
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.proxy(scope, receive, send)
            return
        # The proxy app serves its own `/v1/...` routes: hand it the whole path.
        root = str(scope.get("root_path", ""))
        path = str(scope["path"])
        rest = path[len(root) :] if root and path.startswith(root) else path
        child = {**scope, "root_path": "", "path": PROXY_PREFIX + rest}
        state: ServerState = self.server.state.tidemill
        caller = await self._sign_in(child, receive, send, state)
        if caller is None:
            return
        admit(child, caller)
        status: int | None = None
        started = time.monotonic()

        async def noting(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.proxy(child, receive, noting)
        finally:
            if child["path"] in _CALLS and child["method"] == "POST":
                await self._record(state, caller, status, (time.monotonic() - started) * 1000)

    async def _sign_in(
        self, scope: Scope, receive: Receive, send: Send, state: ServerState
    ) -> ProxyCaller | None:
        """The signed-in caller; None once a 401 (or 403) has been sent."""
        token = _token(scope)
        error: ProxyError | None = None
        if token is None:
            error = ProxyError(
                "Send a Tidemill token: 'Authorization: Bearer tm_pat_...' (the SDKs' api_key).",
                status=401,
                code="invalid_api_key",
            )
        else:
            try:
                identity = await state.authenticator.authenticate(token)
            except SignInFailed as exc:
                error = ProxyError(
                    f"{exc.message} Make one with: tidemill ws tokens create --scope proxy:write.",
                    status=401,
                    code="invalid_api_key",
                )
        if error is not None:
            headers = {"www-authenticate": 'Bearer realm="tidemill"'}
            await JSONResponse(error.body(), status_code=401, headers=headers)(scope, receive, send)
            return None
        return ProxyCaller(
            identity.user,
            identity.token_id,
            identity.scopes,
            state.workspace.signed_in(identity.user),
            track(scope),
        )

    async def _record(
        self, state: ServerState, caller: ProxyCaller, status: int | None, elapsed_ms: float
    ) -> None:
        record = caller.record
        usage = record.usage
        priced = usage is not None and not usage.unpriced_requests and not usage.unreported_requests
        call = ProxyCall(
            state.config.workspace,
            caller.user,
            caller.token_id,
            (record.model_name or "")[:256],
            status,
            resource=caller.resource,
            provider=caller.provider,
            input_tokens=usage.input_tokens if usage is not None else 0,
            output_tokens=usage.output_tokens if usage is not None else 0,
            cost_usd=usage.cost_usd if usage is not None and priced else None,
            latency_ms=elapsed_ms,
            at=time.time(),
        )
        try:
            await record_call(state.engine.store, call)
        except Exception:  # a call that was answered is not failed by its bookkeeping
            _log.exception("The proxy call of %s could not be recorded.", caller.user)


class ProxyCallOut(BaseModel):
    """One call through the proxy."""

    call_id: int | None
    user: str
    token_id: str | None
    model: str
    resource: str | None
    provider: str | None
    status: int | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    latency_ms: float
    at: float


router = APIRouter(prefix="/api/proxy", tags=["proxy"])


@router.get("/usage", response_model=list[ProxyCallOut])
async def usage(
    who: SignedIn,
    state: Annotated[ServerState, Depends(state_of)],
    user: Annotated[str | None, Query(description="Only this user's calls (admins).")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[ProxyCallOut]:
    """The calls made through the proxy, newest first: an admin's of anyone, others' their own."""
    who.require("proxy", "read")
    me = await who.ws.whoami()
    if not me.is_admin:
        user = who.user
    calls = await proxy_calls(state.engine.store, state.config.workspace, user=user, limit=limit)
    return [
        ProxyCallOut(
            call_id=c.call_id,
            user=c.user,
            token_id=c.token_id,
            model=c.model,
            resource=c.resource,
            provider=c.provider,
            status=c.status,
            input_tokens=c.input_tokens,
            output_tokens=c.output_tokens,
            cost_usd=c.cost_usd,
            latency_ms=c.latency_ms,
            at=c.at,
        )
        for c in calls
    ]
