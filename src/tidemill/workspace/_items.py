"""Items: read, write, list, delete; versions, diffs, restore; drafts and deploys; search.

Each method is one transaction as the session's principal, and asks the
permission module before it touches an item: a refusal reads like "not
found" to whoever may not read the path, so it never tells what exists.
"""

from __future__ import annotations

import builtins
import difflib
import json
from collections.abc import Collection
from typing import Any

import yaml

from tidemill.errors import ItemNotFound, VersionConflict
from tidemill.store import dumps
from tidemill.workspace._agents import agent_diff
from tidemill.workspace._closure import linked_agents
from tidemill.workspace._content import VERSIONED, Content, defer_checks, prepare, run_deferred
from tidemill.workspace._models import Draft, Item, ItemKind, Version
from tidemill.workspace._paths import InvalidPath, ItemPath
from tidemill.workspace._search import SearchEntry, SearchHit, SearchIndex
from tidemill.workspace._session import Context, Session
from tidemill.workspace._values import InvalidValue

__all__ = [
    "ItemMethods",
    "check_owner",
    "check_readable",
    "item_path",
    "item_text",
    "not_found",
    "store_content",
]


def item_path(text: str) -> str:
    return str(ItemPath.parse(text))


def not_found(ctx: Context, path: str, what: str = "item") -> ItemNotFound:
    return ItemNotFound(
        f"No {what} at {path} that {ctx.principal.name} may read.",
        hint=f"List what is there: tidemill ws list {path.rsplit('/', 1)[0]}",
        context={"path": path},
    )


def check_readable(ctx: Context, path: str, what: str = "item") -> None:
    if not ctx.rules.allows("read", path):
        raise not_found(ctx, path, what)


def check_owner(ctx: Context, path: str) -> None:
    parsed = ItemPath.parse(path)
    if parsed.root == "f" and ctx.q.folder(parsed.owner) is None:
        raise ItemNotFound(
            f"There is no folder {parsed.owner!r} for {path}.",
            hint=f"A workspace admin creates it: tidemill ws folders add {parsed.owner}",
        )
    if parsed.root == "u" and ctx.q.principal(parsed.owner) is None:
        raise ItemNotFound(f"There is no user {parsed.owner!r} for {path}.")


def item_text(kind: str, value: Any) -> str:
    """An item's value as text, for diffs."""
    if kind == "script" and isinstance(value, str):
        return value
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True)


def store_content(ctx: Context, path: str, content: Content, *, message: str, action: str) -> Item:
    """Write `content` at `path` (already checked: the caller may write it)."""
    check_owner(ctx, path)
    stored = ctx.q.item(path)
    if stored is not None and not stored.item.deleted and stored.item.kind != content.kind:
        raise VersionConflict(
            f"{path} holds a {stored.item.kind}, not a {content.kind}.",
            hint="Delete it first, or write to another path.",
        )
    versioned = content.kind in VERSIONED
    # After a delete the path may have held another kind: count on from its history.
    last = max(stored.item.version if stored else 0, ctx.q.last_version(path) if stored else 0)
    version = last + 1 if versioned else 0
    body = content.value
    if content.secret:
        body = ctx.data_key().encrypt(content.value, aad=f"{ctx.q.ws}/{path}")
    item = Item(
        path=path,
        kind=content.kind,
        summary=content.summary,
        description=content.description,
        version=version,
        updated_by=ctx.principal.name,
        updated_at=ctx.now,
        value=None if content.secret else content.value,
        resource_type=content.resource_type,
        secret=content.secret,
    )
    ctx.q.put_item(item, dumps(body), exists=stored is not None)
    if versioned:
        ctx.q.add_version(
            Version(
                path=path,
                version=version,
                kind=content.kind,
                summary=content.summary,
                description=content.description,
                value=content.value,
                message=message,
                created_by=ctx.principal.name,
                created_at=ctx.now,
                resource_type=content.resource_type,
            )
        )
    ctx.audit(action, path, kind=content.kind, version=version, message=message)
    return item


def _checked_again(ctx: Context, path: str, saved: Draft | Version) -> Content:
    """A draft or a past version, checked again as content of its kind (to write it)."""
    return prepare(
        ctx,
        path,
        saved.kind,
        saved.value,
        summary=saved.summary,
        description=saved.description,
        resource_type=saved.resource_type,
    )


def _deploy_one(ctx: Context, path: str, message: str) -> Item:
    """Deploy the principal's draft at `path` (checked: the principal may write it)."""
    ctx.rules.check("write", path)
    found = ctx.q.draft(path, ctx.principal.name)
    if found is None:
        raise not_found(ctx, path, "draft")
    content = _checked_again(ctx, path, found)
    item = store_content(ctx, path, content, message=message, action="item.deploy")
    ctx.q.drop_draft(path, ctx.principal.name)
    return item


def _linked_drafts(ctx: Context, path: str) -> list[str]:
    """The agents the flow at `path` links that the principal has drafts of."""
    draft = ctx.q.draft(path, ctx.principal.name)
    stored = ctx.q.item(path)
    document = draft.value if draft is not None else (stored.item.value if stored else None)
    if not isinstance(document, dict):
        return []
    found = []
    for each in sorted(linked_agents(document)):
        mine = ctx.q.draft(each, ctx.principal.name)
        if (
            mine is not None
            and mine.resource_type == "ai_agent"
            and ctx.rules.allows("write", each)
        ):
            found.append(each)
    return found


class ItemMethods(Session):
    """The item operations of `AsyncWorkspace`."""

    _index: tuple[int, SearchIndex] | None = None

    async def get(self, path: str, *, version: int | None = None, reveal: bool = False) -> Item:
        """The item at `path` as deployed (or one of its versions).

        Args:
            path: The item's path.
            version: A past version's number; None: the current one.
            reveal: Decrypt a secret variable's value (audited); otherwise a
                secret's `value` is None.

        Raises:
            ItemNotFound: Nothing the principal may read is there.
        """
        path = item_path(path)

        def read(ctx: Context) -> Item:
            check_readable(ctx, path)
            if version is not None:
                found = ctx.q.version(path, version)
                if found is None:
                    raise not_found(ctx, f"{path}@{version}", "version")
                return Item(
                    path,
                    found.kind,
                    found.summary,
                    found.description,
                    found.version,
                    found.created_by,
                    found.created_at,
                    found.value,
                    found.resource_type,
                )
            stored = ctx.q.item(path)
            if stored is None or stored.item.deleted:
                raise not_found(ctx, path)
            item = stored.item
            if item.secret and reveal:
                plaintext = ctx.data_key().decrypt(
                    json.loads(stored.body), aad=f"{ctx.q.ws}/{path}"
                )
                ctx.audit("secret.decrypt", path, purpose="read")
                return Item(
                    item.path,
                    item.kind,
                    item.summary,
                    item.description,
                    item.version,
                    item.updated_by,
                    item.updated_at,
                    plaintext,
                    item.resource_type,
                    True,
                )
            return item

        return await self.transact(read)

    async def write(
        self,
        path: str,
        kind: ItemKind,
        value: Any,
        *,
        summary: str | None = None,
        description: str | None = None,
        resource_type: str | None = None,
        secret: bool = False,
        message: str = "",
        base_version: int | None = None,
    ) -> Item:
        """Write an item: a script, flow or resource gets a new version.

        Args:
            path: Where (`f/<folder>/<name>` or `u/<user>/<name>`).
            kind: `script`, `flow`, `resource`, `variable` or `resource_type`.
            value: Script: its code; flow: its document (a mapping, or YAML
                text); resource: its JSON value; variable: its text; resource
                type: its JSON Schema.
            summary: Defaults to what the value says (a script's docstring,
                a flow's `summary`).
            description: Likewise.
            resource_type: A resource's type: a built-in one or a path.
            secret: A variable whose value is encrypted and never shown.
            message: Why, kept with the version.
            base_version: Refuse the write (`VersionConflict`) unless the
                current version is this one: for editors that read first.

        Raises:
            PermissionDenied: The principal may not write `path`.
            ConfigurationError: The value is not a valid item of its kind.
        """
        path = item_path(path)

        def put(ctx: Context) -> Item:
            ctx.rules.check("write", path)
            if base_version is not None:
                stored = ctx.q.item(path)
                current = 0 if stored is None or stored.item.deleted else stored.item.version
                if current != base_version:
                    raise VersionConflict(
                        f"{path} is at version {current}, not {base_version}.",
                        hint="Read it again and reapply the change.",
                    )
            content = prepare(
                ctx,
                path,
                kind,
                value,
                summary=summary,
                description=description,
                resource_type=resource_type,
                secret=secret,
            )
            return store_content(ctx, path, content, message=message, action="item.write")

        return await self.transact(put)

    async def delete(self, path: str) -> None:
        """Delete an item; its history stays readable by those who could read it."""
        path = item_path(path)

        def drop(ctx: Context) -> None:
            ctx.rules.check("write", path)
            stored = ctx.q.item(path)
            if stored is None or stored.item.deleted:
                raise not_found(ctx, path)
            if stored.item.secret:  # no ciphertext lingers once a secret is gone
                ctx.q.put_item(stored.item, dumps(None), exists=True)
            ctx.q.mark_deleted(path, ctx.now)
            ctx.audit("item.delete", path, kind=stored.item.kind)

        await self.transact(drop)

    async def list(
        self,
        prefix: str = "",
        *,
        kind: ItemKind | None = None,
        after: str | None = None,
        limit: int = 100,
        deleted: bool = False,
    ) -> builtins.list[Item]:
        """The items under `prefix` the principal may read, by path, a page at a time.

        Values are left out (`value` is None): read one with `get`.

        Args:
            prefix: `f/<folder>/`, `u/<user>/`, any start of a path, or "".
            kind: Only items of this kind.
            after: The last path of the previous page (keyset pagination).
            limit: The most items to return.
            deleted: Include deleted items.
        """
        if limit < 1:
            raise InvalidPath("limit must be at least 1.")

        def read(ctx: Context) -> list[Item]:
            found: builtins.list[Item] = []
            cursor = after
            while len(found) < limit:
                page = ctx.q.items(prefix, after=cursor, limit=limit, kind=kind, deleted=deleted)
                found.extend(i for i in page if ctx.rules.allows("read", i.path))
                if len(page) < limit:
                    break
                cursor = page[-1].path
            return found[:limit]

        return await self.transact(read)

    async def history(self, path: str) -> builtins.list[Version]:
        """Every kept version of an item, newest first (a deleted item's too)."""
        path = item_path(path)

        def read(ctx: Context) -> builtins.list[Version]:
            check_readable(ctx, path)
            versions = ctx.q.versions(path)
            if not versions and ctx.q.item(path) is None:
                raise not_found(ctx, path)
            return versions

        return await self.transact(read)

    async def diff(self, path: str, old: int, new: int | None = None) -> str:
        """A unified diff between two versions (`new` None: the current one).

        Two versions of an agent (a resource of type `ai_agent`) are compared
        key by key and tool by tool instead (`agent_diff`).
        """
        path = item_path(path)
        before = await self.get(path, version=old)
        after = await self.get(path, version=new) if new is not None else await self.get(path)
        header = f"--- {path}@{before.version}\n+++ {path}@{after.version}\n"
        if (
            before.resource_type == after.resource_type == "ai_agent"
            and isinstance(before.value, dict)
            and isinstance(after.value, dict)
        ):
            changes = agent_diff(before.value, after.value)
            return header + changes if changes else ""
        lines = difflib.unified_diff(
            item_text(before.kind, before.value).splitlines(keepends=True),
            item_text(after.kind, after.value).splitlines(keepends=True),
            fromfile=f"{path}@{before.version}",
            tofile=f"{path}@{after.version}",
        )
        return "".join(lines)

    async def restore(self, path: str, version: int, *, message: str = "") -> Item:
        """Write an old version forward as a new one."""
        path = item_path(path)

        def put(ctx: Context) -> Item:
            ctx.rules.check("write", path)
            old = ctx.q.version(path, version)
            if old is None:
                raise not_found(ctx, f"{path}@{version}", "version")
            content = _checked_again(ctx, path, old)
            note = message or f"restore version {version}"
            return store_content(ctx, path, content, message=note, action="item.restore")

        return await self.transact(put)

    async def clear_history(self, path: str) -> int:
        """Drop every past version, keeping the current one; return how many were dropped."""
        path = item_path(path)

        def clear(ctx: Context) -> int:
            ctx.rules.check("write", path)
            stored = ctx.q.item(path)
            if stored is None:
                raise not_found(ctx, path)
            dropped = ctx.q.clear_versions(path, stored.item.version)
            ctx.audit("item.clear_history", path, dropped=dropped)
            return dropped

        return await self.transact(clear)

    async def save_draft(
        self,
        path: str,
        kind: ItemKind,
        value: Any,
        *,
        summary: str | None = None,
        description: str | None = None,
        resource_type: str | None = None,
    ) -> Draft:
        """Save the principal's draft of an item: nothing anyone runs changes.

        Only scripts, flows and resources have drafts (never a secret).
        """
        path = item_path(path)
        if kind not in VERSIONED:
            raise InvalidValue(
                f"{path}: only scripts, flows and resources have drafts, not a {kind}.",
                hint="Write variables and resource types directly: they are not versioned.",
            )

        def put(ctx: Context) -> Draft:
            ctx.rules.check("write", path)
            check_owner(ctx, path)
            content = prepare(
                ctx,
                path,
                kind,
                value,
                summary=summary,
                description=description,
                resource_type=resource_type,
                drafts=True,  # what it names may be the principal's own drafts too
            )
            draft = Draft(
                path,
                ctx.principal.name,
                kind,
                content.summary,
                content.description,
                content.value,
                ctx.now,
                content.resource_type,
            )
            ctx.q.put_draft(draft)
            ctx.audit("draft.save", path, kind=kind)
            return draft

        return await self.transact(put)

    async def draft(self, path: str) -> Draft:
        """The principal's draft of an item."""
        path = item_path(path)

        def read(ctx: Context) -> Draft:
            check_readable(ctx, path, "draft")
            found = ctx.q.draft(path, ctx.principal.name)
            if found is None:
                raise not_found(ctx, path, "draft")
            return found

        return await self.transact(read)

    async def drafts(self) -> builtins.list[Draft]:
        """The principal's drafts (of items it may still read)."""

        def read(ctx: Context) -> builtins.list[Draft]:
            return [d for d in ctx.q.drafts(ctx.principal.name) if ctx.rules.allows("read", d.path)]

        return await self.transact(read)

    async def discard_draft(self, path: str) -> None:
        """Drop the principal's draft of an item."""
        path = item_path(path)

        def drop(ctx: Context) -> None:
            check_readable(ctx, path, "draft")
            if not ctx.q.drop_draft(path, ctx.principal.name):
                raise not_found(ctx, path, "draft")
            ctx.audit("draft.discard", path)

        await self.transact(drop)

    async def deploy(self, path: str, *, message: str = "", agents: Collection[str] = ()) -> Item:
        """Write the principal's draft as the item's new version, and drop the draft.

        Args:
            path: The item.
            message: Why, kept with the version(s).
            agents: Linked agents of the flow whose drafts are deployed with it,
                in the same transaction (`linked_drafts` lists them); the
                drafts of those left out are kept.
        """
        path = item_path(path)
        wanted = [item_path(agent) for agent in agents]

        def put(ctx: Context) -> Item:
            if wanted:
                offered = _linked_drafts(ctx, path)
                stray = [agent for agent in wanted if agent not in offered]
                if stray:
                    raise not_found(ctx, stray[0], "draft of an agent this flow links")
            defer_checks(ctx)  # the flow and its agents' drafts land together
            item = _deploy_one(ctx, path, message)
            for agent in wanted:
                _deploy_one(ctx, agent, message)
            run_deferred(ctx)
            return item

        return await self.transact(put)

    async def linked_drafts(self, path: str) -> builtins.list[str]:
        """The agents a flow links that the principal has drafts of.

        The flow is read from the principal's draft of it, else as deployed;
        these are what `deploy(..., agents=...)` may deploy with it.
        """
        path = item_path(path)

        def read(ctx: Context) -> builtins.list[str]:
            check_readable(ctx, path)
            return _linked_drafts(ctx, path)

        return await self.transact(read)

    async def search(
        self, query: str, *, kinds: Collection[str] | None = None, limit: int = 20
    ) -> builtins.list[SearchHit]:
        """Items matching `query` by words of their paths, summaries and descriptions.

        Fuzzy (typos, word order), ranked best first, and only what the
        principal may read. The index is rebuilt when the workspace changes.
        """

        def read(ctx: Context) -> builtins.list[SearchHit]:
            generation = ctx.q.generation()
            cached = self._index
            if cached is None or cached[0] != generation:
                entries = [SearchEntry(*row) for row in ctx.q.search_entries()]
                cached = self._index = (generation, SearchIndex(entries))
            return cached[1].search(
                query,
                kinds=kinds,
                limit=limit,
                allowed=lambda path: ctx.rules.allows("read", path),
            )

        return await self.transact(read)
