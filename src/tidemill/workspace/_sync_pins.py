"""Pins in a push: a pin to an item of the same push follows it to the version the push writes.

A pinned reference (`script: {path: f/x/lookup@3}` in an agent's tool, a
nested agent `agent: {agent: f/x/helper@2}`, a linked step's
`ai_agent: {agent: f/x/triage@7}`) names a version of the workspace it was
written in. Version numbers are that workspace's history, and a directory
holds only each item's current value: a pull writes it, and a push into
another workspace writes it as a new version there (version 1 in an empty
workspace). So a push re-pins:

- A pin `p@N` to an item `p` of the same push, where the workspace holds no
  version N of `p`, is stored as `p@M`, M the version of `p` once the push
  is written (its new version, or its version now when the push leaves it
  unchanged): the pin follows the content the directory holds for `p`.
- A pin the workspace holds (pushing back into the workspace pulled from,
  or naming a real past version there) is kept as written, and so is a pin
  to an item the push does not hold: the reference check then says whether
  it is there.

The plan lists each re-pin on its item (`ItemChange.repinned`). Comparing
the stored item with the re-pinned value, the same directory pushed again
is unchanged. What a directory cannot carry is an older version: a pin to
version 3 of an item pulled at version 5 follows it to the content of
version 5 (the pull holds no other), which the plan's `repinned` shows.

Examples:
    >>> repin({"tools": [{"name": "a", "script": {"path": "f/x/s@3"}},
    ...                  {"name": "b", "inputs": {"path": "f/x/s@3"}}]},
    ...       lambda path, number: None, {"f/x/s": 1})
    ({'tools': [{'name': 'a', 'script': {'path': 'f/x/s@1'}}, \
{'name': 'b', 'inputs': {'path': 'f/x/s@3'}}]}, ['f/x/s@3 -> f/x/s@1'])
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tidemill.workspace._agents import AGENT_TYPE
from tidemill.workspace._content import VERSIONED
from tidemill.workspace._session import Context
from tidemill.workspace._sync_plan import ItemChange
from tidemill.workspace._tree import TreeItem

__all__ = ["repin", "repinned"]

_PINNED = re.compile(r"^([uf](?:/[a-z0-9][a-z0-9_-]{0,63}){2,})@([1-9][0-9]*)\Z")
_REFERENCES = frozenset({"agent", "path"})
"""The keys whose string values are references that may pin (a script's or flow's
`path`, a linked or nested agent's `agent`)."""
_BINDINGS = frozenset({"inputs", "tool_inputs", "input_transforms"})
"""Keys holding a tool's or step's own values: nothing in them is re-pinned."""


def repin(
    value: Any, held: Callable[[str, int], object | None], versions: Mapping[str, int]
) -> tuple[Any, list[str]]:
    """`value` with its pins to the push's items re-pinned (see the module), and each re-pin.

    Args:
        value: A flow document or an agent's value, as the file holds it.
        held: `(path, N)` to whether the workspace holds version N of the
            item (truthy: it does).
        versions: Each versioned item of the push, and its version once written.

    Returns:
        The value (`value` itself when nothing is re-pinned) and `old -> new` for each re-pin.
    """
    notes: list[str] = []

    def walk(inner: Any) -> Any:
        if isinstance(inner, Mapping):
            changed = {}
            for key, held_value in inner.items():
                if key in _BINDINGS:
                    changed[key] = held_value
                elif key in _REFERENCES and isinstance(held_value, str):
                    changed[key] = _pin(held_value)
                else:
                    changed[key] = walk(held_value)
            return changed
        if isinstance(inner, list):
            return [walk(each) for each in inner]
        return inner

    def _pin(written: str) -> str:
        match = _PINNED.match(written)
        if match is None or match[1] not in versions:
            return written
        path, number = match[1], int(match[2])
        if number == versions[path] or held(path, number):
            return written
        moved = f"{path}@{versions[path]}"
        notes.append(f"{written} -> {moved}")
        return moved

    walked = walk(value)
    return (walked if notes else value), notes


def _stored(ctx: Context, items: Sequence[TreeItem]) -> dict[str, tuple[int | None, int]]:
    """Each versioned item of the push: its version now (None: none live), and its next."""
    found: dict[str, tuple[int | None, int]] = {}
    for item in items:
        if item.kind not in VERSIONED:
            continue
        stored = ctx.q.item(item.path) if ctx.rules.allows("read", item.path) else None
        if stored is None:
            found[item.path] = (None, 1)
        else:  # as `store_content` counts: on from the path's history
            last = max(stored.item.version, ctx.q.last_version(item.path))
            found[item.path] = (None if stored.item.deleted else stored.item.version, last + 1)
    return found


def _versions(
    stored: Mapping[str, tuple[int | None, int]], changes: Sequence[ItemChange]
) -> dict[str, int]:
    """Each versioned item of the push, and its version once the push is written."""
    versions: dict[str, int] = {}
    for change in changes:
        if change.path in stored:
            now, after = stored[change.path]
            versions[change.path] = now if change.change == "unchanged" and now else after
    return versions


def repinned(
    ctx: Context,
    items: Sequence[TreeItem],
    changes: Sequence[ItemChange],
    change_of: Callable[[TreeItem], ItemChange],
) -> tuple[tuple[TreeItem, ...], tuple[ItemChange, ...]]:
    """The push's items with their pins re-pinned (`repin`), and their changes.

    The change of a re-pinned item is worked out again from its re-pinned
    value (`change_of`), with the re-pins noted. A re-pin can leave an
    agent unchanged that another one pins, moving the version that one is
    re-pinned to: the versions are worked out again until they hold.
    """

    def held(path: str, number: int) -> bool:
        return ctx.rules.allows("read", path) and ctx.q.version(path, number) is not None

    stored = _stored(ctx, items)
    now_items, now_changes = list(items), list(changes)
    versions: dict[str, int] | None = None
    for _round in range(len(items) + 1):
        found = _versions(stored, now_changes)
        if found == versions:
            break
        versions = found
        for index, item in enumerate(items):
            if item.kind != "flow" and item.resource_type != AGENT_TYPE:
                continue
            value, notes = repin(item.value, held, versions)
            if notes:
                moved = dataclasses.replace(item, value=value)
                now_items[index] = moved
                now_changes[index] = dataclasses.replace(change_of(moved), repinned=tuple(notes))
            else:
                now_items[index], now_changes[index] = item, changes[index]
    return tuple(now_items), tuple(now_changes)
