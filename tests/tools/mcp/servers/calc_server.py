"""A real MCP server for the tests, built with the official SDK.

python calc_server.py stdio     serve on stdin/stdout
python calc_server.py http      serve streamable HTTP on a free port of 127.0.0.1,
                                printing "PORT <n>" once it listens
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

from pydantic import BaseModel

try:  # SDK 2.x
    from mcp.server.mcpserver import Context, Image
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # SDK 1.x
    from mcp.server.fastmcp import Context, Image
    from mcp.server.fastmcp import FastMCP as Server

# The 8-byte PNG signature and a little more: enough to be an image by its type.
PNG = b"\x89PNG\r\n\x1a\n" + bytes(60)

server = Server("calc")


class Point(BaseModel):
    x: float
    y: float


class Shape(BaseModel):
    label: str
    points: list[Point]


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(shape: Shape, note: str = "") -> str:
    """Echo a shape back as JSON."""
    return shape.model_dump_json() + (f" {note}" if note else "")


@server.tool()
def fail(reason: str) -> str:
    """Always fail, with the reason given."""
    raise ValueError(reason)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def image() -> Image:
    """Return a small PNG image."""
    return Image(data=PNG, format="png")


@server.tool()
def pid() -> int:
    """Return the server's process id."""
    return os.getpid()


@server.tool()
def key(ctx: Context) -> str:  # type: ignore[type-arg]
    """Return the idempotency key the call carried in its _meta ("" without one)."""
    meta = ctx.request_context.meta
    data = meta if isinstance(meta, dict) else (meta.model_dump() if meta is not None else {})
    return str(data.get("tidemill.dev/idempotency-key", ""))


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    os._exit(3)


def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        serve_http()
    else:
        server.run()
