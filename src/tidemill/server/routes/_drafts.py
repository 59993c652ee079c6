"""Drafts over HTTP, deploying them, and linking a flow's agent steps (scope domain `items`).

A draft is the caller's own unsaved change: nothing anyone runs changes
until it is deployed. `lint` checks a flow as saving the caller's draft of
it would (`AsyncWorkspace.lint_flow`), and stores nothing. `save-step` and `unlink-step` are
`AsyncWorkspace.save_step_as_agent` and `unlink_step`: one transaction each.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from tidemill.errors import ItemNotFound, TidemillError
from tidemill.server._caller import Caller, SignedIn, requires
from tidemill.server.routes._item_models import (
    DeployIn,
    DraftIn,
    DraftInfo,
    DraftOut,
    ItemOut,
    LinkedDraftsOut,
    LintIn,
    LintOut,
    LintProblem,
    SaveStepIn,
    UnlinkStepIn,
)
from tidemill.server.routes._items import checked_path
from tidemill.workspace import ItemPath
from tidemill.workspace._linking import _agent_of, _find

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["drafts"], dependencies=[requires("items")])


@router.get("/drafts", response_model=list[DraftInfo])
async def list_drafts(who: SignedIn) -> list[DraftInfo]:
    """The caller's drafts, without values."""
    who.require("items", "read")
    drafts = await who.ws.drafts()
    return [DraftInfo.of(d) for d in drafts if who.allows("items", "read", d.path)]


@router.get("/drafts/{path:path}", response_model=DraftOut)
async def read_draft(path: str, who: SignedIn) -> DraftOut:
    """The caller's draft of an item."""
    return DraftOut.of(await who.ws.draft(checked_path(who, path, "read")))


@router.put("/drafts/{path:path}", response_model=DraftOut)
async def save_draft(path: str, body: DraftIn, who: SignedIn) -> DraftOut:
    """Save the caller's draft of a script, flow or resource (never of a variable)."""
    path = checked_path(who, path, "write")
    draft = await who.ws.save_draft(
        path,
        body.kind,
        body.value,
        summary=body.summary,
        description=body.description,
        resource_type=body.resource_type,
    )
    return DraftOut.of(draft)


@router.post("/lint/{path:path}", response_model=LintOut)
async def lint(path: str, body: LintIn, who: SignedIn) -> LintOut:
    """Check a flow as saving the caller's draft of it at `path` would; store nothing.

    The caller needs to read `path` (its folder must exist; the flow need
    not). Every problem the save's checks find is listed, each with its step
    and field: the YAML's syntax, the flow's validation, and the scripts,
    flows and agents it names, read as the caller in draft mode.
    """
    problems = await who.ws.lint_flow(checked_path(who, path, "read"), body.value)
    return LintOut(valid=not problems, problems=[LintProblem.of(p) for p in problems])


@router.delete("/drafts/{path:path}", status_code=204)
async def discard_draft(path: str, who: SignedIn) -> Response:
    """Drop the caller's draft of an item."""
    await who.ws.discard_draft(checked_path(who, path, "write"))
    return Response(status_code=204)


@router.post("/deploy/{path:path}", response_model=ItemOut)
async def deploy(path: str, body: DeployIn, who: SignedIn) -> ItemOut:
    """Deploy the caller's draft as the item's new version, with the drafts of `agents`.

    `agents` are agents the flow links (see `linked-drafts`), deployed in the
    same transaction; the drafts of those left out are kept.
    """
    path = checked_path(who, path, "write")
    agents = [checked_path(who, agent, "write") for agent in body.agents]
    return ItemOut.of(await who.ws.deploy(path, message=body.message, agents=agents))


@router.get("/linked-drafts/{path:path}", response_model=LinkedDraftsOut)
async def linked_drafts(path: str, who: SignedIn) -> LinkedDraftsOut:
    """The agents a flow links that the caller has drafts of."""
    path = checked_path(who, path, "read")
    agents = [a for a in await who.ws.linked_drafts(path) if who.allows("items", "read", a)]
    return LinkedDraftsOut(path=path, agents=agents)


@router.post("/agents/save-step", response_model=ItemOut, tags=["agents"])
async def save_step(body: SaveStepIn, who: SignedIn) -> ItemOut:
    """Save an inline `ai_agent` step as the agent at `agent_path` and link the step to it.

    Answers the agent written; the flow gets a new version (with `draft`,
    the caller's draft of it changes instead).
    """
    flow = checked_path(who, body.flow, "write")
    agent = checked_path(who, body.agent_path, "write")
    item = await who.ws.save_step_as_agent(
        flow, body.step_id, agent, draft=body.draft, message=body.message
    )
    return ItemOut.of(item)


async def _linked_agent(who: Caller, flow: str, step_id: str, draft: bool) -> str | None:
    """The agent a flow's step links, read as the caller (None when it cannot tell)."""
    document: Any = None
    try:
        if draft:
            try:
                document = (await who.ws.draft(flow)).value
            except ItemNotFound:
                document = None
        if not isinstance(document, dict):
            document = (await who.ws.get(flow)).value
        if not isinstance(document, dict):
            return None
        target = _agent_of(_find(document, flow, step_id), flow, step_id).get("agent")
        if not isinstance(target, str):
            return None
        return str(ItemPath.parse(target.partition("@")[0]))
    except TidemillError:
        return None  # the workspace says why when it is asked to unlink


@router.post("/agents/unlink-step", response_model=ItemOut, tags=["agents"])
async def unlink_step(body: UnlinkStepIn, who: SignedIn) -> ItemOut:
    """Replace a linked `ai_agent` step by the inline configuration it runs.

    Answers the flow (with `draft`, as the caller's draft now holds it, version 0).
    """
    flow = checked_path(who, body.flow, "write")
    if who.scopes is not None:
        # The agent's configuration is copied into the flow: the token must reach it too.
        agent = await _linked_agent(who, flow, body.step_id, body.draft)
        if agent is not None:
            who.require("items", "read", agent)
    item = await who.ws.unlink_step(flow, body.step_id, draft=body.draft, message=body.message)
    return ItemOut.of(item)
