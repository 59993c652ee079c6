"""`MCPTool`: one tool of an MCP server, as a Tidemill `Tool`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jsonschema
from pydantic import JsonValue

from tidemill.errors import MCPToolError
from tidemill.tools._context import ToolContext
from tidemill.tools._tool import Tool, render_result

if TYPE_CHECKING:
    from tidemill.tools.mcp._connection import MCPConnection

__all__ = [
    "IDEMPOTENCY_META",
    "ContentBlock",
    "MCPResult",
    "MCPTool",
    "describe",
    "input_schema",
    "render_content",
]

ContentBlock = Mapping[str, JsonValue]
"""One content block of a tool result, as MCP sends it (`{"type": "text", "text": ...}`)."""

IDEMPOTENCY_META = "tidemill.dev/idempotency-key"
"""The `_meta` key of a tool call that carries its idempotency key (the same on every
attempt of the call), for servers that make side effects exactly-once."""


@dataclass(frozen=True, slots=True)
class MCPResult:
    """What an MCP tool call returned.

    Example:
        >>> MCPResult(content=({"type": "text", "text": "3"},)).text()
        '3'
    """

    content: Sequence[ContentBlock] = ()
    """The content blocks: text, images, audio, resource links, embedded resources."""
    structured: JsonValue = None
    """The `structuredContent` value, when the tool declares an output schema."""
    is_error: bool = False
    """Whether the server marked the call as failed."""

    @classmethod
    def from_wire(cls, result: Mapping[str, JsonValue]) -> MCPResult:
        """Read a `tools/call` result in wire format."""
        content = result.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        return cls(
            content=tuple(blocks),
            structured=result.get("structuredContent"),
            is_error=result.get("isError") is True,
        )

    def text(self) -> str:
        """Render the result for the model; see `render_content`."""
        if not self.content and self.structured is not None:
            return render_result(self.structured)
        return render_content(self.content)


def render_content(blocks: Sequence[ContentBlock]) -> str:
    """Render MCP content blocks as text: text as it is, the rest summarised by reference.

    Images and audio become a line naming their type and size (their bytes
    would cost many tokens and most models cannot read them in a tool result);
    an embedded text resource keeps its text under a line naming its URI.

    Example:
        >>> print(render_content([
        ...     {"type": "text", "text": "Chart ready."},
        ...     {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
        ...     {"type": "resource_link", "uri": "file:///tmp/chart.png", "name": "chart.png"},
        ... ]))
        Chart ready.
        [image: image/png, 8 bytes]
        [resource link: chart.png <file:///tmp/chart.png>]
    """
    if not blocks:
        return "(no content)"
    return "\n".join(_render_block(block) for block in blocks)


def _render_block(block: ContentBlock) -> str:
    kind = block.get("type")
    if kind == "text":
        return _str(block.get("text"))
    if kind in ("image", "audio"):
        mime = _str(block.get("mimeType")) or "unknown type"
        return f"[{kind}: {mime}, {_size(block.get('data'))}]"
    if kind == "resource_link":
        name = _str(block.get("title")) or _str(block.get("name"))
        line = f"[resource link: {name} <{_str(block.get('uri'))}>]"
        description = _str(block.get("description"))
        return f"{line} {description}" if description else line
    if kind == "resource":
        resource = block.get("resource")
        if not isinstance(resource, dict):
            return "[resource]"
        uri, mime = _str(resource.get("uri")), _str(resource.get("mimeType"))
        text = resource.get("text")
        if isinstance(text, str):
            return f"[resource <{uri}>]\n{text}"
        described = ", ".join(p for p in (mime, _size(resource.get("blob"))) if p)
        return f"[resource <{uri}>: {described}]"
    return f"[{_str(kind) or 'unknown'} content]"


def _str(value: JsonValue) -> str:
    return value if isinstance(value, str) else ""


def _size(data: JsonValue) -> str:
    if not isinstance(data, str):
        return "no data"
    size = len(data) * 3 // 4 - data[-2:].count("=")
    return f"{size} bytes" if size < 10_000 else f"{size / 1000:.0f} kB"


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
        connection: MCPConnection,
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
        """The connection that calls the tool."""
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
