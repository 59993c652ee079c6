"""Export and import workspace items as the files of a sync directory, over HTTP.

An export is what `tidemill sync pull` writes, as JSON (`{path, text}` per
file); an import is `tidemill sync push` of such files: all of them in one
transaction, or nothing. Both go through a temporary directory, so they are
`AsyncWorkspace.pull` and `push` themselves, as the caller. A secret is
exported without its value; an import of a secret's file without a value
keeps the stored one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Collection, Sequence
from pathlib import Path, PurePosixPath
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Query

from tidemill.errors import PermissionDenied
from tidemill.server._caller import Caller, SignedIn, requires
from tidemill.server.routes._item_models import ExportOut, FileText, ImportIn, PushPlanOut
from tidemill.server.routes._items import checked_path
from tidemill.workspace import InvalidValue
from tidemill.workspace._tree import Tree, read_tree

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["sync"], dependencies=[requires("items")])


def _read_back(root: Path, files: Collection[str]) -> tuple[Tree, dict[str, str]]:
    return read_tree(root), {file: (root / file).read_text("utf-8") for file in files}


async def _pulled(who: Caller, flow: str | None) -> tuple[Tree, dict[str, str], tuple[str, ...]]:
    """What a pull as the caller writes: the tree, each file's text, the secrets."""
    with tempfile.TemporaryDirectory(prefix="tidemill-export-") as tmp:
        root = Path(tmp)
        report = await who.ws.pull(root, flow=flow)
        tree, texts = await anyio.to_thread.run_sync(_read_back, root, report.files)
    return tree, texts, report.secrets


def _covers(prefix: str, folder: str) -> bool:
    """Whether an export of `prefix` reaches into the folder (its meta goes with it)."""
    top = f"f/{folder}/"
    return top.startswith(prefix) or prefix.startswith(top)


def _export(
    tree: Tree,
    texts: dict[str, str],
    secrets: Sequence[str],
    paths: Collection[str],
    folders: Collection[str] = (),
) -> ExportOut:
    """The files of the items at `paths`, with the meta of their folders and of `folders`."""
    items = [i for i in tree.items if i.path in paths]
    metas = {*folders, *(path.split("/")[1] for path in paths if path.startswith("f/"))}
    files = [i.file for i in items] + [m.file for m in tree.folders if m.folder in metas]
    return ExportOut(
        files=[FileText(path=file, text=texts[file]) for file in sorted(files)],
        secrets_without_value=[path for path in secrets if path in paths],
    )


@router.get("/export", response_model=ExportOut)
async def export(who: SignedIn, prefix: Annotated[str, Query(max_length=255)] = "") -> ExportOut:
    """The items under `prefix` the caller may read, as sync files (and their folders' meta)."""
    who.require("items", "read")
    tree, texts, secrets = await _pulled(who, None)
    paths = {
        i.path
        for i in tree.items
        if i.path.startswith(prefix) and who.allows("items", "read", i.path)
    }
    # An empty folder goes too when the token reaches into it (its items' meta always goes).
    folders = {
        m.folder
        for m in tree.folders
        if _covers(prefix, m.folder) and who.allows("items", "read", f"f/{m.folder}/")
    }
    return _export(tree, texts, secrets, paths, folders)


@router.get("/export/{path:path}", response_model=ExportOut)
async def export_item(path: str, who: SignedIn, closure: bool = False) -> ExportOut:
    """One item as a sync file; with `closure`, a flow and everything it needs elsewhere.

    The closure is the flow's scripts, sub-flows, linked agents, their
    provider resources, variables and nested agents: a 404 or 403 when the
    caller may not read one of them, and nothing is exported.
    """
    path = checked_path(who, path, "read")
    tree, texts, secrets = await _pulled(who, path if closure else None)
    paths = {i.path for i in tree.items if closure or i.path == path}
    if path not in paths:
        await who.ws.get(path)  # says why: nothing the caller may read is there
    for each in sorted(paths):
        who.require("items", "read", each)
    return _export(tree, texts, secrets, paths)


def _file_path(text: str) -> PurePosixPath:
    parts = text.split("/")
    if (
        "\\" in text
        or len(parts) < 3
        or parts[0] not in ("f", "u")
        or any(not part or part.startswith(".") for part in parts)
    ):
        raise InvalidValue(
            f"{text!r} is not a file of a sync directory.",
            hint="Name files as `tidemill sync pull` does: f/<folder>/<name>.<kind>.yaml, "
            "u/<user>/<name>.py, f/<folder>/folder.meta.yaml.",
        )
    return PurePosixPath(text)


def _write_files(root: Path, files: Sequence[FileText]) -> Tree:
    seen: set[str] = set()
    for file in files:
        relative = _file_path(file.path)
        if file.path in seen:
            raise InvalidValue(f"The file {file.path} is given twice.", hint="Send each once.")
        seen.add(file.path)
        target = root.joinpath(*relative.parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(file.text, encoding="utf-8")
        except OSError as exc:  # a file where another file needs a directory
            raise InvalidValue(
                f"The file {file.path} cannot be written next to the others: {exc.strerror}.",
                hint="A path cannot be both a file and a directory.",
            ) from exc
    return read_tree(root)


@router.post("/import", response_model=PushPlanOut)
async def import_files(body: ImportIn, who: SignedIn) -> PushPlanOut:
    """Apply sync files to the workspace, all of them or nothing; `dry_run` only plans.

    Items and folders the files do not hold are left alone. Changing a
    folder's meta (its summary or roles) needs the `people:write` scope too.
    """
    action = "read" if body.dry_run else "write"
    who.require("items", action)
    with tempfile.TemporaryDirectory(prefix="tidemill-import-") as tmp:
        root = Path(tmp)
        tree = await anyio.to_thread.run_sync(_write_files, root, body.files)
        for item in tree.items:
            who.require("items", action, item.path)
        plan = await who.ws.push(root, dry_run=True, message=body.message)
        if any(change.change != "unchanged" for change in plan.folders) and not who.allows(
            "people", action
        ):
            raise PermissionDenied(
                f"This token may not {action} people: the files change a folder's meta.",
                hint="Use a token with the people:write scope, or leave folder.meta.yaml out.",
            )
        if not body.dry_run:
            plan = await who.ws.push(root, message=body.message)
    return PushPlanOut.of(plan)
