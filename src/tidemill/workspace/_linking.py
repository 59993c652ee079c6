"""Save an inline `ai_agent` step as a reusable agent; unlink a linked step back inline.

Each method is one transaction as the session's principal: it reads the
flow (or the principal's draft of it), writes the agent resource and the
flow through the same checked path as `write`/`save_draft`, so the
permission checks, audit and versions apply to both.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from tidemill.workspace._agents import AGENT_TYPE, save_as_agent, unlink
from tidemill.workspace._content import prepare
from tidemill.workspace._items import (
    check_owner,
    check_readable,
    item_path,
    not_found,
    store_content,
)
from tidemill.workspace._models import Draft, Item
from tidemill.workspace._session import Context, Session
from tidemill.workspace._values import InvalidValue

__all__ = ["LinkingMethods"]

_BODIES = ("branch", "parallel", "for_each")


def _steps(steps: Any) -> Iterator[dict[str, Any]]:
    """Every step mapping of a list of steps, nested bodies too."""
    for step in steps if isinstance(steps, list) else ():
        if not isinstance(step, dict):
            continue
        yield step
        for key in _BODIES:
            kind = step.get(key)
            if not isinstance(kind, dict):
                continue
            for name in ("steps", "default"):
                yield from _steps(kind.get(name))
            for case in kind.get("branches") or ():
                if isinstance(case, dict):
                    yield from _steps(case.get("steps"))


def _find(document: dict[str, Any], flow_path: str, step_id: str) -> dict[str, Any]:
    for step in _steps(document.get("steps")):
        if step.get("id") == step_id:
            return step
    raise InvalidValue(
        f"{flow_path} has no step {step_id!r}.",
        hint=f"Show the flow's steps: tidemill ws show {flow_path}",
        context={"path": flow_path, "step": step_id},
    )


def _agent_of(step: dict[str, Any], flow_path: str, step_id: str) -> dict[str, Any]:
    agent = step.get("ai_agent")
    if not isinstance(agent, dict):
        raise InvalidValue(
            f"step {step_id!r} of {flow_path} is not an ai_agent step.",
            hint="Only an ai_agent step can be saved as an agent or unlinked.",
            context={"path": flow_path, "step": step_id},
        )
    return agent


def _dropped_bindings(inline: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any]:
    """The tools' bindings `save_as_agent` dropped, as `tool_inputs` of a linked step."""
    kept = {
        str(tool.get("name")): tool.get("inputs") or {}
        for tool in saved.get("tools") or ()
        if isinstance(tool, dict)
    }
    found: dict[str, Any] = {}
    for tool in inline.get("tools") or ():
        if not isinstance(tool, dict) or not isinstance(tool.get("inputs"), dict):
            continue
        name = str(tool.get("name"))
        gone = {k: v for k, v in tool["inputs"].items() if k not in kept.get(name, {})}
        if gone:
            found[name] = copy.deepcopy(gone)
    return found


class LinkingMethods(Session):
    """`save_step_as_agent` and `unlink_step` of `AsyncWorkspace`."""

    async def save_step_as_agent(
        self,
        flow_path: str,
        step_id: str,
        agent_path: str,
        *,
        draft: bool = False,
        message: str = "",
    ) -> Item:
        """Save an inline `ai_agent` step as the agent at `agent_path`, and link it.

        The agent resource gets a new version; the step becomes
        `ai_agent: {agent: <agent_path>}`, its bindings that read the flow
        kept as `tool_inputs`. The flow gets a new version, or with `draft`
        the principal's draft of it (read from the draft, when one exists).
        Returns the agent item written.

        Raises:
            InvalidValue: No such step, not an ai_agent step, or already linked.
            PermissionDenied: The principal may not write the agent or the flow.
        """
        flow_path, agent_path = item_path(flow_path), item_path(agent_path)

        def put(ctx: Context) -> Item:
            document = _read_flow(ctx, flow_path, draft)
            step = _find(document, flow_path, step_id)
            inline = _agent_of(step, flow_path, step_id)
            if inline.get("agent") is not None:
                raise InvalidValue(
                    f"step {step_id!r} of {flow_path} already links {inline['agent']}.",
                    hint=f"Unlink it first: tidemill ws agent unlink {flow_path} {step_id}",
                    context={"path": flow_path, "step": step_id},
                )
            value = save_as_agent(inline)
            linked: dict[str, Any] = {"agent": agent_path}
            tool_inputs = _dropped_bindings(inline, value)
            if tool_inputs:
                linked["tool_inputs"] = tool_inputs
            if inline.get("enabled_tools") is not None:
                linked["enabled_tools"] = inline["enabled_tools"]
            step["ai_agent"] = linked
            ctx.rules.check("write", agent_path)
            ctx.rules.check("write", flow_path)
            content = prepare(ctx, agent_path, "resource", value, resource_type=AGENT_TYPE)
            item = store_content(ctx, agent_path, content, message=message, action="item.write")
            _write_flow(ctx, flow_path, document, draft, message)
            return item

        return await self.transact(put)

    async def unlink_step(
        self, flow_path: str, step_id: str, *, draft: bool = False, message: str = ""
    ) -> Item:
        """Replace a linked `ai_agent` step by the inline configuration it runs.

        The agent is read as the principal (its pinned version for `@N`);
        the step keeps its inputs. Returns the flow item (with `draft`, the
        flow as the draft now holds it, version 0).

        Raises:
            InvalidValue: No such step, not an ai_agent step, or an inline one.
            ItemNotFound: The agent is nothing the principal may read.
        """
        flow_path = item_path(flow_path)

        def put(ctx: Context) -> Item:
            document = _read_flow(ctx, flow_path, draft)
            step = _find(document, flow_path, step_id)
            linked = _agent_of(step, flow_path, step_id)
            target = linked.get("agent")
            if not isinstance(target, str):
                raise InvalidValue(
                    f"step {step_id!r} of {flow_path} is inline: it links no agent.",
                    hint=f"Save it as an agent: tidemill ws agent save {flow_path} {step_id} PATH",
                    context={"path": flow_path, "step": step_id},
                )
            path, _, pin = target.partition("@")
            path = item_path(path)
            check_readable(ctx, path)
            if pin:
                version = ctx.q.version(path, int(pin))
                if version is None:
                    raise not_found(ctx, target, "version")
                value = version.value
            else:
                stored = ctx.q.item(path)
                if stored is None or stored.item.deleted:
                    raise not_found(ctx, path)
                value = stored.item.value
            if not isinstance(value, dict):
                raise InvalidValue(f"{target} is not an agent.", context={"path": target})
            inline = unlink(
                value,
                tool_inputs=linked.get("tool_inputs") or {},
                enabled_tools=linked.get("enabled_tools"),
                agent_path=path,
            )
            if linked.get("metadata"):
                inline["metadata"] = {**dict(inline.get("metadata") or {}), **linked["metadata"]}
            step["ai_agent"] = inline
            return _write_flow(ctx, flow_path, document, draft, message)

        return await self.transact(put)


def _read_flow(ctx: Context, path: str, draft: bool) -> dict[str, Any]:
    check_readable(ctx, path)
    found = ctx.q.draft(path, ctx.principal.name) if draft else None
    if found is not None and found.kind == "flow":
        document = found.value
    else:
        stored = ctx.q.item(path)
        if stored is None or stored.item.deleted or stored.item.kind != "flow":
            raise not_found(ctx, path, "flow")
        document = stored.item.value
    if not isinstance(document, dict):
        raise not_found(ctx, path, "flow")
    return copy.deepcopy(document)


def _write_flow(
    ctx: Context, path: str, document: dict[str, Any], draft: bool, message: str
) -> Item:
    ctx.rules.check("write", path)
    content = prepare(ctx, path, "flow", document, drafts=draft)
    if not draft:
        return store_content(ctx, path, content, message=message, action="item.write")
    check_owner(ctx, path)
    saved = Draft(
        path,
        ctx.principal.name,
        "flow",
        content.summary,
        content.description,
        content.value,
        ctx.now,
        content.resource_type,
    )
    ctx.q.put_draft(saved)
    ctx.audit("draft.save", path, kind="flow")
    return Item(
        path, "flow", content.summary, content.description, 0,
        ctx.principal.name, ctx.now, content.value,
    )  # fmt: skip
