"""The script pool hands a call's output on as it is written (`ScriptPool.run(on_output=...)`).

Joined, the pieces are the outcome's `stdout` and `stderr`, whatever ends the
call: it returns, fails, runs past its timeout, or its caller is cancelled.
"""

from __future__ import annotations

import asyncio
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tidemill.engine.scripts._pool import ScriptCall, ScriptPool

pytestmark = pytest.mark.timeout(60)

GATED = """
import pathlib, sys, time
def main(gate):
    print("first", flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    while not pathlib.Path(gate).exists():
        time.sleep(0.01)
    print("second")
    return "done"
"""

PRINT_THEN_HANG = """
import pathlib, time
def main(mark):
    for n in range(5):
        print("line", n, flush=True)
    pathlib.Path(mark).write_text("printed")
    time.sleep(60)
"""


class Pieces:
    """What `on_output` was given, by stream."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, stream: str, text: str) -> None:
        self.calls.append((stream, text))

    def text(self, stream: str) -> str:
        return "".join(text for name, text in self.calls if name == stream)


def script(source: str, **args: object) -> ScriptCall:
    return ScriptCall(code=textwrap.dedent(source), args=args)


async def until(predicate: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "gave up waiting"
        await asyncio.sleep(0.01)


async def test_output_is_handed_on_while_the_call_runs(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    pieces = Pieces()
    async with ScriptPool(size=1, output_poll=0.02) as pool:
        task = asyncio.create_task(pool.run(script(GATED, gate=str(gate)), on_output=pieces))
        await until(lambda: "first" in pieces.text("stdout"))
        await until(lambda: "to stderr" in pieces.text("stderr"))
        assert not task.done()
        gate.touch()
        outcome = await task
    assert outcome.ok and outcome.result == "done"
    assert pieces.text("stdout") == outcome.stdout == "first\nsecond\n"
    assert pieces.text("stderr") == outcome.stderr == "to stderr\n"


async def test_a_cancelled_call_hands_on_what_it_printed(tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    pieces = Pieces()
    async with ScriptPool(size=1, output_poll=60) as pool:  # no look before the end
        task = asyncio.create_task(
            pool.run(script(PRINT_THEN_HANG, mark=str(mark)), on_output=pieces)
        )
        await until(mark.exists)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert pieces.text("stdout") == "".join(f"line {n}\n" for n in range(5))


async def test_a_timed_out_call_hands_on_its_output(tmp_path: Path) -> None:
    pieces = Pieces()
    call = ScriptCall(
        code=textwrap.dedent(PRINT_THEN_HANG), args={"mark": str(tmp_path / "m")}, timeout=1
    )
    async with ScriptPool(size=1, output_poll=60) as pool:
        outcome = await pool.run(call, on_output=pieces)
    assert outcome.error is not None and outcome.error["type"] == "Timeout"
    assert pieces.text("stdout") == outcome.stdout
    assert outcome.stdout.startswith("line 0\n")


async def test_the_cut_and_split_characters_match_the_outcome() -> None:
    code = (
        "import sys\ndef main():\n    for _ in range(40):\n        print('é', end='', flush=True)\n"
    )
    pieces = Pieces()
    async with ScriptPool(size=1, max_output=25, output_poll=0.001) as pool:
        outcome = await pool.run(ScriptCall(code=code), on_output=pieces)
    assert outcome.stdout.startswith("é" * 12)
    assert outcome.stdout.endswith("[tidemill: output truncated after 25 bytes]")
    assert pieces.text("stdout") == outcome.stdout


async def test_each_call_hands_on_its_own_output_only() -> None:
    first, second = Pieces(), Pieces()
    async with ScriptPool(size=1, output_poll=0.01) as pool:
        await pool.run(ScriptCall(code="def main():\n    print('one')\n"), on_output=first)
        await pool.run(ScriptCall(code="def main():\n    print('two')\n"), on_output=second)
    assert (first.text("stdout"), second.text("stdout")) == ("one\n", "two\n")


async def test_a_call_without_on_output_is_unchanged() -> None:
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(ScriptCall(code="def main():\n    print('hi')\n"))
    assert outcome.stdout == "hi\n"
