"""Turn what went wrong while connecting into an `MCPConnectionError` that says what to do."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus

from tidemill.errors import MCPConnectionError
from tidemill.tools.mcp import _sdk
from tidemill.tools.mcp._server import MCPServer

__all__ = ["Failure", "connection_error", "leaves"]


@dataclass
class Failure:
    """What was seen while connecting, besides the exception that ended it."""

    timed_out: bool = False
    """The handshake ran out of `connect_timeout`."""
    status_code: int | None = None
    """The first HTTP status of 400 or more the server answered."""
    transport_error: Exception | None = None
    """The first error the transport reported to the session (SDK 1.x reports them this way)."""
    stderr: str | None = None
    """The last lines of the server process's stderr."""


def leaves(error: BaseException) -> Iterator[BaseException]:
    """The exceptions inside `error`, exception groups flattened, cancellations left out."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    elif not isinstance(error, asyncio.CancelledError):
        yield error


def connection_error(
    server: MCPServer, error: BaseException | None, seen: Failure
) -> MCPConnectionError:
    """Explain a failed connection: name the server, its command or URL, and the cause."""
    found = list(leaves(error)) if error is not None else []
    for leaf in found:
        if isinstance(leaf, MCPConnectionError):
            return leaf
    if seen.transport_error is not None:
        found.insert(0, seen.transport_error)
    reason, hint = _explain(server, found, seen)
    return MCPConnectionError(
        server.name,
        server.target,
        reason,
        stderr=seen.stderr,
        status_code=seen.status_code,
        hint=hint,
    )


def _explain(
    server: MCPServer, found: list[BaseException], seen: Failure
) -> tuple[str, str | None]:
    # TimeoutError is an OSError too, but says nothing about starting the command.
    oserror = next(
        (e for e in found if isinstance(e, OSError) and not isinstance(e, TimeoutError)), None
    )
    if server.command is not None and oserror is not None:
        if isinstance(oserror, FileNotFoundError):
            return (
                f"command {server.command!r} was not found",
                "Install it, put it on PATH, or give its full path as command=.",
            )
        if isinstance(oserror, PermissionError):
            return f"command {server.command!r} is not executable", None
        return f"the command could not be started ({_describe(oserror)})", None
    if seen.status_code is not None:
        return _http_status(seen.status_code)
    transport = next((e for e in found if isinstance(e, _sdk.transport_error_types())), None)
    if transport is not None:
        return (
            f"could not reach it ({_describe(transport)})",
            "Check the URL, and that the server is running and listening there.",
        )
    refused = next((e for e in found if isinstance(e, _sdk.error_types())), None)
    closed = refused is not None and "closed" in str(refused).lower()
    if server.command is not None and (closed or (not found and not seen.timed_out)):
        return (
            "the server process exited, or closed its stdout, before the MCP handshake finished",
            "Run the command by hand to see why it stops; see its stderr above.",
        )
    if refused is not None:
        return f"the server refused the MCP handshake ({_describe(refused)})", None
    if seen.timed_out:
        hint = (
            "Check that the command starts an MCP server on stdio, or raise connect_timeout=."
            if server.command is not None
            else "Check that the URL is a streamable HTTP MCP endpoint, or raise connect_timeout=."
        )
        return f"no answer to the MCP handshake within {server.connect_timeout:g} s", hint
    if found:
        return f"the MCP handshake failed ({_describe(found[0])})", None
    return "the connection closed during the MCP handshake", None


def _http_status(status: int) -> tuple[str, str | None]:
    try:
        phrase = f" {HTTPStatus(status).phrase}"
    except ValueError:
        phrase = ""
    reason = f"the server answered HTTP {status}{phrase}"
    if status in (401, 403):
        return reason, "Check the credentials passed in headers=."
    if status in (404, 405):
        return reason, "Check the URL's path; streamable HTTP servers often serve at /mcp."
    return reason, "See the server's logs."


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
