"""Plain `def` tools: on the loop's thread where nothing else needs the loop, else in a thread.

A blocking `run()` lends its private loop to the agent's sync tools: a call
made while the run's task is the only one there, by a tool whose last call
was quick, runs on the loop's own thread (no hop there and back). Everywhere
else (the caller's own loop, a loop with other tasks on it, the calls of one
turn run together) a sync tool runs in a worker thread, as before.

`ON_LOOP_LIMIT` is raised in these tests so that "quick" never depends on how
busy the machine is; waits that would hang on a broken design have timeouts.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Iterator, Sequence

import pytest

from tidemill import AgentRuntime, ToolContext, tool
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, Role, ToolCall, ToolCallEnd

WAIT = 10.0
"""Seconds a test waits for something that a correct design makes happen at once."""


@pytest.fixture(autouse=True)
def _every_call_is_quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tidemill._sync.ON_LOOP_LIMIT", 60.0)


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)  # type: ignore[arg-type]


def planned(plans: dict[str, Sequence[Sequence[ToolCall]]]) -> ScriptedModel:
    """Per prompt, these turns of tool calls and then "done", decided from the run's messages."""

    def answer(request: ModelRequest) -> Message:
        messages = request.messages
        start = max(i for i, m in enumerate(messages) if m.role is Role.USER)
        turns = plans[str(messages[start].content)]
        made = sum(1 for m in messages[start:] if m.role is Role.ASSISTANT)
        if made < len(turns):
            return Message.assistant(tool_calls=tuple(turns[made]))
        return Message.assistant("done")

    return ScriptedModel(handler=answer)


@tool
async def where_async() -> str:
    """Name the thread the loop runs on."""
    return threading.current_thread().name


def results(response: object) -> list[str]:
    steps = response.steps  # type: ignore[attr-defined]
    return [r.content for step in steps for r in step.tool_results]


def finished_within(seconds: float, work: Callable[[], object]) -> object:
    """`work()` in a thread of its own; fails the test when it has not returned in time."""
    box: list[object] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(work())
        except BaseException as exc:  # handed to the test
            errors.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s: a deadlock"
    if errors:
        raise errors[0]
    return box[0]


@pytest.fixture
def runtimes() -> Iterator[list[AgentRuntime]]:
    made: list[AgentRuntime] = []
    yield made
    for runtime in made:
        runtime.close()


def test_a_blocking_run_calls_a_quick_sync_tool_on_its_loop_thread(
    runtimes: list[AgentRuntime],
) -> None:
    seen: list[tuple[str, str]] = []

    @tool
    def where(ctx: ToolContext) -> str:
        """Name the thread this call runs on."""
        seen.append((ctx.thread_id, ctx.call_id))
        return threading.current_thread().name

    turns = [[call("where")], [call("where")], [call("where")], [call("where_async")]]
    runtime = AgentRuntime(model=planned({"go": turns}), tools=[where, where_async])
    runtimes.append(runtime)
    response = runtime.run("go", thread_id="t1")
    first, second, third, loop = results(response)
    assert first != loop  # nothing known about the tool yet: a worker thread
    assert second == third == loop
    # The context is the call's own on either thread.
    assert [thread for thread, _ in seen] == ["t1"] * 3
    assert len({call_id for _, call_id in seen}) == 3
    # The blocking stream lends its loop too.
    streamed = [e for e in runtime.stream("go") if isinstance(e, ToolCallEnd)]
    assert [e.result.content for e in streamed] == [loop] * 4


async def test_on_the_callers_own_loop_a_sync_tool_always_runs_in_a_thread() -> None:
    @tool
    def where() -> str:
        """Name the thread this call runs on."""
        return threading.current_thread().name

    turns = [[call("where")], [call("where")], [call("where_async")]]
    runtime = AgentRuntime(model=planned({"go": turns}), tools=[where, where_async])
    first, second, loop = results(await runtime.arun("go"))
    assert loop == threading.current_thread().name
    assert first != loop and second != loop  # the loop may be shared: never on it


def test_a_sync_tool_runs_in_a_thread_while_another_run_is_on_the_loop(
    runtimes: list[AgentRuntime],
) -> None:
    holding, release = threading.Event(), threading.Event()

    @tool
    def hold() -> bool:
        """Wait until released."""
        holding.set()
        return release.wait(WAIT)

    @tool
    def where() -> str:
        """Name the thread this call runs on."""
        return threading.current_thread().name

    plans = {
        "warm": [[call("where")], [call("where_async")]],
        "hold": [[call("hold")]],
        "probe": [[call("where")], [call("where_async")]],
    }
    runtime = AgentRuntime(model=planned(plans), tools=[hold, where, where_async])
    runtimes.append(runtime)
    runtime.run("warm")  # `where` is known to be quick from now on
    held: list[object] = []
    other = threading.Thread(target=lambda: held.append(runtime.run("hold")), daemon=True)
    other.start()
    assert holding.wait(WAIT)
    try:
        # The first run is still on the loop: the probe must not block it, and
        # the slow tool there must not hold the probe up either.
        probe, loop = results(finished_within(WAIT, lambda: runtime.run("probe")))
    finally:
        release.set()
        other.join(WAIT)
    assert probe != loop
    assert results(held[0]) == ["true"]


def test_the_sync_calls_of_one_turn_overlap(runtimes: list[AgentRuntime]) -> None:
    meeting = threading.Barrier(2, timeout=WAIT)

    @tool
    def meet(wait: bool) -> str:
        """Wait until both calls of the turn are running."""
        if wait:
            meeting.wait()  # a call run on the loop's thread would keep the other from starting
        return "met"

    plans = {"go": [[call("meet", wait=False)], [call("meet", wait=True), call("meet", wait=True)]]}
    runtime = AgentRuntime(model=planned(plans), tools=[meet])
    runtimes.append(runtime)
    assert results(runtime.run("go")) == ["met"] * 3


def test_a_sync_tool_whose_last_call_was_slow_runs_in_a_thread(
    runtimes: list[AgentRuntime], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tidemill._sync.ON_LOOP_LIMIT", -1.0)  # every call counts as slow

    @tool
    def where() -> str:
        """Name the thread this call runs on."""
        return threading.current_thread().name

    turns = [[call("where")], [call("where")], [call("where")], [call("where_async")]]
    runtime = AgentRuntime(model=planned({"go": turns}), tools=[where, where_async])
    runtimes.append(runtime)
    *calls, loop = results(runtime.run("go"))
    assert loop not in calls


async def test_a_slow_sync_tool_does_not_stall_another_task_on_the_loop() -> None:
    started, answered = threading.Event(), threading.Event()

    @tool
    def ask() -> bool:
        """Wait for an answer from a task on the loop."""
        started.set()
        return answered.wait(WAIT)

    async def answer() -> None:
        # Set from this task, on the loop: only if the loop is free while the tool runs.
        if await asyncio.to_thread(started.wait, WAIT):
            answered.set()

    runtime = AgentRuntime(model=planned({"go": [[call("ask")]]}), tools=[ask])
    response, _ = await asyncio.gather(runtime.arun("go"), answer())
    assert results(response) == ["true"]


REQUEST = contextvars.ContextVar("REQUEST", default="none")


def test_a_sync_tool_sees_the_callers_contextvars_and_keeps_its_own_to_itself(
    runtimes: list[AgentRuntime],
) -> None:
    @tool
    def peek() -> str:
        """Read the request id, then change it."""
        value = REQUEST.get()
        REQUEST.set("changed by the tool")
        return f"{value} on {threading.current_thread().name}"

    turns = [[call("peek")], [call("peek")], [call("peek")], [call("where_async")]]
    runtime = AgentRuntime(model=planned({"go": turns}), tools=[peek, where_async])
    runtimes.append(runtime)
    token = REQUEST.set("req-7")
    try:
        first, second, third, loop = results(runtime.run("go"))
    finally:
        REQUEST.reset(token)
    assert first.startswith("req-7 on ") and not first.endswith(loop)
    assert second == third == f"req-7 on {loop}"  # not what an earlier call set


def test_a_sync_tool_on_the_loop_thread_sees_no_running_loop(
    runtimes: list[AgentRuntime],
) -> None:
    async def fetch() -> str:
        await asyncio.sleep(0)
        return "fetched"

    @tool
    def wrapper() -> str:
        """A sync tool over async code, as many client libraries are."""
        return f"{asyncio.run(fetch())} on {threading.current_thread().name}"

    turns = [[call("wrapper")], [call("wrapper")], [call("where_async")]]
    runtime = AgentRuntime(model=planned({"go": turns}), tools=[wrapper, where_async])
    runtimes.append(runtime)
    first, second, loop = results(runtime.run("go"))
    assert first.startswith("fetched on ")
    assert second == f"fetched on {loop}"


def test_sync_tool_errors_reach_the_model_alike_on_either_thread(
    runtimes: list[AgentRuntime],
) -> None:
    @tool
    def fail(how: str) -> str:
        """Fail."""
        if how == "stop":
            raise StopIteration  # what next() on an empty iterator raises
        raise ValueError("boom")

    turns = [[call("fail", how="value")], [call("fail", how="value")]]
    turns += [[call("fail", how="stop")], [call("fail", how="stop")]]
    runtime = AgentRuntime(model=planned({"go": turns}), tools=[fail], tool_call_retries=4)
    runtimes.append(runtime)
    response = finished_within(WAIT, lambda: runtime.run("go"))
    assert (
        results(response)
        == ["The tool raised ValueError: boom"] * 2
        + ["The tool raised RuntimeError: fail raised StopIteration"] * 2
    )


def test_a_sync_tool_may_call_the_blocking_methods_of_the_agent_running_it(
    runtimes: list[AgentRuntime],
) -> None:
    runtime: AgentRuntime

    @tool
    def depth(ctx: ToolContext) -> str:
        """How many events the thread holds (through the agent's blocking method)."""
        state = runtime.state(ctx.thread_id)
        return "ok" if state is not None else "none"

    turns = [[call("depth")], [call("depth")], [call("depth")]]
    runtime = AgentRuntime(model=planned({"go": turns}), tools=[depth])
    runtimes.append(runtime)
    response = finished_within(WAIT, lambda: runtime.run("go"))
    assert results(response) == ["ok"] * 3


def test_a_blocking_method_called_on_its_own_loop_thread_is_refused(
    runtimes: list[AgentRuntime],
) -> None:
    runtime: AgentRuntime

    @tool
    async def nested() -> str:
        """Call the agent's blocking run() from inside its own loop."""
        return runtime.run("inner").output

    plans = {"go": [[call("nested")]], "inner": []}
    runtime = AgentRuntime(model=planned(plans), tools=[nested])
    runtimes.append(runtime)
    response = finished_within(WAIT, lambda: runtime.run("go"))
    (content,) = results(response)
    assert content.startswith("The tool raised ConfigurationError: A blocking method was called")
