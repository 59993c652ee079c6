"""`create_app`: the server as an ASGI app (FastAPI): engine, workspace, worker, scheduler."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import FastAPI

from tidemill._version import __version__
from tidemill.engine import AsyncEngine, Metrics, Worker
from tidemill.engine.triggers import Scheduler
from tidemill.errors import ConfigurationError, PermissionDenied
from tidemill.server._config import ServerConfig
from tidemill.server._errors import document_errors, install_error_handlers
from tidemill.server._proxy import mount_proxy
from tidemill.server._security import SecurityHeaders, SignInLimiter
from tidemill.server._state import ServerState
from tidemill.server._ui import mount_ui
from tidemill.server.routes import ROUTERS
from tidemill.workspace import AsyncWorkspace, Authenticator, local_user

__all__ = ["Started", "create_app", "open_state"]

_DESCRIPTION = """\
The workspace (items, versions, drafts, people, grants), runs and their live
events, approvals and the audit log of one Tidemill workspace.

Authenticate with a personal access token (`Authorization: Bearer tm_pat_...`)
or, from a browser, sign in at `POST /api/auth/sign-in` and send the answer's
CSRF token in `X-CSRF-Token` with every request that changes something.
Errors are JSON (`ErrorBody`): `{"type", "message", "hint", "problems"}`;
each operation lists the error statuses it can answer.
"""


@dataclass(frozen=True, slots=True)
class Started:
    """What opening a server's state found."""

    state: ServerState
    first_admin: str | None
    """The user made the workspace's first admin on this start (None: it had users)."""


async def open_state(config: ServerConfig, engine: AsyncEngine | None = None) -> Started:
    """Open the engine and the workspace a server serves; start the workspace if it is new.

    On first start the local user (`local_user`) becomes the first admin.
    """
    engine = engine or AsyncEngine(config.db, migrate=config.migrate)
    await engine.__aenter__()
    authenticator = Authenticator(engine.store, config.workspace)
    fresh = await authenticator.is_new()
    user = local_user()
    workspace = AsyncWorkspace(engine.store, workspace=config.workspace, user=user, create=fresh)
    with contextlib.suppress(PermissionDenied):  # the local user need not be a user of it
        await workspace.whoami()
    metrics: Metrics | None
    try:
        metrics = Metrics()
    except ConfigurationError:
        metrics = None
    limiter = SignInLimiter(config.sign_in_attempts, config.sign_in_window)
    state = ServerState(config, engine, workspace, authenticator, limiter, metrics)
    return Started(state, user if fresh else None)


@contextlib.asynccontextmanager
async def _scheduling(
    state: ServerState, config: ServerConfig, worker: Worker | None
) -> AsyncIterator[Scheduler]:
    """One `Scheduler` for the server's workspace while the app runs (servers may race)."""
    engine = state.engine
    scheduler = Scheduler(
        engine.store,
        engine.defs,
        workspace_name=config.workspace,
        on_fired=None if worker is None else worker.wake,
        metrics=state.metrics,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    try:
        yield scheduler
    finally:
        stop.set()
        await task


def create_app(
    config: ServerConfig | None = None,
    *,
    engine: AsyncEngine | None = None,
) -> FastAPI:
    """The server's ASGI app; its engine opens (and its worker starts) with the app's lifespan.

    Args:
        config: What to serve; the default is the embedded store with a worker.
        engine: An engine to serve instead of opening `config.db` (it is not closed).
    """
    config = config or ServerConfig()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        started = await open_state(config, engine)
        state = started.state
        app.state.tidemill = state
        app.state.first_admin = started.first_admin
        try:
            async with contextlib.AsyncExitStack() as stack:
                worker = None
                if config.worker:
                    worker = await stack.enter_async_context(
                        state.engine.worker(
                            config.concurrency,
                            metrics=state.metrics,
                            lease=config.lease,
                            keep_runs=config.keep_runs,
                            models=config.models,
                            schedules=False,  # the server's own scheduler fires its workspace's
                        )
                    )
                await stack.enter_async_context(_scheduling(state, config, worker))
                yield
        finally:
            if engine is None:
                await state.engine.close()

    app = FastAPI(
        title="Tidemill",
        version=__version__,
        description=_DESCRIPTION,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
    )
    install_error_handlers(app)
    document_errors(app)
    app.add_middleware(SecurityHeaders)
    for router in ROUTERS:
        app.include_router(router)
    mount_proxy(app)
    if config.ui:
        mount_ui(app, config.ui_dir)  # last: it answers every GET no API route took
    return app
