"""`tidemill worker`: execute the runs of a store until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidemill.cli._aliases import ModelOptions, add_model_alias_option
from tidemill.cli._common import (
    add_db_option,
    db_url,
    duration,
    error_line,
    positive_float,
    positive_int,
    run_prefix,
)
from tidemill.cli._times import age_text, run_age

if TYPE_CHECKING:
    from tidemill.engine._metrics import Metrics, MetricsServer
    from tidemill.store import ApprovalRow, JobRow, Store, Tx

__all__ = ["register", "run"]

log = logging.getLogger("tidemill.cli.worker")

_EPILOG = """\
Start as many workers as you like, on as many machines as share the store
(PostgreSQL); each claims jobs under a lease it renews. The first SIGINT or
SIGTERM stops claiming and finishes the steps in hand (for at most --grace
seconds, when given); a second one abandons them, and each is queued again
for another worker to take.

With --metrics-port, the worker serves Prometheus metrics of its AI steps
(tidemill_ai_action_*, tidemill_ai_agent_*) at http://HOST:PORT/metrics.

With --keep-runs, the worker deletes the runs that ended longer ago than that,
on start and every minute (as `tidemill runs prune --older-than` does), and
the events kept for steps to come whose keep ran out. Runs still queued,
running or waiting are never touched.

example:
  tidemill worker --db postgresql://tidemill@db:5432/tidemill --concurrency 8
  tidemill worker --db sqlite:///tidemill.db --metrics-port 9464
  tidemill worker --keep-runs 30d
"""


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `worker` command; return the function that runs it."""
    parser = subparsers.add_parser(
        "worker",
        help="execute the runs of a store until stopped",
        description="Claim and execute the steps of every run in the store until SIGINT\n"
        "or SIGTERM; then finish the steps in hand and exit.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_db_option(parser)
    add_model_alias_option(parser)
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=4,
        metavar="N",
        help="steps run at once (default: %(default)s)",
    )
    parser.add_argument(
        "--grace",
        type=positive_float,
        default=None,
        metavar="S",
        help="after the first SIGINT or SIGTERM, wait at most S seconds for the running steps, "
        "then abandon them (default: wait for them however long)",
    )
    parser.add_argument(
        "--lease",
        type=positive_float,
        default=30.0,
        metavar="S",
        help="seconds a claim lasts unless renewed; another worker takes over a step "
        "whose lease ran out (default: %(default)s)",
    )
    parser.add_argument(
        "--poll",
        type=positive_float,
        default=None,
        metavar="S",
        help="seconds between looks for new work when nothing signals it "
        "(default: 0.25 on SQLite, 1 on PostgreSQL, which signals new work)",
    )
    parser.add_argument(
        "--keep-runs",
        type=run_age,
        default=None,
        metavar="DURATION",
        help="every minute, delete the runs that ended longer ago than this: 30d, 12h, 45m "
        "or seconds (default: keep every run)",
    )
    parser.add_argument(
        "--metrics-port",
        type=_port,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (0 picks a free port; "
        "needs the `metrics` extra); default: no metrics",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address --metrics-port listens on (default: %(default)s)",
    )
    return run


def _port(text: str) -> int:
    """An argparse type: a TCP port, 0 to 65535.

    Examples:
        >>> _port("9464")
        9464
    """
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, not {text!r}")
    return int(text)


def run(args: argparse.Namespace) -> int:
    """Work until stopped; return 0."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger("tidemill")
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        return asyncio.run(_work(args))
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def _work(args: argparse.Namespace) -> int:
    from tidemill.engine import AsyncEngine, Worker

    engine = AsyncEngine(db_url(args))
    server: MetricsServer | None = None
    try:
        await engine.__aenter__()
        metrics = None
        if args.metrics_port is not None:
            metrics, server = _serve_metrics(args.metrics_host, args.metrics_port)
        reporter = _Reporter(engine.store)
        worker = Worker(
            engine.store,
            concurrency=args.concurrency,
            defs=engine.defs,
            engine=engine,
            lease=args.lease,
            poll=args.poll,
            on_event=reporter.event,
            metrics=metrics,
            keep_runs=args.keep_runs,
        )
        worker.models = ModelOptions.of(args).apply(worker.models)  # --models, --model-alias
        stop = asyncio.Event()
        signals = _Signals(stop)
        signals.install()
        task = asyncio.create_task(worker.run(stop))
        log.info(
            "worker %s started on %s (concurrency %d); stop it with Ctrl-C or SIGTERM",
            worker.id,
            engine.url,
            worker.concurrency,
        )
        if args.keep_runs is not None:
            log.info("pruning the runs that ended more than %s ago, every minute",
                     age_text(args.keep_runs))  # fmt: skip
        grace_ends: float | None = None
        try:
            while True:
                waiter = asyncio.ensure_future(signals.pressed.wait())
                left = None if grace_ends is None else max(0.0, grace_ends - time.monotonic())
                await asyncio.wait(
                    {task, waiter}, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                waiter.cancel()
                if task.done():
                    break
                if not signals.pressed.is_set():  # the grace period passed
                    log.warning(
                        "stopping: %d step(s) still running after the %gs grace period; "
                        "abandoning them: they are queued again for another worker",
                        len(reporter.running),
                        args.grace,
                    )
                    task.cancel()
                    grace_ends = None
                    continue
                signals.pressed.clear()
                if signals.count == 1 and args.grace is not None:
                    grace_ends = time.monotonic() + args.grace
                if signals.count == 1 and reporter.running:
                    log.info(
                        "stopping: finishing %d running step(s) (signal again to abandon them)",
                        len(reporter.running),
                    )
                elif signals.count == 1:
                    log.info("stopping")
                else:
                    log.warning(
                        "abandoning the running steps: they are queued again for another worker"
                    )
                    task.cancel()
            if not task.cancelled():
                task.result()
        finally:
            signals.remove()
            await reporter.drain()
        log.info("worker %s stopped after %d step(s)", worker.id, worker.processed)
        return 0
    finally:
        if server is not None:
            server.close()
        await engine.close()


def _serve_metrics(host: str, port: int) -> tuple[Metrics, MetricsServer]:
    """A `Metrics` of this worker's own, served at `http://host:port/metrics`."""
    from tidemill.engine._metrics import Metrics, serve
    from tidemill.errors import ConfigurationError

    metrics = Metrics()
    try:
        server = serve(metrics, port, host)
    except OSError as exc:
        raise ConfigurationError(
            f"Cannot serve metrics on {host}:{port}: {exc.strerror or exc}.",
            hint="Pick another --metrics-port (or --metrics-host).",
        ) from exc
    log.info("serving metrics at http://%s:%d/metrics", host, server.port)
    return metrics, server


class _Signals:
    """Counts SIGINT and SIGTERM; the first sets `stop`."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.count = 0
        self.pressed = asyncio.Event()
        self._installed: list[signal.Signals] = []

    def _press(self) -> None:
        self.count += 1
        self.stop.set()
        self.pressed.set()

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._press)
            except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
                continue
            self._installed.append(sig)

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._installed:
            loop.remove_signal_handler(sig)


class _Reporter:
    """Logs each step a worker starts and ends, with its path in the run and its outcome."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.running: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._last: asyncio.Task[None] | None = None

    def event(self, kind: str, job: JobRow) -> None:
        if kind == "claimed":
            self.running.add(job.id)
        else:
            self.running.discard(job.id)
        task = asyncio.get_running_loop().create_task(self._log(kind, job, self._last))
        self._last = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _log(self, kind: str, job: JobRow, before: asyncio.Task[None] | None) -> None:
        if before is not None and not before.done():
            await asyncio.wait({before})  # one line after the other, in the order of events
        try:
            current, label, root, approval = await self.store.transact(
                lambda tx: _describe(tx, job)
            )
        except Exception as exc:  # a log line is never worth stopping the worker for
            log.warning("job %s (%s): %s", job.id, job.step_id, exc)
            return
        attempt = f" (attempt {job.attempt})" if job.attempt > 1 else ""
        if kind == "claimed":
            log.info("run %s: %s started%s", root, label, attempt)
            return
        status = current.status if current is not None else "gone"
        took = ""
        if current is not None and current.finished_at is not None:
            took = " in " + duration(current.finished_at - (current.started_at or time.time()))
        detail = ""
        if current is not None and status == "failed" and current.error:
            if "step" not in current.error:  # a container fails with its nested step's error
                detail = f": {error_line(current.error)}"
                hint = str(current.error.get("hint") or "").strip()
                detail += f" (hint: {hint})" if hint else ""
        elif status == "waiting":
            detail = (
                f" for approval {approval.id}: {approval.message}"
                if approval is not None
                else " for its branches"
            )
        elif status == "running":
            detail = " elsewhere (this worker lost its lease)"
        level = logging.WARNING if status == "failed" else logging.INFO
        log.log(level, "run %s: %s %s%s%s%s", root, label, status, took, attempt, detail)

    async def drain(self) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)


def _describe(tx: Tx, job: JobRow) -> tuple[JobRow | None, str, str, ApprovalRow | None]:
    """The job as stored now, its path in the run, its top-level run, its pending approval."""
    current = tx.job(job.id)
    run = tx.run(job.run_id)
    if run is None:
        return current, job.step_id, job.run_id, None
    approval = None
    if current is not None and current.status == "waiting":
        pending = tx.approvals(root_id=run.root_id)
        approval = next((a for a in pending if a.job_id == job.id), None)
    return current, run_prefix(run, tx.run) + job.step_id, run.root_id, approval
