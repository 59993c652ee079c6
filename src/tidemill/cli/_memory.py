"""`tidemill memory`: the conversation memories `ai_agent` steps keep, listed and deleted.

A memory is kept per (memory id, step id) and nothing expires it. Its id is
a UUID as stored (`RunInfo.memory_id`, or a step's hashed `memory_id`);
`--key KEY --flow NAME` names one by the string a run or step gave instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemill.cli._common import add_db_option, dump_json, positive_int, stamp, table, with_engine

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine
    from tidemill.store import MemoryRow

__all__ = ["register", "run"]

_EPILOG = """\
examples:
  tidemill memory list
  tidemill memory list --key customer-42 --flow support
  tidemill memory delete 3a516c91-67fd-5099-bc94-8c4394655145
  tidemill memory delete --key customer-42 --workspace default --path f/support/triage --step agent
"""


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `memory` command and its actions; return the function that runs them."""
    parser = subparsers.add_parser(
        "memory",
        help="list and delete agent steps' stored memories",
        description="The conversation memories of ai_agent steps, per memory id and step id.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="stored memories, most recently written first")
    listing.add_argument("memory_id", nargs="?", metavar="ID", help="only this memory id")
    listing.add_argument("--limit", type=positive_int, default=100, help="at most this many")
    listing.add_argument("--json", action="store_true", help="print JSON")
    delete = actions.add_parser("delete", help="delete a memory (every step's, or --step's)")
    delete.add_argument("memory_id", nargs="?", metavar="ID", help="the memory id (a UUID)")
    delete.add_argument("--step", metavar="STEP", help="only this step's memory")
    for sub in (listing, delete):
        sub.add_argument("--key", metavar="KEY", help="name the memory by the key a run gave")
        sub.add_argument("--flow", metavar="NAME", help="with --key: the file flow's name")
        sub.add_argument("--workspace", metavar="NAME", help="with --key and --path")
        sub.add_argument("--path", metavar="PATH", help="with --key: the workspace flow's path")
        add_db_option(sub)
    return run


def _memory_id(args: argparse.Namespace) -> str | None:
    from tidemill.engine._memory import memory_scope, memory_uuid
    from tidemill.errors import ConfigurationError

    if args.key is None:
        return str(args.memory_id) if args.memory_id else None
    if args.memory_id:
        raise ConfigurationError(
            "Give a memory id or --key, not both.", hint="tidemill memory list shows the ids."
        )
    if args.path:
        source = {"workspace": args.workspace or "default", "path": args.path}
        return memory_uuid(args.key, scope=memory_scope(source, ""))
    if not args.flow:
        raise ConfigurationError(
            "A key names a memory only with the flow it was given in.",
            hint="Add --flow NAME (a file flow) or --path f/<folder>/<flow> (a workspace flow).",
        )
    return memory_uuid(args.key, scope=memory_scope(None, args.flow))


def run(args: argparse.Namespace) -> int:
    """Run `tidemill memory ...`."""
    from tidemill.errors import ConfigurationError

    memory_id = _memory_id(args)
    if args.action == "delete":
        if memory_id is None:
            raise ConfigurationError(
                "Name the memory to delete: its id, or --key with --flow or --path.",
                hint="tidemill memory list shows the ids.",
            )
        chosen: str = memory_id

        async def drop(engine: AsyncEngine) -> int:
            return await engine.delete_memory(chosen, step=args.step)

        removed = with_engine(args, drop)
        print(f"deleted {removed} message{'' if removed == 1 else 's'} of memory {chosen}")
        return 0

    async def listed(engine: AsyncEngine) -> list[MemoryRow]:
        return list(await engine.memories(memory_id, limit=args.limit))

    rows = with_engine(args, listed)
    if args.json:
        print(dump_json([
            {"memory_id": r.memory_id, "step": r.step_key, "messages": r.messages,
             "updated_at": r.updated_at}
            for r in rows
        ]))  # fmt: skip
        return 0
    if not rows:
        print("no stored memories", file=sys.stderr)
        return 0
    print(
        table(
            ["MEMORY ID", "STEP", "MESSAGES", "UPDATED"],
            [[r.memory_id, r.step_key, str(r.messages), stamp(r.updated_at)] for r in rows],
        )
    )
    return 0
