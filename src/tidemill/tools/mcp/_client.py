"""`MCPClient`: what an agent needs of a client of an MCP server, and what names one.

`MCPConnection` (the `"fastmcp"` client, over the official SDK) and
`StaticMCPClient` (the `"static"` client) are both `MCPClient`s; so is any
object with the same five members. `MCPClientSpec` is everything
`resolve_client` and `AgentBuilder.mcp` accept in their place.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Literal, Protocol, TypeAlias, TypeGuard

from tidemill.tools._tool import Tool
from tidemill.tools.mcp._server import MCPServer

__all__ = [
    "MCPClient",
    "MCPClientFactory",
    "MCPClientName",
    "MCPClientSpec",
    "is_mcp_client",
]

MCPClientName: TypeAlias = Literal["fastmcp", "static"]
"""Tidemill's own client names: `"fastmcp"` (`MCPConnection`) and `"static"` (`StaticMCPClient`)."""


class MCPClient(Protocol):
    """A client of one MCP server: it connects, lists the server's tools and closes.

    Calls go through its `tools`: each tool calls the server itself (as
    `MCPTool` does through its `MCPConnection`), so an agent needs nothing
    more of a client than these five members. Implement them to bring
    another transport or SDK to `AgentBuilder.mcp(my_client)`.

    `is_mcp_client` tells whether an object has them (`isinstance` cannot:
    reading `tools` of a client that is not open raises).

    Examples:
        >>> import asyncio
        >>> from tidemill import Tool
        >>> class Clock:
        ...     name = "clock"
        ...     def __init__(self) -> None:
        ...         self.is_open = False
        ...         self.tools: list[Tool] = []
        ...     async def aconnect(self) -> None:
        ...         now = Tool(lambda: "12:00", name="clock__now", description="The time.")
        ...         self.tools, self.is_open = [now], True
        ...     async def aclose(self) -> None:
        ...         self.is_open = False
        >>> clock = Clock()
        >>> is_mcp_client(clock)
        True
        >>> asyncio.run(clock.aconnect())
        >>> [tool.name for tool in clock.tools]
        ['clock__now']
    """

    @property
    def name(self) -> str:
        """The server's name: the prefix of its tools' names (`fs` in `fs__read_file`)."""
        ...

    @property
    def is_open(self) -> bool:
        """Whether the client is connected and its `tools` can be called."""
        ...

    @property
    def tools(self) -> Sequence[Tool]:
        """The server's tools, once open, named `{name}__{tool}`."""
        ...

    async def aconnect(self) -> object:
        """Connect and list the tools; whatever it returns is ignored."""
        ...

    async def aclose(self) -> None:
        """Disconnect; its tools fail after this. Closing twice does nothing."""
        ...


MCPClientFactory: TypeAlias = Callable[..., MCPClient]
"""A callable returning an `MCPClient`, such as a client class: called with the options."""

MCPClientSpec: TypeAlias = MCPClientName | str | MCPServer | MCPClient | MCPClientFactory
"""What names a client: one of Tidemill's names, an `MCPServer`, a client, or a factory."""

_MEMBERS = ("name", "is_open", "tools", "aconnect", "aclose")
_METHODS = ("aconnect", "aclose")
_MISSING = object()


def is_mcp_client(value: object) -> TypeGuard[MCPClient]:
    """Whether `value` is an `MCPClient` object: it has all five members.

    Members are looked up without being read, so a client that is not open
    yet (whose `tools` raise) counts; a class does not, its instances do.

    Examples:
        >>> from tidemill.tools.mcp import MCPConnection, StaticMCPClient
        >>> is_mcp_client(MCPConnection(command="npx", args=["-y", "some-server"]))
        True
        >>> is_mcp_client(StaticMCPClient), is_mcp_client("static")
        (False, False)
    """
    if isinstance(value, type):
        return False
    found = {member: inspect.getattr_static(value, member, _MISSING) for member in _MEMBERS}
    if any(attribute is _MISSING for attribute in found.values()):
        return False
    return all(callable(found[method]) for method in _METHODS)
