"""The copilot's run tools: test-run the draft (a whole flow or one step), read runs to debug.

Both test runs have effects, so each call waits for the user's approval
first (`requires_approval=True`: the agent's run pauses, and the CLI asks
y/N). A run is submitted as the asking user, of the user's draft (as
`AsyncEngine.submit_path(..., draft=True)` does), and waited for up to
`CopilotSession.run_timeout` seconds.

The engine runs whole flows only, so `test_run_step` runs a one-step flow
built from the draft's step: the step as written, with the inputs given
(static values: the other steps' results it would read do not exist in such
a run), and without its `needs`, `skip_if` and `stop_after_if`. The run is
recorded against the flow's path, with `step` in its source, so `list_runs`
shows it with the others.

What a run shows the model is what the engine records: each step's result
with the secrets its job resolved masked, and its logs, which workers mask
likewise.
"""

from __future__ import annotations

import contextlib
from typing import Any

import yaml

from tidemill.copilot._editing import current_flow
from tidemill.copilot._outline import find_step
from tidemill.copilot._session import CopilotSession, refusal, refused, session_of
from tidemill.engine import AsyncEngine
from tidemill.engine._run_pages import job_view, runs_page
from tidemill.errors import RunFailed, RunNotFound, RunStateError, RunTimeout, TidemillError
from tidemill.flows import Flow
from tidemill.store import RunReach
from tidemill.tools import ToolContext, ToolReturn, tool
from tidemill.workspace import RunPlan
from tidemill.workspace._includes import WorkspaceIncludes
from tidemill.workspace._session import Context

__all__ = ["LOG_CHARS", "get_run", "list_runs", "one_step_flow", "trial_run_flow", "trial_run_step"]

LOG_CHARS = 4000
"""A run's logs shown to the model are cut to their last this many characters."""

_UNCHECKED = ("needs", "skip_if", "stop_after_if")


def _engine(session: CopilotSession) -> AsyncEngine | ToolReturn:
    if session.engine is None:
        return refusal(
            "Test runs are not available here: no engine was given.",
            hint="Check the flow with get_lint_errors instead.",
        )
    return session.engine


async def run_view(engine: AsyncEngine, run_id: str) -> dict[str, Any]:
    """A run as the model reads it: status, result or error, each step's result, logs.

    Only what the engine masks is shown: each job's result with the secrets
    it resolved masked, the run's result as the API shows it
    (`RunInfo.shown_result`), and the logs.
    """
    info = await engine.get(run_id)
    steps = []
    for job in await engine.jobs(run_id):
        _, shown = await job_view(engine, run_id, job.id)
        steps.append(
            {
                "step": job.step_id,
                "attempt": job.attempt,
                "status": job.status,
                "result": shown.get("result") if isinstance(shown, dict) else None,
                "error": job.error,
                "top": job.run_id == info.id,
            }
        )
    result: Any = info.shown_result if info.status == "succeeded" else None
    for step in steps:
        del step["top"]
    logs = "".join(row.body for row in await engine.logs(run_id))
    source = info.source or {}
    return {
        "run_id": info.id,
        "path": source.get("path"),
        "step": source.get("step"),
        "status": info.status,
        "result": result,
        "error": info.error,
        "steps": steps,
        "logs": logs[-LOG_CHARS:],
    }


async def _finish(session: CopilotSession, engine: AsyncEngine, run_id: str) -> dict[str, Any]:
    session.status("test_run", f"Waiting for run {run_id}")
    with contextlib.suppress(RunFailed, RunStateError, RunTimeout):
        await engine.wait(run_id, timeout=session.run_timeout)
    view = await run_view(engine, run_id)
    if view["status"] not in ("succeeded", "failed", "cancelled"):
        view["note"] = f"Still {view['status']}: read it later with get_run."
    session.status("test_run", f"Run {run_id}: {view['status']}")
    return view


@tool(name="test_run_flow", requires_approval=True)
async def trial_run_flow(
    ctx: ToolContext[CopilotSession], inputs: dict[str, Any] | None = None
) -> dict[str, Any] | ToolReturn:
    """Run the user's draft of the flow being edited, with these inputs (needs the user's approval).

    Answers the run's status, result or error, each step's result and the logs.

    Args:
        ctx: The call, with the copilot session it acts in.
        inputs: The flow's input, fitting its input schema.
    """
    session = session_of(ctx)
    engine = _engine(session)
    if isinstance(engine, ToolReturn):
        return engine
    if not session.flow:
        return refusal("No flow is being edited.", hint="Save one with set_flow first.")
    session.status("test_run_flow", f"Running your draft of {session.flow}")
    try:
        run_id = await engine.submit_path(session.workspace, session.flow, inputs, draft=True)
    except TidemillError as exc:
        return refused(exc)
    return await _finish(session, engine, run_id)


def one_step_flow(document: dict[str, Any], step_id: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """A flow of the one step `step_id` of `document`, taking `inputs` as its inputs.

    Raises:
        KeyError: No step has that id.

    Examples:
        >>> doc = {"steps": [{"id": "a", "identity": {}},
        ...                  {"id": "b", "identity": {}, "needs": ["a"], "inputs": {"x": 1}}]}
        >>> one_step_flow(doc, "b", {"x": 2})
        {'summary': 'Test of step b', 'steps': [{'id': 'b', 'identity': {}, 'inputs': {'x': 2}}]}
    """
    step = find_step(document.get("steps"), step_id)
    if step is None:
        raise KeyError(step_id)
    for key in _UNCHECKED:
        step.pop(key, None)
    step["inputs"] = dict(inputs)
    return {"summary": f"Test of step {step_id}", "steps": [step]}


async def _step_plan(session: CopilotSession, path: str, document: dict[str, Any]) -> RunPlan:
    """The run plan of a one-step flow, read as the user with their drafts (as `run_plan`)."""

    def plan(ctx: Context) -> RunPlan:
        if not ctx.rules.allows("read", path):
            raise RunNotFound(f"No flow at {path} that {ctx.principal.name} may run.")
        includes = WorkspaceIncludes(ctx, drafts=True)
        flow = Flow.from_dict(
            {"name": path.rsplit("/", 1)[-1], **document},
            source=f"{path}@draft",
            includes=includes,
        )
        source = {
            "workspace": ctx.q.ws,
            "path": path,
            "version": 0,
            "draft": True,
            "flow_draft": True,
            "step": document["steps"][0]["id"],
            "items": dict(includes.used),
        }
        return RunPlan(flow, ctx.principal.name, source)

    return await session.workspace.transact(plan)


@tool(name="test_run_step", requires_approval=True)
async def trial_run_step(
    step_id: str, ctx: ToolContext[CopilotSession], inputs: dict[str, Any] | None = None
) -> dict[str, Any] | ToolReturn:
    """Run one step of the user's draft alone, with these inputs (needs the user's approval).

    The step runs as a one-step flow: `inputs` replace the step's own
    (give literal values), and its `needs`, `skip_if` and `stop_after_if`
    are left out.

    Args:
        ctx: The call, with the copilot session it acts in.
        step_id: The step's id (a nested step's too).
        inputs: The step's inputs: a script's parameters, a sub-flow's input.
    """
    session = session_of(ctx)
    engine = _engine(session)
    if isinstance(engine, ToolReturn):
        return engine
    if not session.flow:
        return refusal("No flow is being edited.", hint="Save one with set_flow first.")
    path = session.flow
    session.status("test_run_step", f"Running step {step_id} of your draft of {path}")
    try:
        text, _ = await current_flow(session, path)
        document = _load(text)
        single = one_step_flow(document, step_id, inputs or {})
        plan = await _step_plan(session, path, single)
        run_id = await engine.submit(plan.flow, {}, run_as=plan.run_as, source=plan.source)
        await session.workspace.record_run(run_id, plan)
    except KeyError:
        return refusal(f"No step {step_id!r} in {path}.", hint="Read the steps with show_flow.")
    except TidemillError as exc:
        return refused(exc)
    return await _finish(session, engine, run_id)


def _load(text: str) -> dict[str, Any]:
    found = yaml.safe_load(text) if text else None
    return found if isinstance(found, dict) else {}


@tool
async def list_runs(
    ctx: ToolContext[CopilotSession], path: str | None = None, limit: int = 10
) -> list[dict[str, Any]] | ToolReturn:
    """Your recent runs of a flow, newest first: id, status, whether it ran a draft, the error.

    Args:
        ctx: The call, with the copilot session it acts in.
        path: The flow; by default the flow being edited.
        limit: How many runs, at most 50.
    """
    session = session_of(ctx)
    engine = _engine(session)
    if isinstance(engine, ToolReturn):
        return engine
    target = path or session.flow
    ws = session.workspace
    reach = RunReach(ws.name, run_as=ws.user)
    rows = await runs_page(engine, reach, limit=max(1, min(limit, 50)), path=target)
    return [
        {
            "run_id": info.id,
            "path": (info.source or {}).get("path"),
            "step": (info.source or {}).get("step"),
            "status": info.status,
            "draft": bool((info.source or {}).get("draft")),
            "error": info.error,
            "created_at": info.created_at,
        }
        for info, _ in rows
    ]


@tool
async def get_run(run_id: str, ctx: ToolContext[CopilotSession]) -> dict[str, Any] | ToolReturn:
    """One of your runs: its status, result or error, each step's result, and its logs.

    Args:
        ctx: The call, with the copilot session it acts in.
        run_id: The run's id, as list_runs or a test run answered it.
    """
    session = session_of(ctx)
    engine = _engine(session)
    if isinstance(engine, ToolReturn):
        return engine
    ws = session.workspace
    missing = refusal(f"No run {run_id} of yours.", hint="List your runs with list_runs.")
    try:
        info = await engine.get(run_id)
    except RunNotFound:
        return missing
    source = info.source or {}
    if info.run_as != ws.user or source.get("workspace") != ws.name:
        return missing
    return await run_view(engine, run_id)
