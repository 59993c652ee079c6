"""A child process for tests/agents/test_durability.py: runs or resumes an agent.

Two agents live here, both with a scripted model whose handler decides from
the conversation alone, so any process can pick a thread up where another
left it:

* `record`: asks for `record(n=k)` for k = 1..5, one call a turn, then
  answers with the tool results. The tool appends a line to a side-effect
  file. `--block-model-at` / `--block-tool-at` make the process write a
  marker file and hang at that model call or tool call, for the parent to
  SIGKILL.
* `pay`: asks for `pay(amount)` for each of `--amounts` at once; `pay`
  needs approval. Once every call has a result it answers with them.

The last line on stdout is a JSON report; the exit code says the outcome
(see OUTCOMES). Importing this module does nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from tidemill import (
    AgentInterrupt,
    AgentResponse,
    AgentRuntime,
    ApprovalError,
    Decision,
    Message,
    Role,
    ThreadBusy,
    ToolCall,
    ToolContext,
    tool,
)
from tidemill.agents.checkpoint import Checkpointer, PostgresCheckpointer, SQLiteCheckpointer
from tidemill.agents.journal import JournalEvent, JournalRecord
from tidemill.llm import ModelRequest, ScriptedModel

OUTCOMES = {"ok": 0, "interrupt": 3, "busy": 4, "approval_error": 5}
"""Exit code per outcome; anything unexpected exits 1 with a traceback."""

RECORD_CALLS = 5
WAIT_LIMIT = 20.0
"""Seconds a child waits for a file before giving up."""


def append_line(path: str, record: dict[str, Any]) -> None:
    """Append one JSON line; closed at once, so a SIGKILL cannot lose it."""
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")


def touch(path: str) -> None:
    Path(path).write_text(str(os.getpid()), encoding="utf-8")


def hang() -> None:
    """Block until killed."""
    while True:
        time.sleep(60)


def wait_for(predicate: Callable[[], bool], *, spin: bool = False) -> None:
    deadline = time.monotonic() + WAIT_LIMIT
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {WAIT_LIMIT} s in process {os.getpid()}")
        if not spin:
            time.sleep(0.002)


# -- the agents ---------------------------------------------------------------


def record_agent(args: argparse.Namespace, checkpointer: Checkpointer) -> AgentRuntime:
    @tool
    def record(n: int, ctx: ToolContext) -> str:
        """Record entry n in the side-effect file.

        Args:
            n: The entry number.
        """
        append_line(
            args.side,
            {"n": n, "attempt": ctx.attempt, "key": ctx.idempotency_key, "pid": os.getpid()},
        )
        if n == args.block_tool_at:
            touch(args.marker)
            hang()
        return f"recorded {n}"

    def handler(request: ModelRequest) -> Message:
        results = [m for m in request.messages if m.role is Role.TOOL]
        turn = len(results) + 1
        append_line(args.log, {"pid": os.getpid(), "turn": turn})
        if turn == args.block_model_at:
            touch(args.marker)
            hang()
        if len(results) < RECORD_CALLS:
            call = ToolCall(name="record", arguments={"n": turn})
            return Message.assistant(f"Recording {turn}.", tool_calls=(call,))
        return Message.assistant("Done: " + "; ".join(m.content for m in results))

    return AgentRuntime(
        model=ScriptedModel(handler=handler), tools=[record], checkpointer=checkpointer
    )


def pay_agent(args: argparse.Namespace, checkpointer: Checkpointer) -> AgentRuntime:
    @tool(requires_approval=True)
    def pay(amount: int, ctx: ToolContext) -> str:
        """Pay an amount.

        Args:
            amount: How much.
        """
        append_line(
            args.side,
            {"amount": amount, "attempt": ctx.attempt, "key": ctx.idempotency_key,
             "pid": os.getpid()},
        )  # fmt: skip
        if args.hold:
            touch(f"{args.hold}.{os.getpid()}")
            wait_for(Path(f"{args.hold}.release").exists)
        return f"paid {amount}"

    def handler(request: ModelRequest) -> Message:
        results = [m for m in request.messages if m.role is Role.TOOL]
        append_line(
            args.log,
            {
                "pid": os.getpid(),
                "tool_messages": [
                    {"content": m.content, "is_error": m.is_error, "call_id": m.tool_call_id}
                    for m in results
                ],
            },
        )
        if not results:
            calls = tuple(ToolCall(name="pay", arguments={"amount": a}) for a in args.amounts)
            return Message.assistant("Paying.", tool_calls=calls)
        return Message.assistant("Outcome: " + " | ".join(m.content for m in results))

    return AgentRuntime(
        model=ScriptedModel(handler=handler), tools=[pay], checkpointer=checkpointer
    )


# -- a checkpointer that makes racers line up ------------------------------------


class ReadBarrier:
    """Delegates to a checkpointer; after its first read of a thread, waits for the others.

    Each racer, having read a thread, leaves a file in `folder` and waits
    until `count` racers have: every one has loaded the thread before any
    appends, so the race is decided by the store's conflict check alone.
    """

    def __init__(self, inner: Checkpointer, folder: str, count: int) -> None:
        self.inner, self.folder, self.count = inner, Path(folder), count
        self.passed: set[str] = set()

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        return await self.inner.append(thread_id, events, after=after)

    async def read(self, thread_id: str, *, after: int = 0) -> list[JournalRecord]:
        records = await self.inner.read(thread_id, after=after)
        if thread_id not in self.passed:
            self.passed.add(thread_id)
            touch(str(self.folder / f"{thread_id}.read.{os.getpid()}"))
            wait_for(lambda: len(list(self.folder.glob(f"{thread_id}.read.*"))) >= self.count)
        return records

    async def threads(self) -> list[str]:
        return await self.inner.threads()

    async def delete(self, thread_id: str) -> bool:
        return await self.inner.delete(thread_id)

    async def prune(self, *, older_than: timedelta) -> int:
        return await self.inner.prune(older_than=older_than)

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- commands -----------------------------------------------------------------


def report(outcome: str, response: AgentResponse | None = None, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"outcome": outcome, "pid": os.getpid(), **extra}
    if response is not None:
        result["output"] = response.output
        result["steps"] = [step.model_dump(mode="json") for step in response.steps]
    return result


async def outcome_of(call: Awaitable[AgentResponse]) -> dict[str, Any]:
    try:
        response = await call
    except AgentInterrupt as pause:
        pending = [call.model_dump(mode="json") for call in pause.pending]
        return report("interrupt", pause.response, pending=pending)
    except ThreadBusy as exc:
        return report("busy", error=str(exc))
    except ApprovalError as exc:
        return report("approval_error", error=str(exc))
    return report("ok", response)


async def command(args: argparse.Namespace, runtime: AgentRuntime) -> list[dict[str, Any]]:
    """Run, or resume, each `--thread` in turn; with `--go`, each when its go-file appears."""
    decisions = None
    if args.decide:
        decisions = {cid: Decision.model_validate(d) for cid, d in json.loads(args.decide).items()}
    reports = []
    for index, thread_id in enumerate(args.thread):
        if args.go:
            go = f"{args.go}.{index}"
            touch(f"{go}.ready.{os.getpid()}")
            wait_for(Path(go).exists, spin=True)
        if args.command == "run":
            reports.append(await outcome_of(runtime.arun(args.prompt, thread_id=thread_id)))
            continue
        for _ in range(args.repeat):
            resume = runtime.aresume(
                thread_id,
                decisions,
                approved=True if args.approve else None,
                retry_in_flight=args.retry_in_flight,
            )
            reports.append(await outcome_of(resume) | {"thread": thread_id})
    return reports


async def main(args: argparse.Namespace) -> int:
    store: Checkpointer
    if args.sqlite:
        store = SQLiteCheckpointer(args.sqlite)
    else:
        store = PostgresCheckpointer(args.postgres, schema=args.schema)
    await store.read(args.thread[0])  # connect before any race starts
    checkpointer: Checkpointer = store
    if args.barrier:
        checkpointer = ReadBarrier(store, args.barrier, args.barrier_count)
    build = record_agent if args.agent == "record" else pay_agent
    runtime = build(args, checkpointer)
    try:
        reports = await command(args, runtime)
    finally:
        runtime.close()
        await store.aclose()
    print(json.dumps(reports), flush=True)
    return max(OUTCOMES[r["outcome"]] for r in reports)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("agent", choices=["record", "pay"])
    parser.add_argument("command", choices=["run", "resume"])
    parser.add_argument("--sqlite")
    parser.add_argument("--postgres")
    parser.add_argument("--schema", default="public")
    parser.add_argument("--thread", action="append", required=True)
    parser.add_argument("--side", required=True, help="side-effect file")
    parser.add_argument("--log", required=True, help="model request log")
    parser.add_argument("--prompt", default="Go.")
    parser.add_argument("--marker", help="written before hanging")
    parser.add_argument("--block-model-at", type=int, default=0)
    parser.add_argument("--block-tool-at", type=int, default=0)
    parser.add_argument("--amounts", type=lambda s: [int(a) for a in s.split(",")], default=[42])
    parser.add_argument("--approve", action="store_true")
    parser.add_argument("--decide", help="JSON: {call_id: Decision}")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--retry-in-flight", action="store_true")
    parser.add_argument("--go", help="wait for GO.<i> before the i-th thread")
    parser.add_argument("--barrier", help="folder: after a thread's first read, wait for others")
    parser.add_argument("--barrier-count", type=int, default=2)
    parser.add_argument("--hold", help="pay writes HOLD.<pid>, then waits for HOLD.release")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse(sys.argv[1:]))))
