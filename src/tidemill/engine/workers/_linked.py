"""Linked `ai_agent` steps: the workspace agent a step names, resolved when it starts.

A linked step (`ai_agent: {agent: f/support/triage}`) keeps only its
flow-local inputs; its brain and its tools are those of the `ai_agent`
resource it names. When its job first runs, the worker reads that resource
as the run's identity (`RunRow.run_as`, in the run's workspace): the version
the step pins (`f/x/y@7`), else the one deployed now, or, in a preview run
(`source["draft"]`), the identity's own draft of it when there is one. What
it read (path, version, 0 for a draft, and the value) is stored with the run
(the payload `agent:<job id>`) before the agent runs, so the job resumed
after a crash or a pause runs the same definition it started with, whatever
was deployed since; a retry (another job) reads the agent again. The job's
log says which version ran (`agent f/x/y version 3`), and
`AsyncEngine.linked_agents(run_id)` lists what each job recorded, with the
versions of the scripts and flows its tools name by path.

The effective agent is then built as an inline one: the resource's brain and
tools, the step's `tool_inputs` overlaid on the matching tools' `inputs`,
then `enabled_tools` keeping the tools it names. Only the brain's
references are resolved at the start (a `provider: $res:` credential); the
tools' `$var:`/`$res:` defaults are resolved when a call of that tool runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tidemill.engine._outcome import Outcome
from tidemill.engine._step_env import StepEnv
from tidemill.engine.workers._references import References, _credentials, _model_references
from tidemill.errors import (
    ConfigurationError,
    FlowValidationError,
    ItemNotFound,
    PermissionDenied,
    TidemillError,
    WorkspaceError,
)
from tidemill.flows import AIAgent, Step
from tidemill.store import Tx
from tidemill.workspace import DEFAULT_WORKSPACE, InvalidValue, linked_agent

__all__ = ["effective_agent", "link_step", "linked_key", "recorded_agents", "tool_scripts"]

AGENT_TYPE = "ai_agent"
"""The resource type of a workspace agent."""


def linked_key(job_id: int) -> str:
    """The run payload where a linked step's job records the agent it resolved.

    Examples:
        >>> linked_key(12)
        'agent:12'
    """
    return f"agent:{job_id}"


def recorded_agents(tx: Tx, *, root_id: str) -> list[dict[str, Any]]:
    """What the linked steps' jobs of a run (and of the runs in it) recorded, job by job.

    Each record has `run_id` (the step's own run: the top-level one, or a
    branch, loop, sub-flow or tool call's child in it), `step_id`,
    `job_id`, `attempt`, `path`, `version` (0 for a draft) and `draft`: what
    the job read when it started, and kept to the end (a resume after a
    pause or a crash runs it again; a retry is another job and reads the
    agent again). `scripts` and `flows` list the workspace scripts and flows
    its tools name by path, as read with it (`tool_scripts`): each
    `{tool, path, version}`, version 0 for a draft. `AsyncEngine.linked_agents`
    reads it.
    """
    found: list[dict[str, Any]] = []
    for job in tx.tree_jobs(root_id):
        recorded = tx.payload(job.run_id, linked_key(job.id))
        if isinstance(recorded, dict):
            found.append(
                {
                    "run_id": job.run_id, "step_id": job.step_id, "job_id": job.id,
                    "attempt": job.attempt, "path": recorded.get("path"),
                    "version": recorded.get("version"), "draft": bool(recorded.get("draft")),
                    "scripts": tool_scripts(recorded.get("value"), "script"),
                    "flows": tool_scripts(recorded.get("value"), "flow"),
                }
            )  # fmt: skip
    return found


def tool_scripts(value: Any, kind: str = "script", *, lead: str = "") -> list[dict[str, Any]]:
    """The workspace items of `kind` (`script`, `flow`) a recorded agent's tools ran, by tool.

    The recorded agent holds each one read in, labelled with the version
    read (`source_path: f/x/look@3`, `@draft` for the reader's draft); a
    nested agent's tools are named `<agent tool>.<tool>`.

    Examples:
        >>> tool_scripts({"tools": [
        ...     {"name": "look", "script": {"code": "...", "source_path": "f/x/look@3"}},
        ...     {"name": "raw", "script": "def main(): ..."},
        ...     {"name": "inner", "agent": {"model": "fake", "tools": [{"name": "deep",
        ...         "script": {"code": "...", "source_path": "f/x/deep@draft"}}]}}]})
        [{'tool': 'look', 'path': 'f/x/look', 'version': 3}, \
{'tool': 'inner.deep', 'path': 'f/x/deep', 'version': 0}]
    """
    found: list[dict[str, Any]] = []
    tools = value.get("tools") if isinstance(value, Mapping) else None
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, Mapping):
            continue
        name = f"{lead}{tool.get('name')}"
        held = tool.get(kind)
        label = held.get("source_path") if isinstance(held, Mapping) else None
        if isinstance(label, str) and "@" in label:
            path, _, version = label.rpartition("@")
            found.append(
                {"tool": name, "path": path, "version": int(version) if version.isdigit() else 0}
            )
        if isinstance(tool.get("agent"), Mapping):
            found.extend(tool_scripts(tool["agent"], kind, lead=f"{name}."))
    return found


def effective_agent(step: AIAgent, value: Any, *, path: str) -> AIAgent:
    """The inline agent a linked step runs: the agent's brain and tools, the step's choices on top.

    `tool_inputs` is overlaid on the matching tools' `inputs`, then
    `enabled_tools` keeps the tools it names (pruning specialists of the
    tools left out); the step's `metadata` joins the agent's
    (`tidemill.workspace.linked_agent`).

    Raises:
        InvalidValue: The value is no valid agent, or the step names a tool
            the agent does not have (naming the agent's tools).
    """
    if not isinstance(value, Mapping):
        raise InvalidValue(f"{path}: an ai_agent resource's value must be an object.")
    return linked_agent(step, value)


def _failed(message: str, *, hint: str | None = None, kind: str = "ConfigurationError") -> Outcome:
    error: dict[str, Any] = {"type": kind, "message": message}
    if hint:
        error["hint"] = hint
    return Outcome("failed", error=error, retryable=False)


async def _read(
    references: References, env: StepEnv, step: Step, agent: AIAgent
) -> dict[str, Any] | Outcome:
    """What the step's agent is now, as the run's identity: path, version, draft, value."""
    run = env.run
    path = agent.agent_path
    pin = agent.agent_version
    assert path is not None
    who = run.run_as
    source = run.source or {}
    if who is None:
        return _failed(
            f"Step {step.id!r} links the agent {path}, but run {run.root_id} has no identity "
            "to read it as.",
            hint="Start it from the workspace (engine.submit_path, "
            "tidemill run f/<folder>/<flow>) "
            "or pass run_as= to submit.",
            kind="UnresolvedReference",
        )
    workspace = references.workspace(str(source.get("workspace") or DEFAULT_WORKSPACE), who)
    value: Any = None
    version: int | None = None
    kind: str | None = None
    type_name: str | None = None
    draft = False
    try:
        if source.get("draft") and pin is None:
            try:
                found = await workspace.draft(path)
            except ItemNotFound:
                pass
            else:
                value, version, kind, type_name, draft = (
                    found.value, 0, found.kind, found.resource_type, True
                )  # fmt: skip
        if version is None:
            item = await workspace.get(path, version=pin)
            value, version, kind = item.value, item.version, item.kind
            type_name = item.resource_type
    except (ItemNotFound, PermissionDenied):
        where = f"{path}@{pin}" if pin is not None else path
        return _failed(
            f"Step {step.id!r} links the agent {where}, which names no ai_agent resource "
            f"that {who} may read.",
            hint=f"Check the path (and the version), or ask a folder admin to give {who} "
            "the viewer role on it.",
            kind="UnresolvedReference",
        )
    if kind != "resource" or type_name != AGENT_TYPE:
        what = kind if kind != "resource" else f"resource of type {type_name}"
        return _failed(
            f"Step {step.id!r} links the agent {path}, which is a {what}, not an "
            f"{AGENT_TYPE} resource.",
            hint=f"Link a resource of the type {AGENT_TYPE}.",
        )
    try:
        # The flows its tools name by path are read now, as the identity: the stored
        # record then holds them, and a resumed job runs the same ones.
        value = await workspace.inline_agent(value, drafts=bool(source.get("draft")))
    except (FlowValidationError, InvalidValue) as exc:
        return _failed(f"The agent {path} (version {version}): {exc}")
    return {"path": path, "version": version, "draft": draft, "value": value}


async def _recorded(
    references: References, env: StepEnv, step: Step, agent: AIAgent
) -> dict[str, Any] | Outcome:
    """The agent this job runs: the one it recorded, else read now and recorded."""
    run_id, key = env.run.id, linked_key(env.job.id)
    found = await env.store.transact(lambda tx: tx.payload(run_id, key))
    if isinstance(found, dict):
        return found
    read = await _read(references, env, step, agent)
    if isinstance(read, Outcome):
        return read

    def record(tx: Tx) -> dict[str, Any]:
        earlier = tx.payload(run_id, key)  # another worker of the same job recorded first
        if isinstance(earlier, dict):
            return earlier
        tx.put_payload(run_id, key, read)
        return read

    return await env.store.transact(record)


async def link_step(
    step: Step, env: StepEnv, references: References | None
) -> tuple[Step, StepEnv] | Outcome:
    """A linked step as the inline step it runs as, and its env with the brain's credentials.

    Returns a failed outcome (not retryable) when the agent cannot be read as
    the run's identity, is no `ai_agent` resource, or does not fit the step
    (`enabled_tools` or `tool_inputs` naming a tool it does not have).
    """
    agent = step.ai_agent
    assert agent is not None
    assert agent.agent is not None
    if references is None:
        return _failed(
            f"Step {step.id!r} links the agent {agent.agent_path}, and nothing here reads "
            "the workspace.",
            hint="Run it on a worker (engine.worker(), tidemill worker).",
        )
    recorded = await _recorded(references, env, step, agent)
    if isinstance(recorded, Outcome):
        return recorded
    path = str(recorded["path"])
    version = int(recorded["version"])
    try:
        effective = effective_agent(agent, recorded["value"], path=path)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '(agent)'}: {error['msg']}"
            for error in exc.errors()
        )
        return _failed(f"The agent {path} (version {version}) is not a valid agent: {problems}")
    except TidemillError as exc:
        message = exc.message
        if path not in message:
            message = f"The agent {path}: {message}"
        return _failed(message, hint=exc.hint)
    if env.on_output is not None:
        shown = "draft" if recorded.get("draft") else f"version {version}"
        env.on_output("stdout", f"agent {path} {shown}\n")
    if _model_references(effective):
        run = env.run
        who = run.run_as
        assert who is not None  # `_read` refused a run without an identity
        workspace = references.workspace(
            str((run.source or {}).get("workspace") or DEFAULT_WORKSPACE), who
        )
        secrets: set[str] = set()
        try:
            credentials = await _credentials(
                workspace, effective, f"run {run.root_id} step {step.id}", secrets
            )
        except (WorkspaceError, ConfigurationError) as exc:
            error: dict[str, Any] = {"type": type(exc).__name__, "message": exc.message}
            if exc.hint:
                error["hint"] = exc.hint
            return Outcome("failed", error=error, retryable=False)
        env.secrets.add(secrets)
        env = dataclasses.replace(env, credentials=credentials)
    return step.model_copy(update={"ai_agent": effective}), env
