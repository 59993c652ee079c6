"""What an item may hold, checked before it is stored: one rule per kind.

- A script is Python with a top-level `main(...)`; its module docstring is its
  summary (and description) unless they are given.
- A flow is a flow document, validated as `Flow.from_dict` validates it, with
  the workspace scripts and flows it names by path read as the writer (each
  must exist and be readable by the writer).
- A resource is a JSON value checked against its type's JSON Schema: a
  built-in type (`openai`, `anthropic`, ..., `ai_agent`) or a resource type
  item at a path. A field the schema marks `writeOnly` (a key, a token) must
  be a `$var:` reference to a secret variable: resources are versioned, and
  secrets never are. A resource of type `ai_agent` (a reusable agent) is
  validated in full as an inline `ai_agent` step's settings
  (`tidemill.workspace._agents.agent_definition`), and stored as written.
- A variable is text; a secret one is encrypted with the workspace's data key.
- A resource type is a JSON Schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidemill.errors import ConfigurationError, FlowValidationError
from tidemill.flows import AIAgent, Flow
from tidemill.flows._load import DocumentError, parse_document
from tidemill.workspace._agents import AGENT_TYPE, agent_definition
from tidemill.workspace._includes import WorkspaceIncludes
from tidemill.workspace._models import ItemKind
from tidemill.workspace._paths import ItemPath
from tidemill.workspace._references import REFERENCE
from tidemill.workspace._resource_types import builtin_type
from tidemill.workspace._scripts import script_metadata
from tidemill.workspace._session import Context
from tidemill.workspace._values import (
    InvalidValue,
    check_resource_type_schema,
    check_resource_value,
    secret_fields,
)

__all__ = ["VERSIONED", "Content", "prepare", "resource_schema"]

VERSIONED: frozenset[ItemKind] = frozenset({"script", "flow", "resource"})
"""The kinds whose every write appends a version."""


@dataclass(frozen=True, slots=True)
class Content:
    """An item's checked content, ready to store."""

    kind: ItemKind
    value: Any
    summary: str
    description: str
    resource_type: str | None = None
    secret: bool = False


def resource_schema(ctx: Context, type_name: str, *, path: str) -> dict[str, Any]:
    """The JSON Schema of a resource type: a built-in one, or the item at that path."""
    builtin = builtin_type(type_name)
    if builtin is not None:
        return dict(builtin.schema)
    try:
        ItemPath.parse(type_name)
    except ConfigurationError:
        raise InvalidValue(
            f"{path}: {type_name!r} is not a resource type.",
            hint="Use a built-in type (tidemill ws types) or the path of a resource type item.",
        ) from None
    stored = ctx.q.item(type_name) if ctx.rules.allows("read", type_name) else None
    if stored is None or stored.item.deleted or stored.item.kind != "resource_type":
        raise InvalidValue(
            f"{path}: no resource type {type_name} that {ctx.principal.name} may read.",
            hint="Check the path, or create it with `kind: resource_type` first.",
        )
    schema = stored.item.value
    assert isinstance(schema, dict)
    return schema


def prepare(
    ctx: Context,
    path: str,
    kind: ItemKind,
    value: Any,
    *,
    summary: str | None = None,
    description: str | None = None,
    resource_type: str | None = None,
    secret: bool = False,
) -> Content:
    """Check `value` as an item of `kind` at `path`; raise a `ConfigurationError` saying why not."""
    if secret and kind != "variable":
        raise InvalidValue(f"{path}: only variables can be secret.")
    if resource_type is not None and kind != "resource":
        raise InvalidValue(f"{path}: only resources have a type.")
    if kind == "script":
        if not isinstance(value, str):
            raise InvalidValue(f"{path}: a script is Python source text.")
        meta = script_metadata(value, path=path)
        return Content(
            kind, value, _given(summary, meta.summary), _given(description, meta.description)
        )
    if kind == "flow":
        document = _flow_document(ctx, path, value)
        return Content(
            kind,
            document,
            _given(summary, str(document.get("summary", ""))),
            _given(description, str(document.get("description", ""))),
        )
    if kind == "resource":
        if not resource_type:
            raise InvalidValue(f"{path}: a resource needs a type (`type: openai`, say).")
        if resource_type == AGENT_TYPE:
            agent_definition(value, path=path)
        schema = resource_schema(ctx, resource_type, path=path)
        check_resource_value(schema, value, path=path)
        for name in sorted(secret_fields(schema)):
            held = value.get(name) if isinstance(value, dict) else None
            if held is not None:
                _secret_reference(ctx, path, resource_type, name, held)
        return Content(kind, value, summary or "", description or "", resource_type)
    if kind == "variable":
        if not isinstance(value, str):
            raise InvalidValue(f"{path}: a variable's value is text.")
        return Content(kind, value, summary or "", description or "", secret=secret)
    if kind == "resource_type":
        check_resource_type_schema(value)
        return Content(kind, value, summary or str(value.get("title", "")), description or "")
    raise InvalidValue(f"{path}: {kind!r} is not a kind of item.")


def _secret_reference(ctx: Context, path: str, type_name: str, name: str, held: Any) -> None:
    """A secret field of a resource must name a secret variable the writer may read."""
    match = REFERENCE.match(held) if isinstance(held, str) else None
    target = match[2] if match is not None and match[1] == "var" else None
    stored = ctx.q.item(target) if target and ctx.rules.allows("read", target) else None
    if stored is None or stored.item.deleted or not stored.item.secret:
        named = (
            f" ({held} is not a secret variable {ctx.principal.name} may read)" if target else ""
        )
        raise InvalidValue(
            f"{path}: `{name}` of a resource of type {type_name} is a secret, and resources "
            f"are versioned: it must name a secret variable{named}.",
            hint=f"Store it with `tidemill ws variables set --secret {path}_{name}` "
            f"and write `{name}: $var:{path}_{name}`.",
        )


def _given(explicit: str | None, found: str) -> str:
    return found if explicit is None else explicit


def _flow_document(ctx: Context, path: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = parse_document(value, "yaml")
        except DocumentError as exc:
            raise InvalidValue(f"{path}: {exc.message}") from None
    if not isinstance(value, dict):
        raise InvalidValue(f"{path}: a flow is a mapping (a flow document).")
    document = dict(value)
    try:
        flow = Flow.from_dict(
            {"name": path.rsplit("/", 1)[-1], **document},
            source=path,
            includes=WorkspaceIncludes(ctx),
        )
    except FlowValidationError as exc:
        raise exc from None
    for step in flow.walk():
        if step.ai_agent is not None and step.ai_agent.agent is not None:
            _check_link(ctx, path, step.id, step.ai_agent)
    return document


def _check_link(ctx: Context, path: str, step_id: str, step: AIAgent) -> None:
    """A linked step names an agent the writer may read, and tools that agent has."""
    link = step.agent_path
    assert link is not None
    pin = step.agent_version
    stored = ctx.q.item(link) if ctx.rules.allows("read", link) else None
    value: Any = None
    if stored is not None and not stored.item.deleted:
        if pin is None:
            value = stored.item.value if stored.item.resource_type == "ai_agent" else None
        elif (old := ctx.q.version(link, pin)) is not None and old.resource_type == "ai_agent":
            value = old.value
    if not isinstance(value, dict):
        raise InvalidValue(
            f"{path}: step {step_id!r} links {step.agent}, which names no ai_agent resource "
            f"that {ctx.principal.name} may read.",
            hint="Write the agent first (a resource of type ai_agent), or fix the path.",
        )
    tools = [str(t.get("name")) for t in value.get("tools") or () if isinstance(t, dict)]
    named = [*(step.enabled_tools or ()), *step.tool_inputs]
    unknown = sorted({name for name in named if name not in tools})
    if unknown:
        raise InvalidValue(
            f"{path}: step {step_id!r} names {', '.join(map(repr, unknown))}, which the agent "
            f"{link} does not have; its tools: {', '.join(tools) or 'none'}.",
            hint="Name the agent's tools in enabled_tools and tool_inputs.",
        )
