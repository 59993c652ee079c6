from __future__ import annotations

import pytest

from tidemill import ConfigurationError
from tidemill.tools import Tool, ToolRegistry, as_tool, tool


@tool
def search(query: str) -> str:
    """Search."""
    return query


def plain(x: int) -> int:
    """Double it."""
    return x * 2


def test_registry_keeps_order_and_wraps_plain_functions() -> None:
    registry = ToolRegistry([search, plain])
    assert registry.names() == ["search", "plain"]
    assert isinstance(registry.get("plain"), Tool)
    assert "search" in registry
    assert "nope" not in registry
    assert len(registry) == 2
    assert [d.name for d in registry.definitions()] == ["search", "plain"]
    assert registry.describe()[1] == {
        "name": "plain",
        "description": "Double it.",
        "requires_approval": False,
    }


def test_duplicate_names_are_refused_but_re_adding_the_same_tool_is_fine() -> None:
    registry = ToolRegistry([search])
    registry.add(search)
    other = Tool(lambda query: query, name="search")
    with pytest.raises(ConfigurationError, match="Two tools are named 'search'"):
        registry.add(other)


def test_suggestions_for_misspelled_names() -> None:
    registry = ToolRegistry([search, plain])
    assert registry.suggest("serch") == ["search"]
    assert registry.suggest("zzz") == []


def test_definitions_are_refreshed_after_add() -> None:
    registry = ToolRegistry([search])
    assert len(registry.definitions()) == 1
    registry.add(plain)
    assert len(registry.definitions()) == 2


def test_non_callables_are_not_tools() -> None:
    with pytest.raises(ConfigurationError, match="Cannot use int as a tool"):
        as_tool(42)
