"""`tidemill approvals`: list the decisions runs wait for, approve or reject them."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemill.cli._common import (
    Painter,
    add_db_option,
    approval_dict,
    dump_json,
    duration,
    stamp,
    table,
    with_engine,
)

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine
    from tidemill.store import ApprovalRow

__all__ = ["register", "run"]

_EPILOG = """\
examples:
  tidemill approvals list
  tidemill approvals approve APPROVAL --as alice --comment "looks good"
  tidemill approvals reject APPROVAL --as alice --comment "too risky"
"""


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `approvals` command and its actions; return the function that runs them."""
    parser = subparsers.add_parser(
        "approvals",
        help="list, approve and reject the decisions runs wait for",
        description="The approval steps runs are waiting on, and the decisions on them.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list", help="pending approvals", description="Pending approvals, oldest first."
    )
    listing.add_argument("--run", metavar="RUN", help="only those of this run")
    listing.add_argument("--all", action="store_true", help="decided ones too")
    listing.add_argument("--json", action="store_true", help="print JSON")
    subs = [listing]
    for name, verb in (("approve", "Approve"), ("reject", "Reject")):
        effect = "the run goes on" if name == "approve" else "the step fails, and with it the run"
        sub = actions.add_parser(
            name, help=f"{verb.lower()} an approval", description=f"{verb}: {effect}."
        )
        sub.add_argument("approval_id", metavar="ID")
        sub.add_argument(
            "--as",
            dest="actor",
            metavar="NAME",
            help="who decides (must be one of the approvers when the step names them)",
        )
        sub.add_argument("--comment", metavar="TEXT", help="why; kept with the decision")
        subs.append(sub)
    for sub in subs:
        add_db_option(sub)
    return run


def run(args: argparse.Namespace) -> int:
    """Run one `approvals` action; return its exit status."""
    if args.action == "list":
        return with_engine(args, lambda engine: _list(engine, args))
    return with_engine(args, lambda engine: _decide(engine, args))


async def _list(engine: AsyncEngine, args: argparse.Namespace) -> int:
    if args.run is not None:
        await engine.get(args.run)  # an unknown run is an error, not an empty list
    rows = await engine.approvals(args.run, status=None if args.all else "pending")
    if args.json:
        print(dump_json([approval_dict(row) for row in rows]))
        return 0
    if not rows:
        print("no pending approvals" if not args.all else "no approvals", file=sys.stderr)
        return 0
    paint = Painter(sys.stdout)
    lines = [
        [
            row.id,
            row.root_id,
            row.step_id,
            paint(row.status),
            _who(row),
            stamp(row.created_at),
            _expiry(row),
            row.message,
        ]
        for row in rows
    ]
    headers = ["ID", "RUN", "STEP", "STATUS", "APPROVERS", "CREATED", "EXPIRES", "MESSAGE"]
    print(table(headers, lines))
    return 0


def _who(row: ApprovalRow) -> str:
    if row.decided_by:
        return row.decided_by
    return ",".join(row.approvers) if row.approvers else "anyone"


def _expiry(row: ApprovalRow) -> str:
    if row.expires_at is None or row.status != "pending":
        return "-"
    return f"in {duration(row.expires_at - time.time())} ({row.on_timeout})"


async def _decide(engine: AsyncEngine, args: argparse.Namespace) -> int:
    decide = engine.approve if args.action == "approve" else engine.reject
    row = await decide(args.approval_id, actor=args.actor, comment=args.comment)
    by = f" by {row.decided_by}" if row.decided_by else ""
    print(f"approval {row.id} {row.status}{by} (run {row.root_id}, step {row.step_id})")
    return 0
