"""`tidemill runs prune`: delete the runs that ended longer ago than a duration.

Each top-level run that ended (succeeded, failed or cancelled) before the
cutoff goes with the runs under it and all they own, a batch per
transaction (`AsyncEngine.prune_runs`); a run still queued, running or
waiting is never touched. Progress goes to stderr after each batch, the
summary (runs, and rows by table) to stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING

from tidemill.cli._common import dump_json, positive_int, stamp, table
from tidemill.cli._times import run_age

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine, Pruned

__all__ = ["add_prune", "prune"]

_EPILOG = """\
What goes with each run: its sub-runs (branches, loop iterations, sub-flows,
agents' child runs), steps, results, payloads, logs, model usage, approvals,
events, agent journals and webhook keys, and the flow definitions no run uses
any more. What stays: agents' conversation memory, the workspace's audit log
and schedules' history of fires.

examples:
  tidemill runs prune --older-than 30d --dry-run    # how many would go; nothing is deleted
  tidemill runs prune --older-than 30d
  tidemill runs prune --older-than 12h --workspace default --json
"""


def add_prune(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the `prune` action to `tidemill runs`; return its parser (for `--db`)."""
    parser = actions.add_parser(
        "prune",
        help="delete the runs that ended longer ago than a duration",
        description="Delete the top-level runs that ended (succeeded, failed or cancelled)\n"
        "longer ago than --older-than, each with the runs under it and all they own.\n"
        "Runs still queued, running or waiting are never touched, however old.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--older-than",
        type=run_age,
        required=True,
        metavar="DURATION",
        help="delete the runs that ended longer ago than this: 30d, 12h, 45m or seconds (90)",
    )
    parser.add_argument(
        "--workspace",
        metavar="NAME",
        default=None,
        help="only runs started from this workspace's flows (default: every run of the store, "
        "runs of flow files too)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="delete nothing: count the runs that would go"
    )
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=200,
        metavar="N",
        help="top-level runs deleted per transaction (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


async def prune(engine: AsyncEngine, args: argparse.Namespace) -> int:
    """Prune as `args` say; print progress on stderr and the summary on stdout."""
    shown = [0]

    def progress(total: Pruned) -> None:
        if total.runs > shown[0]:
            shown[0] = total.runs
            print(f"pruned {_runs(total.runs)}...", file=sys.stderr, flush=True)

    pruned = await engine.prune_runs(
        args.older_than,
        workspace=args.workspace,
        batch=args.batch,
        dry_run=args.dry_run,
        on_batch=None if args.dry_run else progress,
    )
    if args.json:
        print(dump_json({**dataclasses.asdict(pruned), "workspace": args.workspace}))
        return 0
    print(_summary(pruned, args.workspace))
    if pruned.rows:
        rows = [[name, str(count)] for name, count in sorted(pruned.rows.items())]
        print("\n".join(f"  {line}" for line in table(["TABLE", "ROWS"], rows).splitlines()))
    return 0


def _runs(count: int) -> str:
    """`1 run`, `3 runs`.

    Examples:
        >>> _runs(1), _runs(0)
        ('1 run', '0 runs')
    """
    return f"{count} run{'' if count == 1 else 's'}"


def _summary(pruned: Pruned, workspace: str | None) -> str:
    """The first line of the summary: how many runs went (or would), of which ended before when.

    Examples:
        >>> from tidemill.engine import Pruned
        >>> _summary(Pruned(0.0, runs=2, dry_run=True), "default").split(" that ")[0]
        "would prune 2 runs of workspace 'default'"
        >>> _summary(Pruned(0.0), None).split(" that ")[0]
        'pruned 0 runs'
    """
    runs = _runs(pruned.runs) + ("" if workspace is None else f" of workspace {workspace!r}")
    before = f"that ended before {stamp(pruned.before)}"
    if pruned.dry_run:
        return f"would prune {runs} {before} (dry run: nothing was deleted)"
    under = " (each with the runs under it)" if pruned.runs else ""
    return f"pruned {runs} {before}{under}"
