"""`Workspace`: the blocking front of `AsyncWorkspace`, for scripts and the CLI.

Each method is the async one, run to completion on the workspace's own event
loop: one implementation, with a thin typed wrapper (`_blocking`) per name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from tidemill._sync import LoopThread
from tidemill.workspace._workspace import AsyncWorkspace

__all__ = ["Workspace"]

P = ParamSpec("P")
T = TypeVar("T")


def _blocking(
    method: Callable[Concatenate[AsyncWorkspace, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[Workspace, P], T]:
    @functools.wraps(method)
    def call(self: Workspace, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._loop.run(method(self.core, *args, **kwargs))

    return call


class Workspace:
    """A workspace, from blocking code; the arguments are `AsyncWorkspace`'s.

    Each method is `AsyncWorkspace`'s of the same name, run to completion:
    items (`get`, `write`, `delete`, `list`, `history`, `diff`, `restore`,
    `clear_history`, `search`), drafts (`save_draft`, `draft`, `drafts`,
    `discard_draft`, `deploy`, `linked_drafts`, `lint_flow`), people (`whoami`,
    `add_user`, `set_user`, `users`, `add_group`, `delete_group`, `set_member`, `groups`,
    `add_folder`, `set_folder`, `folders`, `grant`, `audit`, `rotate_key`), signing in
    (`set_password`, `create_token`, `create_hook_token`, `tokens`, `revoke_token`),
    directories (`pull`, `push`) and what the engine asks (`run_plan`,
    `record_run`, `resolve`, `inline_agent`).

    Examples:
        >>> import tempfile
        >>> with Workspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada") as ws:
        ...     folder = ws.add_folder("ops")
        ...     item = ws.write("f/ops/region", "variable", "eu-west-1")
        ...     print(ws.get("f/ops/region").value, [u.name for u in ws.users()])
        eu-west-1 ['ada']
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.core = AsyncWorkspace(*args, **kwargs)
        self._loop = LoopThread("tidemill-workspace")

    def acting_as(self, user: str) -> Workspace:
        """The same workspace acting as `user` (a workspace admin may ask)."""
        other = Workspace.__new__(Workspace)
        other.core = self._loop.run(self.core.acting_as(user))
        other._loop = self._loop
        return other

    get = _blocking(AsyncWorkspace.get)
    write = _blocking(AsyncWorkspace.write)
    delete = _blocking(AsyncWorkspace.delete)
    list = _blocking(AsyncWorkspace.list)
    history = _blocking(AsyncWorkspace.history)
    diff = _blocking(AsyncWorkspace.diff)
    restore = _blocking(AsyncWorkspace.restore)
    clear_history = _blocking(AsyncWorkspace.clear_history)
    save_draft = _blocking(AsyncWorkspace.save_draft)
    draft = _blocking(AsyncWorkspace.draft)
    drafts = _blocking(AsyncWorkspace.drafts)
    discard_draft = _blocking(AsyncWorkspace.discard_draft)
    deploy = _blocking(AsyncWorkspace.deploy)
    linked_drafts = _blocking(AsyncWorkspace.linked_drafts)
    lint_flow = _blocking(AsyncWorkspace.lint_flow)
    search = _blocking(AsyncWorkspace.search)
    save_step_as_agent = _blocking(AsyncWorkspace.save_step_as_agent)
    unlink_step = _blocking(AsyncWorkspace.unlink_step)
    whoami = _blocking(AsyncWorkspace.whoami)
    add_user = _blocking(AsyncWorkspace.add_user)
    set_user = _blocking(AsyncWorkspace.set_user)
    users = _blocking(AsyncWorkspace.users)
    add_group = _blocking(AsyncWorkspace.add_group)
    delete_group = _blocking(AsyncWorkspace.delete_group)
    set_member = _blocking(AsyncWorkspace.set_member)
    groups = _blocking(AsyncWorkspace.groups)
    add_folder = _blocking(AsyncWorkspace.add_folder)
    set_folder = _blocking(AsyncWorkspace.set_folder)
    folders = _blocking(AsyncWorkspace.folders)
    grant = _blocking(AsyncWorkspace.grant)
    audit = _blocking(AsyncWorkspace.audit)
    rotate_key = _blocking(AsyncWorkspace.rotate_key)
    set_password = _blocking(AsyncWorkspace.set_password)
    create_token = _blocking(AsyncWorkspace.create_token)
    create_hook_token = _blocking(AsyncWorkspace.create_hook_token)
    tokens = _blocking(AsyncWorkspace.tokens)
    revoke_token = _blocking(AsyncWorkspace.revoke_token)
    schedules = _blocking(AsyncWorkspace.schedules)
    schedule = _blocking(AsyncWorkspace.schedule)
    pause_schedule = _blocking(AsyncWorkspace.pause_schedule)
    resume_schedule = _blocking(AsyncWorkspace.resume_schedule)
    schedule_fires = _blocking(AsyncWorkspace.schedule_fires)
    check_event_target = _blocking(AsyncWorkspace.check_event_target)
    record_event_sent = _blocking(AsyncWorkspace.record_event_sent)
    check_prune_runs = _blocking(AsyncWorkspace.check_prune_runs)
    record_runs_pruned = _blocking(AsyncWorkspace.record_runs_pruned)
    run_plan = _blocking(AsyncWorkspace.run_plan)
    record_run = _blocking(AsyncWorkspace.record_run)
    resolve = _blocking(AsyncWorkspace.resolve)
    inline_agent = _blocking(AsyncWorkspace.inline_agent)
    pull = _blocking(AsyncWorkspace.pull)
    push = _blocking(AsyncWorkspace.push)

    def close(self) -> None:
        """Close the store (when the workspace opened it) and the loop."""
        try:
            self._loop.run(self.core.close())
        finally:
            self._loop.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
