"""`tidemill db`: bring a store's schema up to date, or say how far behind it is."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemill.cli._common import add_db_option, db_url, require_store

if TYPE_CHECKING:
    from tidemill.store import Migration, Store

__all__ = ["register", "run"]

_EPILOG = """\
SQLite stores are upgraded on first use. PostgreSQL stores are upgraded with
this command, once per new Tidemill version, before workers start:
  tidemill db upgrade --db postgresql://tidemill@db:5432/tidemill
`db upgrade` creates a SQLite store that does not exist; `db status` does not.
"""


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `db` command and its actions; return the function that runs them."""
    parser = subparsers.add_parser(
        "db",
        help="upgrade a store's schema, or show its version",
        description="Manage the store's schema.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    upgrade = actions.add_parser(
        "upgrade",
        help="apply the migrations the store has not had",
        description="Apply the migrations the store has not had yet.",
    )
    status = actions.add_parser(
        "status",
        help="the store's schema version and pending migrations",
        description="The store's schema version, and the migrations it has not had yet.",
    )
    for sub in (upgrade, status):
        add_db_option(sub)
    return run


def run(args: argparse.Namespace) -> int:
    """Run one `db` action; return its exit status."""
    from tidemill.store import Store, StoreURL

    url = StoreURL.parse(db_url(args) if args.action == "upgrade" else require_store(args))

    async def main() -> int:
        store = Store(url, max_connections=1)
        try:
            if args.action == "upgrade":
                return await _upgrade(store)
            return await _status(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _name(migration: Migration) -> str:
    return f"{migration.version:04d}_{migration.name}"


async def _upgrade(store: Store) -> int:
    from tidemill.store import current_version, pending, upgrade

    todo = await pending(store)
    latest = current_version(store.dialect)
    if not todo:
        print(f"{store.url}: up to date (schema version {latest})")
        return 0
    print(f"{store.url}: applying {len(todo)} migration(s)")
    for migration in todo:
        print(f"  pending  {_name(migration)}")
    applied = await upgrade(store)
    for migration in applied:
        print(f"  applied  {_name(migration)}")
    print(f"{store.url}: now at schema version {latest}")
    return 0


async def _status(store: Store) -> int:
    from tidemill.store import current_version, migrations, pending

    todo = await pending(store)
    missing = {m.version for m in todo}
    done = [m.version for m in migrations(store.dialect) if m.version not in missing]
    latest = current_version(store.dialect)
    print(f"store           {store.url}")
    print(f"schema version  {max(done, default=0)}")
    print(f"this Tidemill   {latest}")
    if todo:
        print(f"pending         {', '.join(_name(m) for m in todo)}")
        print(f"upgrade with    tidemill db upgrade --db '{store.url}'")
    else:
        print("pending         none: up to date")
    return 0
