"""What an item may hold, checked before it is stored: one rule per kind.

- A script is Python with a top-level `main(...)`; its module docstring is its
  summary (and description) unless they are given.
- A flow is a flow document, validated as `Flow.from_dict` validates it, with
  the workspace scripts and flows it names by path read as the writer (each
  must exist and be readable by the writer), and so must the agent a step
  links and what that agent's tools name.
- A resource is a JSON value checked against its type's JSON Schema: a
  built-in type (`openai`, `anthropic`, ..., `ai_agent`) or a resource type
  item at a path. A field the schema marks `writeOnly` (a key, a token) must
  be a `$var:` reference to a secret variable: resources are versioned, and
  secrets never are. A resource of type `ai_agent` (a reusable agent) is
  validated in full as an inline `ai_agent` step's settings
  (`tidemill.workspace._agents.agent_definition`), and stored as written;
  the flows, scripts, agents and MCP resources its tools name must be there
  for the writer (below: at once, or at the end of a push).
- A variable is text; a secret one is encrypted with the workspace's data key.
- A resource type is a JSON Schema.
- A schedule is a `Schedule` whose target and handlers its writer may run
  (`tidemill.workspace._schedule_content`): it runs as whoever saved it last.

An `ai_agent` resource names workspace items through its tools: the flows
of `flow` tools (`flow: f/...`), the scripts of `script` tools
(`script: {path: f/...@3}`), nested agents (`agent: {agent: f/...@2}`, and
the tools of an inline nested agent in turn) and MCP server resources
(`mcp: {resource: $res:f/...}`). Writing the agent, or a flow with a step
that links it, checks each names an item of that kind the writer may read
(`MissingReferences` lists the others). The check reads the store as the
transaction sees it when it runs:

- A single write (`write`, `save_draft`, `deploy`, `restore`) checks at once.
- A draft (`save_draft`, `--draft`) is checked against what its author sees
  in draft mode, as a preview run of it reads: the deployed items and the
  author's own drafts (a tool's flow that so far is only the author's
  draft passes; one nobody has does not). A pin (`@N`) names a deployed
  version either way. Deploying the draft checks it again against what is
  deployed.
- A transaction that writes many items in an arbitrary order (a directory
  push, a deploy of a flow with its agents' drafts) defers the checks
  (`defer_checks`) and runs them after its last write (`run_deferred`), so
  an agent and the tool flows it names may arrive together.

A nested agent a tool links is checked to exist, not its own tools: it was
checked when it was written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidemill.errors import ConfigurationError, FlowValidationError
from tidemill.flows import WORKSPACE_PATH, AIAgent, Flow, Problem
from tidemill.flows._load import DocumentError, parse_document
from tidemill.workspace._agents import AGENT_TYPE, agent_definition
from tidemill.workspace._includes import WorkspaceIncludes
from tidemill.workspace._models import Draft, ItemKind
from tidemill.workspace._paths import ItemPath
from tidemill.workspace._references import REFERENCE
from tidemill.workspace._resource_types import builtin_type
from tidemill.workspace._schedule_content import check_targets, schedule_spec, stored_form
from tidemill.workspace._scripts import script_metadata
from tidemill.workspace._session import Context
from tidemill.workspace._values import (
    InvalidValue,
    check_resource_type_schema,
    check_resource_value,
    secret_fields,
)

__all__ = [
    "VERSIONED",
    "Content",
    "MissingReferences",
    "agent_references",
    "check_agent",
    "check_flow",
    "defer_checks",
    "link_problems",
    "prepare",
    "resource_schema",
    "run_deferred",
]

VERSIONED: frozenset[ItemKind] = frozenset({"script", "flow", "resource", "schedule"})
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
    drafts: bool = False,
) -> Content:
    """Check `value` as an item of `kind` at `path`; raise a `ConfigurationError` saying why not.

    With `drafts` (a draft is written) what it names may be the writer's own drafts too.
    """
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
        document = _flow_document(ctx, path, value, drafts=drafts)
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
            later(ctx, path, lambda: check_agent(ctx, path, value, drafts=drafts))
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
    if kind == "schedule":
        spec = schedule_spec(path, value)
        later(ctx, path, lambda: check_targets(ctx, path, spec))
        shown = f"{spec.target} at `{spec.cron}` ({spec.timezone})"
        return Content(kind, stored_form(spec), _given(summary, shown), description or "")
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


def _flow_document(ctx: Context, path: str, value: Any, *, drafts: bool) -> dict[str, Any]:
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
            includes=WorkspaceIncludes(ctx, drafts=drafts),
        )
    except FlowValidationError as exc:
        raise exc from None
    for step in flow.walk():
        if step.ai_agent is not None and step.ai_agent.agent is not None:
            _check_link(ctx, path, step.id, step.ai_agent, drafts=drafts)
    later(ctx, path, lambda: check_flow(ctx, path, flow, drafts=drafts))
    return document


def _check_link(ctx: Context, path: str, step_id: str, step: AIAgent, *, drafts: bool) -> None:
    """A linked step names an agent the writer may read, and tools that agent has."""
    link = step.agent_path
    assert link is not None
    pin = step.agent_version
    readable = ctx.rules.allows("read", link)
    stored = ctx.q.item(link) if readable else None
    value: Any = None
    draft = _own_draft(ctx, link, "agent") if drafts and pin is None and readable else None
    if draft is not None:
        value = draft.value
    elif stored is not None and not stored.item.deleted:
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


# --- what an agent's tools name -----------------------------------------------------------

_PINNED = re.compile(r"^([uf](?:/[a-z0-9][a-z0-9_-]{0,63}){2,})(?:@([1-9][0-9]*))?\Z")
_RESOURCE = re.compile(r"^\$res:([uf](?:/[a-z0-9][a-z0-9_-]{0,63}){2,})\Z")

Kind = str
"""What a reference must name: `flow`, `script`, `agent` (an ai_agent resource), `resource`."""


class MissingReferences(InvalidValue):
    """An agent (or a flow linking one) names workspace items that are not there for the writer.

    Each is missing, of another kind, or in a folder the writer may not read
    (the two look alike, as for every read). Nothing was written.

    Attributes:
        missing: The paths named (with their `@N` pins), in the order met.
        problems: Each as `at <field>: no <kind> <path> that <user> may read`.
    """

    def __init__(
        self, message: str, *, missing: Sequence[str], problems: Sequence[str], hint: str
    ) -> None:
        super().__init__(message, problems=problems, hint=hint, context={"missing": list(missing)})
        self.missing: list[str] = list(missing)


def _tool_flow(value: Any) -> str | None:
    if isinstance(value, Mapping):
        value = value.get("path")
    return value if isinstance(value, str) and WORKSPACE_PATH.match(value) else None


def agent_references(value: Any, where: str = "") -> Iterator[tuple[str, Kind, str]]:
    """Each item an agent's tools name: (field, kind, path as written, maybe `@N`).

    Examples:
        >>> for found in agent_references({"tools": [{"name": "a", "flow": "f/x/refund"},
        ...     {"name": "b", "agent": {"model": "fake", "tools": [
        ...         {"name": "c", "script": {"path": "f/x/look@2"}}]}}]}):
        ...     print(*found)
        tools[0].flow flow f/x/refund
        tools[1].agent.tools[0].script.path script f/x/look@2
    """
    tools = value.get("tools") if isinstance(value, Mapping) else None
    for index, tool in enumerate(tools if isinstance(tools, list) else ()):
        if not isinstance(tool, Mapping):
            continue
        field = f"{where}tools[{index}]"
        if (flow := _tool_flow(tool.get("flow"))) is not None:
            yield f"{field}.flow", "flow", flow
        script = tool.get("script")
        if isinstance(script, Mapping) and isinstance(script.get("path"), str):
            yield f"{field}.script.path", "script", script["path"]
        nested = tool.get("agent")
        if isinstance(nested, Mapping):
            if isinstance(nested.get("agent"), str):
                yield f"{field}.agent.agent", "agent", nested["agent"]
            else:
                yield from agent_references(nested, f"{field}.agent.")
        mcp = tool.get("mcp")
        resource = mcp.get("resource") if isinstance(mcp, Mapping) else None
        if isinstance(resource, str) and (match := _RESOURCE.match(resource)):
            yield f"{field}.mcp.resource", "resource", match[1]


def _own_draft(ctx: Context, path: str, kind: Kind) -> Draft | None:
    """The writer's draft at `path` when it is an item of `kind` (a readable path)."""
    draft = ctx.q.draft(path, ctx.principal.name)
    if draft is None or draft.kind != ("resource" if kind == "agent" else kind):
        return None
    return draft if kind != "agent" or draft.resource_type == AGENT_TYPE else None


def _exists(ctx: Context, kind: Kind, written: str, *, drafts: bool = False) -> bool:
    match = _PINNED.match(written)
    if match is None:
        return True  # not a workspace path: the model's own validation says what is wrong
    path, pin = match[1], match[2]
    if not ctx.rules.allows("read", path):
        return False
    if drafts and pin is None and _own_draft(ctx, path, kind) is not None:
        return True
    stored_kind = "resource" if kind == "agent" else kind
    if pin is not None:
        old = ctx.q.version(path, int(pin))
        found = None if old is None else (old.kind, old.resource_type)
    else:
        item = ctx.q.item(path)
        found = (
            None if item is None or item.item.deleted else (item.item.kind, item.item.resource_type)
        )
    if found is None or found[0] != stored_kind:
        return False
    return kind != "agent" or found[1] == "ai_agent"


_WHAT = {"flow": "flow", "script": "script", "agent": "ai_agent resource", "resource": "resource"}


def _absent(ctx: Context, value: Any, *, drafts: bool = False) -> list[tuple[str, str, str]]:
    """(field, path as written, what is wrong) for each reference of `value` that is not there."""
    who = ctx.principal.name
    seen = " (deployed, or a draft of theirs)" if drafts else ""
    return [
        (field, written, f"no {_WHAT[kind]} {written} that {who} may read{seen}")
        for field, kind, written in agent_references(value)
        if not _exists(ctx, kind, written, drafts=drafts)
    ]


def _missing(
    ctx: Context, value: Any, *, lead: str = "", drafts: bool = False
) -> list[tuple[str, str]]:
    """(path as written, problem) for each reference of `value` that is not there."""
    return [
        (written, f"at {lead}{field}: {what}")
        for field, written, what in _absent(ctx, value, drafts=drafts)
    ]


def _refuse(ctx: Context, path: str, missing: list[tuple[str, str]], whose: str) -> None:
    if not missing:
        return
    paths = list(dict.fromkeys(written for written, _problem in missing))
    raise MissingReferences(
        f"{path}: {whose} {', '.join(paths)}, which {'is' if len(paths) == 1 else 'are'} "
        f"nothing {ctx.principal.name} may read.",
        missing=paths,
        problems=[problem for _written, problem in missing],
        hint="Write them first or fix the paths (tidemill ws list f/<folder> shows what is "
        "there); `tidemill sync push` of a directory may hold them too: it checks once "
        "everything it holds is written.",
    )


def check_agent(ctx: Context, path: str, value: Any, *, drafts: bool = False) -> None:
    """Raise `MissingReferences` unless each item the agent's tools name is there for the writer.

    With `drafts` (the agent is a draft), the writer's own drafts count as there.
    """
    _refuse(ctx, path, _missing(ctx, value, drafts=drafts), "its tools name")


def _linked_value(ctx: Context, written: str, *, drafts: bool) -> Any:
    match = _PINNED.match(written)
    if match is None or not ctx.rules.allows("read", match[1]):
        return None
    if drafts and match[2] is None and (draft := _own_draft(ctx, match[1], "agent")):
        return draft.value
    if match[2] is not None:
        old = ctx.q.version(match[1], int(match[2]))
        return None if old is None else old.value
    stored = ctx.q.item(match[1])
    return None if stored is None or stored.item.deleted else stored.item.value


def check_flow(ctx: Context, path: str, flow: Flow, *, drafts: bool = False) -> None:
    """Raise `MissingReferences` unless the agents its steps run name items there for the writer.

    A linked step's agent is read (as the writer) and its tools' references
    checked; an inline step's tools were read in with the flow, all but the
    nested agents they link, which are checked here.
    """
    missing: list[tuple[str, str]] = []
    for step in flow.walk():
        agent = step.ai_agent
        if agent is None:
            continue
        if agent.agent is not None:
            value = _linked_value(ctx, agent.agent, drafts=drafts)
            lead = f"step {step.id!r} links {agent.agent}, whose "
        else:
            value = agent.model_dump(mode="json", exclude_defaults=True)
            lead = f"step {step.id!r}: ai_agent."
        missing.extend(_missing(ctx, value, lead=lead, drafts=drafts))
    _refuse(ctx, path, missing, "its agents name")


def link_problems(ctx: Context, path: str, flow: Flow, *, drafts: bool = False) -> list[Problem]:
    """What `_flow_document`'s link checks and `check_flow` find, every problem with its step.

    Writing raises the first of them; a lint (`tidemill.workspace._lint`)
    lists them all. A step whose link fails is not looked into further.
    """
    problems: list[Problem] = []
    for step in flow.walk():
        agent = step.ai_agent
        if agent is None:
            continue
        if agent.agent is None:
            value = agent.model_dump(mode="json", exclude_defaults=True)
            problems.extend(
                Problem(step.id, f"ai_agent.{field}", what)
                for field, _written, what in _absent(ctx, value, drafts=drafts)
            )
            continue
        try:
            _check_link(ctx, path, step.id, agent, drafts=drafts)
        except InvalidValue as exc:
            what = exc.message.removeprefix(f"{path}: ")  # the step is named by the problem
            problems.append(Problem(step.id, "ai_agent.agent", what))
            continue
        value = _linked_value(ctx, agent.agent, drafts=drafts)
        problems.extend(
            Problem(step.id, "ai_agent.agent", f"{agent.agent} names, at {field}: {what}")
            for field, _written, what in _absent(ctx, value, drafts=drafts)
        )
    return problems


def defer_checks(ctx: Context) -> None:
    """Collect the reference checks of what `ctx` writes from now on, for `run_deferred`."""
    ctx.deferred = []


def later(ctx: Context, path: str, check: Callable[[], None]) -> None:
    """Run `check` now, or at the end of the transaction when its checks are deferred."""
    if ctx.deferred is None:
        check()
    else:
        ctx.deferred.append((path, check))


def run_deferred(
    ctx: Context, *, on_error: Callable[[str, InvalidValue], Exception] | None = None
) -> None:
    """Run the deferred checks, each path's last one, in the order written; stop deferring.

    Args:
        ctx: The transaction whose checks were deferred (`defer_checks`).
        on_error: Turns the error of a path's check into the one raised
            (a push names the file); None: raise it as it is.
    """
    checks = dict(ctx.deferred or ())
    ctx.deferred = None
    for path, check in checks.items():
        try:
            check()
        except InvalidValue as exc:
            raise (exc if on_error is None else on_error(path, exc)) from None
