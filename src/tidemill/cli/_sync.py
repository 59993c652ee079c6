"""`tidemill sync pull DIR` and `tidemill sync push DIR`: a workspace as a directory of files.

`pull` writes what you may read of the workspace as files (a secret's value
is left out); `push` applies a directory to it, all of it in one transaction
or nothing, showing what it changes first (`--dry-run` stops there). The
layout of the files is `tidemill.workspace._tree`'s; what a push does and
does not do is `tidemill.workspace._sync`'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tidemill.cli._common import dump_json
from tidemill.cli._ws_people import add_ws_options, open_workspace

if TYPE_CHECKING:
    from tidemill.workspace._sync import PullReport, PushPlan

__all__ = ["register", "run"]

_EPILOG = """\
examples:
  tidemill sync pull ws/                      write the workspace as files under ws/
  tidemill sync push ws/ --dry-run            what a push would change
  tidemill sync push ws/ -m "new triage"      apply ws/, all of it or nothing
  tidemill sync push examples/workspace       the support-triage demo, as workspace items

A pull never writes a secret's value; pushing a secret's file without a value
keeps the stored one. A push deletes nothing.
"""


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", type=Path, help="the sync directory")
    add_ws_options(parser, json_output=True)


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `sync` command and its actions; return the function that runs them."""
    parser = subparsers.add_parser(
        "sync",
        help="pull a workspace into files, push files into a workspace",
        description="A workspace as a directory of files: f/<folder>/<name>.flow.yaml, "
        "<name>.py, <name>.resource.yaml, <name>.variable.yaml, folder.meta.yaml, ...",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    pull = actions.add_parser(
        "pull",
        help="write what you may read of the workspace as files",
        description="Write every item you may read, and each folder's folder.meta.yaml, "
        "under DIR. Secrets are written without their values; no file is deleted.",
    )
    pull.add_argument(
        "--flow",
        metavar="PATH",
        help="export only this flow and what it needs (its scripts, sub-flows, linked "
        "agents, their resources and variables), for another workspace",
    )
    push = actions.add_parser(
        "push",
        help="apply a directory to the workspace, in one transaction",
        description="Show what the directory changes, then apply all of it in one "
        "transaction; any error changes nothing and names the file.",
    )
    for sub in (pull, push):
        _add_options(sub)
    push.add_argument(
        "--dry-run", action="store_true", help="show the changes and try them; change nothing"
    )
    push.add_argument(
        "-m", "--message", default="", help="the message of the versions written"
    )  # fmt: skip
    return run


def run(args: argparse.Namespace) -> int:
    """Run one `sync` action; return its exit status."""
    from tidemill.workspace._tree import SyncFileError

    root: Path = args.directory
    try:
        if args.action == "pull":
            with open_workspace(args) as ws:
                report = ws.pull(root, flow=args.flow)
            _print_pull(report, json_output=args.json)
            return 0
        with open_workspace(args) as ws:
            plan = ws.push(root, dry_run=args.dry_run, message=args.message)
    except SyncFileError as exc:
        if args.json:
            print(dump_json({"error": exc.message, **exc.context}))
        for file, line, problem in exc.problems:
            where = file if line is None else f"{file}, line {line}"
            print(f"tidemill sync: error: {where}: {problem}", file=sys.stderr)
        print(f"tidemill sync: {exc.hint}", file=sys.stderr)
        return 2
    _print_push(plan, json_output=args.json)
    if plan.problem is not None:
        print(f"tidemill sync: error: the push would fail: {plan.problem}", file=sys.stderr)
        return 2
    return 0


def _print_pull(report: PullReport, *, json_output: bool) -> None:
    if json_output:
        print(dump_json(report.to_dict()))
        return
    counts = ", ".join(f"{count} {kind}" for kind, count in report.counts.items() if count)
    print(f"Pulled into {report.root}: {counts or 'nothing'} ({len(report.files)} files).")
    if report.secrets:
        print(f"Secrets written without their values: {', '.join(report.secrets)}.")


def _print_push(plan: PushPlan, *, json_output: bool) -> None:
    if json_output:
        print(dump_json(plan.to_dict()))
        return
    for folder in plan.folders:
        if folder.change != "unchanged":
            what = f"  {', '.join(folder.fields)}" if folder.fields else ""
            print(f"{folder.change:7} f/{folder.folder}/ (folder){what}")
    for item in plan.items:
        if item.change == "unchanged":
            continue
        what = f"  {', '.join(item.fields)}" if item.fields else ""
        print(f"{item.change:7} {item.path} ({item.kind}){what}")
        for line in item.diff.splitlines():
            print(f"    {line}")
    counts = plan.counts()
    summary = (
        f"{counts['create']} to create, {counts['update']} to update, "
        f"{counts['unchanged']} unchanged"
    )
    if plan.applied:
        print(f"Pushed: {summary}.")
    else:
        print(f"Dry run: {summary}; nothing was changed.")
