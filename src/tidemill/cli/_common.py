"""What the store commands share: the `--db` option, `-i` inputs, tables, times, colors."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import re
import shlex
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from tidemill.cli._ids import resolve_ids
from tidemill.errors import ConfigurationError, FlowInputError, StoreError

if TYPE_CHECKING:
    from tidemill.engine import AsyncEngine, RunInfo
    from tidemill.store import ApprovalRow, JobRow, RunRow

__all__ = [
    "DB_ENV",
    "Painter",
    "add_db_option",
    "approval_dict",
    "db_option",
    "db_url",
    "dump_json",
    "duration",
    "error_line",
    "failed_step",
    "first_line",
    "info_dict",
    "job_dict",
    "job_duration",
    "parse_input",
    "positive_float",
    "positive_int",
    "quoting_hint",
    "read_inputs",
    "require_store",
    "run_prefix",
    "stamp",
    "table",
    "tree_prefixes",
    "with_engine",
]

T = TypeVar("T")

DB_ENV = "TIDEMILL_DB"
"""The environment variable naming the store when `--db` is not given."""


# --- the store ---------------------------------------------------------------------------


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """Add `--db URL` (default: `$TIDEMILL_DB`, else the embedded SQLite file)."""
    parser.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help=f"the store: sqlite:///path.db or postgresql://... "
        f"(default: ${DB_ENV}, else sqlite:///.tidemill/tidemill.db)",
    )


def db_url(args: argparse.Namespace) -> str:
    """The store URL the command should use.

    Examples:
        >>> db_url(argparse.Namespace(db="sqlite:///t.db"))
        'sqlite:///t.db'
    """
    from tidemill.store import DEFAULT_URL

    given: str | None = getattr(args, "db", None)
    return given or os.environ.get(DB_ENV) or DEFAULT_URL


def db_option(args: argparse.Namespace) -> str:
    """` --db URL` for commands printed as hints, so they reach the same store elsewhere.

    A relative SQLite path is made absolute (another terminal may be in another
    directory); a URL taken from the environment is written as `"$TIDEMILL_DB"`.

    Examples:
        >>> db_option(argparse.Namespace(db="sqlite:////tmp/t.db"))
        ' --db sqlite:////tmp/t.db'
    """
    given: str | None = getattr(args, "db", None)
    if not given and os.environ.get(DB_ENV):
        return f' --db "${DB_ENV}"'
    url = db_url(args)
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        url = "sqlite:///" + str(Path(url.removeprefix("sqlite:///")).resolve())
    return f" --db {shlex.quote(url)}"


def require_store(args: argparse.Namespace) -> str:
    """The store URL the command should use, checked to name a store that exists.

    Commands that read or act on what a store holds (`runs`, `approvals`, `db
    status`) create no store: a SQLite file that does not exist holds nothing,
    and the likely cause is a mistyped path or another working directory.
    PostgreSQL URLs are returned as they are (the server says what is wrong).

    Raises:
        StoreError: The SQLite file does not exist; the message names its path
            and how the URL was chosen, the hint how a relative path is read.
        ConfigurationError: The URL is not a store URL.

    Examples:
        >>> require_store(argparse.Namespace(db="postgresql://db/tidemill"))
        'postgresql://db/tidemill'
    """
    from tidemill.store import DEFAULT_URL, StoreURL

    url = db_url(args)
    path = StoreURL.parse(url).path
    if path is None or path.exists():
        return url
    if getattr(args, "db", None):
        source = f"from --db {url}"
    elif os.environ.get(DB_ENV):
        source = f"from ${DB_ENV}"
    else:
        source = f"the default store: --db not given and ${DB_ENV} not set"
    hint = ""
    if not path.is_absolute() and url != DEFAULT_URL:
        hint = (
            f"{url} is a relative path (three slashes): {path} under the current directory. "
            f"For the absolute path /{path}, write four slashes: sqlite:////{path}. "
        )
    hint += (
        "A store is created by `tidemill run`, `tidemill worker` or `tidemill db upgrade`; "
        f"to read another one, pass --db URL or set ${DB_ENV}."
    )
    raise StoreError(
        f"No store at {path.absolute()} ({source}).",
        hint=hint,
        context={"url": url, "path": str(path.absolute())},
    )


def with_engine(
    args: argparse.Namespace,
    action: Callable[[AsyncEngine], Awaitable[T]],
    *,
    migrate: bool | None = None,
) -> T:
    """Open the store named by `args`, run `action` on it, close it; return what it returned.

    The store must exist (see `require_store`): the commands that use this act
    on runs and approvals already stored. The ids they were given may be
    unique prefixes; `resolve_ids` puts the whole ids in `args` first.
    """
    from tidemill.engine import AsyncEngine

    url = require_store(args)

    async def main() -> T:
        engine = AsyncEngine(url, migrate=migrate)
        try:
            await engine.__aenter__()
            await resolve_ids(engine, args)
            return await action(engine)
        finally:
            await engine.close()

    return asyncio.run(main())


# --- inputs -------------------------------------------------------------------------------


def _no_constants(name: str) -> Any:
    raise ValueError(name)


def parse_input(text: str) -> tuple[str, Any]:
    """Read one `-i KEY=VALUE`: the value as JSON when it is JSON, else as a string.

    Raises:
        argparse.ArgumentTypeError: Without an `=` or without a key.

    Examples:
        >>> parse_input("n=3"), parse_input("name=bob"), parse_input('tags=["a"]')
        (('n', 3), ('name', 'bob'), ('tags', ['a']))
        >>> parse_input("id=007"), parse_input("empty="), parse_input("x=NaN")
        (('id', '007'), ('empty', ''), ('x', 'NaN'))
        >>> parse_input("oops")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: expected KEY=VALUE, e.g. -i n=3 or -i name=bob, not 'oops'
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE, e.g. -i n=3 or -i name=bob, not {text!r}"
        )
    try:
        parsed: Any = json.loads(value, parse_constant=_no_constants)
    except ValueError:
        parsed = value
    return key, parsed


def read_inputs(pairs: Sequence[tuple[str, Any]], file: str | None) -> dict[str, Any]:
    """The run's input: the JSON object in `file` (`-` for stdin), then each `-i` over it.

    Raises:
        ConfigurationError: The file is missing, is not JSON, or holds no object.

    Examples:
        >>> read_inputs([("n", 3), ("n", 4), ("s", "x")], None)
        {'n': 4, 's': 'x'}
    """
    inputs: dict[str, Any] = {}
    if file is not None:
        hint = 'Pass a file holding one JSON object, e.g. {"n": 3}.'
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text("utf-8")
        except OSError as exc:
            raise ConfigurationError(
                f"Cannot read the input file {file}: {exc.strerror or exc}.", hint=hint
            ) from exc
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise ConfigurationError(
                f"The input file {file} is not JSON: {exc}.", hint=hint
            ) from exc
        if not isinstance(loaded, dict):
            raise ConfigurationError(
                f"The input file {file} holds a {type(loaded).__name__}, not a JSON object.",
                hint=hint,
            )
        inputs.update(loaded)
    inputs.update(pairs)
    return inputs


def quoting_hint(error: FlowInputError, pairs: Sequence[tuple[str, Any]]) -> str | None:
    """How to pass as text the `-i` values that were read as JSON where the flow wants a string.

    None when no such value is to blame for `error`.

    Examples:
        >>> error = FlowInputError(["$.order_id: 1001 is not of type 'string'"])
        >>> hint = quoting_hint(error, [("order_id", 1001)])
        >>> hint.split(": ", 1)[0]
        '-i reads a value as JSON when it is JSON'
        >>> print(hint.rsplit(": ", 1)[1])
        -i order_id='"1001"'.
        >>> print(quoting_hint(error, [("order_id", "1001")]))
        None
    """
    kinds = {bool: "true or false", int: "a number", float: "a number", list: "a list"}
    fixes = []
    for key, value in pairs:
        if isinstance(value, str):
            continue
        paths = (f"$.{key}: ", f"$['{key}']: ")
        if not any(line.startswith(paths) and "'string'" in line for line in error.errors):
            continue
        text = json.dumps(value, ensure_ascii=False)
        kind = "null" if value is None else kinds.get(type(value), "an object")
        fixes.append(
            f"{key}={text} was read as JSON ({kind}), not as a string. Quote it as a JSON "
            f"string: -i {shlex.quote(key)}={shlex.quote(json.dumps(text, ensure_ascii=False))}."
        )
    if not fixes:
        return None
    return "-i reads a value as JSON when it is JSON: " + " ".join(fixes)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1.

    Examples:
        >>> positive_int("4")
        4
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a positive number of seconds.

    Examples:
        >>> positive_float("0.5")
        0.5
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text!r}")
    return value


# --- where a step sits ----------------------------------------------------------------------


def run_prefix(run: RunRow, lookup: Callable[[str], RunRow | None]) -> str:
    """The path of a run's steps: `""` for a top-level run, `each[2]/` inside a loop.

    Loop iterations and parallel branches carry their index; a branch case
    or a sub-flow does not (it has one body).

    Examples:
        >>> from tidemill.store import RunRow
        >>> def row(id_, parent, scope, index):
        ...     return RunRow(id_, "r", parent, 1 if parent else None, index, scope,
        ...                   "f", "d", "running", None, 0.0, None, None, None)
        >>> runs = {"r": row("r", None, "[]", None)}
        >>> runs["c"] = row("c", "r", '[["each","body"]]', 2)
        >>> runs["g"] = row("g", "c", '[["each","body"],["pick","case:0"]]', 0)
        >>> run_prefix(runs["g"], runs.get)
        'each[2]/pick/'
    """
    parts: list[str] = []
    current: RunRow | None = run
    while current is not None and current.parent_id is not None:
        scope = json.loads(current.scope)
        step, part = scope[-1] if scope else ("?", "")
        indexed = part == "body" or part.startswith("branch:")
        index = current.child_index
        if part.startswith("tool:"):  # a tool call's child run: `agent.lookup`
            parts.append(f"{step}.{part.split(':')[1]}")
        else:
            parts.append(f"{step}[{index}]" if indexed and index is not None else step)
        current = lookup(current.parent_id)
    return "".join(f"{part}/" for part in reversed(parts))


async def tree_prefixes(engine: AsyncEngine, root_id: str) -> dict[str, str]:
    """The step-path prefix of every run in a run's tree, by run id."""
    from tidemill.store import Tx

    def read(tx: Tx) -> list[RunRow]:
        return tx.tree(root_id)

    runs = {run.id: run for run in await engine.store.transact(read)}
    return {run_id: run_prefix(run, runs.get) for run_id, run in runs.items()}


def failed_step(jobs: Iterable[JobRow], prefixes: Mapping[str, str]) -> JobRow | None:
    """The step attempt whose failure failed a run: the last failed one not a container.

    A container (loop, branch) fails with its nested step's error, which names
    the step (`error["step"]`); the nested step's own error does not.
    """
    failed = [j for j in jobs if j.status == "failed" and "step" not in (j.error or {})]
    return max(failed, key=lambda j: (j.finished_at or 0.0, j.id)) if failed else None


# --- showing things ---------------------------------------------------------------------------


def stamp(at: float | None) -> str:
    """A time in the local zone with its offset from UTC, `YYYY-MM-DD HH:MM:SS +HH:MM`, or `-`.

    Examples:
        >>> stamp(None)
        '-'
        >>> len(stamp(0.0)), stamp(0.0)[-6] in "+-"
        (26, True)
    """
    if at is None:
        return "-"
    local = datetime.fromtimestamp(at, tz=UTC).astimezone()
    offset = local.strftime("%z")  # +0530: the offset's seconds, if any, are left out
    return f"{local:%Y-%m-%d %H:%M:%S} {offset[:3]}:{offset[3:5]}"


def duration(seconds: float | None) -> str:
    """A short duration: `0.05s`, `3.2s`, `2m05s`, `1h02m`.

    Examples:
        >>> [duration(s) for s in (0.049, 3.24, 125, 3720, None)]
        ['0.05s', '3.2s', '2m05s', '1h02m', '-']
    """
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def job_duration(job: JobRow) -> str:
    """How long a job ran, or `-` when it has not started."""
    if job.started_at is None:
        return "-"
    if job.finished_at is None:
        return "-"
    return duration(job.finished_at - job.started_at)


def first_line(text: str) -> str:
    r"""The first non-blank line of `text`.

    Examples:
        >>> first_line("\n  bad data\nmore")
        'bad data'
    """
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def error_line(error: Mapping[str, Any] | None) -> str:
    r"""A stored error as `Type: first line of the message`.

    Examples:
        >>> error_line({"type": "ValueError", "message": "bad data\nat line 3"})
        'ValueError: bad data'
    """
    if not error:
        return ""
    kind = str(error.get("type") or "Error")
    message = first_line(str(error.get("message") or ""))
    return f"{kind}: {message}" if message else kind


_ESCAPE = re.compile(r"\033\[[0-9;]*m")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Rows under headers, in columns (colors do not count as width); no trailing blanks.

    Examples:
        >>> print(table(["ID", "STATUS"], [["a1", "succeeded"], ["b22", "failed"]]))
        ID   STATUS
        a1   succeeded
        b22  failed
    """
    body = [list(headers), *(list(row) for row in rows)]

    def width(cell: str) -> int:
        return len(_ESCAPE.sub("", cell))

    widths = [max(width(row[i]) for row in body) for i in range(len(headers))]
    lines = []
    for row in body:
        cells = [cell + " " * (size - width(cell)) for cell, size in zip(row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def dump_json(value: Any) -> str:
    """Indented JSON; values JSON cannot hold are written as strings.

    Examples:
        >>> print(dump_json({"n": 1}))
        {
          "n": 1
        }
    """
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def info_dict(info: RunInfo) -> dict[str, Any]:
    """A run as JSON."""
    return {**dataclasses.asdict(info), "done": info.done}


def job_dict(job: JobRow, prefix: str = "") -> dict[str, Any]:
    """A step attempt as JSON, with its path."""
    return {"path": prefix + job.step_id, **dataclasses.asdict(job)}


def approval_dict(approval: ApprovalRow) -> dict[str, Any]:
    """An approval as JSON."""
    return dataclasses.asdict(approval)


_COLORS = {
    "succeeded": "32",
    "approved": "32",
    "failed": "31",
    "rejected": "31",
    "expired": "31",
    "cancelled": "33",
    "waiting": "36",
    "pending": "36",
    "running": "34",
    "started": "34",
    "skipped": "2",
    "queued": "2",
}


class Painter:
    """Colors statuses on a terminal that wants them (`NO_COLOR` unset), never elsewhere.

    Examples:
        >>> import io
        >>> Painter(io.StringIO())("failed")
        'failed'
    """

    def __init__(self, stream: TextIO) -> None:
        isatty = getattr(stream, "isatty", None)
        self.enabled = bool(
            isatty is not None
            and isatty()
            and not os.environ.get("NO_COLOR")
            and os.environ.get("TERM") != "dumb"
        )

    def __call__(self, text: str, status: str | None = None, *, width: int = 0) -> str:
        """`text` padded to `width`, colored by `status` (default: `text` itself)."""
        padded = text.ljust(width)
        code = _COLORS.get(status or text)
        if not self.enabled or code is None:
            return padded
        return f"\033[{code}m{text}\033[0m{padded[len(text) :]}"

    def bold(self, text: str) -> str:
        """`text` in bold, when coloring."""
        return f"\033[1m{text}\033[0m" if self.enabled else text
