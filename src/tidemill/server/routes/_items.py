"""Workspace items over HTTP: list, search, read, write, delete, versions, diff, restore.

Each route parses, checks the caller's token scopes (domain `items`, on the
item's path), and asks `AsyncWorkspace` as the caller, whose permission
module decides the rest. A secret variable's value is write-only here:
no route reads it back (there is no `reveal`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from tidemill.server._caller import Caller, SignedIn, requires
from tidemill.server.routes._item_models import (
    ClearedOut,
    DiffOut,
    ItemInfo,
    ItemOut,
    RestoreIn,
    SearchHitOut,
    VersionInfo,
    WriteIn,
)
from tidemill.server.routes._params import Version
from tidemill.workspace import Item, ItemKind, ItemPath

__all__ = ["checked_path", "router"]

router = APIRouter(prefix="/api", tags=["items"], dependencies=[requires("items")])

_PAGE = 500


def checked_path(who: Caller, text: str, action: str) -> str:
    """`text` as an item path (else `InvalidPath`: 422), once the token's scopes allow `action`."""
    path = str(ItemPath.parse(text))
    who.require("items", action, path)
    return path


@router.get("/items", response_model=list[ItemInfo])
async def list_items(
    who: SignedIn,
    prefix: Annotated[str, Query(max_length=255)] = "",
    kind: ItemKind | None = None,
    after: Annotated[str | None, Query(max_length=255)] = None,
    limit: Annotated[int, Query(ge=1, le=_PAGE)] = 100,
    deleted: bool = False,
) -> list[ItemInfo]:
    """The items under `prefix` the caller may read, by path, without values.

    A page at a time: pass the last path of a page as `after` for the next.
    """
    who.require("items", "read")
    found: list[Item] = []
    cursor = after
    while len(found) < limit:
        page = await who.ws.list(prefix, kind=kind, after=cursor, limit=limit, deleted=deleted)
        found.extend(i for i in page if who.allows("items", "read", i.path))
        if len(page) < limit:
            break
        cursor = page[-1].path
    return [ItemInfo.of(item) for item in found[:limit]]


@router.get("/search", response_model=list[SearchHitOut])
async def search(
    who: SignedIn,
    q: Annotated[str, Query(max_length=500)] = "",
    kind: Annotated[list[ItemKind] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> list[SearchHitOut]:
    """Items matching `q` by the words of their paths, summaries and descriptions, best first."""
    who.require("items", "read")
    hits = await who.ws.search(q, kinds=kind, limit=limit)
    return [SearchHitOut.of(h) for h in hits if who.allows("items", "read", h.path)]


@router.get("/items/{path:path}", response_model=ItemOut)
async def read_item(path: str, who: SignedIn, version: Version | None = None) -> ItemOut:
    """An item as deployed, or one of its past `version`s; a secret's value is null."""
    path = checked_path(who, path, "read")
    return ItemOut.of(await who.ws.get(path, version=version))


@router.put("/items/{path:path}", response_model=ItemOut)
async def write_item(path: str, body: WriteIn, who: SignedIn) -> ItemOut:
    """Write an item; with `base_version`, a 409 unless the item is still at that version."""
    path = checked_path(who, path, "write")
    item = await who.ws.write(
        path,
        body.kind,
        body.value,
        summary=body.summary,
        description=body.description,
        resource_type=body.resource_type,
        secret=body.secret,
        message=body.message,
        base_version=body.base_version,
    )
    return ItemOut.of(item)


@router.delete("/items/{path:path}", status_code=204)
async def delete_item(path: str, who: SignedIn) -> Response:
    """Delete an item; its history stays readable."""
    await who.ws.delete(checked_path(who, path, "write"))
    return Response(status_code=204)


@router.get("/history/{path:path}", response_model=list[VersionInfo])
async def history(path: str, who: SignedIn) -> list[VersionInfo]:
    """Every kept version of an item, newest first, without values."""
    path = checked_path(who, path, "read")
    return [VersionInfo.of(v) for v in await who.ws.history(path)]


@router.delete("/history/{path:path}", response_model=ClearedOut)
async def clear_history(path: str, who: SignedIn) -> ClearedOut:
    """Drop every past version of an item, keeping the current one."""
    path = checked_path(who, path, "write")
    return ClearedOut(path=path, dropped=await who.ws.clear_history(path))


@router.post("/restore/{path:path}", response_model=ItemOut)
async def restore(path: str, body: RestoreIn, who: SignedIn) -> ItemOut:
    """Write an old version forward as the item's new version."""
    path = checked_path(who, path, "write")
    return ItemOut.of(await who.ws.restore(path, body.version, message=body.message))


@router.get("/diff/{path:path}", response_model=DiffOut)
async def diff(
    path: str,
    who: SignedIn,
    old: Version,
    new: Version | None = None,
) -> DiffOut:
    """A unified diff from version `old` to `new` (default: the current one).

    Two versions of an agent (a resource of type `ai_agent`) are compared key
    by key and tool by tool.
    """
    path = checked_path(who, path, "read")
    return DiffOut(path=path, old=old, new=new, diff=await who.ws.diff(path, old, new))
