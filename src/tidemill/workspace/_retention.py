r"""Who may prune a workspace's ended runs, and the audit of a prune.

Pruning (`AsyncEngine.prune_runs` with the workspace's name) deletes every
top-level run started from the workspace's items that ended before a
cutoff, whoever started it and whichever flow it ran, with all it owns: so
only an active workspace admin may ask it. The front door
(`POST /api/runs/prune`) asks `check_prune_runs`, prunes through the
engine, then `record_runs_pruned` (`runs.prune`, a dry run too: what it
counted).

Examples:
    >>> import asyncio, tempfile
    >>> from tidemill.errors import PermissionDenied
    >>> from tidemill.workspace import AsyncWorkspace
    >>> async def main():
    ...     ws = AsyncWorkspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada")
    ...     await ws.add_user("max")
    ...     await ws.check_prune_runs()
    ...     await ws.record_runs_pruned(runs=3, before=1700000000.0, dry_run=True)
    ...     entry = (await ws.audit(action="runs.prune"))[0]
    ...     try:
    ...         await (await ws.acting_as("max")).check_prune_runs()
    ...     except PermissionDenied as exc:
    ...         refused = exc.message
    ...     await ws.close()
    ...     return entry.actor, entry.details, refused
    >>> asyncio.run(main())  # doctest: +NORMALIZE_WHITESPACE
    ('ada', {'runs': 3, 'before': 1700000000.0, 'dry_run': True},
     "max may not prune the workspace's ended runs: it needs a workspace admin.")
"""

from __future__ import annotations

from tidemill.workspace._session import Context, Session

__all__ = ["RetentionMethods"]

_WHAT = "prune the workspace's ended runs"


def _check(ctx: Context) -> None:
    """Return when the principal may prune the workspace's runs: an active workspace admin."""
    ctx.rules.check_active(_WHAT)
    ctx.rules.check_admin(_WHAT)


class RetentionMethods(Session):
    """The run-retention operations of `AsyncWorkspace`."""

    async def check_prune_runs(self) -> None:
        """Return when the principal may prune the workspace's ended runs.

        A prune deletes the ended runs of every flow and every user of the
        workspace, so it is for workspace admins only.

        Raises:
            PermissionDenied: The principal is no workspace admin, or is disabled.
        """
        await self.transact(_check)

    async def record_runs_pruned(self, *, runs: int, before: float, dry_run: bool) -> None:
        """Audit a prune (`runs.prune`), asked as `check_prune_runs`.

        Args:
            runs: Top-level runs deleted (for a dry run: that would be).
            before: The cutoff (epoch seconds): runs that ended before it went.
            dry_run: Whether nothing was deleted.

        Raises:
            PermissionDenied: The principal is no workspace admin, or is disabled.
        """

        def record(ctx: Context) -> None:
            _check(ctx)
            ctx.audit("runs.prune", None, runs=runs, before=before, dry_run=dry_run)

        await self.transact(record)
