"""The copilot's reading tools: search the workspace, read a flow or a script, find resource types.

Every read is the asking user's (`CopilotSession.workspace`): search only
finds what the user may read, and reading a path the user may not read is
refused as if nothing were there. Resources are shown by path and type,
never by value, and no tool reads a variable: a secret's value cannot reach
the model from here.
"""

from __future__ import annotations

from typing import Any

from tidemill.copilot._outline import outline
from tidemill.copilot._session import CopilotSession, refusal, refused, session_of
from tidemill.errors import ConfigurationError, TidemillError
from tidemill.tools import ToolContext, ToolReturn, tool
from tidemill.workspace import BUILTIN_TYPES, Item
from tidemill.workspace._scripts import script_metadata
from tidemill.workspace._search import SearchEntry, SearchIndex

__all__ = [
    "SEARCH_LIMIT",
    "get_flow_details",
    "get_script_details",
    "resource_type",
    "search_flows",
    "search_scripts",
]

SEARCH_LIMIT = 10
"""How many hits a search tool answers."""

_BUILTINS = SearchIndex([SearchEntry(t.name, "resource_type", t.summary) for t in BUILTIN_TYPES])


async def _search(session: CopilotSession, query: str, kind: str) -> list[dict[str, str]]:
    hits = await session.workspace.search(query, kinds={kind}, limit=SEARCH_LIMIT)
    return [{"path": hit.path, "summary": hit.summary} for hit in hits]


@tool
async def search_flows(query: str, ctx: ToolContext[CopilotSession]) -> list[dict[str, str]]:
    """Search the workspace's flows you may read; returns `[{path, summary}]`, best first.

    Use it before writing a flow: an existing flow can be reused as a sub-flow step.

    Args:
        ctx: The call, with the copilot session it acts in.
        query: What the flow does, in a few words: "process invoices", "send notification".
    """
    session = session_of(ctx)
    session.status("search_flows", f'Searching for workspace flows related to "{query}"...')
    found = await _search(session, query, "flow")
    session.status("search_flows", f'Found {len(found)} flows related to "{query}"')
    return found


@tool
async def search_scripts(query: str, ctx: ToolContext[CopilotSession]) -> list[dict[str, str]]:
    """Search the workspace's scripts you may read; returns `[{path, summary}]`, best first.

    Use it before writing a script: reuse one with a `script: {path: ...}` step.

    Args:
        ctx: The call, with the copilot session it acts in.
        query: What the script does, in a few words: "send slack message", "refund order".
    """
    session = session_of(ctx)
    session.status("search_scripts", f'Searching for workspace scripts related to "{query}"...')
    found = await _search(session, query, "script")
    session.status("search_scripts", f'Found {len(found)} scripts related to "{query}"')
    return found


async def _read(session: CopilotSession, path: str, kind: str) -> Item | ToolReturn:
    try:
        item = await session.workspace.get(path)
    except TidemillError as exc:
        return refused(exc)
    if item.kind != kind:
        return refusal(
            f"{path} is a {item.kind}, not a {kind}.",
            hint=f"Find {kind}s with search_{kind}s.",
        )
    return item


@tool
async def get_flow_details(
    path: str, ctx: ToolContext[CopilotSession]
) -> dict[str, Any] | ToolReturn:
    """A workspace flow's summary, description, input schema and step structure.

    Read it before reusing a flow as a sub-flow step: the step's `inputs`
    must fit the flow's input schema.

    Args:
        ctx: The call, with the copilot session it acts in.
        path: The flow's path, as search_flows answered it (`f/billing/process_invoice`).
    """
    session = session_of(ctx)
    session.status("get_flow_details", f"Reading flow {path}")
    item = await _read(session, path, "flow")
    if isinstance(item, ToolReturn):
        return item
    document = item.value if isinstance(item.value, dict) else {}
    schema = document.get("inputs") or {}
    required = schema.get("required", []) if isinstance(schema, dict) else []
    return {
        "path": item.path,
        "summary": item.summary,
        "description": item.description,
        "inputs": schema,
        "steps": outline(document.get("steps")),
        # A sub-flow step's shape, for the model to fill in: every required input bound.
        "reuse_as": {
            "id": "<step id>",
            "flow": item.path,
            "inputs": {name: f"<{name}>" for name in required},
        },
    }


@tool
async def get_script_details(
    path: str, ctx: ToolContext[CopilotSession]
) -> dict[str, Any] | ToolReturn:
    """A workspace script's summary, input schema (the parameters of `main`) and code.

    Args:
        ctx: The call, with the copilot session it acts in.
        path: The script's path, as search_scripts answered it (`f/ops/send_slack`).
    """
    session = session_of(ctx)
    session.status("get_script_details", f"Reading script {path}")
    item = await _read(session, path, "script")
    if isinstance(item, ToolReturn):
        return item
    code = str(item.value or "")
    try:
        schema = script_metadata(code, path=item.path).schema
    except ConfigurationError:
        schema = {}
    shown: dict[str, Any] = {
        "path": item.path,
        "summary": item.summary,
        "description": item.description,
        "schema": schema,
        "code": code[: session.max_code_chars],
        "reuse_as": {
            "id": "<step id>",
            "script": {"path": item.path},
            "inputs": {name: f"<{name}>" for name in schema.get("required", [])},
        },
    }
    if len(code) > session.max_code_chars:
        shown["truncated"] = (
            f"The code is {len(code)} characters; only the first {session.max_code_chars} "
            "are shown."
        )
    return shown


@tool
async def resource_type(query: str, ctx: ToolContext[CopilotSession]) -> list[dict[str, Any]]:
    """Resource types matching `query`: their JSON Schemas and the resources you may read of each.

    Resources are listed by path only: reference one as `$res:<path>` in a
    step's inputs, and never put a secret in a flow (use `$var:<path>`).

    Args:
        ctx: The call, with the copilot session it acts in.
        query: A service or kind of resource: "openai", "postgres", "slack".
    """
    session = session_of(ctx)
    session.status("resource_type", f'Looking up resource types for "{query}"')
    ws = session.workspace
    found: list[dict[str, Any]] = []
    builtins = {t.name: t for t in BUILTIN_TYPES}
    for hit in _BUILTINS.search(query, limit=5):
        kind = builtins[hit.path]
        found.append({"name": kind.name, "summary": kind.summary, "schema": kind.schema})
    for hit in await ws.search(query, kinds={"resource_type"}, limit=5):
        item = await ws.get(hit.path)
        found.append({"name": item.path, "summary": item.summary, "schema": item.value})
    names = {each["name"] for each in found}
    resources = [r for r in await ws.list(kind="resource", limit=500) if r.resource_type in names]
    for each in found:
        each["resources"] = [r.path for r in resources if r.resource_type == each["name"]]
    return found
