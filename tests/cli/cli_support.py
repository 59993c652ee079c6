"""Flow files, in-process calls and subprocesses for the CLI tests."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidemill.cli import main

SHIP = {
    "name": "ship",
    "steps": [
        {"id": "ask", "approval": {"message": "Ship it?", "approvers": ["alice"]}},
        {"id": "after", "identity": {}, "inputs": {"by": {"expr": "results.ask.by"}}},
    ],
}

DOUBLE = {
    "name": "double",
    "inputs": {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "tag": {"type": "string"}},
        "required": ["x"],
    },
    "steps": [
        {"id": "double", "script": "def main(x):\n    return x * 2\n",
         "inputs": {"x": {"expr": "flow_input.x"}}},
        {"id": "show", "identity": {},
         "inputs": {"value": {"expr": "results.double"}, "tag": {"expr": "flow_input.tag"}}},
    ],
}  # fmt: skip

FAILING = {
    "name": "failing",
    "steps": [
        {"id": "first", "identity": {}, "inputs": {"v": 1}},
        {"id": "boom", "script": "def main():\n    print('about to fail')\n"
                                 "    raise ValueError('bad data')\n"},
        {"id": "never", "identity": {}},
    ],
}  # fmt: skip


def gated(gate: Path) -> dict[str, Any]:
    """A flow whose `guard` step fails until the file `gate` exists."""
    code = (
        "import pathlib\n"
        "def main(path):\n"
        "    print('checking', path)\n"
        "    if not pathlib.Path(path).exists():\n"
        "        raise RuntimeError('gate closed')\n"
        "    return 'open'\n"
    )
    return {
        "name": "gated",
        "steps": [
            {"id": "each", "for_each": {"items": [1, 2], "steps": [
                {"id": "inner", "identity": {}, "inputs": {"v": {"expr": "iter.value"}}}]}},
            {"id": "guard", "script": code, "inputs": {"path": str(gate)}},
        ],
    }  # fmt: skip


def write_flow(directory: Path, body: dict[str, Any], name: str = "flow.yaml") -> str:
    path = directory / name
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return str(path)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run `tidemill ARGV` in this process: exit status, stdout, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def tidemill(*argv: str) -> list[str]:
    return [sys.executable, "-m", "tidemill.cli", *argv]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TIDEMILL_DB"}
    env["NO_COLOR"] = "1"
    return env


class Lines:
    """Reads a process's stream on a thread, so a test can wait for a line with a timeout."""

    def __init__(self, stream: Any) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        for line in self.seen:
            if found := re.search(pattern, line):
                return found
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line matched {pattern!r} in:\n{''.join(self.seen)}")
            try:
                item = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if item is None:
                raise AssertionError(f"ended before {pattern!r}:\n{''.join(self.seen)}")
            self.seen.append(item)
            if found := re.search(pattern, item):
                return found

    def rest(self, timeout: float = 30) -> str:
        """Everything up to the end of the stream."""
        self._thread.join(timeout)
        while not self._queue.empty():
            line = self._queue.get()
            if line is not None:
                self.seen.append(line)
        return "".join(self.seen)


@contextlib.contextmanager
def running(*argv: str) -> Iterator[tuple[subprocess.Popen[str], Lines]]:
    """Run `tidemill ARGV` for the block; its stderr is read line by line.

    On the way out the process is killed if still running, and its pipes closed.
    """
    process = subprocess.Popen(
        tidemill(*argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    assert process.stdout is not None and process.stderr is not None
    lines = Lines(process.stderr)
    try:
        yield process, lines
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        lines.rest()
        process.stdout.close()
        process.stderr.close()
