r"""`AsyncWorkspace`: everything a team shares, at a path, as one acting principal.

It puts the item operations (`_items`) and the user, group, folder, grant,
audit and key operations (`_people`) together with what the engine asks of a
workspace: the flow to run for a path (deployed, or the caller's draft) with
the versions it reads, and references resolved as a run's identity.

Examples:
    >>> import asyncio, tempfile
    >>> from tidemill.workspace import AsyncWorkspace
    >>> async def main():
    ...     ws = AsyncWorkspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada")
    ...     await ws.add_folder("support", summary="Customer support")
    ...     code = "'''Say hello.'''\ndef main(name: str):\n    return 'hello ' + name\n"
    ...     item = await ws.write("f/support/hello", "script", code, message="first")
    ...     hits = await ws.search("helo")
    ...     await ws.close()
    ...     return item.version, item.summary, [hit.path for hit in hits]
    >>> asyncio.run(main())
    (1, 'Say hello.', ['f/support/hello'])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tidemill.errors import ItemNotFound, PermissionDenied
from tidemill.flows import Flow, Step
from tidemill.flows._load import flow_from_data
from tidemill.store import Tx
from tidemill.workspace._events import EventMethods
from tidemill.workspace._includes import WorkspaceIncludes
from tidemill.workspace._items import ItemMethods
from tidemill.workspace._linking import LinkingMethods
from tidemill.workspace._lint import LintMethods
from tidemill.workspace._paths import ItemPath, check_name
from tidemill.workspace._people import PeopleMethods
from tidemill.workspace._references import Resolved, resolve_references
from tidemill.workspace._retention import RetentionMethods
from tidemill.workspace._schedules import ScheduleMethods, script_flow
from tidemill.workspace._session import Context
from tidemill.workspace._sign_in import SignInMethods
from tidemill.workspace._sync import SyncMethods

__all__ = ["AsyncWorkspace", "RunPlan"]


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What to run for a path: the flow, as whom, and which versions of what it read."""

    flow: Flow
    """The flow, with the workspace scripts and sub-flows it names inlined."""
    run_as: str
    """The identity the run's references are resolved as: who started it."""
    source: dict[str, Any] = field(default_factory=dict)
    """`workspace`, `path`, `version` (0 for a draft), `draft`, and `items`: each
    included item's path and version. A run records it."""


class AsyncWorkspace(
    ItemMethods,
    LintMethods,
    LinkingMethods,
    PeopleMethods,
    SignInMethods,
    SyncMethods,
    ScheduleMethods,
    EventMethods,
    RetentionMethods,
):
    """A workspace in a store, as one principal: see `Session` for the arguments.

    Every method is one transaction that asks the permission module first.
    Use `acting_as` to act as another user (an admin may; tests and the
    CLI's `--as` do).
    """

    async def acting_as(self, user: str) -> AsyncWorkspace:
        """The same workspace acting as `user`; only a workspace admin may ask.

        Raises:
            PermissionDenied: The principal is not a workspace admin.
            ItemNotFound: There is no such user.
        """
        name = check_name(user, what="user")

        def check(ctx: Context) -> None:
            if name != ctx.principal.name:
                ctx.rules.check_admin(f"act as {name}")
            if ctx.q.principal(name) is None:
                raise ItemNotFound(f"There is no user {name!r}.", hint="tidemill ws users list")

        await self.transact(check)
        other = AsyncWorkspace(
            self.store, workspace=self.name, user=name, create=False, environ=self._environ
        )
        other._keyring = self._keyring
        other._ready = True
        return other

    def signed_in(self, user: str) -> AsyncWorkspace:
        """The same workspace as `user`, whom a front door has just authenticated.

        Nothing is asked here: it is what `AsyncWorkspace(store, user=user)`
        gives, sharing this one's keys and schema check, and every operation
        of it is asked as `user` (an unknown or disabled user may do nothing).
        """
        other = AsyncWorkspace(
            self.store,
            workspace=self.name,
            user=check_name(user, what="user"),
            create=False,
            environ=self._environ,
        )
        other._keyring = self._keyring
        other._ready = self._ready
        return other

    async def run_plan(
        self, path: str, *, draft: bool = False, inputs: Mapping[str, Any] | None = None
    ) -> RunPlan:
        """The flow to run for `path`, as the principal (who needs the viewer role).

        A workspace script at `path` runs as a one-step flow of it
        (`script_flow`): its input schema is the script's, and `main` gets
        the inputs named in `inputs` (a schedule's), each from the run's input.

        Args:
            path: The flow's (or script's) path.
            draft: Run the principal's drafts (a preview): of the flow, where
                the principal has one, and of the workspace scripts and flows
                it names, where it has them; the rest as deployed.
            inputs: For a script: the inputs its runs pass to `main` (only
                their names matter here; each run gives the values).

        Raises:
            ItemNotFound: No flow (or draft) there that the principal may read.
            FlowValidationError: The flow, with what it includes, is not valid.
        """
        path = str(ItemPath.parse(path))

        def plan(ctx: Context) -> RunPlan:
            missing = ItemNotFound(
                f"No flow at {path} that {ctx.principal.name} may run.",
                hint=f"List the flows: tidemill ws list {path.rsplit('/', 1)[0]} --kind flow",
                context={"path": path},
            )
            if not ctx.rules.allows("read", path):
                raise missing
            version = 0
            found = ctx.q.draft(path, ctx.principal.name) if draft else None
            if found is not None and found.kind not in ("flow", "script"):
                found = None
            if found is not None:
                kind, document = found.kind, found.value
            else:
                stored = ctx.q.item(path)
                if (
                    stored is None
                    or stored.item.deleted
                    or stored.item.kind not in ("flow", "script")
                ):
                    raise missing
                kind, document, version = stored.item.kind, stored.item.value, stored.item.version
            if kind == "script":
                document = script_flow(path, document, inputs or {})
            includes = WorkspaceIncludes(ctx, drafts=draft)
            label = f"{path}@{'draft' if found is not None else version}"
            flow = Flow.from_dict(
                {"name": path.rsplit("/", 1)[-1], **document}, source=label, includes=includes
            )
            source = {
                "workspace": ctx.q.ws,
                "path": path,
                "version": version,
                "draft": draft,
                "flow_draft": found is not None,
                "items": dict(includes.used),
            }
            return RunPlan(flow, ctx.principal.name, source)

        return await self.transact(plan)

    async def record_run(self, run_id: str, plan: RunPlan) -> None:
        """Audit a run started from `plan`."""
        source = plan.source

        def record(ctx: Context) -> None:
            path = str(source.get("path", ""))
            if plan.run_as != ctx.principal.name or not ctx.rules.allows("read", path):
                raise PermissionDenied(
                    f"{ctx.principal.name} may not record a run of {path or 'this plan'}: "
                    "only who the plan runs as, with the viewer role on the flow, may.",
                    hint="Record the run with the workspace the plan was made with.",
                    context={"principal": ctx.principal.name, "path": path},
                )
            ctx.audit(
                "run.start",
                source.get("path"),
                run_id=run_id,
                version=source.get("version"),
                draft=source.get("draft", False),
            )

        await self.transact(record)

    async def resolve(self, value: Any, *, purpose: str = "") -> Resolved:
        """`value` with its `$var:` and `$res:` references resolved as the principal.

        Raises:
            UnresolvedReference: A reference the principal cannot read.
        """
        return await self.transact(lambda ctx: resolve_references(ctx, value, purpose=purpose))

    async def inline_agent(
        self, value: Mapping[str, Any], *, drafts: bool = False
    ) -> dict[str, Any]:
        """An `ai_agent` resource's value with the workspace flows its tools name read in.

        A tool `flow: f/<folder>/<name>` (in the agent, or in a nested agent
        of its tools) becomes the flow itself, read as the principal (from its
        drafts too with `drafts`), as a flow's own steps are when it runs.

        Raises:
            FlowValidationError: A flow a tool names is nothing the principal
                may read, or the agent is not valid.
        """

        def read(ctx: Context) -> dict[str, Any]:
            wrapper = {"name": "agent", "steps": [{"id": "agent", "ai_agent": dict(value)}]}
            loaded = flow_from_data(
                wrapper,
                flow_model=Flow,
                step_model=Step,
                source="the agent",
                includes=WorkspaceIncludes(ctx, drafts=drafts),
            )
            step = loaded.steps[0].ai_agent
            assert step is not None
            return step.model_dump(mode="json", exclude_defaults=True)

        return await self.transact(read)

    def resolve_in(self, tx: Tx, value: Any, *, purpose: str = "") -> Resolved | None:
        """`resolve`, inside a transaction the caller already holds on this store.

        For the engine, which resolves a step's references in the transaction
        that claims its job rather than in one more. None when the session has
        not checked the store's schema yet (the caller then uses `resolve`).

        Raises:
            UnresolvedReference: A reference the principal cannot read.
            PermissionDenied: The principal is no user of the workspace.
        """
        if not self._ready:
            return None
        return resolve_references(self._context(tx, self.user), value, purpose=purpose)

    async def __aenter__(self) -> AsyncWorkspace:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
