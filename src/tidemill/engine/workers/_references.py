"""`References`: a step's `$var:` and `$res:` references, resolved as its run's identity.

A worker resolves them when it runs a leaf step (a script, an identity, an
`ai_action`, an `ai_agent`), after evaluating the step's inputs: as the
workspace user the run runs as (`RunRow.run_as`), never as an
administrator, in the workspace the run came from (`source["workspace"]`,
else `default`). An AI step's `provider: $res:<path>` and `api_key:
$var:<path>` are resolved the same way into the credentials its model is
built with. What is resolved lives only in the worker's memory, for the job
(a retry of the same job reuses it, another identity never does): it is not
stored anywhere, and the secrets in it are masked in what the job records.

Examples:
    >>> step_references({"to": "$var:f/ops/email"}, None)
    True
    >>> step_references({"to": "someone"}, None)
    False
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tidemill.errors import (
    ConfigurationError,
    ItemNotFound,
    PermissionDenied,
    TidemillError,
    UnresolvedReference,
    WorkspaceError,
)
from tidemill.flows import evaluate_inputs
from tidemill.llm import parse_model_spec
from tidemill.store import JobRow, RunRow, Store, Tx
from tidemill.workspace import DEFAULT_WORKSPACE, AsyncWorkspace, builtin_type, has_references
from tidemill.workspace._resource_types import credentials_from_resource

if TYPE_CHECKING:
    from tidemill.flows import AIAction, AIAgent, Step

__all__ = [
    "RESOLVING_KINDS",
    "References",
    "ResolvedStep",
    "model_settings",
    "step_references",
]

RESOLVING_KINDS = frozenset({"script", "identity", "ai_action", "ai_agent"})
"""The step kinds whose references are resolved when they run (the leaves: the
others pass them on to their child runs, whose steps resolve them)."""

_CACHED_JOBS = 256
"""How many jobs' resolutions a worker keeps (a job parked and claimed again reuses its)."""

_CACHED_WORKSPACES = 64
"""How many (workspace, identity) sessions a worker keeps."""

_SPEC_ALIASES = {"openai": {"openai", "openai-responses"}}
"""Model spec providers a provider resource type serves besides its own."""


@dataclass(slots=True)
class ResolvedStep:
    """A step's inputs and model credentials with their references resolved."""

    inputs: dict[str, Any] = field(repr=False)
    credentials: dict[str, Any] | None = field(default=None, repr=False)
    secrets: set[str] = field(default_factory=set, repr=False)


def model_settings(step: Step) -> AIAction | AIAgent | None:
    """The model settings of an AI step; None for other kinds."""
    return step.ai_action if step.ai_action is not None else step.ai_agent


def _model_references(settings: AIAction | AIAgent | None) -> bool:
    if settings is None:
        return False
    key = settings.api_key
    return settings.provider is not None or (key is not None and key.startswith("$var:"))


def step_references(inputs: Mapping[str, Any], settings: AIAction | AIAgent | None) -> bool:
    """Whether a step's evaluated inputs or its model settings hold references (no database)."""
    return has_references(inputs) or _model_references(settings)


class References:
    """Resolves steps' references as their runs' identities, for one worker.

    Args:
        store: The worker's store (the workspace's tables are in it); it
            stays the worker's: nothing here closes it.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._workspaces: OrderedDict[tuple[str, str], AsyncWorkspace] = OrderedDict()
        self._jobs: OrderedDict[tuple[int, str, str], ResolvedStep] = OrderedDict()
        self._literal: dict[tuple[int, str], bool] = {}

    def workspace(self, name: str, user: str) -> AsyncWorkspace:
        """The workspace `name` as `user`, made once and reused (it keeps its master keys)."""
        key = (name, user)
        found = self._workspaces.get(key)
        if found is None:
            found = AsyncWorkspace(
                self.store, workspace=name, user=user, create=False, migrate=False
            )
            self._workspaces[key] = found
            if len(self._workspaces) > _CACHED_WORKSPACES:
                self._workspaces.popitem(last=False)
        else:
            self._workspaces.move_to_end(key)
        return found

    async def resolve(
        self, run: RunRow, job: JobRow, step: Step, inputs: dict[str, Any]
    ) -> ResolvedStep:
        """The step's inputs (and AI model credentials) resolved as `run.run_as`.

        Raises:
            UnresolvedReference: The run has no identity, or a reference it
                may not read (or that names nothing of its kind).
            PermissionDenied: The identity is no user of the workspace.
            ConfigurationError: A `provider` resource of no provider type, or
                of another provider than the step's model; no master key.
        """
        source = run.source or {}
        name = str(source.get("workspace") or DEFAULT_WORKSPACE)
        who = run.run_as
        if who is None:
            raise UnresolvedReference(
                f"Step {step.id!r} uses workspace references ($var:/$res:), but run "
                f"{run.root_id} has no identity to resolve them as.",
                hint="Start it from the workspace (engine.submit_path, "
                "tidemill run f/<folder>/<flow>) "
                "or pass run_as= to submit.",
                context={"run_id": run.root_id, "step": step.id},
            )
        key = (job.id, name, who)
        cached = self._jobs.get(key)
        if cached is not None:
            self._jobs.move_to_end(key)
            return cached
        workspace = self.workspace(name, who)
        purpose = f"run {run.root_id} step {step.id}"
        done = ResolvedStep(inputs)
        if has_references(inputs):
            resolved = await workspace.resolve(inputs, purpose=purpose)
            done.inputs = resolved.value
            done.secrets |= resolved.secrets
        settings = model_settings(step)
        if _model_references(settings):
            assert settings is not None
            done.credentials = await _credentials(workspace, settings, purpose, done.secrets)
        self._jobs[key] = done
        if len(self._jobs) > _CACHED_JOBS:
            self._jobs.popitem(last=False)
        return done

    def prefetch(
        self, tx: Tx, run: RunRow, job: JobRow, step: Step, context: dict[str, Any]
    ) -> None:
        """Resolve a leaf step's input references in `tx`, the transaction claiming its job.

        It saves the job a transaction of its own: `resolve` then finds the
        result. Only plain input references are resolved here (an AI step's
        model credentials are resolved when it runs); anything that goes
        wrong is left for `resolve` to raise when the step runs.
        """
        who = run.run_as
        if (
            who is None
            or step.kind not in RESOLVING_KINDS
            or _model_references(model_settings(step))
            or not self._names_references(step)  # the common case, decided once per step
        ):
            return
        try:
            inputs = evaluate_inputs(step, context)
        except TidemillError:
            return
        if not has_references(inputs):
            return
        name = str((run.source or {}).get("workspace") or DEFAULT_WORKSPACE)
        purpose = f"run {run.root_id} step {step.id}"
        try:
            resolved = self.workspace(name, who).resolve_in(tx, inputs, purpose=purpose)
        except (WorkspaceError, ConfigurationError):
            return
        if resolved is not None:
            done = ResolvedStep(resolved.value, secrets=set(resolved.secrets))
            self._jobs[(job.id, name, who)] = done
            if len(self._jobs) > _CACHED_JOBS:
                self._jobs.popitem(last=False)

    def _names_references(self, step: Step) -> bool:
        """Whether the step's inputs are written with `$var:`/`$res:` (not only computed)."""
        key = (id(step), step.id)
        found = self._literal.get(key)
        if found is None:
            text = step.model_dump_json(include={"inputs"})
            found = self._literal[key] = "$var:" in text or "$res:" in text
            if len(self._literal) > _CACHED_JOBS * 16:
                self._literal.clear()
        return found

    def forget(self, job: JobRow) -> None:
        """Drop what was resolved for `job` (it is finished: nothing will reuse it)."""
        for key in [key for key in self._jobs if key[0] == job.id]:
            del self._jobs[key]


async def _credentials(
    workspace: AsyncWorkspace, settings: AIAction | AIAgent, purpose: str, secrets: set[str]
) -> dict[str, Any]:
    """The `resolve_model` keyword arguments of an AI step's `provider` and `api_key`."""
    who = workspace.user
    credentials: dict[str, Any] = {}
    if settings.provider is not None:
        reference = settings.provider
        path = reference.removeprefix("$res:")
        try:
            item = await workspace.get(path)
        except (ItemNotFound, PermissionDenied):
            item = None
        if item is None or item.kind != "resource":
            raise UnresolvedReference(
                f"{reference} names no resource that {who} may read.",
                hint=f"Check the path, or ask a folder admin to give {who} the viewer role on it.",
                context={"reference": reference, "identity": who},
            )
        resolved = await workspace.resolve(item.value, purpose=purpose)
        secrets |= resolved.secrets
        type_name = item.resource_type or ""
        _check_provider(type_name, settings.model, path)
        value = resolved.value if isinstance(resolved.value, Mapping) else {}
        credentials.update(credentials_from_resource(type_name, value, path=path))
    key = settings.api_key
    if key is not None and key.startswith("$var:"):
        resolved = await workspace.resolve(key, purpose=purpose)
        if not isinstance(resolved.value, str):
            raise ConfigurationError(
                f"{key} is not a text variable; an API key must be one.",
                context={"reference": key},
            )
        secrets |= resolved.secrets
        secrets.add(resolved.value)  # a key is masked even when its variable is not secret
        credentials["api_key"] = resolved.value
    return credentials


def _check_provider(type_name: str, spec: str, path: str) -> None:
    """Refuse a provider resource whose type does not serve the step's model spec."""
    kind = builtin_type(type_name)
    if kind is None or kind.provider is None:
        return  # credentials_from_resource says what is wrong with it
    wanted = parse_model_spec(spec).provider
    if wanted in ("fake", "scripted"):
        return  # an offline model: it sends nothing, whatever the credentials
    served = _SPEC_ALIASES.get(kind.name, {kind.provider})
    if wanted not in served:
        raise ConfigurationError(
            f"The step's model {spec!r} is a {wanted} model, but its provider {path} is "
            f"a {type_name} resource.",
            hint=f"Name a {kind.provider} model ('{kind.provider}:<model>'), or a resource "
            f"of the type {wanted.replace('-', '_')}.",
            context={"model": spec, "provider": path, "type": type_name},
        )
