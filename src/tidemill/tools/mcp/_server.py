"""`MCPServer`: where an MCP server is and how to talk to it."""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Literal, TypedDict
from urllib.parse import urlsplit

from tidemill.errors import ConfigurationError
from tidemill.tools.mcp._names import server_name_from_command, server_name_from_url

__all__ = ["MCPServer", "MCPServerOptions"]

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class MCPServerOptions(TypedDict, total=False):
    """The keyword arguments of `MCPServer`, for functions that pass them on."""

    command: str | None
    """As `MCPServer.command`."""
    args: Sequence[str]
    """As `MCPServer.args`."""
    env: Mapping[str, str] | None
    """As `MCPServer.env`."""
    cwd: str | Path | None
    """As `MCPServer.cwd`."""
    url: str | None
    """As `MCPServer.url`."""
    headers: Mapping[str, str] | None
    """As `MCPServer.headers`."""
    name: str
    """As `MCPServer.name`."""
    connect_timeout: float
    """As `MCPServer.connect_timeout`."""
    call_timeout: float | None
    """As `MCPServer.call_timeout`."""
    requires_approval: bool | Collection[str]
    """As `MCPServer.requires_approval`."""


@dataclass(frozen=True, repr=False)
class MCPServer:
    """An MCP server to connect to: a command to run (stdio) or a URL (streamable HTTP).

    Give `command` (with `args`, `env`, `cwd`) for a server that runs as a
    subprocess, or `url` (with `headers`) for one that is already running.
    Its tools are named `{name}__{tool}`, so two servers with a tool of the
    same name do not collide. Nothing connects until `MCPConnection` opens.

    Examples:
        >>> fs = MCPServer(command="npx", args=["-y", "@modelcontextprotocol/server-filesystem"])
        >>> fs.name, fs.transport
        ('server-filesystem', 'stdio')
        >>> MCPServer(url="https://mcp.example.com/mcp?key=secret", headers={"X-Key": "secret"})
        MCPServer(name='mcp_example_com', target='https://mcp.example.com/mcp')
    """

    _: KW_ONLY
    command: str | None = None
    """The program that runs the server (stdio transport)."""
    args: Sequence[str] = ()
    """Its command-line arguments."""
    env: Mapping[str, str] | None = None
    """Variables to set for it, over a minimal inherited set (`PATH`, `HOME`, ...).

    The rest of this process's environment is not passed on: give API keys here.
    """
    cwd: str | Path | None = None
    """The directory to run it in."""
    url: str | None = None
    """The endpoint of a streamable HTTP server, such as `http://localhost:8000/mcp`."""
    headers: Mapping[str, str] | None = None
    """HTTP headers for every request, such as `Authorization`."""
    name: str = ""
    """The prefix of its tools' names; derived from the command or URL host when empty."""
    connect_timeout: float = 10.0
    """Seconds to start or reach the server, initialise and list its tools."""
    call_timeout: float | None = 300.0
    """Seconds to wait for one tool call; `None` waits as long as it takes."""
    requires_approval: bool | Collection[str] = False
    """Pause runs for a human decision before calls: `True` for every tool, or
    the names (on the server, without the prefix) of the tools that need it."""

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ConfigurationError(
                "An MCP server needs either command= (stdio) or url= (HTTP), not both or neither.",
                hint="MCPServer(command='npx', args=[...]) or MCPServer(url='http://host/mcp').",
            )
        if self.command is not None:
            self._check_stdio(self.command)
        else:
            assert self.url is not None
            self._check_http(self.url)
        if isinstance(self.args, str):
            raise ConfigurationError(
                f"args= of MCP server {self.command!r} must be a list of strings, not a string.",
                hint=f"Use args={shlex.split(self.args)!r}.",
            )
        object.__setattr__(self, "args", tuple(self.args))
        if not isinstance(self.requires_approval, bool):
            object.__setattr__(self, "requires_approval", frozenset(self.requires_approval))
        if self.connect_timeout <= 0:
            raise ConfigurationError("connect_timeout must be a positive number of seconds.")
        if self.call_timeout is not None and self.call_timeout <= 0:
            raise ConfigurationError("call_timeout must be positive, or None to wait for ever.")
        if not self.name:
            derived = (
                server_name_from_command(self.command, self.args)
                if self.command is not None
                else server_name_from_url(self.url or "")
            )
            object.__setattr__(self, "name", derived)
        elif not _NAME.match(self.name):
            raise ConfigurationError(
                f"MCP server name {self.name!r} is not usable in tool names.",
                hint="Use letters, digits, '_' and '-' only.",
            )

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """`stdio` for a command, `http` for a URL."""
        return "stdio" if self.command is not None else "http"

    @property
    def target(self) -> str:
        """The command line or URL, for messages: no environment, headers or query string.

        Examples:
            >>> MCPServer(url="https://user:pw@example.com/mcp?token=abc").target
            'https://example.com/mcp'
        """
        if self.command is not None:
            return shlex.join([self.command, *self.args])
        parts = urlsplit(self.url or "")
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"

    def __repr__(self) -> str:
        # Never the environment, headers, URL credentials or query: they hold secrets.
        return f"MCPServer(name={self.name!r}, target={self.target!r})"

    def needs_approval(self, tool: str) -> bool:
        """Whether calls to `tool` (its name on the server) pause for approval."""
        if isinstance(self.requires_approval, bool):
            return self.requires_approval
        return tool in self.requires_approval

    def _check_stdio(self, command: str) -> None:
        if not command.strip():
            raise ConfigurationError("The command of an MCP server must not be empty.")
        if self.headers is not None:
            raise ConfigurationError(
                f"headers= applies to HTTP servers; {command!r} runs over stdio.",
                hint="Pass values a stdio server needs through env=.",
            )
        if self.cwd is not None and not Path(self.cwd).is_dir():
            raise ConfigurationError(
                f"The working directory {str(self.cwd)!r} of MCP server {command!r} does not exist."
            )

    def _check_http(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(
                f"The URL of an MCP server must be http:// or https://, not {url!r}.",
                hint="Streamable HTTP servers usually serve at a path like /mcp.",
            )
        try:
            parts.port  # noqa: B018 - raises on a malformed port
        except ValueError as exc:
            raise ConfigurationError(f"The URL {url!r} has an invalid port.") from exc
        if self.args or self.env is not None or self.cwd is not None:
            raise ConfigurationError(
                "args=, env= and cwd= apply to servers started with command=, not url=.",
                hint="Pass credentials for an HTTP server through headers=.",
            )
