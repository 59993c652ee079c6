"""Starting a run from a workspace plan inside a transaction the caller holds.

A schedule's fire (and its handler) is recorded in the same transaction as
the run it starts, so the run exists exactly when its fire row does. The run
is what `AsyncEngine.submit_path` makes of a plan: it runs as the plan's
principal, records the plan's source, and the workspace audits its start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidemill.engine.runs._lifecycle import concurrency_key
from tidemill.engine.runs._scope import Definitions
from tidemill.engine.runs._transition import Transition
from tidemill.errors import StoreError, TidemillError
from tidemill.store import RunRow, Tx
from tidemill.workspace import AsyncWorkspace, RunPlan, record_audit

__all__ = ["Ready", "describe", "prepare_run", "start_run", "still_current"]


@dataclass(frozen=True, slots=True)
class Ready:
    """A plan with its input checked: all a transaction needs to start the run."""

    plan: RunPlan
    flow_input: dict[str, Any]
    digest: str
    body: str
    concurrency_key: str | None


def describe(exc: TidemillError) -> str:
    """An error as a fire's `error` says it: its type, message and hint."""
    return f"{type(exc).__name__}: {exc}"


async def prepare_run(
    workspace: AsyncWorkspace, path: str, inputs: Mapping[str, Any]
) -> Ready | str:
    """The run of `path` with `inputs`, planned as the workspace's principal; or why not.

    An error the principal can do something about (no longer a user, may no
    longer read the flow, the flow or the inputs are not valid any more) is
    the answer, as text; a store error is raised (the caller tries again).
    """
    try:
        plan = await workspace.run_plan(path, inputs=inputs)
        flow_input = plan.flow.validate_input(inputs)
        digest, body = plan.flow.digest(), plan.flow.model_dump_json()
        key = concurrency_key(plan.flow, digest, flow_input)
    except StoreError:
        raise
    except TidemillError as exc:
        return describe(exc)
    return Ready(plan, flow_input, digest, body, key)


def still_current(tx: Tx, workspace: str, ready: Ready) -> bool:
    """Whether the workspace items a plan read (the flow, what it includes) are unchanged."""
    source = ready.plan.source
    versions = {str(path): version for path, version in dict(source.get("items") or {}).items()}
    versions[str(source.get("path", ""))] = source.get("version")
    paths = list(versions)
    marks = ", ".join("?" for _ in paths)
    rows = tx.all(
        f"SELECT path, version FROM tm_ws_items WHERE workspace = ? AND path IN ({marks}) "
        "AND deleted_at IS NULL",
        (workspace, *paths),
    )
    now = {str(path): int(version) for path, version in rows}
    return all(now.get(path) == version for path, version in versions.items())


def start_run(
    tx: Tx,
    defs: Definitions,
    ready: Ready,
    *,
    now: float,
    source: Mapping[str, Any],
) -> RunRow:
    """Create the run in `tx` and audit its start as the plan's principal.

    `source` is added to the plan's (the schedule and fire that started it).
    """
    plan, flow = ready.plan, ready.plan.flow
    limit = None if flow.concurrency is None else flow.concurrency.limit
    recorded = {**plan.source, **source}
    run = Transition(tx, defs, now).create(
        flow,
        ready.digest,
        ready.body,
        ready.flow_input,
        concurrency_key=ready.concurrency_key,
        limit=limit,
        run_as=plan.run_as,
        source=recorded,
    )
    record_audit(
        tx,
        workspace=str(plan.source.get("workspace", "")),
        actor=plan.run_as,
        action="run.start",
        path=str(plan.source.get("path", "")) or None,
        details={"run_id": run.id, "version": plan.source.get("version"), "draft": False, **source},
        now=now,
    )
    return run
