"""The seam to the official `mcp` SDK: imported lazily, 1.x and 2.x alike.

Everything that differs between SDK versions lives here, so the rest of the
package reads MCP data in its wire format (camelCase JSON) and never touches a
version-specific name. 2.x renamed fields to snake_case, replaced
`streamablehttp_client(headers=...)` with `streamable_http_client(http_client=...)`,
moved `list_tools(cursor)` to `list_tools(params=...)` and renamed `McpError`:
https://py.sdk.modelcontextprotocol.io/v2/migration/
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Protocol, TextIO, cast

import httpx
from pydantic import BaseModel, JsonValue

from tidemill.errors import MissingDependencyError

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = [
    "MessageHandler",
    "ResponseHook",
    "call_tool",
    "closed_stream_types",
    "connection_closed",
    "error_types",
    "initialize_result",
    "list_tools_page",
    "open_http",
    "open_session",
    "open_stdio",
    "require",
    "transport_error_types",
    "wire",
]

ResponseHook = Callable[[Any], Awaitable[None]]
"""An httpx response event hook."""


class MessageHandler(Protocol):
    """Receives what the server sends besides answers: notifications, and transport errors."""

    async def __call__(self, message: object) -> None: ...


def require() -> None:
    """Import the SDK, or say which extra installs it.

    Raises:
        MissingDependencyError: When `mcp` is not installed.
    """
    try:
        importlib.import_module("mcp")
    except ImportError as exc:
        raise MissingDependencyError("mcp", extra="mcp", feature="MCP client tools") from exc


async def open_stdio(
    stack: AsyncExitStack,
    *,
    command: str,
    args: list[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    errlog: TextIO,
) -> tuple[Any, Any]:
    """Start the server process; return its (read, write) message streams."""
    from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

    # Merge over the SDK's safe defaults ourselves: 1.x replaced them with `env` when given.
    merged = {**get_default_environment(), **(env or {})}
    parameters = StdioServerParameters(command=command, args=args, env=merged, cwd=cwd)
    streams = await stack.enter_async_context(stdio_client(parameters, errlog=errlog))
    return streams[0], streams[1]


async def open_http(
    stack: AsyncExitStack,
    *,
    url: str,
    headers: Mapping[str, str] | None,
    on_response: ResponseHook,
) -> tuple[Any, Any]:
    """Open a streamable HTTP transport; return its (read, write) message streams."""
    module = importlib.import_module("mcp.client.streamable_http")
    modern = getattr(module, "streamable_http_client", None)
    if modern is None:
        # SDK 1.9 to 1.23: headers go to the transport, and no response hook.
        legacy = module.streamablehttp_client
        streams = await stack.enter_async_context(legacy(url, headers=dict(headers or {})))
        return streams[0], streams[1]
    from mcp.shared._httpx_utils import create_mcp_http_client

    client = create_mcp_http_client(headers=dict(headers or {}))
    client.event_hooks["response"].append(on_response)
    await stack.enter_async_context(client)
    # 2.x yields (read, write); 1.24+ adds a session-id getter.
    streams = await stack.enter_async_context(modern(url, http_client=client))
    return streams[0], streams[1]


async def open_session(
    stack: AsyncExitStack,
    read: Any,
    write: Any,
    *,
    on_message: MessageHandler,
    client_name: str,
    client_version: str,
) -> ClientSession:
    """Enter a `ClientSession` over the streams (not yet initialised)."""
    from mcp import ClientSession, types

    session = ClientSession(
        read,
        write,
        message_handler=on_message,
        client_info=types.Implementation(name=client_name, version=client_version),
    )
    return await stack.enter_async_context(session)


async def list_tools_page(
    session: ClientSession, cursor: str | None
) -> tuple[list[dict[str, JsonValue]], str | None]:
    """Return one page of `tools/list` in wire format, and the next cursor."""
    if cursor is None:
        result = await session.list_tools()
    elif "params" in inspect.signature(session.list_tools).parameters:
        from mcp import types

        result = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
    else:
        # SDK 1.9 to 1.17 take the cursor positionally.
        result = await cast(Any, session).list_tools(cursor)
    page = wire(result)
    tools = page.get("tools")
    next_cursor = page.get("nextCursor")
    return (
        [tool for tool in tools if isinstance(tool, dict)] if isinstance(tools, list) else [],
        next_cursor if isinstance(next_cursor, str) and next_cursor else None,
    )


async def call_tool(
    session: ClientSession,
    name: str,
    arguments: dict[str, Any],
    meta: Mapping[str, str] | None = None,
) -> dict[str, JsonValue]:
    """Send `tools/call`, with `_meta` when the SDK can send one; the result in wire format."""
    if meta and _takes_meta(session):
        return wire(await session.call_tool(name, arguments, meta=cast(Any, dict(meta))))
    return wire(await session.call_tool(name, arguments))


def _takes_meta(session: ClientSession) -> bool:
    """Whether this SDK's `call_tool` sends a `_meta` (2.x, and late 1.x releases)."""
    return "meta" in inspect.signature(session.call_tool).parameters


def initialize_result(result: BaseModel) -> dict[str, JsonValue]:
    """The `initialize` result in wire format."""
    return wire(result)


def wire(model: BaseModel) -> dict[str, JsonValue]:
    """Dump an SDK model as it travels: camelCase keys, no unset fields."""
    dumped = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return cast(dict[str, JsonValue], dumped)


def error_types() -> tuple[type[Exception], ...]:
    """The SDK's error for a JSON-RPC error answer (`McpError` in 1.x, `MCPError` in 2.x)."""
    module = importlib.import_module("mcp.shared.exceptions")
    found = (getattr(module, "MCPError", None), getattr(module, "McpError", None))
    return tuple(t for t in found if isinstance(t, type) and issubclass(t, Exception))


def transport_error_types() -> tuple[type[Exception], ...]:
    """HTTP transport failures: `httpx` errors, and `httpx2` ones under SDK 2.x."""
    found: list[type[Exception]] = [httpx.TransportError]
    try:
        httpx2 = importlib.import_module("httpx2")
    except ImportError:
        return tuple(found)
    error = getattr(httpx2, "TransportError", None)
    if isinstance(error, type) and issubclass(error, Exception):
        found.append(error)
    return tuple(found)


def closed_stream_types() -> tuple[type[Exception], ...]:
    """What the SDK's streams raise once the other end is gone."""
    import anyio

    return (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


# The SDK's code for "the connection closed" (1.10+); 1.9 lets the request wait instead.
_CONNECTION_CLOSED = -32000


def connection_closed(error: Exception) -> bool:
    """Whether an SDK error says the connection is gone, not that the server said no."""
    data = getattr(error, "error", None)
    return getattr(data, "code", None) == _CONNECTION_CLOSED
