"""`tidemill runs`: list runs, show one with its steps, logs or model usage; cancel, retry, prune.

`runs why RUN` says what each unfinished step waits for, with the commands
that unblock it where a person can; `runs wait RUN` waits for a run to end
(a worker elsewhere executes it) and prints its result as `tidemill run` does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemill.cli._aliases import ModelOptions, add_model_alias_option
from tidemill.cli._common import (
    Painter,
    add_db_option,
    approval_dict,
    db_option,
    dump_json,
    duration,
    error_line,
    failed_step,
    first_line,
    info_dict,
    job_dict,
    job_duration,
    positive_float,
    positive_int,
    stamp,
    table,
    tree_prefixes,
    with_engine,
)
from tidemill.cli._run import Follower, follow, hint_line, interrupts, wait_for_run
from tidemill.cli._runs_prune import add_prune, prune
from tidemill.errors import TidemillError

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine, RunInfo, Wait
    from tidemill.store import JobRow, LogRow

__all__ = ["register", "run"]

_STATUSES = ("queued", "running", "waiting", "succeeded", "failed", "cancelled")

_RUN_HELP = "the run's id, or enough of its start to be unique (tidemill runs list shows them)"
"""The help of the `RUN` argument."""

_WAIT_EPILOG = """\
Progress goes to stderr and the result, as JSON, to stdout.

exit status: 0 the run succeeded, 1 it failed or was cancelled, 2 no such run,
124 the timeout passed first, 130 interrupted (the run goes on either way).
"""

_EPILOG = """\
examples:
  tidemill runs list --status failed
  tidemill runs show RUN
  tidemill runs why RUN                # what its unfinished steps wait for, and how to unblock them
  tidemill runs wait RUN --timeout 600 # until it ends; its result on stdout, exit 0 if it succeeded
  tidemill runs logs RUN --step fetch
  tidemill runs logs RUN --follow      # what its steps print, as they print it, until it ends
  tidemill runs usage RUN
  tidemill runs retry RUN --wait
  tidemill runs prune --older-than 30d # delete the runs that ended more than 30 days ago
"""


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `runs` command and its actions; return the function that runs them."""
    parser = subparsers.add_parser(
        "runs",
        help="list, show, cancel, retry and prune runs",
        description="Look at the runs of a store and act on them.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="the newest runs", description="The newest runs.")
    listing.add_argument("--status", choices=_STATUSES, help="only runs with this status")
    listing.add_argument("--flow", metavar="NAME", help="only runs of the flow with this name")
    listing.add_argument(
        "--limit", type=positive_int, default=20, metavar="N", help="at most N (default: 20)"
    )
    listing.add_argument("--json", action="store_true", help="print JSON")

    show = actions.add_parser(
        "show",
        help="a run, its result or error, and its steps",
        description="A run's status, times, result or error, and every attempt of its steps.",
    )
    show.add_argument("run_id", metavar="RUN", help=_RUN_HELP)
    show.add_argument("--json", action="store_true", help="print JSON")

    why = actions.add_parser(
        "why",
        help="what a run waits for, and how to unblock it",
        description="What each unfinished step of a run waits for (a person's decision, child "
        "runs, a worker, a retry, a concurrency slot), with the commands that unblock it.",
    )
    why.add_argument("run_id", metavar="RUN", help=_RUN_HELP)
    why.add_argument("--json", action="store_true", help="print JSON")

    wait = actions.add_parser(
        "wait",
        help="wait for a run to end and print its result",
        description="Wait until a run ends, showing its steps as they change, and print its "
        "result as `tidemill run` does. It executes nothing: a `tidemill worker` must.",
        epilog=_WAIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wait.add_argument("run_id", metavar="RUN", help=_RUN_HELP)
    wait.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        metavar="S",
        help="stop waiting after S seconds (the run goes on; exit status 124); "
        "default: wait as long as it takes",
    )

    logs = actions.add_parser(
        "logs", help="what a run's steps printed", description="What a run's steps printed."
    )
    logs.add_argument("run_id", metavar="RUN", help=_RUN_HELP)
    logs.add_argument(
        "--step", metavar="ID", help="only this step (its id, or its path such as each[2]/fetch)"
    )
    logs.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep printing what the steps print, as it is stored, until the run ends "
        "(Ctrl-C stops following; the run goes on)",
    )

    usage = actions.add_parser(
        "usage",
        help="the model calls of a run's AI steps: tokens, cost, latency",
        description="Every model call of a run's AI steps, one a line, and the totals.",
    )
    usage.add_argument("run_id", metavar="RUN", help=_RUN_HELP)
    usage.add_argument("--json", action="store_true", help="print JSON")

    cancel = actions.add_parser(
        "cancel",
        help="cancel a run",
        description="Cancel a run: queued steps never start, running ones are stopped.",
    )
    cancel.add_argument("run_id", metavar="RUN", help=_RUN_HELP)

    retry = actions.add_parser(
        "retry",
        help="run a failed run again from its failed steps",
        description="Run a failed run again from its failed steps; finished steps are kept.",
    )
    retry.add_argument("run_id", metavar="RUN", help=_RUN_HELP)
    retry.add_argument(
        "--wait",
        action="store_true",
        help="execute it here with a worker, showing progress, and print its result",
    )
    retry.add_argument(
        "--concurrency",
        type=positive_int,
        default=4,
        metavar="N",
        help="with --wait: steps run at once (default: %(default)s)",
    )
    add_model_alias_option(retry)  # with --wait

    pruning = add_prune(actions)

    for sub in (listing, show, why, wait, logs, usage, cancel, retry, pruning):
        add_db_option(sub)
    return run


def run(args: argparse.Namespace) -> int:
    """Run one `runs` action; return its exit status."""
    actions = {
        "list": _list,
        "show": _show,
        "why": _why,
        "wait": wait_for_run,
        "logs": _logs,
        "usage": _usage,
        "cancel": _cancel,
        "retry": _retry,
        "prune": prune,
    }
    action = actions[args.action]
    return with_engine(args, lambda engine: action(engine, args))


async def _list(engine: AsyncEngine, args: argparse.Namespace) -> int:
    infos = await engine.runs(status=args.status, flow=args.flow, limit=args.limit)
    if args.json:
        print(dump_json([info_dict(info) for info in infos]))
        return 0
    if not infos:
        print("no runs", file=sys.stderr)
        return 0
    paint = Painter(sys.stdout)
    rows = [
        [
            info.id,
            info.flow,
            paint(info.status),
            stamp(info.created_at),
            _took(info),
            error_line(info.error),
        ]
        for info in infos
    ]
    print(table(["ID", "FLOW", "STATUS", "CREATED", "TOOK", "ERROR"], rows))
    return 0


def _took(info: RunInfo) -> str:
    return "-" if info.finished_at is None else duration(info.finished_at - info.created_at)


async def _show(engine: AsyncEngine, args: argparse.Namespace) -> int:
    info = await engine.get(args.run_id)
    jobs = await engine.jobs(info.id)
    prefixes = await tree_prefixes(engine, info.id)
    approvals = await engine.approvals(info.id, status=None)
    if args.json:
        document = {
            **info_dict(info),
            "steps": [job_dict(job, prefixes.get(job.run_id, "")) for job in jobs],
            "approvals": [approval_dict(a) for a in approvals],
        }
        print(dump_json(document))
        return 0
    paint = Painter(sys.stdout)
    print(f"run       {info.id}")
    print(f"flow      {info.flow}")
    print(f"status    {paint(info.status)}")
    print(f"created   {stamp(info.created_at)}")
    print(f"finished  {stamp(info.finished_at)}" + (f"  (took {_took(info)})" if info.done else ""))
    if info.status == "succeeded":
        print("result")
        print(_indent(dump_json(info.result)))
    elif info.error:
        culprit = failed_step(jobs, prefixes)
        step = info.error.get("step")
        if culprit is not None:
            step = prefixes.get(culprit.run_id, "") + culprit.step_id
        print(f"error     {error_line(info.error)}" + (f"  (step {step})" if step else ""))
        if info.error.get("hint"):
            print(f"hint      {str(info.error['hint']).strip()}")
        trace = str(info.error.get("traceback") or "").rstrip()
        if trace:
            print(_indent(trace))
    if jobs:
        print("steps")
        rows = [
            [
                prefixes.get(job.run_id, "") + job.step_id,
                str(job.attempt),
                paint(job.status),
                stamp(job.started_at),
                job_duration(job),
                error_line(job.error) if "step" not in (job.error or {}) else "",
            ]
            for job in jobs
        ]
        headers = ["STEP", "ATTEMPT", "STATUS", "STARTED", "TOOK", "ERROR"]
        print(_indent(table(headers, rows)))
    if approvals:
        print("approvals")
        rows = [
            [
                a.id,
                a.step_id,
                paint(a.status),
                a.decided_by or ("anyone" if not a.approvers else "|".join(a.approvers)),
                a.message,
            ]
            for a in approvals
        ]
        print(_indent(table(["ID", "STEP", "STATUS", "BY", "MESSAGE"], rows)))
    return 0


async def _why(engine: AsyncEngine, args: argparse.Namespace) -> int:
    info = await engine.get(args.run_id)
    waits = await engine.waits(info.id)
    if args.json:
        found = [dataclasses.asdict(wait) for wait in waits]
        print(dump_json({**info_dict(info), "waits": found}))
        return 0
    paint = Painter(sys.stdout)
    if info.done:
        print(_ended(info, db_option(args)))
        return 0
    print(f"run {info.id} (flow {info.flow}) is {paint(info.status)}; it waits for:")
    now = time.time()
    for wait in waits:
        _print_wait(wait, now, db_option(args), "")
    if not waits:
        print("  nothing found: it should move on at once (look again)")
    return 0


def _ended(info: RunInfo, db: str) -> str:
    """Why a finished run waits for nothing: how it ended, and what may follow."""
    at = f"at {stamp(info.finished_at)} (took {_took(info)})"
    if info.status == "succeeded":
        return f"run {info.id} succeeded {at}; it waits for nothing"
    if info.status == "cancelled":
        return f"run {info.id} was cancelled {at}; it waits for nothing"
    step = (info.error or {}).get("step")
    where = f" in step {step}" if step else ""
    hint = hint_line(info.error, "  ")
    return (
        f"run {info.id} failed {at}{where}: {error_line(info.error)}\n"
        + (f"{hint}\n" if hint else "")
        + "  it waits for nothing; run it again from its failed steps:\n"
        f"    tidemill runs retry {info.id}{db}"
    )


def _print_wait(wait: Wait, now: float, db: str, indent: str) -> None:
    where = "run" if wait.step is None else wait.step
    print(f"{indent}- {where}: {wait.reason}")
    when = _when(wait, now)
    if when:
        print(f"{indent}  {when}")
    for command in wait.commands:
        print(f"{indent}    {command}{db}")
    for child in wait.children:
        _print_wait(child, now, db, indent + "  ")


def _when(wait: Wait, now: float) -> str:
    """Since when a wait lasts, and what happens when it ends by itself.

    Examples:
        >>> from tidemill.engine import Wait
        >>> wait = Wait("retry", "s", "r", "...", since=90.0, until=130.0, then="it is due")
        >>> _when(wait, 100.0).split("; ")[1]
        'in 30.0s, it is due'
    """
    parts = []
    if wait.since is not None:
        parts.append(f"since {stamp(wait.since)} ({duration(now - wait.since)})")
    if wait.until is not None and wait.then:
        if wait.until > now:
            parts.append(f"in {duration(wait.until - now)}, {wait.then}")
        else:
            parts.append(f"{duration(now - wait.until)} ago, {wait.then}")
    return "; ".join(parts)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


async def _logs(engine: AsyncEngine, args: argparse.Namespace) -> int:
    info = await engine.get(args.run_id)
    printer = _LogPrinter(engine, info.id, args.step)
    await printer.read_steps()
    if args.step is not None and (info.done or not args.follow):
        printer.check_step()
    if args.follow:
        return await _follow_logs(engine, info.id, printer)
    if not printer.show(await engine.logs(info.id)):
        print(f"run {info.id}: no logs" + (f" from step {args.step}" if args.step else ""),
              file=sys.stderr)  # fmt: skip
    printer.end()
    return 0


async def _follow_logs(engine: AsyncEngine, run_id: str, printer: _LogPrinter) -> int:
    """Print what the run's steps print as it is stored, until the run ends (or Ctrl-C).

    A row read is never printed twice; rows are asked for from two looks
    back, since a transaction that took its row ids earlier may commit later.
    """
    seen: set[int] = set()
    marks = [0, 0]
    print(f"following the logs of run {run_id} until it ends (Ctrl-C stops following)",
          file=sys.stderr, flush=True)  # fmt: skip
    with interrupts() as presses:
        while True:
            done = (await engine.get(run_id)).done
            rows = [row for row in await engine.logs(run_id, after=marks[0]) if row.id not in seen]
            seen.update(row.id for row in rows)
            marks = [marks[1], max([marks[1], *seen])]
            seen = {row_id for row_id in seen if row_id > marks[0]}
            if any(row.job_id not in printer.jobs for row in rows):
                await printer.read_steps()
            printer.show(rows)
            sys.stdout.flush()
            if done:
                printer.end()
                return 0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(presses.event.wait(), 0.5)
            if presses.is_set():
                printer.end()
                return 130


class _LogPrinter:
    """Prints log rows under a heading per step attempt and stream, as `tail` does per file."""

    def __init__(self, engine: AsyncEngine, run_id: str, step: str | None) -> None:
        self.engine, self.run_id, self.step = engine, run_id, step
        self.jobs: dict[int, JobRow] = {}
        self.prefixes: dict[str, str] = {}
        self.heading: tuple[int, str] | None = None
        self.at_line_start = True

    async def read_steps(self) -> None:
        """Read the run's step attempts (again: new ones appear while it runs)."""
        self.jobs = {job.id: job for job in await self.engine.jobs(self.run_id)}
        self.prefixes = await tree_prefixes(self.engine, self.run_id)

    def label(self, job_id: int) -> str:
        job = self.jobs.get(job_id)
        return "?" if job is None else self.prefixes.get(job.run_id, "") + job.step_id

    def check_step(self) -> None:
        """Refuse a `--step` that names none of the run's steps."""
        known = {self.label(job_id) for job_id in self.jobs}
        known |= {job.step_id for job in self.jobs.values()}
        if self.step not in known:
            raise TidemillError(
                f"Run {self.run_id} has no step {self.step!r}.",
                hint=f"Its steps: {', '.join(sorted(known)) or 'none yet'}.",
            )

    def show(self, rows: list[LogRow]) -> bool:
        """Print the rows (of `step` only, when given); True when any was printed."""
        shown = False
        for row in rows:
            job = self.jobs.get(row.job_id)
            if self.step is not None and (
                job is None or self.step not in (self.label(row.job_id), job.step_id)
            ):
                continue
            shown = True
            if (row.job_id, row.stream) != self.heading:
                self.heading = (row.job_id, row.stream)
                attempt = f", attempt {job.attempt}" if job is not None and job.attempt > 1 else ""
                self.end()
                print(f"==> {self.label(row.job_id)} ({row.stream}{attempt}) <==")
            sys.stdout.write(row.body)
            self.at_line_start = row.body.endswith("\n")
        return shown

    def end(self) -> None:
        """End a line a step left unfinished (a piece stored mid-line)."""
        if not self.at_line_start:
            sys.stdout.write("\n")
            self.at_line_start = True


async def _usage(engine: AsyncEngine, args: argparse.Namespace) -> int:
    info = await engine.get(args.run_id)
    calls = await engine.usage(info.id)
    prefixes = await tree_prefixes(engine, info.id)
    for call in calls:
        call["path"] = prefixes.get(call["run_id"], "") + call["step_id"]
    priced = [call["cost_usd"] for call in calls if call["cost_usd"] is not None]
    unpriced = sum(1 for call in calls if call["cost_usd"] is None and call["error"] is None)
    totals = {
        "calls": len(calls),
        "failed_calls": sum(1 for call in calls if call["error"] is not None),
        "input_tokens": sum(call["input_tokens"] for call in calls),
        "output_tokens": sum(call["output_tokens"] for call in calls),
        "cost_usd": sum(priced) if priced or not unpriced else None,
        "unpriced_calls": unpriced,
    }
    if args.json:
        print(dump_json({"run_id": info.id, "calls": calls, "totals": totals}))
        return 0
    if not calls:
        print(f"run {info.id}: no model calls", file=sys.stderr)
        return 0
    rows = [
        [
            call["path"],
            str(call["attempt"]),
            call["model"],
            call["provider"],
            str(call["input_tokens"]),
            str(call["output_tokens"]),
            _cost(call["cost_usd"], failed=call["error"] is not None),
            f"{call['latency_ms']:.0f}ms",
            first_line(call["error"] or ""),
        ]
        for call in calls
    ]
    headers = ["STEP", "ATTEMPT", "MODEL", "PROVIDER", "IN", "OUT", "COST", "LATENCY", "ERROR"]
    print(table(headers, rows))
    cost = "unpriced" if totals["cost_usd"] is None else _cost(totals["cost_usd"])
    if totals["cost_usd"] is not None and unpriced:
        cost += f" + {unpriced} unpriced call(s)"
    failed = f" ({totals['failed_calls']} failed)" if totals["failed_calls"] else ""
    print(
        f"total  {len(calls)} call(s){failed}, {totals['input_tokens']} in + "
        f"{totals['output_tokens']} out tokens, {cost}"
    )
    return 0


def _cost(cost: float | None, *, failed: bool = False) -> str:
    if cost is None:
        return "-" if failed else "unpriced"
    return f"${cost:.6f}".rstrip("0").rstrip(".") if cost else "$0"


async def _cancel(engine: AsyncEngine, args: argparse.Namespace) -> int:
    info = await engine.cancel(args.run_id)
    print(f"run {info.id} {info.status}")
    return 0


async def _retry(engine: AsyncEngine, args: argparse.Namespace) -> int:
    info = await engine.retry(args.run_id)
    if not args.wait:
        print(f"run {info.id} {info.status} again from its failed steps")
        print(
            f"  execute it:  tidemill worker{db_option(args)}\n"
            f"  watch it:    tidemill runs show {info.id}{db_option(args)}",
            file=sys.stderr,
        )
        return 0
    follower = Follower(engine, info.id, args)
    await follower.prime()
    follower.say(f"run {info.id} of flow {info.flow!r} retried from its failed steps")
    return await follow(
        engine, follower, concurrency=args.concurrency, models=ModelOptions.of(args)
    )
