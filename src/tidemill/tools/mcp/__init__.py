"""MCP client tools: the tools of Model Context Protocol servers, as Tidemill tools.

Connect to a server that runs as a subprocess (stdio) or listens on a URL
(streamable HTTP); its tools become `Tool` objects named `{server}__{tool}`,
ready to give to an agent. Needs the `mcp` extra: `pip install 'tidemill[mcp]'`.

`MCPConnection` is one `MCPClient` (named `"fastmcp"`); `StaticMCPClient`
(`"static"`) serves a fixed list of in-process tools the same way, with no
server and no SDK; `resolve_client` turns a name, a server, a client or a
factory into a client, as `AgentBuilder.mcp` does.

Examples:
    ```python
    from tidemill import agent
    from tidemill.tools.mcp import MCPConnection

    async with MCPConnection(command="uvx", args=["mcp-server-fetch"], name="web") as web:
        bot = agent().llm("openai:gpt-4o-mini").tool(*web.tools)
        print(await bot.arun("Summarise https://example.com"))
    ```
"""

from tidemill.tools.mcp._client import (
    MCPClient,
    MCPClientFactory,
    MCPClientName,
    MCPClientSpec,
    is_mcp_client,
)
from tidemill.tools.mcp._connection import MCPConnection, connect_mcp
from tidemill.tools.mcp._names import tool_names
from tidemill.tools.mcp._resolve import CLIENT_NAMES, resolve_client
from tidemill.tools.mcp._result import ContentBlock, MCPResult, render_content
from tidemill.tools.mcp._server import MCPServer, MCPServerOptions
from tidemill.tools.mcp._static import StaticMCPClient, StaticTool
from tidemill.tools.mcp._tool import IDEMPOTENCY_META, MCPTool

__all__ = [
    "CLIENT_NAMES",
    "IDEMPOTENCY_META",
    "ContentBlock",
    "MCPClient",
    "MCPClientFactory",
    "MCPClientName",
    "MCPClientSpec",
    "MCPConnection",
    "MCPResult",
    "MCPServer",
    "MCPServerOptions",
    "MCPTool",
    "StaticMCPClient",
    "StaticTool",
    "connect_mcp",
    "is_mcp_client",
    "render_content",
    "resolve_client",
    "tool_names",
]
