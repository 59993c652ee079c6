"""Lint a flow as its reader would save it as a draft, storing nothing.

`AsyncWorkspace.lint_flow` runs what saving the principal's draft of a flow
runs (`prepare` of `_content`: the YAML parse, the flow model's validation
with the workspace scripts and flows it names read in, the agents its steps
link and what their tools name, all as the principal in draft mode), and
answers the problems instead of raising the first. The verdict is the
save's own: a lint finds no problem exactly when the save's checks pass.
Its problems then come, each with its step and field, from the same checks
(`link_problems` lists every link and reference problem the save raises the
first of).

Only reading the path is needed (a viewer may lint what it may not save),
and the path's folder must exist, as for a save.
"""

from __future__ import annotations

from typing import Any

from tidemill.errors import ConfigurationError, FlowValidationError
from tidemill.flows import Flow, Problem
from tidemill.flows._load import DocumentError, parse_document
from tidemill.workspace._content import link_problems, prepare
from tidemill.workspace._includes import WorkspaceIncludes
from tidemill.workspace._items import check_owner, check_readable, item_path
from tidemill.workspace._session import Context, Session

__all__ = ["LintMethods", "flow_problems"]


def flow_problems(ctx: Context, path: str, value: Any) -> list[Problem]:
    """What is wrong with `value` (a flow document, or its YAML text) as `ctx`'s draft at `path`."""
    try:
        prepare(ctx, path, "flow", value, drafts=True)
    except FlowValidationError as exc:
        return [Problem(p.step, p.field, p.message) for p in exc.problems]
    except ConfigurationError as exc:  # a document that is no mapping; a link or reference
        return _details(ctx, path, value) or [Problem(None, "flow", exc.message)]
    return []


def _details(ctx: Context, path: str, value: Any) -> list[Problem]:
    """The problems of a flow the save refused after its model's validation, each where it is."""
    if isinstance(value, str):
        try:
            value = parse_document(value, "yaml")
        except DocumentError as exc:
            return [Problem(None, exc.field, exc.message)]
    if not isinstance(value, dict):
        shown = "a list" if isinstance(value, list) else type(value).__name__
        return [Problem(None, "value", f"a flow is a mapping (a flow document), not {shown}")]
    flow = Flow.from_dict(
        {"name": path.rsplit("/", 1)[-1], **value},
        source=path,
        includes=WorkspaceIncludes(ctx, drafts=True),
    )
    return link_problems(ctx, path, flow, drafts=True)


class LintMethods(Session):
    """The lints of `AsyncWorkspace`."""

    async def lint_flow(self, path: str, value: Any) -> list[Problem]:
        """The problems saving `value` as the principal's draft of the flow at `path` would find.

        Args:
            path: The flow's path (it need not exist yet; its folder must).
            value: The flow document, or its YAML text.

        Returns:
            Every problem, each with its step (None: the flow itself), field
            and message, in the order found; empty when the draft would save.
            Nothing is stored.

        Raises:
            ItemNotFound: The principal may not read `path`, or its folder does not exist.
            InvalidPath: `path` is not an item path.
        """
        path = item_path(path)

        def lint(ctx: Context) -> list[Problem]:
            check_readable(ctx, path)
            check_owner(ctx, path)
            return flow_problems(ctx, path, value)

        return await self.transact(lint)
