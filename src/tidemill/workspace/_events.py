r"""Who may send an event to a workspace flow's runs, and the audit of a send.

An event (`AsyncEngine.send_event`) is addressed to the runs of one
workspace flow (its path), or, with no path, to the runs of flows from
files and Python. Sending one ends the steps of those runs that wait for
it, so it is asked like starting a run: the principal must be allowed to
run the flow at the path (the viewer role, as `run_plan` asks), and there
must be a flow there; an event with no path reaches runs that belong to no
path, so only a workspace admin may send one. The front doors (the CLI's
`tidemill events send`, `POST /api/events`) ask `check_event_target`, send
through the engine, then `record_event_sent`.

Examples:
    >>> import asyncio, tempfile
    >>> from tidemill.workspace import AsyncWorkspace
    >>> async def main():
    ...     ws = AsyncWorkspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada")
    ...     await ws.add_folder("shop")
    ...     flow = {"steps": [{"id": "paid", "wait_for_event": {"name": "paid"}}]}
    ...     await ws.write("f/shop/checkout", "flow", flow)
    ...     path = await ws.check_event_target("f/shop/checkout")
    ...     await ws.record_event_sent(path, name="paid", key="42", event_id=1)
    ...     entry = (await ws.audit(action="event.send"))[0]
    ...     await ws.close()
    ...     return path, entry.path, entry.details["key"]
    >>> asyncio.run(main())
    ('f/shop/checkout', 'f/shop/checkout', '42')
"""

from __future__ import annotations

from collections.abc import Sequence

from tidemill.errors import ItemNotFound
from tidemill.workspace._items import item_path
from tidemill.workspace._session import Context, Session

__all__ = ["EventMethods"]


def _target(ctx: Context, path: str | None) -> str:
    """The canonical path `path` names, when the principal may send its runs events."""
    if not path:
        ctx.rules.check_active("send an event")
        ctx.rules.check_admin("send an event to the runs of no workspace path")
        return ""
    canonical = item_path(path)
    missing = ItemNotFound(
        f"No flow at {canonical} that {ctx.principal.name} may run (and send events to).",
        hint="Send it to the path of the workspace flow whose runs wait for it: "
        f"tidemill ws list {canonical.rsplit('/', 1)[0]} --kind flow",
        context={"path": canonical},
    )
    if not ctx.rules.allows("read", canonical):
        raise missing
    stored = ctx.q.item(canonical)
    if stored is None or stored.item.deleted or stored.item.kind != "flow":
        raise missing
    return canonical


class EventMethods(Session):
    """The event operations of `AsyncWorkspace`."""

    async def check_event_target(self, path: str | None) -> str:
        """The canonical path of the flow `path` names, when the principal may send it events.

        Sending an event to a flow's runs is asked like running it: the
        principal needs the viewer role on the flow. `None` or `""` (the runs
        of flows from files or Python, which belong to no path) is for
        workspace admins only.

        Returns:
            The flow's canonical path (`""` for no path).

        Raises:
            ItemNotFound: No flow at `path` that the principal may run.
            PermissionDenied: No path, and the principal is no workspace admin
                (or is disabled).
            InvalidPath: `path` is not a workspace path.
        """
        return await self.transact(lambda ctx: _target(ctx, path))

    async def record_event_sent(
        self,
        path: str | None,
        *,
        name: str,
        key: str = "",
        event_id: int | None = None,
        delivered_to: Sequence[str] = (),
    ) -> None:
        """Audit an event sent to the runs of `path` (`event.send`), asked as `check_event_target`.

        Raises:
            ItemNotFound: No flow at `path` that the principal may run.
            PermissionDenied: No path, and the principal is no workspace admin.
        """

        def record(ctx: Context) -> None:
            target = _target(ctx, path)
            ctx.audit(
                "event.send",
                target or None,
                name=name,
                key=key,
                event_id=event_id,
                delivered_to=list(delivered_to),
            )

        await self.transact(record)
