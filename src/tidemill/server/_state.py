"""`ServerState`: what every request of one server shares (the engine, the workspace, sign-in)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from tidemill.engine import AsyncEngine, Metrics
from tidemill.server._config import ServerConfig
from tidemill.server._security import SignInLimiter
from tidemill.workspace import AsyncWorkspace, Authenticator

__all__ = ["ServerState", "state_of"]


@dataclass(slots=True)
class ServerState:
    """The engine and workspace a server serves, and how it signs callers in."""

    config: ServerConfig
    engine: AsyncEngine
    workspace: AsyncWorkspace
    """The served workspace; `signed_in(user)` gives it as a caller."""
    authenticator: Authenticator
    limiter: SignInLimiter = field(default_factory=SignInLimiter)
    metrics: Metrics | None = None
    """The in-process worker's metrics, served at `/metrics` (None: not installed)."""


async def state_of(request: Request) -> ServerState:
    """The state of the server answering `request` (async: no thread hop per request)."""
    state: ServerState = request.app.state.tidemill
    return state
