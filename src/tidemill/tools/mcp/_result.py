"""`MCPResult`: what an MCP tool call returned, and how it reads to a model.

Both sides of a call use it: `MCPConnection.acall_tool` returns one, and
`MCPTool` renders it as the tool's result (`render_content`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from tidemill.tools._tool import render_result

__all__ = ["ContentBlock", "MCPResult", "render_content"]

ContentBlock = Mapping[str, JsonValue]
"""One content block of a tool result, as MCP sends it (`{"type": "text", "text": ...}`)."""


@dataclass(frozen=True, slots=True)
class MCPResult:
    """What an MCP tool call returned.

    Examples:
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

    Examples:
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
