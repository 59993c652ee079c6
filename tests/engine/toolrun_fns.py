"""Agent tools called in the worker that ask for a `ToolContext` (its `deps`: the `ToolRun`)."""

from __future__ import annotations

from typing import Any

from tidemill import tool
from tidemill.engine import ToolRun
from tidemill.tools import ToolContext


async def whose(ctx: ToolContext[ToolRun], prefix: str = "") -> dict[str, Any]:
    """Who the run runs as, and the items they may read.

    Args:
        ctx: The call; its deps are the run's.
        prefix: Where to list.
    """
    run = ctx.deps
    ws = run.workspace()
    return {
        "run_as": run.run_as,
        "user": ws.user,
        "workspace": run.workspace_name,
        "flow_input": dict(run.flow_input),
        "engine": run.engine is not None,
        "items": [item.path for item in await ws.list(prefix)],
        "ids": [run.run_id == run.root_id, run.step_id, run.attempt, ctx.call_id],
    }


@tool
def shout(text: str, ctx: ToolContext[ToolRun]) -> str:
    """Upper-case the text (a `@tool`, named by a flow's `function`)."""
    return f"{text.upper()} for {ctx.deps.run_as}"


def needs_context(ctx: ToolContext[ToolRun]) -> str:
    """Needs the call's context, which only an in-process call is given."""
    return str(ctx.deps.run_as)
