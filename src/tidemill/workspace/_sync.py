r"""`pull` a workspace into a directory of files, and `push` a directory back, in one transaction.

The files are those of `tidemill.workspace._tree` (its docstring shows the
layout). Both work as the session's principal, and only with what it may do:

- `pull(ws, root)` writes every live item the principal may read, and a
  `folder.meta.yaml` (summary and roles) for each folder it may read: a
  viewer of a folder sees who else may use it, as `tidemill ws folders` shows
  a folder's grants. A secret variable is written without its value (the
  file says `secret: true` and has no `value`); nothing is ever decrypted.
  Pulling writes files and deletes none (see `write_tree`).
- `push(ws, root)` reads the whole directory first (`read_tree`: a broken
  file is a `SyncFileError` naming it and its line, and nothing is
  changed), compares it with the workspace (`PushPlan`: each item and folder
  is `create`, `update` or `unchanged`) and writes what changed in ONE
  transaction, in an order in which what is named exists first: folders,
  resource types, variables, scripts, resources, then flows, each flow after
  the flows it includes. What agents' tools name (their flows, scripts,
  nested agents) is checked after the last write, so an agent and its tool
  flows may come in the same push. Any error (a refusal, a flow naming a
  script that does not exist, an agent naming a flow neither stored nor in
  the push, a resource that does not fit its type) undoes the whole push,
  and names the file it came from. Each item written is a new version
  (for the kinds that keep versions) with the push's message, audited as
  `sync.push`.
- A pin (`@N`) to an item of the same push that the workspace does not
  hold at that version (a push into another workspace, where the pulled
  items start again at version 1) is stored pinned to the version the push
  writes of it, and listed on the plan (`ItemChange.repinned`;
  `tidemill.workspace._sync_pins`).

What a push does not do:

- It deletes nothing: items and grants the directory does not hold stay.
- A secret variable whose file has no value keeps the stored value (its
  summary and description are still pushed); with no stored secret there
  it is an error. A secret's value is never shown in a plan, even in a diff.
- A `folder.meta.yaml` without `roles` leaves the folder's grants alone; with
  `roles` they become exactly those (grants not listed are revoked).
  Creating a folder needs a workspace admin, changing one its admin role.
- The grants a push writes apply from the next transaction on: the push
  itself is checked against the grants as they were when it started.
- Grants on single items are not in the files: they are neither pulled nor
  pushed.

A dry run (`push(..., dry_run=True)`) does all of it and then rolls the
transaction back: its plan is the one a push would follow, and
`PushPlan.problem` says why the push would fail, if it would.

Examples:
    >>> import asyncio, tempfile
    >>> from pathlib import Path
    >>> from tidemill.workspace import AsyncWorkspace
    >>> async def main():
    ...     base = Path(tempfile.mkdtemp())
    ...     ws = AsyncWorkspace(f"sqlite:///{base}/a.db", user="ada")
    ...     await ws.add_folder("ops", summary="Operations")
    ...     await ws.write("f/ops/region", "variable", "eu-west-1")
    ...     pulled = await pull(ws, base / "tree")
    ...     other = AsyncWorkspace(f"sqlite:///{base}/b.db", user="ada")
    ...     plan = await push(other, base / "tree", message="copy")
    ...     again = await push(other, base / "tree")
    ...     await ws.close(); await other.close()
    ...     return pulled.files, plan.counts(), again.counts()
    >>> files, first, second = asyncio.run(main())
    >>> files
    ('f/ops/folder.meta.yaml', 'f/ops/region.variable.yaml')
    >>> first, second
    ({'create': 2, 'update': 0, 'unchanged': 0}, {'create': 0, 'update': 0, 'unchanged': 2})
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from tidemill.errors import ItemNotFound, TidemillError
from tidemill.store import dumps
from tidemill.workspace._closure import closure
from tidemill.workspace._content import defer_checks, prepare, run_deferred
from tidemill.workspace._items import check_owner, item_text, store_content
from tidemill.workspace._models import Item, ItemKind
from tidemill.workspace._paths import ItemPath
from tidemill.workspace._people import _grantee
from tidemill.workspace._session import Context, Session
from tidemill.workspace._sync_pins import repinned
from tidemill.workspace._sync_plan import (
    DIFF_LINES,
    FolderChange,
    ItemChange,
    PullReport,
    PushPlan,
)
from tidemill.workspace._tree import (
    FOLDER_META,
    FolderMeta,
    Tree,
    TreeItem,
    item_file,
    read_tree,
    write_tree,
)
from tidemill.workspace._values import InvalidValue

__all__ = [
    "DIFF_LINES",
    "FolderChange",
    "ItemChange",
    "PullReport",
    "PushPlan",
    "SyncMethods",
    "pull",
    "push",
]

ACTION = "sync.push"
"""The audit action of every item a push writes."""

_ORDER: dict[ItemKind, int] = {
    "resource_type": 0,
    "variable": 1,
    "script": 2,
    "resource": 3,
    "flow": 4,
    "schedule": 5,
}
"""The order in which a push writes the kinds: what may be named before what names it."""

_TEXT_KEYS = ("summary", "description")
_PAGE = 500


# --- pull -------------------------------------------------------------------------------------


def _tree_item(stored: Item) -> TreeItem:
    value = stored.value
    if stored.kind == "flow" and isinstance(value, dict):
        value = {key: inner for key, inner in value.items() if key not in _TEXT_KEYS}
    return TreeItem(
        stored.path,
        stored.kind,
        None if stored.secret else value,
        summary=stored.summary,
        description=stored.description,
        resource_type=stored.resource_type,
        secret=stored.secret,
    )


def _readable_tree(ctx: Context) -> Tree:
    """Every live item and folder the principal may read (secrets without values)."""
    items: list[TreeItem] = []
    cursor: str | None = None
    while True:
        page = ctx.q.items("", after=cursor, limit=_PAGE, kind=None, deleted=False)
        for listed in page:
            if not ctx.rules.allows("read", listed.path):
                continue
            stored = ctx.q.item(listed.path)
            if stored is not None and not stored.item.deleted:
                items.append(_tree_item(stored.item))
        if len(page) < _PAGE:
            break
        cursor = page[-1].path
    folders = [
        FolderMeta(folder.name, summary=folder.summary, roles=dict(folder.roles))
        for folder in ctx.q.folders()
        if ctx.rules.allows("read", f"f/{folder.name}")
    ]
    return Tree(items=tuple(items), folders=tuple(folders))


def _flow_tree(ctx: Context, *, flow: str) -> Tree:
    """A flow and its dependency closure, as the principal may read them."""
    path = str(ItemPath.parse(flow))

    def read(wanted: str) -> Any:
        if not ctx.rules.allows("read", wanted):
            return None
        stored = ctx.q.item(wanted)
        return None if stored is None or stored.item.deleted else stored.item.value

    document = read(path)
    stored = ctx.q.item(path) if document is not None else None
    if stored is None or stored.item.kind != "flow":
        raise ItemNotFound(f"No flow at {path} that {ctx.principal.name} may read.")
    wanted = {path, *closure(read, document)}
    items, missing = [], []
    for each in sorted(wanted):
        found = ctx.q.item(each) if ctx.rules.allows("read", each) else None
        if found is None or found.item.deleted:
            missing.append(each)
        else:
            items.append(_tree_item(found.item))
    if missing:
        raise ItemNotFound(
            f"{path} needs {', '.join(missing)}, which {ctx.principal.name} may not read "
            "or which does not exist: nothing was written.",
            hint="Ask for the viewer role on them, or fix the references.",
            context={"path": path, "missing": missing},
        )
    owners = {each.split("/")[1] for each in wanted if each.startswith("f/")}
    folders = [
        FolderMeta(folder.name, summary=folder.summary, roles=dict(folder.roles))
        for folder in ctx.q.folders()
        if folder.name in owners and ctx.rules.allows("read", f"f/{folder.name}")
    ]
    return Tree(items=tuple(items), folders=tuple(folders))


async def pull(ws: Session, root: Path | str, *, flow: str | None = None) -> PullReport:
    """Write what the principal may read of the workspace as files under `root`.

    Args:
        ws: The workspace, as the principal (an `AsyncWorkspace`).
        root: The directory; made when missing. Files already there that the
            workspace does not hold are left alone.
        flow: Export only this flow and what it needs elsewhere (its
            dependency closure: the scripts, sub-flows, linked agents, their
            provider resources, variables and nested agents), with their
            folders' `folder.meta.yaml`.

    Raises:
        SyncFileError: An item cannot be written as a file; nothing was written.
        ItemNotFound: `flow`, or an item it needs, is nothing the principal may
            read; nothing was written.
    """
    root = Path(root)
    tree = await ws.transact(_readable_tree if flow is None else partial(_flow_tree, flow=flow))
    root.mkdir(parents=True, exist_ok=True)
    files = write_tree(root, tree)
    counts: dict[str, int] = {"folder": len(tree.folders)}
    for item in tree.items:
        counts[item.kind] = counts.get(item.kind, 0) + 1
    secrets = tuple(item.path for item in tree.items if item.secret)
    return PullReport(str(root), tuple(files), counts, secrets)


# --- push: the plan ---------------------------------------------------------------------------


def _file(item: TreeItem) -> str:
    return item.file or item_file(item)


def _meta_file(meta: FolderMeta) -> str:
    return meta.file or f"f/{meta.folder}/{FOLDER_META}"


def _expected_summary(item: TreeItem) -> str:
    """The summary the item will be stored with (a resource type's defaults to its title)."""
    if item.kind == "resource_type" and not item.summary and isinstance(item.value, Mapping):
        return str(item.value.get("title", ""))
    return item.summary


def _stored_value(stored: Item) -> Any:
    value = stored.value
    if stored.kind == "flow" and isinstance(value, dict):
        return {key: inner for key, inner in value.items() if key not in _TEXT_KEYS}
    return value


def _same(left: Any, right: Any) -> bool:
    """Equal as stored JSON (a tuple and a list holding the same are the same)."""
    return bool(json.loads(dumps(left)) == json.loads(dumps(right)))


def _secret_value(ctx: Context, path: str, body: str) -> str:
    plaintext = ctx.data_key().decrypt(json.loads(body), aad=f"{ctx.q.ws}/{path}")
    ctx.audit("secret.decrypt", path, purpose=ACTION)
    return str(plaintext)


def _diff(path: str, kind: str, version: int, old: Any, new: Any, file: str) -> str:
    lines = list(
        difflib.unified_diff(
            item_text(kind, old).splitlines(keepends=True),
            item_text(kind, new).splitlines(keepends=True),
            fromfile=f"{path}@{version}",
            tofile=file,
        )
    )
    lines = [line if line.endswith("\n") else line + "\n" for line in lines]
    if len(lines) > DIFF_LINES:
        more = len(lines) - DIFF_LINES
        lines = [*lines[:DIFF_LINES], f"... {more} more line{'s' if more > 1 else ''}\n"]
    return "".join(lines)


def _item_change(ctx: Context, item: TreeItem) -> ItemChange:
    file = _file(item)
    stored = ctx.q.item(item.path) if ctx.rules.allows("read", item.path) else None
    if stored is None or stored.item.deleted:
        return ItemChange(item.path, item.kind, file, "create")
    old = stored.item
    fields: list[str] = []
    if old.kind != item.kind:
        fields.append("kind")
    if item.kind == "variable":
        if old.secret != item.secret:
            fields.append("secret")
        if item.value is not None:
            if old.secret:
                if _secret_value(ctx, item.path, stored.body) != item.value:
                    fields.append("value")
            elif old.value != item.value:
                fields.append("value")
    elif not _same(_stored_value(old), item.value):
        fields.append("value")
    if item.kind == "resource" and old.resource_type != item.resource_type:
        fields.append("type")
    if old.summary != _expected_summary(item):
        fields.append("summary")
    if old.description != item.description:
        fields.append("description")
    if not fields:
        return ItemChange(item.path, item.kind, file, "unchanged")
    shown = "value" in fields and "kind" not in fields and not (old.secret or item.secret)
    diff = _diff(item.path, item.kind, old.version, old.value, item.value, file) if shown else ""
    return ItemChange(item.path, item.kind, file, "update", tuple(fields), diff)


def _folder_change(ctx: Context, meta: FolderMeta) -> FolderChange:
    file = _meta_file(meta)
    stored = ctx.q.folder(meta.folder)
    if stored is None:
        return FolderChange(meta.folder, file, "create", roles=dict(meta.roles))
    fields: list[str] = []
    if stored.summary != meta.summary:
        fields.append("summary")
    if meta.roles and dict(stored.roles) != dict(meta.roles):
        fields.append("roles")
    if not fields:
        return FolderChange(meta.folder, file, "unchanged")
    roles = dict(meta.roles) if "roles" in fields else {}
    return FolderChange(meta.folder, file, "update", tuple(fields), roles)


def _plan(ctx: Context, tree: Tree, message: str) -> tuple[PushPlan, Tree]:
    """The plan, and the tree as the push writes it (its pins re-pinned: `_sync_pins`)."""
    changes = [_item_change(ctx, item) for item in tree.items]
    items, changed = repinned(ctx, tree.items, changes, partial(_item_change, ctx))
    folders = tuple(_folder_change(ctx, meta) for meta in tree.folders)
    plan = PushPlan(folders=folders, items=changed, message=message)
    return plan, dataclasses.replace(tree, items=items)


# --- push: writing it -------------------------------------------------------------------------


def _named(exc: TidemillError, file: str) -> TidemillError:
    """`exc`, its message starting with the file it came from."""
    if not exc.message.startswith(f"{file}:"):
        exc.message = f"{file}: {exc.message}"
        exc.args = (exc.message, *exc.args[1:])
    exc.context = {**exc.context, "file": file}
    return exc


def _references(value: Any) -> Iterator[str]:
    """The paths a flow document names as a script's `path` or a sub-flow."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "flow" and isinstance(inner, str):
                yield inner
            if key in ("flow", "script") and isinstance(inner, dict) and "path" in inner:
                yield str(inner["path"])
            yield from _references(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _references(inner)


def _ordered(items: list[TreeItem]) -> list[TreeItem]:
    """Items by kind (`_ORDER`), each flow after the flows of the push it includes.

    A cycle is left in path order: the flow's own validation reports it.
    """
    flows = {item.path: item for item in items if item.kind == "flow"}
    done: dict[str, TreeItem] = {}
    visiting: set[str] = set()

    def visit(item: TreeItem) -> None:
        if item.path in done or item.path in visiting:
            return
        visiting.add(item.path)
        for path in _references(item.value):
            if path in flows:
                visit(flows[path])
        visiting.discard(item.path)
        done[item.path] = item

    for item in sorted(flows.values(), key=lambda found: found.path):
        visit(item)
    others = sorted(
        (item for item in items if item.kind != "flow"),
        key=lambda found: (_ORDER[found.kind], found.path),
    )
    return [*others, *done.values()]


def _apply_folder(ctx: Context, meta: FolderMeta, change: FolderChange) -> None:
    name, target = meta.folder, f"f/{meta.folder}"
    if change.change == "create":
        ctx.rules.check_admin(f"create the folder {name}")
        ctx.q.add_folder(name, meta.summary, ctx.principal.name, ctx.now)
        for grantee, role in meta.roles.items():
            ctx.q.set_grant(target, _grantee(ctx, grantee), role)
        ctx.audit("folder.add", target, roles=dict(meta.roles), via=ACTION)
        return
    ctx.rules.check("admin", target)
    if "summary" in change.fields:
        ctx.q.set_folder_summary(name, meta.summary)
        ctx.audit("folder.change", target, summary=meta.summary, via=ACTION)
    if "roles" in change.fields:
        stored = ctx.q.folder(name)
        current = dict(stored.roles) if stored is not None else {}
        for grantee in sorted(set(current) | set(meta.roles)):
            wanted = meta.roles.get(grantee)
            if current.get(grantee) != wanted:
                who = grantee if wanted is None else _grantee(ctx, grantee)
                ctx.q.set_grant(target, who, wanted)
                ctx.audit("grant.set", target, grantee=who, role=wanted, via=ACTION)


def _keep_secret(ctx: Context, item: TreeItem) -> None:
    """Push a secret variable's summary and description, keeping its stored value."""
    stored = ctx.q.item(item.path)
    if stored is None or stored.item.deleted or stored.item.kind != "variable":
        raise InvalidValue(
            f"{item.path} is a secret that has no value and nothing is stored there "
            "(a pull leaves secrets' values out).",
            hint=f"Give it a value in the file, or store it first: tidemill ws variables set "
            f"--secret {item.path}",
            context={"path": item.path},
        )
    if not stored.item.secret:
        raise InvalidValue(
            f"{item.path} is a secret with no value, and the stored variable is not secret.",
            hint="Give it its value in the file, to store it encrypted.",
            context={"path": item.path},
        )
    check_owner(ctx, item.path)
    old = stored.item
    kept = Item(
        path=old.path,
        kind="variable",
        summary=item.summary,
        description=item.description,
        version=0,
        updated_by=ctx.principal.name,
        updated_at=ctx.now,
        value=None,
        secret=True,
    )
    ctx.q.put_item(kept, stored.body, exists=True)
    ctx.audit(ACTION, item.path, kind="variable", version=0, message="", kept_value=True)


def _apply_item(ctx: Context, item: TreeItem, message: str) -> None:
    ctx.rules.check("write", item.path)
    if item.kind == "variable" and item.secret and item.value is None:
        _keep_secret(ctx, item)
        return
    value = item.value
    if item.kind == "flow" and isinstance(value, Mapping):
        # As a flow file holds it: its summary and description first, in the document.
        texts = {key: getattr(item, key) for key in _TEXT_KEYS if getattr(item, key)}
        value = {**texts, **value}
    content = prepare(
        ctx,
        item.path,
        item.kind,
        value,
        summary=item.summary,
        description=item.description,
        resource_type=item.resource_type if item.kind == "resource" else None,
        secret=item.secret and item.kind == "variable",
    )
    store_content(ctx, item.path, content, message=message, action=ACTION)


def _apply(ctx: Context, tree: Tree, plan: PushPlan) -> None:
    for meta, folder_change in zip(tree.folders, plan.folders, strict=True):
        if folder_change.change != "unchanged":
            try:
                _apply_folder(ctx, meta, folder_change)
            except TidemillError as exc:
                raise _named(exc, folder_change.file) from None
    changed = {change.path for change in plan.items if change.change != "unchanged"}
    files: dict[str, str] = {}
    # What agents and flows name is checked once all of the push is written: its items
    # arrive in an order that need not put a tool's flow before the agent naming it.
    defer_checks(ctx)
    for item in _ordered([item for item in tree.items if item.path in changed]):
        files[item.path] = _file(item)
        try:
            _apply_item(ctx, item, plan.message)
        except TidemillError as exc:
            raise _named(exc, files[item.path]) from None
    run_deferred(ctx, on_error=lambda path, exc: _named(exc, files[path]))


class _DryRun(Exception):
    """Ends a dry run's transaction, undoing it, with the plan (and the problem met)."""

    def __init__(self, plan: PushPlan) -> None:
        super().__init__("dry run")
        self.plan = plan


async def push(
    ws: Session, root: Path | str, *, dry_run: bool = False, message: str = ""
) -> PushPlan:
    """Apply the directory `root` to the workspace, all of it or nothing, as the principal.

    Args:
        ws: The workspace, as the principal (an `AsyncWorkspace`).
        root: The directory (the layout of `tidemill.workspace._tree`).
        dry_run: Work out and try the push, then undo it: the plan says what
            a push would do, and `problem` why it would fail.
        message: The message of every version written.

    Returns:
        The plan, `applied` unless it was a dry run.

    Raises:
        SyncFileError: A file is broken (every problem of every file); nothing changed.
        PermissionDenied: The principal may not change an item or folder it
            would change; the message names the file. Nothing changed.
        ConfigurationError: An item is not valid (a flow naming a missing
            script, a resource that does not fit its type); the message
            names the file. Nothing changed.
    """
    tree = read_tree(Path(root))

    def run(ctx: Context) -> PushPlan:
        plan, written = _plan(ctx, tree, message)
        try:
            _apply(ctx, written, plan)
        except TidemillError as exc:
            if dry_run:
                raise _DryRun(dataclasses.replace(plan, problem=str(exc))) from None
            raise
        if dry_run:
            raise _DryRun(plan)
        return dataclasses.replace(plan, applied=True)

    try:
        return await ws.transact(run)
    except _DryRun as done:
        return done.plan


class SyncMethods(Session):
    """`pull` and `push` as methods of a workspace (mixed into `AsyncWorkspace`)."""

    async def pull(self, root: Path, *, flow: str | None = None) -> PullReport:
        """Write what the principal may read as files under `root` (see `pull`)."""
        return await pull(self, root, flow=flow)

    async def push(self, root: Path, *, dry_run: bool = False, message: str = "") -> PushPlan:
        """Apply the directory `root`, all of it or nothing (see `push`)."""
        return await push(self, root, dry_run=dry_run, message=message)
