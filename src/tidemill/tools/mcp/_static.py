"""`StaticMCPClient`: the `"static"` client, a fixed list of in-process tools served as a server's.

It needs no server and no SDK: for tests of code that takes MCP tools, and
for giving ordinary tools a server's names (`{server}__{tool}`) and
lifecycle (they fail once the client is closed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Self

from pydantic import JsonValue

from tidemill.errors import ConfigurationError, MCPToolError, ToolArgumentsError
from tidemill.tools._context import ToolContext
from tidemill.tools._registry import ToolLike, as_tool
from tidemill.tools._tool import Tool
from tidemill.tools.mcp._names import tool_names

__all__ = ["StaticMCPClient", "StaticTool"]

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_State = Literal["new", "open", "closed"]


class StaticMCPClient:
    """An `MCPClient` whose server is a fixed list of tools in this process.

    Its tools are the given ones renamed `{name}__{tool}` (made provider-safe
    as a real server's are), with the same description, schema, approval
    flag, validation and results. Like `MCPConnection`, it has no tools until
    `aconnect()`, and its tools raise `MCPToolError` after `aclose()`.
    `AgentBuilder.mcp("static", server=..., tools=[...])` makes, opens and
    closes one.

    Args:
        tools: The tools: `@tool` functions, `Tool` objects or plain functions.
        name: The server's name, the prefix of the tools' names.

    Raises:
        ConfigurationError: For no tools, two tools of one name, or a name
            that is not usable in tool names.

    Examples:
        >>> import asyncio
        >>> from tidemill import tool
        >>> @tool
        ... def read_file(path: str) -> str:
        ...     '''Read a file.'''
        ...     return f"contents of {path}"
        >>> fs = StaticMCPClient([read_file], name="fs")
        >>> asyncio.run(fs.aconnect())
        StaticMCPClient(name='fs', tools=1, open)
        >>> [tool.name for tool in fs.tools]
        ['fs__read_file']
        >>> asyncio.run(fs.tools[0].arun(path="notes.txt")).content
        'contents of notes.txt'
    """

    def __init__(self, tools: Iterable[ToolLike], *, name: str = "static") -> None:
        given: object = tools  # tools="x" or tools=my_tool would iterate wrongly, or not at all
        if isinstance(given, str | bytes) or not isinstance(given, Iterable):
            raise ConfigurationError(
                f"tools= of the static MCP client {name!r} must be a list of tools, "
                f"not {type(given).__name__}.",
                hint="Pass tools=[my_tool, ...]: @tool functions, Tool objects or functions.",
            )
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigurationError(
                f"MCP server name {name!r} is not usable in tool names.",
                hint="Use letters, digits, '_' and '-' only.",
            )
        wrapped = [as_tool(item) for item in tools]
        if not wrapped:
            raise ConfigurationError(
                f"The static MCP client {name!r} was given no tools.",
                hint="Pass the tools it serves: .mcp('static', server='fs', tools=[read_file]).",
            )
        by_name: dict[str, Tool] = {}
        for item in wrapped:
            if item.name in by_name:
                raise ConfigurationError(
                    f"The static MCP client {name!r} was given two tools named {item.name!r}.",
                    hint="Give one of them another name with @tool(name=...).",
                )
            by_name[item.name] = item
        self._name = name
        names = tool_names(name, by_name)
        self._tools = tuple(
            StaticTool(self, item, name=names[key]) for key, item in by_name.items()
        )
        self._state: _State = "new"

    @property
    def name(self) -> str:
        """The server's name: the prefix of its tools' names."""
        return self._name

    @property
    def is_open(self) -> bool:
        """Whether `aconnect()` was called and `aclose()` was not."""
        return self._state == "open"

    @property
    def tools(self) -> tuple[StaticTool, ...]:
        """The tools, named `{name}__{tool}`.

        Raises:
            ConfigurationError: Before the client has opened.
        """
        if self._state == "new":
            raise ConfigurationError(
                f"MCP client {self._name!r} is not open yet, so it has no tools.",
                hint="Open it first: await client.aconnect().",
            )
        return self._tools

    async def aconnect(self) -> Self:
        """Open the client: its tools become available.

        Raises:
            ConfigurationError: When the client was opened before.
        """
        if self._state != "new":
            raise ConfigurationError(
                f"MCP client {self._name!r} was opened before; a client opens once.",
                hint="Create a new StaticMCPClient to open again.",
            )
        self._state = "open"
        return self

    async def aclose(self) -> None:
        """Close: its tools raise `MCPToolError` from now on. Closing twice does nothing."""
        self._state = "closed"

    def __repr__(self) -> str:
        return f"StaticMCPClient(name={self._name!r}, tools={len(self._tools)}, {self._state})"


class StaticTool(Tool):
    """A tool of a `StaticMCPClient`: another tool, under its server's name.

    It validates, runs and renders as the tool it wraps, while its client is open.
    """

    def __init__(self, client: StaticMCPClient, wrapped: Tool, *, name: str) -> None:
        super().__init__(
            name=name,
            description=wrapped.description,
            parameters=wrapped.parameters,
            requires_approval=wrapped.requires_approval,
        )
        self.client = client
        """The client that serves it."""
        self.wrapped = wrapped
        """The tool it runs."""
        self.delegates = wrapped.delegates

    @property
    def server(self) -> str:
        """The name of the tool's server."""
        return self.client.name

    @property
    def remote_name(self) -> str:
        """The tool's name on its server: the wrapped tool's own name."""
        return self.wrapped.name

    def validate(self, arguments: Mapping[str, JsonValue]) -> dict[str, Any]:
        """Validate as the wrapped tool does, naming this tool in the error.

        Raises:
            ToolArgumentsError: Listing every problem, by argument.
        """
        try:
            return self.wrapped.validate(arguments)
        except ToolArgumentsError as exc:
            raise ToolArgumentsError(self.name, exc.errors) from None

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> object:
        """Run the wrapped tool.

        Raises:
            MCPToolError: When the client is not open.
        """
        if not self.client.is_open:
            raise MCPToolError(
                self.server,
                self.remote_name,
                f"MCP client {self.server!r} is not open; it cannot call {self.remote_name!r}.",
                hint="Open the client before running the agent, and close it after.",
            )
        return await self.wrapped.acall(arguments, context)

    def render(self, value: object) -> str:
        """Render as the wrapped tool does."""
        return self.wrapped.render(value)
