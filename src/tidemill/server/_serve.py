"""`serve`: run the server with uvicorn until it is stopped."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from tidemill.errors import MissingDependencyError
from tidemill.server._app import create_app
from tidemill.server._config import ServerConfig
from tidemill.server._run_feed import stop_feed

__all__ = ["serve", "uvicorn_server"]


def uvicorn_server(app: Any, *, host: str, port: int) -> Any:
    """A `uvicorn.Server` for `app` that ends its never-ending streams when it stops.

    uvicorn stopping gracefully waits for every open response before the
    app's lifespan ends; the runs feed (`GET /api/runs/feed`) would never end.
    """
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - the server extra installs it
        raise MissingDependencyError("uvicorn", extra="server", feature="The server") from exc

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            stop_feed(app)
            await super().shutdown(sockets)

    return Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))


async def serve(
    config: ServerConfig | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    on_ready: Callable[[str, str | None], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve the API at `http://host:port` until `stop` is set (or the process is interrupted).

    Args:
        config: What to serve.
        host: The address to bind (127.0.0.1: this machine only).
        port: The port (0: any free one).
        on_ready: Called once listening, with the base URL and the first
            admin made on this start (None when the workspace had users).
        stop: Set to shut down gracefully.
    """
    app = create_app(config)
    server = uvicorn_server(app, host=host, port=port)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task  # it failed to start: say why
            return
        await asyncio.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
    if on_ready is not None:
        on_ready(f"http://{host}:{bound}", app.state.first_admin)
    if stop is not None:
        waiter = asyncio.create_task(stop.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        server.should_exit = True
        waiter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
