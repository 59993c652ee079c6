"""The JSON shapes of the workspace item routes: what they take and what they answer.

Each answer model has an `of` that reads the workspace's dataclass. A secret
variable's value is never in an answer: `ItemOut.of` drops it even if the
workspace handed one back.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from tidemill.errors import ConfigurationError
from tidemill.flows import Problem
from tidemill.server.routes._body import Body
from tidemill.server.routes._params import BIGINT_MAX
from tidemill.workspace import (
    Draft,
    FolderChange,
    Item,
    ItemChange,
    ItemKind,
    PushPlan,
    SearchHit,
    Version,
)
from tidemill.workspace._scripts import script_metadata

__all__ = [
    "ClearedOut",
    "DeployIn",
    "DiffOut",
    "DraftIn",
    "DraftInfo",
    "DraftOut",
    "ExportOut",
    "FileText",
    "FolderChangeOut",
    "ImportIn",
    "ItemChangeOut",
    "ItemInfo",
    "ItemOut",
    "LinkedDraftsOut",
    "LintIn",
    "LintOut",
    "LintProblem",
    "PushPlanOut",
    "RestoreIn",
    "SaveStepIn",
    "SearchHitOut",
    "UnlinkStepIn",
    "VersionInfo",
    "WriteIn",
]

_PATH = Field(min_length=1, max_length=255)
_TEXT = Field(default="", max_length=10_000)
MAX_FILE_CHARS = 1 << 20
"""The longest file an import takes (the sync directory's limit, 1 MiB)."""


class ItemInfo(BaseModel):
    """An item as listed: everything but its value."""

    path: str
    kind: ItemKind
    summary: str
    description: str
    version: int
    """The current version (0 for variables and resource types, which keep none)."""
    updated_by: str
    updated_at: float
    resource_type: str | None
    secret: bool
    deleted: bool

    @classmethod
    def of(cls, item: Item) -> ItemInfo:
        return cls(
            path=item.path, kind=item.kind, summary=item.summary, description=item.description,
            version=item.version, updated_by=item.updated_by, updated_at=item.updated_at,
            resource_type=item.resource_type, secret=item.secret, deleted=item.deleted,
        )  # fmt: skip


class ItemOut(ItemInfo):
    """An item with its value; a secret variable's value is always null."""

    value: Any
    """Script: its code; flow: its document; resource: its JSON value; variable: its
    text (null for a secret); resource type: its JSON Schema."""

    input_schema: dict[str, Any] | None = None
    """What running it takes, as JSON Schema: a script's `main(...)` parameters, a flow's
    `inputs`; null for other kinds (and for a script whose `main` cannot be read)."""

    @classmethod
    def of(cls, item: Item) -> ItemOut:
        info = ItemInfo.of(item).model_dump()
        value = None if item.secret else item.value
        return cls(**info, value=value, input_schema=_input_schema(item.kind, item.path, value))


def _input_schema(kind: str, path: str, value: Any) -> dict[str, Any] | None:
    """The JSON Schema of what a script or a flow takes (None: another kind, or unreadable)."""
    if kind == "script" and isinstance(value, str):
        try:
            return script_metadata(value, path=path).schema
        except ConfigurationError:
            return None
    if kind == "flow" and isinstance(value, dict) and isinstance(value.get("inputs"), dict):
        return dict(value["inputs"])
    return None


class WriteIn(Body):
    """An item to write: a script, flow or resource gets a new version."""

    kind: ItemKind
    value: Any
    """Script: its code; flow: its document (an object, or YAML text); resource: its
    JSON value; variable: its text; resource type: its JSON Schema."""
    summary: str | None = Field(default=None, max_length=10_000)
    """None: what the value says (a script's docstring, a flow's `summary`)."""
    description: str | None = Field(default=None, max_length=100_000)
    resource_type: str | None = Field(default=None, max_length=255)
    secret: bool = False
    """A variable whose value is encrypted and never shown again (not even here)."""
    message: str = _TEXT
    base_version: int | None = Field(default=None, ge=0, le=BIGINT_MAX)
    """Refuse the write with 409 unless the item is at this version (0: it does not exist)."""


class VersionInfo(BaseModel):
    """One kept version of an item (read its value with `GET /api/items/{path}?version=N`)."""

    path: str
    version: int
    kind: ItemKind
    summary: str
    description: str
    message: str
    created_by: str
    created_at: float
    resource_type: str | None

    @classmethod
    def of(cls, version: Version) -> VersionInfo:
        return cls(
            path=version.path, version=version.version, kind=version.kind,
            summary=version.summary, description=version.description, message=version.message,
            created_by=version.created_by, created_at=version.created_at,
            resource_type=version.resource_type,
        )  # fmt: skip


class ClearedOut(BaseModel):
    """The past versions dropped; the current one stays."""

    path: str
    dropped: int


class RestoreIn(Body):
    """An old version to write forward as a new one."""

    version: int = Field(ge=1, le=BIGINT_MAX)
    message: str = _TEXT


class DiffOut(BaseModel):
    """A unified diff between two versions (agents: key by key and tool by tool)."""

    path: str
    old: int
    new: int | None
    """None: the current version."""
    diff: str
    """Empty when the two are the same."""


class SearchHitOut(BaseModel):
    """One search result, best first."""

    path: str
    kind: str
    summary: str
    score: float
    """0 to 100, higher is better; 0 for an empty query."""

    @classmethod
    def of(cls, hit: SearchHit) -> SearchHitOut:
        return cls(path=hit.path, kind=hit.kind, summary=hit.summary, score=hit.score)


class DraftInfo(BaseModel):
    """One of the caller's drafts, as listed: everything but its value."""

    path: str
    owner: str
    kind: ItemKind
    summary: str
    description: str
    updated_at: float
    resource_type: str | None

    @classmethod
    def of(cls, draft: Draft) -> DraftInfo:
        return cls(
            path=draft.path, owner=draft.owner, kind=draft.kind, summary=draft.summary,
            description=draft.description, updated_at=draft.updated_at,
            resource_type=draft.resource_type,
        )  # fmt: skip


class DraftOut(DraftInfo):
    """A draft with its value."""

    value: Any

    @classmethod
    def of(cls, draft: Draft) -> DraftOut:
        return cls(**DraftInfo.of(draft).model_dump(), value=draft.value)


class DraftIn(Body):
    """A draft to save: only scripts, flows and resources have drafts."""

    kind: ItemKind
    value: Any
    summary: str | None = Field(default=None, max_length=10_000)
    description: str | None = Field(default=None, max_length=100_000)
    resource_type: str | None = Field(default=None, max_length=255)


class DeployIn(Body):
    """Deploy the caller's draft (and drafts of agents the flow links, named in `agents`)."""

    message: str = _TEXT
    agents: list[str] = Field(default_factory=list[str], max_length=100)


class LintIn(Body):
    """A flow to lint as the caller's draft of it would be saved: nothing is stored."""

    value: dict[str, Any] | str
    """The flow document, or its YAML text; at most 1 MiB (as JSON, for a document)."""

    @field_validator("value")
    @classmethod
    def _small(cls, value: dict[str, Any] | str) -> dict[str, Any] | str:
        size = len(value) if isinstance(value, str) else len(json.dumps(value, default=str))
        if size > MAX_FILE_CHARS:
            raise ValueError(f"a flow of at most {MAX_FILE_CHARS} characters, not {size}")
        return value


class LintProblem(BaseModel):
    """One thing wrong with a linted flow."""

    step: str | None
    """The step it is about (None: the flow itself, or its text)."""
    field: str
    """Where, inside the step or the flow: `needs`, `script.path`, `ai_agent.agent`, `yaml`."""
    message: str

    @classmethod
    def of(cls, problem: Problem) -> LintProblem:
        return cls(step=problem.step, field=problem.field, message=problem.message)


class LintOut(BaseModel):
    """What a lint found: `valid` when saving the caller's draft would pass its checks."""

    valid: bool
    problems: list[LintProblem]


class LinkedDraftsOut(BaseModel):
    """The agents a flow links that the caller has drafts of: what a deploy may take along."""

    path: str
    agents: list[str]


class SaveStepIn(Body):
    """Save an inline `ai_agent` step of a flow as an agent, and link the step to it."""

    flow: str = _PATH
    step_id: str = Field(min_length=1, max_length=200)
    agent_path: str = _PATH
    draft: bool = False
    """Change the caller's draft of the flow instead of deploying a new version."""
    message: str = _TEXT


class UnlinkStepIn(Body):
    """Replace a linked `ai_agent` step by the inline configuration it runs."""

    flow: str = _PATH
    step_id: str = Field(min_length=1, max_length=200)
    draft: bool = False
    message: str = _TEXT


class FileText(Body):
    """One file of a sync directory: its path (`f/ops/region.variable.yaml`) and text."""

    path: str = Field(min_length=1, max_length=400)
    text: str = Field(max_length=MAX_FILE_CHARS)


class ExportOut(BaseModel):
    """Items as the files `tidemill sync pull` writes (secrets without their values)."""

    files: list[FileText]
    secrets_without_value: list[str]
    """The secret variables exported, with no value."""


class ImportIn(Body):
    """Files to apply, as `tidemill sync push` does: all of them, or nothing."""

    files: list[FileText] = Field(max_length=10_000)
    dry_run: bool = False
    """Work out and try the import, then undo it: the plan says what it would do."""
    message: str = _TEXT


class ItemChangeOut(BaseModel):
    """What an import does to one item."""

    path: str
    kind: ItemKind
    file: str
    change: Literal["create", "update", "unchanged"]
    fields: list[str]
    diff: str
    """For an update of the value, a unified diff (never of a secret)."""

    @classmethod
    def of(cls, change: ItemChange) -> ItemChangeOut:
        return cls(
            path=change.path, kind=change.kind, file=change.file, change=change.change,
            fields=list(change.fields), diff=change.diff,
        )  # fmt: skip


class FolderChangeOut(BaseModel):
    """What an import does to one folder."""

    folder: str
    file: str
    change: Literal["create", "update", "unchanged"]
    fields: list[str]
    roles: dict[str, Literal["viewer", "writer", "admin"]]

    @classmethod
    def of(cls, change: FolderChange) -> FolderChangeOut:
        return cls(
            folder=change.folder, file=change.file, change=change.change,
            fields=list(change.fields), roles=dict(change.roles),
        )  # fmt: skip


class PushPlanOut(BaseModel):
    """What an import did (or, for a dry run, would do)."""

    applied: bool
    message: str
    counts: dict[str, int]
    """How many folders and items are created, updated and unchanged."""
    problem: str | None
    """For a dry run, why the import would fail (null: it would succeed)."""
    folders: list[FolderChangeOut]
    items: list[ItemChangeOut]

    @classmethod
    def of(cls, plan: PushPlan) -> PushPlanOut:
        return cls(
            applied=plan.applied, message=plan.message, counts=plan.counts(),
            problem=plan.problem, folders=[FolderChangeOut.of(f) for f in plan.folders],
            items=[ItemChangeOut.of(i) for i in plan.items],
        )  # fmt: skip
