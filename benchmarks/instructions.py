"""Instructions per agent-loop iteration, counted by callgrind: a yardstick the host cannot bend.

`agent_loop.py` times the loop in microseconds, on machines whose speed
changes several-fold from one hour to the next: a run on a slow hour cannot
say whether a change helped, nor where a target stands. This script runs the
same task (the rows of `agent_loop.py`) under `valgrind --tool=callgrind`,
which counts the instructions the CPU executes. For the same code, inputs and
environment that count is the same on a busy host as on a quiet one, so two
versions of Tidemill compare exactly, side by side, on any host:

    .venv-bench/bin/python benchmarks/instructions.py                # the working tree
    .venv-bench/bin/python benchmarks/instructions.py --rev 7210507  # and a commit beside it

Each row and source runs in a process of its own, with `PYTHONHASHSEED=0`
(so dicts and sets lay out alike) and the source's `src/` first on the path:
warm-up runs, then the counters are zeroed (`callgrind_control -z`), R runs
go, and the counters are dumped. Start-up, imports and warm-up are not
counted; each counted run's untimed reset (dropping its thread) is, as a
sliver of the run. The first and last counted runs are checked afterwards.

    instr/iter at N = instructions of the R runs at N / (R * N)

Instructions are not seconds (a cache miss costs many), so this does not
replace the timed table; it tells what a change does to the work done, and,
beside a commit whose time was measured on a known host, where a version
stands there. It needs valgrind (Debian's `valgrind` package).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import agent_loop

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ROWS = ("Tidemill, memory", "Tidemill, memory + features")
DEFAULT_SIZES = (10, 50)
WARMUPS = 5


# -- the counted process ---------------------------------------------------------------


def handshake(word: str) -> None:
    """Tell the parent `word`, then wait for its answer.

    The wait polls rather than blocks: valgrind takes `callgrind_control`
    commands only while the program runs code, not inside a blocking read.
    """
    print(word, flush=True)
    while not select.select([sys.stdin], [], [], 0.02)[0]:
        pass
    sys.stdin.readline()


async def child(label: str, sizes: Sequence[int], runs: int) -> None:
    """Run one row under callgrind: per N, warm up, then `runs` counted runs."""
    row = next(r for r in agent_loop.ROWS if r.label == label)
    async with row.setup() as make:
        for n in sizes:
            bench = await make(n)
            for _ in range(WARMUPS):
                result = await bench.run()
                bench.check(result)
                await bench.reset(result)
            gc.collect()
            handshake(f"zero {n}")
            first = last = None
            for _ in range(runs):
                last = await bench.run()
                await agent_loop.drain()
                await bench.reset(last)
                if first is None:
                    first = last
            handshake(f"dump {n}")
            bench.check(first)
            bench.check(last)
            await bench.aclose()
    print("end", flush=True)


# -- the parent ------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where the code under test comes from: the working tree or a commit."""

    name: str
    src: Path


@dataclass
class Count:
    source: Source
    label: str
    per_run: dict[int, float]
    """Instructions per counted run, by N."""

    def per_iteration(self, n: int) -> float:
        return self.per_run[n] / n

    def split(self) -> tuple[float, float] | None:
        """(instructions per extra iteration, fixed instructions per run), from two sizes."""
        if len(self.per_run) < 2:
            return None
        small, large = min(self.per_run), max(self.per_run)
        marginal = (self.per_run[large] - self.per_run[small]) / (large - small)
        return marginal, self.per_run[small] - small * marginal


def dumped_total(path: Path) -> int:
    """The instruction total of one callgrind dump file."""
    text = path.read_text(errors="replace")
    found = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no total in {path}")
    return int(found.group(1))


def count(source: Source, label: str, sizes: Sequence[int], runs: int) -> Count:
    """Run one row of one source under callgrind; instructions per run, by N."""
    with tempfile.TemporaryDirectory(prefix="tidemill-cg-") as folder:
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(source.src)}
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={folder}/cg.%p",
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            label,
            "--runs",
            str(runs),
            "--sizes",
            *map(str, sizes),
        ]
        log = Path(folder) / "stderr"
        with log.open("w") as stderr:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
            )
        assert process.stdin is not None
        assert process.stdout is not None
        per_run: dict[int, float] = {}
        try:
            for line in process.stdout:
                word, _, arg = line.strip().partition(" ")
                if word == "zero":
                    control(process.pid, "-z")
                elif word == "dump":
                    control(process.pid, "-d")
                    dumps = sorted(Path(folder).glob(f"cg.{process.pid}.*"), key=dump_index)
                    per_run[int(arg)] = dumped_total(dumps[-1]) / runs
                elif word == "end":
                    break
                else:
                    continue
                process.stdin.write("go\n")
                process.stdin.flush()
            process.stdin.close()
            process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
        if process.returncode != 0 or len(per_run) != len(sizes):
            tail = "\n".join(log.read_text(errors="replace").strip().splitlines()[-15:])
            raise RuntimeError(f"{label} ({source.name}) failed under callgrind:\n{tail}")
    return Count(source, label, per_run)


def dump_index(path: Path) -> int:
    return int(path.name.rpartition(".")[2])


def control(pid: int, flag: str) -> None:
    subprocess.run(["callgrind_control", flag, str(pid)], check=True, capture_output=True)


@contextmanager
def sources(revisions: Sequence[str]) -> Iterator[list[Source]]:
    """The working tree, then each revision checked out in a temporary worktree."""
    found = [Source("working tree", ROOT / "src")]
    made: list[Path] = []
    try:
        for rev in revisions:
            folder = Path(tempfile.mkdtemp(prefix="tidemill-rev-"))
            folder.rmdir()
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(folder), rev],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            made.append(folder)
            found.append(Source(rev, folder / "src"))
        yield found
    finally:
        for folder in made:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(folder)],
                cwd=ROOT,
                capture_output=True,
            )


def report(counts: Sequence[Count], sizes: Sequence[int], runs: int) -> str:
    headers = [
        "row",
        "source",
        *(f"N={n}" for n in sizes),
        "per extra iteration",
        "fixed per run",
        *(f"ratio N={n}" for n in sizes),
    ]
    rows: list[list[str]] = []
    base: dict[str, Count] = {}
    for c in counts:
        first = base.setdefault(c.label, c)
        split = c.split()
        rows.append(
            [
                c.label,
                c.source.name,
                *(f"{c.per_iteration(n):,.0f}" for n in sizes),
                f"{split[0]:,.0f}" if split else "-",
                f"{split[1]:,.0f}" if split else "-",
                *(f"{c.per_run[n] / first.per_run[n]:.3f}x" for n in sizes),
            ]
        )
    lines = [
        "Instructions per agent-loop iteration (callgrind, steady state, PYTHONHASHSEED=0)",
        f"{agent_loop.platform.python_implementation()} {agent_loop.platform.python_version()};"
        f" {runs} counted runs per cell after {WARMUPS} warm-up runs;"
        " ratio = this source / the first source of the row",
        "",
        agent_loop.table(headers, rows, left=2),
    ]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if args.child:
        asyncio.run(child(args.child, args.sizes, args.runs))
        return 0
    for tool in ("valgrind", "callgrind_control", "git"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (apt-get install valgrind git)", file=sys.stderr)
            return 2
    known = [r.label for r in agent_loop.ROWS if r.label.startswith("Tidemill")]
    labels = (
        [label for label in known if any(w.lower() in label.lower() for w in args.only)]
        if args.only
        else list(DEFAULT_ROWS)
    )
    if not labels:
        print(f"no Tidemill row matches {args.only}; rows: {known}", file=sys.stderr)
        return 2
    with sources(args.rev) as found:
        jobs = [(source, label) for label in labels for source in found]
        for source, label in jobs:
            agent_loop.progress(f"counting {label} ({source.name})")
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            counts = list(pool.map(lambda job: count(job[0], job[1], args.sizes, args.runs), jobs))
    print(report(counts, args.sizes, args.runs))
    return 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", action="append", default=[], help="a git revision to add")
    parser.add_argument(
        "--only",
        nargs="*",
        help="Tidemill rows whose label contains any of these words "
        f"(default: {' and '.join(DEFAULT_ROWS)})",
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--runs", type=int, default=30, help="counted runs per N")
    parser.add_argument("--jobs", type=int, default=2, help="processes at once")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(parse_args()))
