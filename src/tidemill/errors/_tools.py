"""Errors of tools: arguments that do not fit, a result not ready yet, and MCP servers.

MCP errors are raised by the MCP client tools (`tidemill.tools.mcp`). Messages
name the server, the command or URL (never its environment, headers or query
string) and what went wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidemill.errors._base import ConfigurationError, TidemillError

__all__ = ["MCPConnectionError", "MCPToolError", "ToolArgumentsError", "ToolSuspended"]


class ToolArgumentsError(TidemillError):
    """Arguments do not fit a tool's schema.

    During a run the model sees this message as the call's error result and
    may correct itself; when an approver's edited arguments fail, `resume`
    raises it wrapped in an `ApprovalError`.

    Attributes:
        tool: The tool's name.
        errors: One line per problem, naming the argument.
    """

    def __init__(self, tool: str, errors: Sequence[str]) -> None:
        super().__init__(
            f"Invalid arguments for tool {tool!r}: " + "; ".join(errors),
            context={"tool": tool, "errors": list(errors)},
        )
        self.tool = tool
        self.errors = list(errors)


class ToolSuspended(TidemillError):
    """Raised by a tool whose result is not ready: the run stops, the call stays open.

    A tool that hands its work to something slower or elsewhere (a job in a
    queue, a person) raises this instead of blocking. The call gets no
    result in the journal: it stays started, so resuming the thread with
    `retry_in_flight=True` calls the tool again, with the same call id and
    idempotency key; it then returns the result, or suspends again. The
    other calls of the same turn still run to the end first.

    Attributes:
        reason: What the call waits for, for whoever resumes the thread
            (any object; the engine passes its child-run request here).
    """

    def __init__(self, message: str, *, reason: object = None) -> None:
        super().__init__(message)
        self.reason = reason


class MCPConnectionError(ConfigurationError):
    """An MCP server could not be started, reached or initialised.

    Raised when a connection opens, never later: a server that fails is an
    error, not an empty tool list.

    Attributes:
        server: The server's name (the prefix of its tools' names).
        target: The command line or URL that was tried (secrets left out).
        reason: What went wrong, in a few words.
        stderr: The last lines the server process wrote to stderr, if any.
        status_code: The HTTP status that refused the connection, if any.

    Examples:
        >>> err = MCPConnectionError("fs", "npx -y server-fs", "command 'npx' was not found")
        >>> err.message
        "Could not connect to MCP server 'fs' (npx -y server-fs): command 'npx' was not found."
    """

    def __init__(
        self,
        server: str,
        target: str,
        reason: str,
        *,
        stderr: str | None = None,
        status_code: int | None = None,
        hint: str | None = None,
    ) -> None:
        message = f"Could not connect to MCP server {server!r} ({target}): {reason}."
        if stderr:
            message += f" Its stderr ended with:\n{stderr}\n"
        super().__init__(
            message,
            hint=hint,
            context={"server": server, "target": target, "status_code": status_code},
        )
        self.server = server
        self.target = target
        self.reason = reason
        self.stderr = stderr
        self.status_code = status_code


class MCPToolError(TidemillError):
    """An MCP server failed a tool call, or its connection broke during one.

    The server said the call failed (`isError`), refused the request, did not
    answer in time, or was no longer connected. During a run the model sees
    the message as the call's error result.

    Attributes:
        server: The server's name.
        tool: The tool's name on the server (without the server prefix).
    """

    def __init__(self, server: str, tool: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, context={"server": server, "tool": tool})
        self.server = server
        self.tool = tool
