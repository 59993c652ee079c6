"""A worker that stalls past its lease starts nothing its successor took over.

Each test runs two workers, A and B, each in a thread of its own with its own
event loop, on one store. A is frozen at one point (its thread blocked, as a
GC pause, a frozen VM or SIGSTOP would freeze it) for longer than its lease;
B takes the job over meanwhile; then A wakes. What A does next is what each
test checks: it must not start the step's script, the agent's tool call or
its model call again. On SQLite and PostgreSQL.

A's lease renewals take half a second (a busy database), so that its renewal
loop, which wakes with it, cannot stop the job in time by luck: only the
check before each effect can.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidemill.agents.journal import ModelTurn, ToolFinished
from tidemill.engine import AsyncEngine
from tidemill.flows import Flow
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.store import JobRow
from tidemill.types import ModelResponse, ToolCall

pytestmark = pytest.mark.timeout(90)

LEASE = 1.0
"""Each worker's lease: A's freezes last several of them."""

STEP = (
    "import os\n"
    "def main(path: str):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(os.environ['TIDEMILL_STEP_ID'] + '\\n')\n"
)
TOOL = (
    "import os, time\n"
    "def main(path: str, pause: float):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(os.environ['TIDEMILL_TOOL_CALL_ID'] + '\\n')\n"
    "    time.sleep(pause)\n"
    "    return 'done'\n"
)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def until(condition: Callable[[], bool], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def freeze(frozen: threading.Event, thaw: threading.Event) -> None:
    """Block the calling thread (a worker's event loop) until `thaw`: a stall."""
    frozen.set()
    assert thaw.wait(60)


def slow_renewals(worker: Any) -> None:
    """Make the worker's lease renewals wait half a second before they reach the store."""
    store = worker.store
    transact = store.transact

    async def slow(work: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(work, "func", None) is not None and work.func.__name__ == "_renew":
            await asyncio.sleep(0.5)  # before the transaction: it holds no lock meanwhile
        return await transact(work, *args, **kwargs)

    store.transact = slow


class WorkerThread:
    """A worker with an event loop of its own, in a thread of its own."""

    def __init__(
        self,
        url: str,
        name: str,
        *,
        model: Model | None = None,
        on_event: Callable[[str, JobRow], None] | None = None,
        patch: Callable[[Any], None] | None = None,
    ) -> None:
        self.url, self.name, self.model, self.hook, self.patch = url, name, model, on_event, patch
        self.events: list[tuple[str, str]] = []
        self.ready, self.stop = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def finished(self, step_id: str) -> bool:
        return ("finished", step_id) in self.events

    def __enter__(self) -> WorkerThread:
        self.thread.start()
        assert self.ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)

    def _event(self, name: str, job: JobRow) -> None:
        if self.hook is not None:
            self.hook(name, job)
        self.events.append((name, job.step_id))

    async def _main(self) -> None:
        engine = AsyncEngine(self.url)
        model = self.model
        options: dict[str, Any] = {} if model is None else {"models": lambda _choice: model}
        try:
            async with engine.worker(
                concurrency=1, lease=LEASE, poll=0.05, pool_size=1, worker_id=self.name,
                on_event=self._event, **options,
            ) as worker:  # fmt: skip
                if self.name == "A":
                    slow_renewals(worker)
                if self.patch is not None:
                    self.patch(worker)
                self.ready.set()
                while not self.stop.is_set():  # noqa: ASYNC110 - set by another thread
                    await asyncio.sleep(0.02)
        finally:
            await engine.close()


async def test_a_step_claimed_before_the_stall_is_not_started_after_it(
    engine: AsyncEngine, store_url: str, tmp_path: Path
) -> None:
    """A records `e1` and claims `e2` in one transaction, then stalls; B runs `e2`; A wakes."""
    effects = tmp_path / "effects"
    steps = [
        {"id": name, "script": STEP, "inputs": {"path": str(effects)}} for name in ("e1", "e2")
    ]
    frozen, thaw = threading.Event(), threading.Event()

    def stall_on_e2(name: str, job: JobRow) -> None:
        if name == "claimed" and job.step_id == "e2" and not frozen.is_set():
            freeze(frozen, thaw)

    run_id = await engine.submit(Flow.model_validate({"steps": steps}))
    with WorkerThread(store_url, "A", on_event=stall_on_e2) as a:
        await until(frozen.is_set)
        with WorkerThread(store_url, "B") as b:
            await until(lambda: b.finished("e2"))  # B took e2 over when A's lease ran out
            await engine.wait(run_id, timeout=10)  # ended: B recorded e2
            thaw.set()
            await until(lambda: a.finished("e2"))
    assert lines(effects) == ["e1", "e2"]  # e2's script ran once: B's


def agent_flow(effects: Path, pause: float) -> Flow:
    tool = {"name": "effect", "script": TOOL, "inputs": {"path": str(effects), "pause": pause}}
    step = {"id": "agent", "ai_agent": {"model": "fake", "tools": [tool]},
            "inputs": {"user_message": "go"}}  # fmt: skip
    return Flow.model_validate({"steps": [step]})


def scripted() -> ScriptedModel:
    """Calls `effect` once (`c1`), then answers "finished"."""
    call = ToolCall(id="c1", name="effect", arguments={})
    return ScriptedModel(["", "finished"], tool_calls=[[call], []], record=True)


class _FreezeAfter:
    """A checkpointer that freezes its worker right after an append `when` picks."""

    def __init__(self, inner: Any, when: Callable[[Any], bool], stall: Callable[[], None]):
        self.inner, self.when, self.stall = inner, when, stall

    async def append(self, thread_id: str, events: Any, *, after: int) -> int:
        seq: int = await self.inner.append(thread_id, events, after=after)
        if any(self.when(event) for event in events):
            self.stall()
        return seq

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_model_call_after_the_stall_is_not_made(
    engine: AsyncEngine, store_url: str, tmp_path: Path
) -> None:
    """A journals the tool's result, then stalls before its next model call; B makes it."""
    effects = tmp_path / "effects"
    frozen, thaw = threading.Event(), threading.Event()
    once = threading.Event()

    def stall() -> None:
        if not once.is_set():
            once.set()
            freeze(frozen, thaw)

    def patch(worker: Any) -> None:
        journals, opened = worker._journals, worker._journals.checkpointer

        def checkpointer(url: Any) -> Any:
            return _FreezeAfter(opened(url), lambda e: isinstance(e, ToolFinished), stall)

        journals.checkpointer = checkpointer

    run_id = await engine.submit(agent_flow(effects, pause=0))
    model_a, model_b = scripted(), scripted()
    with WorkerThread(store_url, "A", model=model_a, patch=patch) as a:
        await until(frozen.is_set)
        with WorkerThread(store_url, "B", model=model_b) as b:
            await until(lambda: b.finished("agent"))
            assert await engine.wait(run_id, timeout=10) == "finished"
            thaw.set()
            await until(lambda: a.finished("agent"))
    assert len(model_a.requests) == 1  # A's first turn only: its second call was not made
    assert len(model_b.requests) == 1  # B asked the second turn, seeing the tool's result
    assert lines(effects) == ["c1"]


class _Held(Model):
    """A model whose answers wait until `release()` says so (B's, while A decides)."""

    def __init__(self, inner: ScriptedModel, release: Callable[[], bool]) -> None:
        self.inner, self.release = inner, release
        self.provider, self.model_name = inner.provider, inner.model_name
        self.supports_tools = True

    async def request(self, request: ModelRequest) -> ModelResponse:
        await until(self.release)
        return await self.inner.request(request)


class _Stalling(Model):
    """A model whose first answer comes after a stall of its worker's thread (A's)."""

    def __init__(self, inner: ScriptedModel, stall: Callable[[], None]) -> None:
        self.inner, self.stall = inner, stall
        self.provider, self.model_name = inner.provider, inner.model_name
        self.supports_tools = True

    async def request(self, request: ModelRequest) -> ModelResponse:
        response = await self.inner.request(request)
        if len(self.inner.requests) == 1:
            self.stall()
        return response


async def test_a_tool_call_after_the_stall_is_not_started(
    engine: AsyncEngine, store_url: str, tmp_path: Path
) -> None:
    """A gets the model's tool call, then stalls before starting it; B starts it instead.

    B's model answers only once A has acted (started the call, or given the
    job up), so that without the check A would journal and start the call
    first, and B, finding it started and unfinished, would run it again.
    """
    effects = tmp_path / "effects"
    frozen, thaw = threading.Event(), threading.Event()
    a_box: list[WorkerThread] = []

    def a_acted() -> bool:
        return bool(lines(effects)) or a_box[0].finished("agent")

    model_a = _Stalling(scripted(), lambda: freeze(frozen, thaw))
    model_b = _Held(scripted(), a_acted)
    run_id = await engine.submit(agent_flow(effects, pause=1.5))
    with WorkerThread(store_url, "A", model=model_a) as a:
        a_box.append(a)
        await until(frozen.is_set)
        with WorkerThread(store_url, "B", model=model_b) as b:
            await until(lambda: ("claimed", "agent") in b.events)  # A's lease ran out
            thaw.set()
            await until(lambda: b.finished("agent"))
            assert await engine.wait(run_id, timeout=10) == "finished"
            await until(lambda: a.finished("agent"))
    assert lines(effects) == ["c1"]  # the call ran once: B's
    turns = await engine.transcript(run_id, "agent")
    assert [m.role for m in turns].count("tool") == 1


def test_the_journal_checks_only_appends_that_start_calls() -> None:
    """The check runs before a turn that starts calls; never before a result is kept."""
    from tidemill.agents.checkpoint import MemoryCheckpointer
    from tidemill.engine._journal import StepJournal
    from tidemill.errors import LeaseLost
    from tidemill.types import ToolResult, Usage

    async def lost() -> None:
        raise LeaseLost("gone")

    journal = StepJournal(MemoryCheckpointer(), hold=lost)
    response = ModelResponse.model_validate(
        {"message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "effect", "arguments": {}}]},
         "usage": Usage().model_dump(), "model": "m"}
    )  # fmt: skip
    result = ToolResult(call_id="c1", name="effect", content="ok")

    async def appends() -> list[str]:
        seen: list[str] = []
        for event in (ModelTurn(response=response, started=("c1",)), ToolFinished(result=result)):
            try:
                await journal.append("t", [event], after=seen.count("kept"))
                seen.append("kept")
            except LeaseLost:
                seen.append("refused")
        return seen

    assert asyncio.run(appends()) == ["refused", "kept"]


async def test_a_renewal_read_just_after_a_recording_keeps_what_it_claimed(
    engine: AsyncEngine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A renewal that reads the store right after `e1` was recorded finds `e1` not running.

    That must not stop the worker's slot: the recording claimed `e2` for it,
    which would otherwise wait a whole lease for another claim.
    """
    effects = tmp_path / "effects"
    steps = [
        {"id": name, "script": STEP, "inputs": {"path": str(effects)}} for name in ("e1", "e2")
    ]
    run_id = await engine.submit(Flow.model_validate({"steps": steps}))
    lease = 3.0
    async with engine.worker(concurrency=1, lease=lease, poll=0.05, pool_size=1) as worker:
        transact = worker.store.transact

        async def then_renew(work: Any, *args: Any, **kwargs: Any) -> Any:
            result = await transact(work, *args, **kwargs)
            if getattr(work, "__name__", "") == "record":
                await asyncio.sleep(lease / 3 + 0.3)  # the renewal loop runs meanwhile
            return result

        worker.store.transact = then_renew  # type: ignore[method-assign]
        with caplog.at_level("INFO", logger="tidemill.worker"):
            await engine.wait(run_id, timeout=30)
    assert lines(effects) == ["e1", "e2"]
    assert [(job.step_id, job.epoch) for job in await engine.jobs(run_id)] == [("e1", 1), ("e2", 1)]
    assert "lease was lost" not in caplog.text
