"""A graph thread paused for approval in one process is resumed by another.

Both halves are child processes running SCRIPT on one journal: a SQLite file,
or a PostgreSQL schema (skipped, saying why, when TIDEMILL_TEST_POSTGRES_URL
is not set). Nothing but the journal connects them.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tidemill.agents.checkpoint import Checkpointer, PostgresCheckpointer, SQLiteCheckpointer

pytest.importorskip("langgraph")
pytestmark = pytest.mark.slow

WAIT = 30.0
"""Seconds a child may take before the test fails."""

SCRIPT = '''
import asyncio, json, os, sys

from tidemill import AgentInterrupt, Decision, Message, ToolCall, tool
from tidemill.agents.checkpoint import PostgresCheckpointer, SQLiteCheckpointer
from tidemill.agents.graph import GraphRuntime
from tidemill.llm import ModelRequest, ScriptedModel

command, side, store = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
CALL = ToolCall(id="call_pay", name="pay", arguments={"to": "bob", "amount": 500})


@tool(requires_approval=True)
def pay(to: str, amount: int) -> str:
    """Send money.

    Args:
        to: Who gets it.
        amount: How much, in cents.
    """
    with open(side, "a") as file:
        file.write(json.dumps({"to": to, "amount": amount, "pid": os.getpid()}) + "\\n")
    return f"paid {amount} to {to}"


def handler(request: ModelRequest) -> Message | str:
    results = [m.content for m in request.messages if m.role == "tool"]
    if not results:
        return Message.assistant("Paying.", tool_calls=(CALL,))
    return "Result: " + " | ".join(results)


async def main() -> dict:
    if "sqlite" in store:
        checkpointer = SQLiteCheckpointer(store["sqlite"])
    else:
        checkpointer = PostgresCheckpointer(store["postgres"], schema=store["schema"])
    model = ScriptedModel(handler=handler)
    runtime = GraphRuntime(model=model, tools=[pay], checkpointer=checkpointer)
    report = {"pid": os.getpid()}
    try:
        if command == "run":
            try:
                await runtime.arun("pay bob", thread_id="t")
                report["outcome"] = "finished"
            except AgentInterrupt as pause:
                report["outcome"] = "paused"
                report["pending"] = [c.model_dump(mode="json") for c in pause.pending]
        else:
            pending = await runtime.apending_approvals("t")
            report["pending"] = [c.model_dump(mode="json") for c in pending]
            decision = Decision.approve({"to": "bob", "amount": 5})
            response = await runtime.aresume("t", {pending[0].id: decision})
            report["outcome"] = "finished"
            report["output"] = response.output
            report["requests"] = response.usage.requests
            report["model_calls_here"] = len(model.requests)
            report["messages"] = [m.content for m in response.messages]
    finally:
        runtime.close()
        await checkpointer.aclose()
    return report


print(json.dumps(asyncio.run(main())), flush=True)
'''


@pytest.fixture(params=["sqlite", "postgres"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[dict[str, str], Callable[[], Checkpointer]]]:
    if request.param == "sqlite":
        path = str(tmp_path / "graph.db")
        yield {"sqlite": path}, lambda: SQLiteCheckpointer(path)
        return
    url = request.getfixturevalue("postgres_url")
    schema = f"tidemill_test_{os.getpid()}_{secrets.token_hex(4)}"
    yield {"postgres": url, "schema": schema}, lambda: PostgresCheckpointer(url, schema=schema)

    async def drop() -> None:
        checkpointer = PostgresCheckpointer(url, schema=schema)
        await checkpointer.drop_schema()
        await checkpointer.aclose()

    asyncio.run(drop())


def child(tmp_path: Path, command: str, where: dict[str, str]) -> dict[str, Any]:
    script = tmp_path / "graph_child.py"
    script.write_text(SCRIPT, encoding="utf-8")
    side = tmp_path / "payments.jsonl"
    done = subprocess.run(
        [sys.executable, str(script), command, str(side), json.dumps(where)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        cwd=tmp_path,
    )
    assert done.returncode == 0, f"the {command} child exited {done.returncode}:\n{done.stderr}"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def payments(tmp_path: Path) -> list[dict[str, Any]]:
    side = tmp_path / "payments.jsonl"
    if not side.exists():
        return []
    return [json.loads(line) for line in side.read_text().splitlines()]


def test_a_paused_graph_thread_resumes_in_another_process(
    tmp_path: Path, store: tuple[dict[str, str], Callable[[], Checkpointer]]
) -> None:
    where, open_store = store
    paused = child(tmp_path, "run", where)
    assert paused["outcome"] == "paused"
    assert [c["id"] for c in paused["pending"]] == ["call_pay"]
    assert payments(tmp_path) == []  # nothing paid before the decision

    resumed = child(tmp_path, "resume", where)
    assert resumed["pid"] != paused["pid"]
    assert [c["id"] for c in resumed["pending"]] == ["call_pay"]
    assert resumed["outcome"] == "finished"
    assert resumed["output"] == "Result: paid 5 to bob"
    assert resumed["messages"] == ["pay bob", "Paying.", "paid 5 to bob", "Result: paid 5 to bob"]
    # The first process's model turn counts; the second asked the model only once.
    assert (resumed["requests"], resumed["model_calls_here"]) == (2, 1)
    assert payments(tmp_path) == [{"to": "bob", "amount": 5, "pid": resumed["pid"]}]

    async def kinds() -> list[str]:
        checkpointer = open_store()
        try:
            return [r.event.kind for r in await checkpointer.read("t")]
        finally:
            await checkpointer.aclose()

    journal = asyncio.run(kinds())
    assert "graph_checkpoint" in journal and "approval_decided" in journal
    assert journal[-1] == "finished"
