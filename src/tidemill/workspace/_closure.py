"""`closure`: the workspace items a flow needs elsewhere, for an export.

A flow names items by path: scripts (`script: {path: f/...}`), sub-flows
(`flow: f/...`), linked agents (`ai_agent: {agent: f/...@7}`), and
`$var:`/`$res:` references (a provider resource, a key). Each of those may
name more: an agent its provider resource, its tools' flows and workspace
scripts (`script: {path: f/...@3}`), MCP credentials and nested agents; a
sub-flow its own steps' items. The closure follows them all, reading each
item once.

Examples:
    >>> items = {
    ...     "f/support/triage": {"provider": "$res:f/ai/openai", "model": "openai:gpt-4o",
    ...                          "tools": [{"name": "refund", "flow": "f/support/refund"}]},
    ...     "f/ai/openai": {"api_key": "$var:f/ai/key"},
    ...     "f/support/refund": {"steps": [{"id": "pay", "script": {"path": "f/support/pay"}}]},
    ... }
    >>> flow = {"steps": [{"id": "t", "ai_agent": {"agent": "f/support/triage@3"}}]}
    >>> sorted(closure(items.get, flow))
    ['f/ai/key', 'f/ai/openai', 'f/support/pay', 'f/support/refund', 'f/support/triage']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tidemill.flows import WORKSPACE_PATH

__all__ = ["closure", "linked_agents", "references"]

_REFERENCE = re.compile(r"^\$(?:var|res):([uf](?:/[a-z0-9][a-z0-9_-]{0,63}){2,})\Z")
_LINK = re.compile(r"^([uf](?:/[a-z0-9][a-z0-9_-]{0,63}){2,})(?:@[1-9][0-9]*)?\Z")
_BODIES = ("branch", "parallel", "for_each")


def _path(value: Any) -> str | None:
    return value if isinstance(value, str) and WORKSPACE_PATH.match(value) else None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _step_lists(kind: Mapping[str, Any]) -> Iterator[list[Any]]:
    """The lists of steps a branch, parallel or for_each holds."""
    for key in ("steps", "default"):
        if isinstance(kind.get(key), list):
            yield kind[key]
    for case in kind.get("branches") or ():
        if isinstance(case, Mapping) and isinstance(case.get("steps"), list):
            yield case["steps"]


def _flow_items(document: Mapping[str, Any]) -> Iterator[str]:
    for step in document.get("steps") or ():
        if isinstance(step, Mapping):
            yield from _step_items(step)


def _step_items(step: Mapping[str, Any]) -> Iterator[str]:
    script = step.get("script")
    if isinstance(script, Mapping) and (path := _path(script.get("path"))):
        yield path
    yield from _sub_flow(step.get("flow"))
    for key in _BODIES:
        kind = step.get(key)
        if isinstance(kind, Mapping):
            for body in _step_lists(kind):
                yield from _flow_items({"steps": body})
    agent = step.get("ai_agent")
    if isinstance(agent, Mapping):
        yield from _agent_items(agent)


def _sub_flow(value: Any) -> Iterator[str]:
    if (path := _path(value)) is not None:
        yield path
    elif isinstance(value, Mapping):
        if (path := _path(value.get("path"))) is not None:
            yield path
        if isinstance(value.get("flow"), Mapping):
            yield from _flow_items(value["flow"])


def _agent_items(agent: Mapping[str, Any]) -> Iterator[str]:
    """What an agent names: a linked one its resource; an inline one its tools' items."""
    link = agent.get("agent")
    if isinstance(link, str) and (match := _LINK.match(link)):
        yield match[1]
    for tool in agent.get("tools") or ():
        if not isinstance(tool, Mapping):
            continue
        yield from _sub_flow(tool.get("flow"))
        script = tool.get("script")
        written = script.get("path") if isinstance(script, Mapping) else None
        if isinstance(written, str) and (match := _LINK.match(written)):
            yield match[1]  # a script tool may pin a version: the closure carries the script
        if isinstance(tool.get("agent"), Mapping):
            yield from _agent_items(tool["agent"])
        mcp = tool.get("mcp")
        if isinstance(mcp, Mapping) and (path := _path(mcp.get("resource"))):
            yield path  # `resource: f/...`, a bare path (a `$res:` one is a reference)


def linked_agents(flow_document: Mapping[str, Any]) -> set[str]:
    """The agents a flow's `ai_agent` steps link (without their pins), in every body.

    Examples:
        >>> sorted(linked_agents({"steps": [{"id": "a", "ai_agent": {"agent": "f/s/triage@3"}},
        ...     {"id": "b", "branch": {"branches": [{"when": "true", "steps": [
        ...         {"id": "c", "ai_agent": {"agent": "f/s/refunds"}}]}]}}]}))
        ['f/s/refunds', 'f/s/triage']
    """
    found: set[str] = set()

    def walk(steps: Any) -> None:
        for step in steps if isinstance(steps, list) else ():
            if not isinstance(step, Mapping):
                continue
            agent = step.get("ai_agent")
            link = agent.get("agent") if isinstance(agent, Mapping) else None
            if isinstance(link, str) and (match := _LINK.match(link)):
                found.add(match[1])
            for key in _BODIES:
                kind = step.get(key)
                if isinstance(kind, Mapping):
                    for body in _step_lists(kind):
                        walk(body)
            sub = step.get("flow")
            if isinstance(sub, Mapping) and isinstance(sub.get("flow"), Mapping):
                walk(sub["flow"].get("steps"))

    walk(flow_document.get("steps"))
    return found


def references(value: Any) -> set[str]:
    """The paths one item's value names directly (not those of the items it names).

    A flow document's scripts, sub-flows and linked agents; an agent's tools'
    flows and nested agents; and every whole-string `$var:`/`$res:` reference.

    Examples:
        >>> sorted(references({"api_key": "$var:f/ai/key", "base_url": "https://x"}))
        ['f/ai/key']
    """
    found = {match[1] for text in _strings(value) if (match := _REFERENCE.match(text))}
    if isinstance(value, Mapping):
        found.update(_flow_items(value) if "steps" in value else _agent_items(value))
    return found


def closure(read: Callable[[str], Any], flow_document: Mapping[str, Any]) -> set[str]:
    """The paths of every workspace item a flow needs, followed recursively.

    Args:
        read: The value of the item at a path (a flow document, an agent's
            or another resource's value, a variable's text), or None when
            there is none (or the reader may not read it): its path is still
            in the closure, and what it names is not.
        flow_document: The flow, as written (with its paths, not inlined).

    Returns:
        The paths, without `@version` pins; the flow's own path is not among them.
    """
    found: set[str] = set()
    pending = sorted(references(flow_document))
    while pending:
        path = pending.pop()
        if path in found:
            continue
        found.add(path)
        value = read(path)
        if value is not None:
            pending.extend(sorted(references(value) - found))
    return found
