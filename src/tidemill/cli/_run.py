"""`tidemill run`: run a flow here, with live progress; `--detach` only submits it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidemill.cli._aliases import ModelOptions, add_model_alias_option
from tidemill.cli._common import (
    Painter,
    add_db_option,
    db_option,
    db_url,
    dump_json,
    duration,
    error_line,
    failed_step,
    job_duration,
    parse_input,
    positive_int,
    read_inputs,
    stamp,
    tree_prefixes,
)
from tidemill.cli._times import at_time
from tidemill.errors import ConfigurationError

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine, RunInfo, Wait
    from tidemill.flows import Flow
    from tidemill.store import ApprovalRow, JobRow

__all__ = [
    "Follower",
    "follow",
    "hint_line",
    "interrupts",
    "load_flow",
    "register",
    "run",
    "wait_for_run",
]

_EPILOG = """\
Each -i value is read as JSON when it is JSON, else as a string:
  -i n=3 (a number)  -i name=bob (a string)  -i tags='["a","b"]' (a list)

Progress goes to stderr and the result, as JSON, to stdout:
  tidemill run flow.yaml -i n=3 | jq .

A workspace flow runs by its path, as deployed or as your draft:
  tidemill run f/support/triage -i ticket=42    tidemill run f/support/triage --draft

exit status: 0 the run succeeded, 1 it failed or was cancelled,
2 bad flow, input or options, 130 interrupted (the run stays in the store).
"""

_GRACE = 10.0
"""Seconds an interrupted `run` waits for its running steps before abandoning them."""

_LOG_TAIL = 10

_TIMED_OUT = 124
"""The exit status of `runs wait` when its timeout passed first (as `timeout(1)` exits)."""

_REQUEST_KINDS = {
    "approval": "approval",
    "tool_call": "approval",
    "question": "question",
    "budget": "budget",
    "reconcile": "reconciliation",
}
"""How a request to a person is named in progress lines, by its wait's kind."""


def hint_line(error: Mapping[str, Any] | None, prefix: str = "") -> str:
    """`prefix` and the hint a stored error carries (`hint: ...`), or nothing.

    Examples:
        >>> hint_line({"type": "E", "message": "m", "hint": "Set X."}, "  ")
        '  hint: Set X.'
        >>> hint_line({"type": "E", "message": "m"})
        ''
    """
    hint = str((error or {}).get("hint") or "").strip()
    return f"{prefix}hint: {hint}" if hint else ""


def _decision(row: ApprovalRow) -> str:
    """How a request to a person ended, in a word or few: `approved`, `answered`, `extended to 4`.

    A budget's and a reconciliation's decision is the engine's own comment on it.
    """
    if row.kind == "question" and row.status == "approved":
        return "answered"
    if row.kind in ("budget", "reconcile") and row.status != "expired" and row.comment:
        return row.comment
    return row.status


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `run` command; return the function that runs it."""
    parser = subparsers.add_parser(
        "run",
        help="run a flow, showing its steps as they go",
        description="Validate a flow, submit it as a run and execute it with a worker in\n"
        "this process, showing each step as it starts and ends.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "flow", metavar="FLOW",
        help="the flow file (YAML or JSON), or a workspace flow's path (f/<folder>/<name>)",
    )  # fmt: skip
    parser.add_argument(
        "-i",
        "--input",
        dest="inputs",
        metavar="KEY=VALUE",
        type=parse_input,
        action="append",
        default=[],
        help="one input field (repeatable); the value is JSON or else a string",
    )
    parser.add_argument(
        "--input-file",
        metavar="JSON",
        default=None,
        help="a file holding the input as a JSON object (- for stdin); -i fields override it",
    )
    add_db_option(parser)
    add_model_alias_option(parser)
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=4,
        metavar="N",
        help="steps run at once by this process's worker (default: %(default)s)",
    )
    parser.add_argument(
        "--detach",
        action="store_true",
        help="only submit the run and print its id; a `tidemill worker` executes it",
    )
    parser.add_argument("--at", type=at_time, metavar="TIME",
                        help="run later (implies --detach): ISO 8601, or +10m")  # fmt: skip
    parser.add_argument("--draft", action="store_true", help="run your draft of a workspace flow")
    parser.add_argument(
        "--memory-id",
        metavar="KEY",
        help="the run's memory id: the conversation its window-memory agent steps recall "
        "and extend (a key scoped to this flow, or a UUID)",
    )
    parser.add_argument("--as", dest="actor", metavar="USER",
                        help="run as this user (workspace admins only)")  # fmt: skip
    parser.add_argument("--workspace", metavar="NAME", help="the workspace (default: default)")
    return run


def load_flow(path: str) -> Flow:
    """Load and validate a flow file.

    Raises:
        ConfigurationError: No such file.
        FlowValidationError: The flow is malformed (every problem is listed).
    """
    from tidemill.flows import Flow

    if not Path(path).is_file():
        raise ConfigurationError(
            f"No flow file {path}.", hint="Give the path of a flow's YAML or JSON file."
        )
    return Flow.load(path)


def run(args: argparse.Namespace) -> int:
    """Run the flow; return 0 (succeeded), 1 (failed or cancelled) or 130 (interrupted)."""
    from tidemill.cli._ws import is_workspace_target, submit_flow

    inputs = read_inputs(args.inputs, args.input_file)
    by_path = is_workspace_target(args.flow)
    if args.draft and not by_path:
        raise ConfigurationError(
            f"--draft runs a draft of a workspace flow; {args.flow} is not a workspace path.",
            hint="Name the flow by its path, e.g. tidemill run f/support/triage --draft",
        )
    flow = None if by_path else load_flow(args.flow)
    from tidemill.engine import AsyncEngine

    async def main() -> int:
        engine = AsyncEngine(db_url(args))
        try:
            await engine.__aenter__()
            run_id, label = await submit_flow(engine, args, flow, inputs)
            if args.detach or args.at is not None:
                print(run_id)
                option = db_option(args)
                when = "" if args.at is None else f" to start at {stamp(args.at)}"
                print(
                    f"submitted run {run_id} of flow {label}{when}\n"
                    f"  execute it:  tidemill worker{option}\n"
                    f"  watch it:    tidemill runs show {run_id}{option}",
                    file=sys.stderr,
                )
                return 0
            follower = Follower(engine, run_id, args)
            follower.say(f"run {run_id} of flow {label} started")
            models = ModelOptions.of(args)
            return await follow(engine, follower, concurrency=args.concurrency, models=models)
        finally:
            await engine.close()

    return asyncio.run(main())


async def follow(
    engine: AsyncEngine,
    follower: Follower,
    *,
    concurrency: int,
    models: ModelOptions | None = None,
) -> int:
    """Execute a run with a worker in this process, showing its progress, until it ends.

    The worker executes that run and the runs it spawns, nothing else of the
    store (other runs are for `tidemill worker`). Prints the result as JSON on
    stdout when the run succeeds; returns the exit status (0 succeeded, 1
    failed or cancelled, 130 interrupted).
    """
    from tidemill.engine import Worker

    changed = asyncio.Event()

    def on_event(kind: str, job: JobRow) -> None:
        changed.set()

    worker = Worker(
        engine.store,
        concurrency=concurrency,
        defs=engine.defs,
        engine=engine,
        poll=0.5,
        on_event=on_event,
        run_id=follower.run_id,
    )
    if models is not None:
        worker.models = models.apply(worker.models)  # --models, --model-alias
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    with interrupts() as presses:
        try:
            info = await follower.watch(changed, presses, task)
        except BaseException:
            stop.set()
            with contextlib.suppress(Exception):
                await _stop(task, presses, abandon=True)
            raise
        stop.set()
        running = sum(1 for status in follower.seen.values() if status == "running")
        if presses.is_set() and running and not task.done():
            follower.say(
                f"interrupted: waiting up to {_GRACE:.0f} s for {running} running "
                "step(s) to finish (Ctrl-C again to abandon them)"
            )
        await _stop(task, presses)
    if info is None:
        follower.say(
            f"interrupted: run {follower.run_id} stays in the store; a worker can continue it "
            "(a step left running is taken over once its lease runs out):\n"
            f"  tidemill worker{follower.db}\n"
            f"  tidemill runs show {follower.run_id}{follower.db}"
        )
        return 130
    return await follower.finish(info)


async def wait_for_run(engine: AsyncEngine, args: argparse.Namespace) -> int:
    """`tidemill runs wait`: wait for a run to end, with no worker here; print its result.

    Shows its steps as they change and its pending requests to people, then
    reports the end as `tidemill run` does. Returns 0 (succeeded), 1 (failed
    or cancelled), 124 (`args.timeout` passed first) or 130 (interrupted).
    """
    info = await engine.get(args.run_id)
    follower = Follower(engine, info.id, args, timed=False)
    if info.done:
        return await follower.finish(info)
    follower.say(
        f"waiting for run {info.id} of flow {info.flow!r} to end; it is {info.status} "
        "(Ctrl-C stops waiting, not the run)"
    )
    await follower.prime(requests=True)
    until = None if args.timeout is None else time.monotonic() + args.timeout
    with interrupts() as presses:
        ended = await follower.watch(asyncio.Event(), presses, None, until=until)
    if ended is not None:
        return await follower.finish(ended)
    status = (await engine.get(info.id)).status
    if presses.is_set():
        follower.say(f"interrupted: run {info.id} is {status}; it goes on")
        return 130
    follower.say(
        f"run {info.id} is still {status} after {duration(args.timeout)}; it goes on\n"
        f"  what it waits for:  tidemill runs why {info.id}{follower.db}"
    )
    return _TIMED_OUT


async def _stop(task: asyncio.Task[None], presses: _Presses, *, abandon: bool = False) -> None:
    """Wait for the worker to finish its steps; cancel them on a second Ctrl-C or after a grace.

    The worker was told to stop; `abandon` cancels its steps at once. A
    cancelled step stays claimed until its lease runs out; then any worker
    takes it over.
    """
    deadline = time.monotonic() + _GRACE
    while not task.done():
        late = presses.is_set() and time.monotonic() > deadline
        if abandon or presses.count > 1 or late:
            task.cancel()
        await asyncio.wait({task}, timeout=0.1)
    if not task.cancelled():
        error = task.exception()
        if error is not None:
            raise error


class _Presses:
    """How many times Ctrl-C (or SIGTERM) was pressed."""

    def __init__(self) -> None:
        self.count = 0
        self.event = asyncio.Event()

    def press(self) -> None:
        self.count += 1
        self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()


@contextlib.contextmanager
def interrupts() -> Iterator[_Presses]:
    """Count SIGINT and SIGTERM in the running loop instead of raising `KeyboardInterrupt`."""
    presses = _Presses()
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, presses.press)
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread; Windows
            continue
        installed.append(sig)
    try:
        yield presses
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


class Follower:
    """Shows a run's steps on stderr as they start and end, and its requests to people."""

    def __init__(
        self, engine: AsyncEngine, run_id: str, args: argparse.Namespace, *, timed: bool = True
    ) -> None:
        self.engine = engine
        self.run_id = run_id
        self.db = db_option(args)
        self.seen: dict[int, str] = {}
        self.prefixes: dict[str, str] = {}
        self.requests: dict[int, dict[str, Wait]] = {}
        """The requests to people each parked job made, by approval id (as `runs why` has them)."""
        self.shown: set[str] = set()
        self.started = time.monotonic()
        self.timed = timed
        """True: the end says how long this process followed it; False: how long the run took."""
        self.said_queued = False
        self.paint = Painter(sys.stderr)

    async def prime(self, *, requests: bool = False) -> None:
        """Take the steps as they stand as seen: show only what changes from now on.

        With `requests`, show the pending requests to people of the parked steps first.
        """
        self.prefixes = await tree_prefixes(self.engine, self.run_id)
        jobs = await self.engine.jobs(self.run_id)
        self.seen = {job.id: job.status for job in jobs}
        if not requests:
            return
        await self._read_requests()
        for job in jobs:
            label = self.prefixes.get(job.run_id, "") + job.step_id
            for approval_id, wait in self.requests.get(job.id, {}).items():
                if job.status == "waiting" and approval_id not in self.shown:
                    self.shown.add(approval_id)
                    self.say(self._request(label, wait))

    def say(self, text: str) -> None:
        """Write a line of progress to stderr."""
        print(text, file=sys.stderr, flush=True)

    async def watch(
        self,
        changed: asyncio.Event,
        presses: _Presses,
        worker: asyncio.Task[None] | None,
        *,
        until: float | None = None,
    ) -> RunInfo | None:
        """Show progress until the run ends (its info), or None: Ctrl-C, or `until` passed.

        `worker` is this process's worker, if it has one; `until` a `time.monotonic()`.
        """
        while True:
            changed.clear()
            jobs = await self.engine.jobs(self.run_id)
            info = await self.engine.get(self.run_id)
            if info.done:
                jobs = await self.engine.jobs(self.run_id)
            await self.show(jobs)
            if info.done:
                return info
            if info.status == "queued" and not self.said_queued:
                gated = await self.engine.waits(self.run_id)
                if any(wait.kind == "concurrency" for wait in gated):
                    self.said_queued = True
                    self.say(
                        "  queued: the flow's concurrency limit is reached; waiting for a slot"
                    )
            if worker is not None and worker.done():
                worker.result()  # raises what stopped the worker
                raise RuntimeError("The worker stopped before the run ended.")
            if until is not None and time.monotonic() >= until:
                return None
            waits: set[asyncio.Future[Any]] = {
                asyncio.ensure_future(changed.wait()),
                asyncio.ensure_future(presses.event.wait()),
            }
            pause = 0.5 if until is None else max(0.0, min(0.5, until - time.monotonic()))
            others = set() if worker is None else {worker}
            await asyncio.wait(waits | others, timeout=pause, return_when=asyncio.FIRST_COMPLETED)
            for future in waits:
                future.cancel()
            if presses.is_set():
                return None

    async def show(self, jobs: list[JobRow]) -> None:
        """Print what changed since the last look, in the order it happened."""
        if any(job.run_id not in self.prefixes for job in jobs):
            self.prefixes = await tree_prefixes(self.engine, self.run_id)
        parked = [j for j in jobs if j.status == "waiting" and self.seen.get(j.id) != "waiting"]
        if parked:
            await self._read_requests()
        events: list[tuple[tuple[float, int, int], str]] = []
        for job in jobs:
            before = self.seen.get(job.id)
            if before == job.status:
                continue
            self.seen[job.id] = job.status
            events.extend(await self._changed(job, before))
        events.sort(key=lambda event: event[0])
        for _, text in events:
            self.say(text)

    async def _changed(
        self, job: JobRow, before: str | None
    ) -> list[tuple[tuple[float, int, int], str]]:
        """The lines a job's change of status calls for, each with its place in time.

        Changes recorded in one transaction share a time: then ends come before
        starts, a nested step ends before its container, and a step starts before
        the steps nested in it.
        """
        label = self.prefixes.get(job.run_id, "") + job.step_id
        attempt = f"  (attempt {job.attempt})" if job.attempt > 1 else ""
        status = job.status
        start_at = job.started_at or job.created_at
        end_at = max(job.finished_at or time.time(), start_at)
        began = (start_at, 1, job.id)
        ended = (end_at, 0 if end_at > start_at else 2, -job.id)
        events: list[tuple[tuple[float, int, int], str]] = []
        if status in ("running", "waiting") and before not in ("running", "waiting"):
            events.append((began, self._line("started", label + attempt)))
        if status == "waiting":
            for approval_id, wait in self.requests.get(job.id, {}).items():
                if approval_id not in self.shown:
                    self.shown.add(approval_id)
                    events.append((began, self._request(label, wait)))
        elif status in ("succeeded", "failed", "skipped"):
            if before is None and status != "skipped":
                events.append((began, self._line("started", label + attempt)))
            detail = f"  {job_duration(job)}{attempt}"
            if status == "failed" and job.error and "step" not in job.error:
                detail += f"  {error_line(job.error)}"  # a container's error is its step's
                detail += hint_line(job.error, "\n" + " " * 13)
            elif job.id in self.requests:
                detail += await self._decided(job.id)
            events.append((ended, self._line(status, label + detail)))
        elif status == "cancelled" and before in ("running", "waiting"):
            events.append((ended, self._line(status, label)))
        return events

    def _line(self, status: str, text: str) -> str:
        return f"  {self.paint(status, width=10)} {text}"

    async def _read_requests(self) -> None:
        """Read the pending requests to people of the run's parked steps, from its waits."""
        for top in await self.engine.waits(self.run_id):
            for wait in top.walk():
                if wait.approval_id is not None and wait.job_id is not None:
                    self.requests.setdefault(wait.job_id, {}).setdefault(wait.approval_id, wait)

    def _request(self, label: str, wait: Wait) -> str:
        """A request to a person: what it asks, who decides, by when, and the commands."""
        what = _REQUEST_KINDS.get(wait.kind, wait.kind)
        text = wait.details.get("message", wait.reason) if wait.kind == "approval" else wait.reason
        lines = [self._line("waiting", f"{label}  {what} {wait.approval_id}: {text}")]
        pad = " " * 13
        if wait.approvers and wait.kind == "approval":  # the other reasons say who decides
            lines.append(f"{pad}approvers: {', '.join(wait.approvers)}")
        if wait.until is not None and wait.then:
            lines.append(f"{pad}in {duration(wait.until - time.time())}, {wait.then}")
        verbs = [f"{command.split()[2]}:" for command in wait.commands]
        width = max((len(verb) for verb in verbs), default=0)
        for verb, command in zip(verbs, wait.commands, strict=True):
            lines.append(f"{pad}{verb:<{width}} {command}{self.db}")
        return "\n".join(lines)

    async def _decided(self, job_id: int) -> str:
        """How the requests of a job were decided: `  (approved by alice)`, `  (extended to 4)`."""
        asked = self.requests.get(job_id, {})
        words = []
        for row in await self.engine.approvals(self.run_id, status=None):
            if row.id in asked and row.status != "pending":
                by = f" by {row.decided_by}" if row.decided_by else ""
                words.append(_decision(row) + by)
        return f"  ({'; '.join(words)})" if words else ""

    async def finish(self, info: RunInfo) -> int:
        """Report how the run ended; print its result; return the exit status."""
        if self.timed or info.finished_at is None:
            took = duration(time.monotonic() - self.started)
        else:
            took = duration(info.finished_at - info.created_at)
        if info.status == "succeeded":
            self.say(f"run {info.id} {self.paint('succeeded')} in {took}")
            print(dump_json(info.result), flush=True)
            return 0
        if info.status == "cancelled":
            self.say(f"run {info.id} was {self.paint('cancelled')}")
            return 1
        await self.report_failure(info)
        return 1

    async def report_failure(self, info: RunInfo) -> None:
        """Name the failed step, its error and the last lines it printed."""
        error = info.error or {}
        prefixes = await tree_prefixes(self.engine, info.id)
        culprit = failed_step(await self.engine.jobs(info.id), prefixes)
        step = error.get("step")
        if culprit is not None:
            step = prefixes.get(culprit.run_id, "") + culprit.step_id
        where = f" at step {step!r}" if step else ""
        self.say(f"run {info.id} {self.paint('failed')}{where}: {error_line(error)}")
        hint = hint_line(error, "  ")
        if hint:
            self.say(hint)
        trace = [line for line in str(error.get("traceback") or "").splitlines() if line.strip()]
        if trace:
            self.say("  traceback (last lines):")
            self.say("\n".join(f"    {line}" for line in trace[-6:]))
        if culprit is not None:
            lines = [
                (log.stream, line)
                for log in await self.engine.logs(info.id)
                if log.job_id == culprit.id
                for line in log.body.splitlines()
            ]
            if lines:
                self.say(f"  its logs (last {min(len(lines), _LOG_TAIL)} lines):")
                self.say("\n".join(f"    {s} | {t}" for s, t in lines[-_LOG_TAIL:]))
        self.say(
            f"  all logs:  tidemill runs logs {info.id}{self.db}\n"
            f"  retry it:  tidemill runs retry {info.id}{self.db}"
        )
