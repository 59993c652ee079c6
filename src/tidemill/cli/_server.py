"""`tidemill server`: serve the HTTP API (and a worker) until stopped."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable

from tidemill.cli._common import add_db_option, db_url, positive_float, positive_int
from tidemill.cli._copilot import MODEL_ENV
from tidemill.cli._times import run_age
from tidemill.cli._worker import _port
from tidemill.errors import InvalidOption

__all__ = ["register", "run"]

_EPILOG = """\
On first start of a new workspace, you (TIDEMILL_USER, else your login name)
become its first admin; make a token with `tidemill ws tokens create NAME` and
send it as `Authorization: Bearer <token>`, or set a password for the browser
with `tidemill ws password`. The API's docs are at http://HOST:PORT/docs.

examples:
  tidemill server
  tidemill server --db postgresql://tidemill@db:5432/tidemill --no-worker --host 0.0.0.0
  tidemill server --keep-runs 30d     # its worker deletes the runs that ended over 30 days ago
"""


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `server` command; return the function that runs it."""
    parser = subparsers.add_parser(
        "server",
        help="serve the HTTP API (and a worker) until stopped",
        description="Serve the workspace and the engine over HTTP: a JSON API with an\n"
        "OpenAPI document, sign-in and tokens, with a worker in the same process.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_db_option(parser)
    parser.add_argument(
        "--workspace", metavar="NAME", default="default",
        help="the workspace to serve (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--host", default="127.0.0.1", metavar="HOST",
        help="the address to listen on (default: %(default)s, this machine only)",
    )  # fmt: skip
    parser.add_argument(
        "--port", type=_port, default=8000, metavar="PORT",
        help="the port to listen on (default: %(default)s; 0 picks a free one)",
    )  # fmt: skip
    parser.add_argument(
        "--no-worker", dest="worker", action="store_false",
        help="run no worker here (`tidemill worker` processes execute the runs)",
    )  # fmt: skip
    parser.add_argument(
        "--concurrency", type=positive_int, default=4, metavar="N",
        help="steps the in-process worker runs at once (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--lease", type=positive_float, default=30.0, metavar="S",
        help="seconds the in-process worker's claim on a step lasts unless renewed; after a "
        "crash the step is taken over once it runs out (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--keep-runs", type=run_age, default=None, metavar="DURATION",
        help="the in-process worker deletes, every minute, the runs that ended longer ago than "
        "this: 30d, 12h, 45m or seconds (default: keep every run; not with --no-worker)",
    )  # fmt: skip
    parser.add_argument(
        "--secure-cookies", action="store_true",
        help="mark the session cookie Secure (behind HTTPS)",
    )  # fmt: skip
    parser.add_argument(
        "--copilot-model", metavar="SPEC", default=None,
        help="the model of the copilot's chat API, e.g. openai:gpt-4o (default: "
        "$TIDEMILL_COPILOT_MODEL; none: each request names one)",
    )  # fmt: skip
    return run


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM."""
    from tidemill.server import ServerConfig, serve

    if args.keep_runs is not None and not args.worker:
        raise InvalidOption(
            "--keep-runs prunes runs from the server's worker, and --no-worker runs none.",
            hint="Give --keep-runs to a `tidemill worker` on this store instead, "
            "or drop --no-worker.",
        )
    config = ServerConfig(
        db=db_url(args),
        workspace=args.workspace,
        worker=args.worker,
        concurrency=args.concurrency,
        lease=args.lease,
        keep_runs=args.keep_runs,
        secure_cookies=args.secure_cookies,
        copilot_model=args.copilot_model or os.environ.get(MODEL_ENV) or None,
    )

    def ready(url: str, first_admin: str | None) -> None:
        print(
            f"Tidemill server at {url} (web UI: {url}/, API docs: {url}/docs); Ctrl-C stops it.",
            flush=True,
        )
        if first_admin is not None:
            print(
                f"New workspace {args.workspace!r}: {first_admin} is its first admin.\n"
                f"  Make a token:   tidemill ws tokens create laptop --db {config.db}\n"
                f"  Or a password:  tidemill ws password --db {config.db}",
                flush=True,
            )
        if not args.worker:
            print("No worker here: run `tidemill worker` on this store.", file=sys.stderr)

    asyncio.run(serve(config, host=args.host, port=args.port, on_ready=ready))
    return 0
