"""`ToolRegistry`: the tools an agent may call, by name."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.tools._tool import FunctionTool, Tool
from tidemill.types import ToolDefinition

__all__ = ["ToolLike", "ToolRegistry", "as_tool"]

ToolLike = Tool | Callable[..., Any]
"""What an agent accepts as a tool: a `Tool`, or a plain function to wrap."""


def as_tool(item: object) -> Tool:
    """Return `item` as a `Tool`, wrapping a plain function.

    Raises:
        ConfigurationError: When `item` is neither a tool nor a function.
    """
    if isinstance(item, Tool):
        return item
    if callable(item):
        return FunctionTool(item)
    raise ConfigurationError(
        f"Cannot use {type(item).__name__} as a tool.",
        hint="Pass a @tool-decorated function, a Tool instance or a plain function.",
    )


class ToolRegistry:
    """An ordered set of tools with unique names.

    Examples:
        >>> def ping() -> str:
        ...     '''Answer pong.'''
        ...     return "pong"
        >>> registry = ToolRegistry([ping])
        >>> registry.names(), registry.suggest("pong")
        (['ping'], ['ping'])
    """

    def __init__(self, tools: Iterable[ToolLike] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._definitions: list[ToolDefinition] | None = None
        for item in tools:
            self.add(item)

    def add(self, item: ToolLike) -> Tool:
        """Add a tool, wrapping a plain function; return the tool.

        Raises:
            ConfigurationError: When another tool already has the name.
        """
        added = as_tool(item)
        existing = self._tools.get(added.name)
        if existing is not None and existing is not added:
            raise ConfigurationError(
                f"Two tools are named {added.name!r}.",
                hint="Give one of them another name with @tool(name=...).",
            )
        self._tools[added.name] = added
        self._definitions = None
        return added

    def get(self, name: str) -> Tool | None:
        """Return the tool called `name`, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Return the tool names, in the order they were added."""
        return list(self._tools)

    def suggest(self, name: str) -> list[str]:
        """Return the registered names closest to `name`, for did-you-mean messages."""
        return difflib.get_close_matches(name, self._tools, n=3, cutoff=0.5)

    def definitions(self) -> list[ToolDefinition]:
        """Return the tools as a model sees them."""
        if self._definitions is None:
            self._definitions = [t.definition for t in self._tools.values()]
        return self._definitions

    def describe(self) -> list[dict[str, JsonValue]]:
        """Return a JSON-safe summary of the tools."""
        return [
            {"name": t.name, "description": t.description, "requires_approval": t.requires_approval}
            for t in self._tools.values()
        ]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools
