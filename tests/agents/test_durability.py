"""Durability across real processes: SIGKILL and resume, racing approvals, split decisions.

Every test runs child processes (tests/agents/procs/durable_agent.py) that
share one journal, in SQLite and in PostgreSQL (skipped, saying why, when
TIDEMILL_TEST_POSTGRES_URL is not set).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tidemill import AgentRuntime, ScriptedModel
from tidemill.agents.checkpoint import Checkpointer, PostgresCheckpointer, SQLiteCheckpointer
from tidemill.agents.journal import (
    ApprovalDecided,
    ApprovalRequested,
    JournalEvent,
    JournalRecord,
    ModelTurn,
    ToolStarted,
    UserInput,
)

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "procs" / "durable_agent.py"
WAIT = 15.0
"""Seconds any wait on a child may take before the test fails."""

OUTCOMES = {"ok": 0, "interrupt": 3, "busy": 4, "approval_error": 5}
"""The children's exit codes (see durable_agent.py)."""

REJECTED = "The user rejected this call."


# Not imported from tests/conftest.py: with tests/llm/conftest.py beside it,
# `import conftest` may find either one.
def unique_schema() -> str:
    """A PostgreSQL schema name no other test uses."""
    return f"tidemill_test_{os.getpid()}_{secrets.token_hex(4)}"


# -- where the journal lives ------------------------------------------------------------


@dataclass
class Store:
    """A journal the children and the test share."""

    name: str
    args: list[str]
    open: Callable[[], Checkpointer]

    def read(self, thread_id: str) -> list[JournalRecord]:
        async def read() -> list[JournalRecord]:
            checkpointer = self.open()
            try:
                return await checkpointer.read(thread_id)
            finally:
                await checkpointer.aclose()

        return asyncio.run(read())

    def history(self, thread_id: str) -> list[JournalRecord]:
        """The thread's audit trail, as `AgentRuntime.history` gives it."""

        async def history() -> list[JournalRecord]:
            checkpointer = self.open()
            runtime = AgentRuntime(model=ScriptedModel(), checkpointer=checkpointer)
            try:
                return await runtime.ahistory(thread_id)
            finally:
                runtime.close()
                await checkpointer.aclose()

        return asyncio.run(history())


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        path = tmp_path / "journal.db"
        yield Store("sqlite", ["--sqlite", str(path)], lambda: SQLiteCheckpointer(path))
        return
    url = request.getfixturevalue("postgres_url")
    schema = unique_schema()
    yield Store(
        "postgres",
        ["--postgres", url, "--schema", schema],
        lambda: PostgresCheckpointer(url, schema=schema),
    )

    async def drop() -> None:
        checkpointer = PostgresCheckpointer(url, schema=schema)
        await checkpointer.drop_schema()
        await checkpointer.aclose()

    asyncio.run(drop())


# -- the children -----------------------------------------------------------------------


@dataclass
class Result:
    code: int
    reports: list[dict[str, Any]]
    stderr: str

    @property
    def report(self) -> dict[str, Any]:
        (only,) = self.reports
        return only

    @property
    def outcome(self) -> str:
        return str(self.report["outcome"])


@dataclass
class Children:
    """Starts child processes on one store; kills whatever still runs at the end."""

    store: Store
    folder: Path
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def side(self) -> Path:
        return self.folder / "side-effects.jsonl"

    @property
    def log(self) -> Path:
        return self.folder / "model-calls.jsonl"

    def start(self, *args: str) -> subprocess.Popen[str]:
        command = [sys.executable, str(SCRIPT), *args, *self.store.args]
        command += ["--side", str(self.side), "--log", str(self.log)]
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.folder
        )
        self.procs.append(proc)
        return proc

    def finish(self, proc: subprocess.Popen[str]) -> Result:
        """Wait for a child and read its report."""
        try:
            out, err = proc.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"child {proc.args[2:4]} did not finish in {WAIT} s:\n{err}")
        lines = out.strip().splitlines()
        assert lines, f"child {proc.args[2:4]} exited {proc.returncode} with no report:\n{err}"
        return Result(proc.returncode, json.loads(lines[-1]), err)

    def run(self, *args: str) -> Result:
        return self.finish(self.start(*args))

    def wait_until(self, ready: Callable[[], bool], *watching: subprocess.Popen[str]) -> None:
        """Wait until `ready()`; fail early, with its stderr, if a watched child exits."""
        deadline = time.monotonic() + WAIT
        while not ready():
            for proc in watching:
                if proc.poll() is not None:
                    _, err = proc.communicate()
                    pytest.fail(f"child exited {proc.returncode} before it was ready:\n{err}")
            if time.monotonic() > deadline:
                pytest.fail(f"waited {WAIT} s for the children")
            time.sleep(0.005)

    def kill(self, proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=WAIT)
        assert proc.returncode == -signal.SIGKILL

    def side_effects(self) -> list[dict[str, Any]]:
        if not self.side.exists():
            return []
        return [json.loads(line) for line in self.side.read_text().splitlines()]

    def model_calls(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def close(self) -> None:
        for proc in self.procs:
            if proc.returncode is None and proc.poll() is None:
                proc.kill()
            with contextlib.suppress(ValueError, OSError):  # already read and closed
                proc.communicate(timeout=WAIT)


@pytest.fixture
def children(store: Store, tmp_path: Path) -> Iterator[Children]:
    spawned = Children(store, tmp_path)
    try:
        yield spawned
    finally:
        spawned.close()


def kinds(records: list[JournalRecord]) -> Counter[str]:
    return Counter(record.event.kind for record in records)


def events_of(records: list[JournalRecord], kind: type[JournalEvent]) -> list[Any]:
    return [record.event for record in records if isinstance(record.event, kind)]


def starts(records: list[JournalRecord]) -> list[tuple[str, int]]:
    """Every tool start, as (call id, attempt): marked in its turn, or an entry of its own."""
    found: list[tuple[str, int]] = []
    for record in records:
        event = record.event
        if isinstance(event, ModelTurn):
            found += [(call_id, 1) for call_id in event.started]
        elif isinstance(event, ToolStarted):
            found.append((event.call.id, event.attempt))
    return found


def assert_one_clean_run(records: list[JournalRecord]) -> None:
    assert [record.seq for record in records] == list(range(1, len(records) + 1))
    assert len(events_of(records, UserInput)) == 1, "the journal shows more than one run"
    counts = kinds(records)
    assert counts["finished"] == 1
    assert counts["failed"] == 0
    assert records[-1].event.kind == "finished"


# -- a. SIGKILL, then resume ------------------------------------------------------------------

ALL_RECORDED = "Done: recorded 1; recorded 2; recorded 3; recorded 4; recorded 5"


def test_killed_while_the_model_thinks_resumes_without_repeating(
    store: Store, children: Children
) -> None:
    thread = "killed-in-model"
    marker = children.folder / "blocked"
    first = children.start(
        "record", "run", "--thread", thread, "--marker", str(marker), "--block-model-at", "4"
    )
    children.wait_until(marker.exists, first)
    children.kill(first)

    second = children.start("record", "resume", "--thread", thread)
    result = children.finish(second)

    assert (result.code, result.outcome) == (0, "ok"), result.stderr
    assert result.report["output"] == ALL_RECORDED
    effects = children.side_effects()
    assert [(e["n"], e["attempt"]) for e in effects] == [(n, 1) for n in range(1, 6)]
    assert [e["pid"] for e in effects] == [first.pid] * 3 + [second.pid] * 2
    # Model turns answered before the kill were not asked again.
    calls = children.model_calls()
    assert [c["turn"] for c in calls if c["pid"] == first.pid] == [1, 2, 3, 4]
    assert [c["turn"] for c in calls if c["pid"] == second.pid] == [4, 5, 6]

    records = store.read(thread)
    assert_one_clean_run(records)
    counts = kinds(records)
    assert (counts["model_response"], len(starts(records)), counts["tool_finished"]) == (6, 5, 5)
    # Each call started with its turn, in the same entry: no separate start entries.
    assert counts["tool_started"] == 0
    assert len(result.report["steps"]) == 6  # one run, across both processes


def test_killed_while_a_tool_runs_retries_that_call_with_the_same_key(
    store: Store, children: Children
) -> None:
    thread = "killed-in-tool"
    marker = children.folder / "blocked"
    first = children.start(
        "record", "run", "--thread", thread, "--marker", str(marker), "--block-tool-at", "3"
    )
    children.wait_until(marker.exists, first)
    children.kill(first)

    # The started call has no result: it might still run somewhere, so a plain
    # resume refuses, and says how to go on.
    refused = children.run("record", "resume", "--thread", thread)
    assert (refused.code, refused.outcome) == (OUTCOMES["busy"], "busy"), refused.stderr
    assert "retry_in_flight=True" in refused.report["error"]

    second = children.start("record", "resume", "--thread", thread, "--retry-in-flight")
    result = children.finish(second)
    assert (result.code, result.outcome) == (0, "ok"), result.stderr
    assert result.report["output"] == ALL_RECORDED

    # At least once for the call in flight: it ran again, as attempt 2, same key.
    effects = children.side_effects()
    assert [e["n"] for e in effects] == [1, 2, 3, 3, 4, 5]
    third = [e for e in effects if e["n"] == 3]
    assert [(e["attempt"], e["pid"]) for e in third] == [(1, first.pid), (2, second.pid)]
    records = store.read(thread)
    (third_call,) = [
        call
        for turn in events_of(records, ModelTurn)
        for call in turn.response.message.tool_calls
        if call.arguments["n"] == 3
    ]
    started = [attempt for call_id, attempt in starts(records) if call_id == third_call.id]
    # The first attempt was marked with its turn; the retry has an entry of its own.
    assert started == [1, 2]
    assert [e.attempt for e in events_of(records, ToolStarted)] == [2]
    assert {e["key"] for e in third} == {f"{thread}/{third_call.id}"}
    assert all(e["attempt"] == 1 for e in effects if e["n"] != 3)
    # The model was not asked for turn 3 again: the resumer went on from the tool.
    calls = children.model_calls()
    assert [c["turn"] for c in calls if c["pid"] == second.pid] == [4, 5, 6]

    assert_one_clean_run(records)
    counts = kinds(records)
    assert (counts["model_response"], len(starts(records)), counts["tool_finished"]) == (6, 6, 5)


# -- b. exactly-once approval -------------------------------------------------------------------


def pause(children: Children, *threads: str, amounts: str = "42") -> list[dict[str, Any]]:
    """Start a run on each thread; each pauses for approval of its payments."""
    thread_args = [arg for thread in threads for arg in ("--thread", thread)]
    result = children.run("pay", "run", *thread_args, "--amounts", amounts)
    assert result.code == OUTCOMES["interrupt"], result.stderr
    assert {report["outcome"] for report in result.reports} == {"interrupt"}
    return result.reports


def payments(children: Children, thread: str) -> list[dict[str, Any]]:
    return [e for e in children.side_effects() if e["key"].startswith(f"{thread}/")]


def race(children: Children, threads: list[str], *extra: str) -> list[list[dict[str, Any]]]:
    """Two children resume each thread with approved=True at the same moment.

    Both children handle every thread, one round per thread: each signals it
    is ready, then spins until the round's go-file appears. Returns the two
    reports of each round.
    """
    go = children.folder / "go"
    thread_args = [arg for thread in threads for arg in ("--thread", thread)]
    racers = [
        children.start("pay", "resume", *thread_args, "--approve", "--go", str(go), *extra)
        for _ in range(2)
    ]
    for index in range(len(threads)):
        ready = f"go.{index}.ready.*"
        children.wait_until(
            lambda ready=ready: len(list(children.folder.glob(ready))) == 2, *racers
        )
        Path(f"{go}.{index}").touch()
    results = [children.finish(racer) for racer in racers]
    for result in results:
        assert result.code == max(OUTCOMES[r["outcome"]] for r in result.reports), result.stderr
        assert [r["thread"] for r in result.reports] == threads
    return [list(pair) for pair in zip(results[0].reports, results[1].reports, strict=True)]


def assert_paid_once(store: Store, children: Children, thread: str) -> None:
    paid = payments(children, thread)
    assert [p["amount"] for p in paid] == [42], f"{thread}: paid {paid}"
    records = store.read(thread)
    assert_one_clean_run(records)
    assert len(events_of(records, ApprovalDecided)) == 1
    assert len(starts(records)) == 1


def test_racing_approvals_pay_once(store: Store, children: Children) -> None:
    threads = [f"race-{i}" for i in range(8)]
    pause(children, *threads)
    for thread, pair in zip(threads, race(children, threads), strict=True):
        winners = [r for r in pair if r["outcome"] == "ok"]
        losers = [r for r in pair if r["outcome"] != "ok"]
        assert len(winners) == 1, pair
        # The loser lost the append race (ThreadBusy), or read the journal
        # after the winner's decision was in (ApprovalError: not paused).
        assert losers[0]["outcome"] in ("busy", "approval_error"), pair
        assert winners[0]["output"] == "Outcome: paid 42"
        assert_paid_once(store, children, thread)


def test_approvals_racing_after_both_read_the_pause(store: Store, children: Children) -> None:
    """Both racers have loaded the paused thread before either appends: the store decides."""
    threads = [f"lined-up-{i}" for i in range(5)]
    pause(children, *threads)
    barrier = children.folder / "barrier"
    barrier.mkdir()
    for thread, pair in zip(
        threads, race(children, threads, "--barrier", str(barrier)), strict=True
    ):
        # The loser's append fails; it re-reads the thread, finds the call
        # decided already, and is refused without deciding it a second time.
        assert sorted(r["outcome"] for r in pair) == ["approval_error", "ok"], pair
        refused = next(r for r in pair if r["outcome"] == "approval_error")
        assert "not waiting for approval" in refused["error"]
        assert_paid_once(store, children, thread)


def test_approving_while_another_process_pays_is_refused(store: Store, children: Children) -> None:
    thread = "approve-mid-run"
    pause(children, thread)
    hold = children.folder / "hold"
    first = children.start("pay", "resume", "--thread", thread, "--approve", "--hold", str(hold))
    children.wait_until(lambda: Path(f"{hold}.{first.pid}").exists(), first)

    # The first process is inside pay(): the thread is no longer paused.
    late = children.run("pay", "resume", "--thread", thread, "--approve")
    Path(f"{hold}.release").touch()
    result = children.finish(first)

    assert (late.code, late.outcome) == (OUTCOMES["approval_error"], "approval_error"), late.stderr
    assert "not waiting for approval" in late.report["error"]
    assert (result.code, result.outcome) == (0, "ok"), result.stderr
    assert_paid_once(store, children, thread)


def test_resuming_twice_in_one_process_pays_once(store: Store, children: Children) -> None:
    thread = "twice"
    pause(children, thread)
    result = children.run("pay", "resume", "--thread", thread, "--approve", "--repeat", "2")
    assert [r["outcome"] for r in result.reports] == ["ok", "approval_error"], result.stderr
    assert result.code == OUTCOMES["approval_error"]
    assert "not waiting for approval" in result.reports[1]["error"]
    assert_paid_once(store, children, thread)


# -- c. decisions split across processes ----------------------------------------------------


def test_partial_decisions_across_processes(store: Store, children: Children) -> None:
    thread = "split"
    (paused,) = pause(children, thread, amounts="10,250")
    small, large = (call["id"] for call in paused["pending"])
    assert [call["arguments"]["amount"] for call in paused["pending"]] == [10, 250]

    approve = json.dumps({small: {"action": "approve", "actor": "ana"}})
    first = children.run("pay", "resume", "--thread", thread, "--decide", approve)
    assert (first.code, first.outcome) == (OUTCOMES["interrupt"], "interrupt"), first.stderr
    assert [call["id"] for call in first.report["pending"]] == [large]
    assert [p["amount"] for p in children.side_effects()] == [10]

    feedback = "250 is over the limit; pay 25 instead."
    reject = json.dumps({large: {"action": "reject", "feedback": feedback, "actor": "bo"}})
    second = children.run("pay", "resume", "--thread", thread, "--decide", reject)
    assert (second.code, second.outcome) == (0, "ok"), second.stderr

    # The model saw the rejection and its feedback as the call's result.
    rejection = f"{REJECTED} Feedback: {feedback}"
    assert second.report["output"] == f"Outcome: paid 10 | {rejection}"
    last_request = [c for c in children.model_calls() if c["pid"] == second.report["pid"]][-1]
    assert {"content": rejection, "is_error": True, "call_id": large} in last_request[
        "tool_messages"
    ]
    assert [p["amount"] for p in children.side_effects()] == [10]

    # The audit trail: in the run's steps ...
    approvals = [a for step in second.report["steps"] for a in step["approvals"]]
    assert [(a["call_id"], a["outcome"], a["actor"]) for a in approvals] == [
        (small, "approved", "ana"),
        (large, "rejected", "bo"),
    ]
    assert approvals[1]["feedback"] == feedback
    # ... and in the journal.
    records = store.history(thread)
    assert_one_clean_run(records)
    decided = events_of(records, ApprovalDecided)
    assert [(d.call_id, d.decision.action, d.decision.feedback) for d in decided] == [
        (small, "approve", None),
        (large, "reject", feedback),
    ]
    assert all(d.decided_at.tzinfo is not None for d in decided)
    (requested,) = events_of(records, ApprovalRequested)
    assert [call.id for call in requested.calls] == [small, large]
    assert [call_id for call_id, _ in starts(records)] == [small]


def test_deciding_one_call_while_another_runs_keeps_its_result(
    store: Store, children: Children
) -> None:
    thread = "split-overlap"
    (paused,) = pause(children, thread, amounts="10,250")
    small, large = (call["id"] for call in paused["pending"])
    hold = children.folder / "hold"
    approve = json.dumps({small: {"action": "approve"}})
    first = children.start(
        "pay", "resume", "--thread", thread, "--decide", approve, "--hold", str(hold)
    )
    children.wait_until(lambda: Path(f"{hold}.{first.pid}").exists(), first)

    # While pay(10) runs in the first process, a second one rejects the other call.
    reject = json.dumps({large: {"action": "reject", "feedback": "Too much."}})
    second = children.run("pay", "resume", "--thread", thread, "--decide", reject)
    Path(f"{hold}.release").touch()
    first_result = children.finish(first)
    outcomes = (first_result.outcome, second.outcome)

    # The second process recorded its rejection and left the run to the first,
    # which folded the rejection in, kept its payment's result and finished.
    assert outcomes == ("ok", "busy"), (first_result.reports, second.reports)
    assert "decisions were recorded" in second.reports[-1]["error"]
    assert [p["amount"] for p in children.side_effects()] == [10]
    records = store.read(thread)
    finished = [r.event.result.call_id for r in records if r.event.kind == "tool_finished"]
    assert finished == [small], f"outcomes {outcomes}: the result of pay(10) was dropped"
    assert records[-1].event.kind == "finished"
    assert "Too much." in first_result.reports[-1]["output"]
