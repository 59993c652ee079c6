"""Results, schemas and tool listing, without a server process."""

from __future__ import annotations

from typing import Any

import pytest

from tidemill.tools.mcp import MCPConnection, MCPResult, render_content
from tidemill.tools.mcp._tool import describe, input_schema

types = pytest.importorskip("mcp.types", reason="the MCP tests need the 'mcp' extra")


def test_text_blocks_are_joined() -> None:
    blocks = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    assert render_content(blocks) == "first\nsecond"
    assert render_content([]) == "(no content)"


def test_images_audio_and_resources_are_summarised_by_reference() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "image", "mimeType": "image/jpeg", "data": "A" * 40_000},
        {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
        {"type": "resource_link", "uri": "file:///r.csv", "name": "r.csv", "description": "Q3"},
        {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hello"}},
        {
            "type": "resource",
            "resource": {"uri": "file:///b.bin", "mimeType": "x/y", "blob": "AA=="},
        },
        {"type": "hologram"},
    ]
    assert render_content(blocks).splitlines() == [
        "[image: image/jpeg, 30 kB]",
        "[audio: audio/wav, 3 bytes]",
        "[resource link: r.csv <file:///r.csv>] Q3",
        "[resource <file:///a.txt>]",
        "hello",
        "[resource <file:///b.bin>: x/y, 1 bytes]",
        "[hologram content]",
    ]


def test_results_from_the_wire() -> None:
    result = MCPResult.from_wire(
        {"content": [{"type": "text", "text": "3"}], "structuredContent": {"result": 3}}
    )
    assert (result.text(), result.structured, result.is_error) == ("3", {"result": 3}, False)
    only_structured = MCPResult.from_wire({"content": [], "structuredContent": {"rows": [1, 2]}})
    assert only_structured.text() == '{"rows":[1,2]}'
    assert MCPResult.from_wire({"content": [], "isError": True}).is_error


def test_input_schemas_are_made_usable_or_left_out() -> None:
    assert input_schema({"inputSchema": {"properties": {"q": {"type": "string"}}}}) == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
    }
    assert input_schema({}) == {"type": "object", "properties": {}}
    assert input_schema({"inputSchema": {"type": "string"}}) is None
    assert input_schema({"inputSchema": {"type": "object", "required": "q"}}) is None


def test_the_description_falls_back_to_the_title() -> None:
    assert describe({"name": "t", "description": " Search. "}) == "Search."
    assert describe({"name": "t", "title": "Search the docs"}) == "Search the docs"
    assert describe({"name": "t"}) == ""


def listing(names: list[str], cursor: str | None) -> Any:
    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in names]
    return types.ListToolsResult.model_validate({"tools": tools, "nextCursor": cursor})


class PagedSession:
    """Answers tools/list in three pages, the way SDK 1.18+ and 2.x are called."""

    def __init__(self) -> None:
        self.cursors: list[str | None] = []

    async def list_tools(self, *, params: Any = None) -> Any:
        cursor = params.cursor if params is not None else None
        self.cursors.append(cursor)
        pages = {None: (["a", "b"], "p2"), "p2": (["c"], "p3"), "p3": (["d"], None)}
        names, following = pages[cursor]
        return listing(names, following)


class LegacySession:
    """Takes the cursor positionally, as SDK 1.9 to 1.17 do; repeats its last cursor."""

    async def list_tools(self, cursor: str | None = None) -> Any:
        return listing(["x"] if cursor is None else ["y"], "again")


async def test_every_page_of_tools_is_listed() -> None:
    session = PagedSession()
    tools = await MCPConnection(command="x")._list_tools(session)  # type: ignore[arg-type]
    assert [t["name"] for t in tools] == ["a", "b", "c", "d"]
    assert session.cursors == [None, "p2", "p3"]


async def test_older_sdks_and_repeated_cursors() -> None:
    tools = await MCPConnection(command="x")._list_tools(LegacySession())  # type: ignore[arg-type]
    assert [t["name"] for t in tools] == ["x", "y"]
