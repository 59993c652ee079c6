"""`MCPTool`: one tool of an MCP server, as a Tidemill `Tool`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import jsonschema
from pydantic import JsonValue

from tidemill.errors import MCPToolError
from tidemill.tools._context import ToolContext
from tidemill.tools._tool import Tool, render_result
from tidemill.tools.mcp._result import MCPResult

__all__ = [
    "IDEMPOTENCY_META",
    "MCPTool",
    "ToolCaller",
    "describe",
    "input_schema",
]

IDEMPOTENCY_META = "tidemill.dev/idempotency-key"
"""The `_meta` key of a tool call that carries its idempotency key (the same on every
attempt of the call), for servers that make side effects exactly-once."""


class ToolCaller(Protocol):
    """What an `MCPTool` calls its server through: the `MCPConnection` that made it.

    A protocol, so that this module, which `MCPConnection` imports to make
    its tools, does not import the connection back.
    """

    @property
    def name(self) -> str:
        """The server's name: the prefix of its tools' names."""

    async def acall_tool(
        self, tool: str, arguments: Mapping[str, Any], *, meta: Mapping[str, str] | None = None
    ) -> MCPResult:
        """Call `tool` (its name on the server) and return its result, errors included."""


def input_schema(tool: Mapping[str, JsonValue]) -> dict[str, JsonValue] | None:
    """The tool's `inputSchema`, usable as a Tidemill schema, or None when it is unusable.

    A schema without a `type` is taken as an object; one that is not an
    object, or not a valid JSON Schema, is unusable.
    """
    raw = tool.get("inputSchema")
    schema: dict[str, JsonValue] = dict(raw) if isinstance(raw, dict) else {}
    schema.setdefault("type", "object")
    if schema["type"] != "object":
        return None
    if not isinstance(schema.get("properties"), dict):
        schema["properties"] = {}
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError:
        return None
    return schema


class MCPTool(Tool):
    """A tool of a connected MCP server, callable by an agent like any other `Tool`.

    `MCPConnection` makes these; its `tools` are ready to pass to an agent.
    The name is `{server}__{tool}`, the description and argument schema are
    the server's; arguments are checked against the schema before the call.
    A result the server marks as an error raises `MCPToolError`, which the
    runtime shows the model as the call's error result.
    """

    def __init__(
        self,
        connection: ToolCaller,
        *,
        remote_name: str,
        name: str,
        description: str,
        parameters: Mapping[str, JsonValue],
        requires_approval: bool = False,
    ) -> None:
        super().__init__(
            name=name,
            description=description,
            parameters=parameters,
            requires_approval=requires_approval,
        )
        self.connection = connection
        """The connection that calls the tool: the `MCPConnection` that made it."""
        self.remote_name = remote_name
        """The tool's name on its server."""

    @property
    def server(self) -> str:
        """The name of the tool's server."""
        return self.connection.name

    async def acall(self, arguments: dict[str, Any], context: ToolContext) -> MCPResult:
        """Call the tool on its server, its idempotency key in `_meta` (`IDEMPOTENCY_META`).

        Raises:
            MCPToolError: When the server reports an error, refuses the call,
                does not answer within `call_timeout`, or is disconnected.
        """
        meta = {IDEMPOTENCY_META: context.idempotency_key}
        result = await self.connection.acall_tool(self.remote_name, arguments, meta=meta)
        if result.is_error:
            raise MCPToolError(self.server, self.remote_name, result.text())
        return result

    def render(self, value: object) -> str:
        """Render an `MCPResult` with `render_content`; anything else as JSON."""
        if isinstance(value, MCPResult):
            return value.text()
        return render_result(value)


def describe(tool: Mapping[str, JsonValue]) -> str:
    """The description a model sees: the server's description, else its title."""
    description = tool.get("description")
    if isinstance(description, str) and description.strip():
        return description.strip()
    title = tool.get("title")
    return title if isinstance(title, str) else ""
