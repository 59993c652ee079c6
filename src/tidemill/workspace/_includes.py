"""`WorkspaceIncludes`: the workspace scripts and flows a flow names, as its reader sees them.

`Flow.from_dict(..., includes=...)` asks it for each `script: {path: f/...}`
and `flow: f/...` it meets. Each is read as the acting principal: an item it
may not read is reported exactly like one that does not exist. It notes the
version of everything it read, which a run records.
"""

from __future__ import annotations

from typing import Any

from tidemill.workspace._session import Context

__all__ = ["WorkspaceIncludes"]


class WorkspaceIncludes:
    """Reads included items in one transaction, as one principal.

    Args:
        ctx: The transaction and principal.
        drafts: Read the principal's own draft of an item when it has one
            (a preview run), instead of what is deployed.
    """

    def __init__(self, ctx: Context, *, drafts: bool = False) -> None:
        self.ctx = ctx
        self.drafts = drafts
        self.used: dict[str, int] = {}
        """Path to the version read (0: the reader's draft)."""

    def script(self, path: str) -> tuple[str, str]:
        """The code of the script at `path` (`path@N`: its version N), and `path@version`.

        A script tool may pin a version; a script step names the deployed one.
        """
        path, _, pin = path.partition("@")
        value, label = self._read(path, "script") if not pin else self._version(path, int(pin))
        assert isinstance(value, str)
        return value, label

    def _version(self, path: str, version: int) -> tuple[Any, str]:
        ctx = self.ctx
        found = ctx.q.version(path, version) if ctx.rules.allows("read", path) else None
        if found is None or found.kind != "script":
            raise LookupError(
                f"no version {version} of a workspace script {path} that "
                f"{ctx.principal.name} may read (tidemill ws history {path} lists its versions)"
            )
        self.used[path] = version
        return found.value, f"{path}@{version}"

    def flow(self, path: str) -> tuple[dict[str, Any], str]:
        """The document of the flow at `path`, and `path@version`."""
        value, label = self._read(path, "flow")
        assert isinstance(value, dict)
        return {"name": path.rsplit("/", 1)[-1], **value}, label

    def _read(self, path: str, kind: str) -> tuple[Any, str]:
        ctx = self.ctx
        missing = LookupError(
            f"no workspace {kind} {path} that {ctx.principal.name} may read "
            f"(tidemill ws list {path.rsplit('/', 1)[0]} shows what is there)"
        )
        if not ctx.rules.allows("read", path):
            raise missing
        if self.drafts:
            draft = ctx.q.draft(path, ctx.principal.name)
            if draft is not None and draft.kind == kind:
                self.used[path] = 0
                return draft.value, f"{path}@draft"
        stored = ctx.q.item(path)
        if stored is None or stored.item.deleted or stored.item.kind != kind:
            raise missing
        self.used[path] = stored.item.version
        return stored.item.value, f"{path}@{stored.item.version}"
