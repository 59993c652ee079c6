"""The copilot's editing tools: show, lint, propose (whole or as a patch) the flow being edited.

A proposal is linted first (`AsyncWorkspace.lint_flow`, the checks saving a
draft runs) and refused with its problems when it does not validate; one
that validates is saved as the asking user's draft of the flow
(`save_draft`), never deployed, and the answer is the diff against what was
there before: the user's earlier draft, else the deployed flow, else nothing.

A flow's YAML here is the stored document dumped as YAML (key order kept,
comments not), which is what `show_flow` shows and a patch must match.
"""

from __future__ import annotations

import difflib
from typing import Any

import yaml

from tidemill.copilot._session import CopilotSession, refusal, refused, session_of
from tidemill.errors import ItemNotFound, TidemillError
from tidemill.flows import Problem
from tidemill.tools import ToolContext, ToolReturn, tool
from tidemill.workspace._items import item_text

__all__ = ["current_flow", "get_lint_errors", "patch_flow", "set_flow", "show_flow"]


async def current_flow(session: CopilotSession, path: str) -> tuple[str, bool]:
    """The flow at `path` as YAML, as the user would edit it, and whether that is a draft.

    The user's draft of it, else the deployed flow, else "" (a new flow).
    """
    ws = session.workspace
    try:
        draft = await ws.draft(path)
    except ItemNotFound:
        pass
    else:
        if draft.kind == "flow":
            return item_text("flow", draft.value), True
    try:
        item = await ws.get(path)
    except ItemNotFound:
        return "", False
    return (item_text("flow", item.value), False) if item.kind == "flow" else ("", False)


def _problems(problems: list[Problem]) -> list[dict[str, Any]]:
    return [{"step": p.step, "field": p.field, "message": p.message} for p in problems]


def _target(session: CopilotSession, path: str | None) -> str | ToolReturn:
    chosen = path or session.flow
    if not chosen:
        return refusal(
            "No flow is being edited, so there is nowhere to save it.",
            hint="Pass `path`: the flow's workspace path, such as f/<folder>/<name> "
            "or u/<you>/<name>.",
        )
    return chosen


@tool
async def show_flow(
    ctx: ToolContext[CopilotSession], path: str | None = None
) -> dict[str, Any] | ToolReturn:
    """The YAML of the flow being edited: your draft of it, else what is deployed.

    A patch_flow's `old` must be an exact piece of this text.

    Args:
        ctx: The call, with the copilot session it acts in.
        path: Another flow's path; by default the flow being edited.
    """
    session = session_of(ctx)
    target = _target(session, path)
    if isinstance(target, ToolReturn):
        return target
    try:
        text, is_draft = await current_flow(session, target)
    except TidemillError as exc:
        return refused(exc)
    state = "your draft" if is_draft else ("deployed" if text else "new: nothing saved yet")
    return {"path": target, "state": state, "yaml": text}


@tool
async def get_lint_errors(
    flow: str, ctx: ToolContext[CopilotSession], path: str | None = None
) -> dict[str, Any] | ToolReturn:
    """Check a flow's YAML with the flow validator, saving nothing; returns its problems.

    Args:
        ctx: The call, with the copilot session it acts in.
        flow: The whole flow as YAML.
        path: Where it would be saved; by default the flow being edited.
    """
    session = session_of(ctx)
    target = _target(session, path)
    if isinstance(target, ToolReturn):
        return target
    session.status("get_lint_errors", f"Linting {target}")
    try:
        problems = await session.workspace.lint_flow(target, flow)
    except TidemillError as exc:
        return refused(exc)
    return {"path": target, "valid": not problems, "problems": _problems(problems)}


async def _propose(session: CopilotSession, target: str, before: str, after: str) -> Any:
    """Lint `after`; save it as the user's draft at `target` if it validates; answer the diff."""
    ws = session.workspace
    try:
        problems = await ws.lint_flow(target, after)
        if problems:
            return refusal(
                f"The flow does not validate; nothing was saved ({len(problems)} problem(s)).",
                hint="Fix each problem and propose the flow again.",
                problems=_problems(problems),
            )
        await ws.save_draft(target, "flow", after)
    except TidemillError as exc:
        return refused(exc)
    saved, _ = await current_flow(session, target)
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            saved.splitlines(keepends=True),
            fromfile=f"{target} (before)",
            tofile=f"{target} (your draft)",
        )
    )
    session.flow = target
    session.status("set_flow", f"Saved your draft of {target}")
    return {
        "path": target,
        "saved": "as your draft (not deployed)",
        "diff": diff or "(no change)",
    }


@tool
async def set_flow(
    flow: str, ctx: ToolContext[CopilotSession], path: str | None = None
) -> dict[str, Any] | ToolReturn:
    """Propose the whole flow: it is validated, then saved as the user's draft (never deployed).

    Answers the diff against what was there, or the problems when it does not validate.

    Args:
        ctx: The call, with the copilot session it acts in.
        flow: The whole flow as YAML (`summary`, `inputs` as a JSON Schema, `steps`).
        path: Where to save it; by default the flow being edited.
    """
    session = session_of(ctx)
    target = _target(session, path)
    if isinstance(target, ToolReturn):
        return target
    session.status("set_flow", f"Proposing {target}")
    try:
        before, _ = await current_flow(session, target)
        yaml.safe_load(flow)
    except yaml.YAMLError as exc:
        return refusal(f"The flow is not valid YAML: {exc}", hint="Send the whole flow as YAML.")
    except TidemillError as exc:
        return refused(exc)
    result: dict[str, Any] | ToolReturn = await _propose(session, target, before, flow)
    return result


@tool
async def patch_flow(
    old: str, new: str, ctx: ToolContext[CopilotSession], path: str | None = None
) -> dict[str, Any] | ToolReturn:
    """Change the flow: replace one exact piece of its YAML (as show_flow shows it) with another.

    Refused when `old` is not found exactly once. The result is validated
    and saved as the user's draft, as set_flow does.

    Args:
        ctx: The call, with the copilot session it acts in.
        old: The exact text to replace, found once in the current YAML.
        new: The text to put in its place.
        path: The flow; by default the flow being edited.
    """
    session = session_of(ctx)
    target = _target(session, path)
    if isinstance(target, ToolReturn):
        return target
    session.status("patch_flow", f"Patching {target}")
    try:
        before, _ = await current_flow(session, target)
    except TidemillError as exc:
        return refused(exc)
    count = before.count(old) if old else 0
    if count != 1:
        found = "is not in" if count == 0 else f"is {count} times in"
        return refusal(
            f"The piece to replace {found} the flow's YAML; nothing was changed.",
            hint="Read the YAML with show_flow and pass a piece found exactly once "
            "(add surrounding lines to make it unique), or send the whole flow with set_flow.",
        )
    result: dict[str, Any] | ToolReturn = await _propose(
        session, target, before, before.replace(old, new, 1)
    )
    return result
