"""Read a Google-style docstring: the summary, and the `Args:` descriptions."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns|Return|Yields|Raises|"
    r"Examples?|Notes?|Attributes|Warnings?|See Also|Todo|Performance):\s*$"
)
_ARG_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Keyword Args"}
# "name: text", "name (type): text", "*args: text"
_ARG_LINE = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(\([^)]*\))?\s*:\s*(?P<text>.*)$")


@dataclass(frozen=True)
class Docstring:
    """The parts of a docstring a tool needs."""

    description: str = ""
    """Everything before the first section: the tool's description."""
    params: dict[str, str] = field(default_factory=dict)
    """Argument name to its description, from the `Args:` section."""


def parse_docstring(doc: str | None) -> Docstring:
    """Split a Google-style docstring into its description and argument notes.

    Examples:
        >>> d = parse_docstring('''Search the web.
        ...
        ... Args:
        ...     query: What to look for.
        ...     limit (int): How many results,
        ...         at most.
        ... ''')
        >>> d.description
        'Search the web.'
        >>> d.params["limit"]
        'How many results, at most.'
    """
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, list[str]] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section, current, arg_indent = header.group(1), None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in _ARG_SECTIONS or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if arg_indent is None:
            arg_indent = indent
        match = _ARG_LINE.match(line.strip())
        if indent <= arg_indent and match:
            current = match.group("name")
            params[current] = [match.group("text").strip()]
        elif current is not None:
            params[current].append(line.strip())
    return Docstring(
        description="\n".join(description).strip(),
        params={name: " ".join(p for p in parts if p) for name, parts in params.items()},
    )
