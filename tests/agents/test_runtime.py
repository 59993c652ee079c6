"""The reason/act loop: answers, tools, bounds, corrections, threads, streaming."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from tidemill import (
    AgentRuntime,
    ApprovalError,
    ConfigurationError,
    MalformedToolCall,
    MaxIterationsExceeded,
    ThreadBusy,
    ToolContext,
    ToolRetriesExceeded,
    tool,
)
from tidemill.agents.checkpoint import MemoryCheckpointer, SQLiteCheckpointer
from tidemill.agents.journal import JournalEvent, ModelTurn, ToolFinished, ToolStarted
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import (
    Message,
    ResponseDone,
    Role,
    RunDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEnd,
    ToolCallStart,
)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def calls(*specs: tuple[str, dict[str, object]]) -> list[ToolCall]:
    return [ToolCall(name=name, arguments=args) for name, args in specs]  # type: ignore[arg-type]


async def test_answer_without_tools() -> None:
    model = ScriptedModel(["Hello!"], strict=True)
    response = await AgentRuntime(model=model, system_prompt="Be kind.").arun("Hi")
    assert response.output == "Hello!"
    assert [m.role for m in response.messages] == [Role.USER, Role.ASSISTANT]
    assert response.usage.requests == 1
    assert response.thread_id.startswith("thread_")
    assert response.latency_ms > 0
    sent = model.requests[0]
    assert [m.role for m in sent.messages] == [Role.SYSTEM, Role.USER]
    assert sent.messages[0].content == "Be kind."


async def test_one_tool_call_then_answer() -> None:
    model = ScriptedModel(
        ["", "It is 5."], tool_calls=[calls(("add", {"a": 2, "b": 3})), []], strict=True
    )
    response = await AgentRuntime(model=model, tools=[add]).arun("2+3?")
    assert response.output == "It is 5."
    assert [m.role for m in response.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert response.messages[2].content == "5"
    assert [len(s.tool_calls) for s in response.steps] == [1, 0]
    assert response.steps[0].tool_results[0].content == "5"
    assert response.usage.requests == 2
    assert [d.name for d in model.requests[0].tools] == ["add"]
    # The second call sees the tool result.
    assert model.requests[1].messages[-1].content == "5"


async def test_settings_reach_the_model() -> None:
    model = ScriptedModel(["ok"])
    await AgentRuntime(model=model).arun("x", temperature=0.2, max_tokens=5)
    assert model.requests[0].settings == {"temperature": 0.2, "max_tokens": 5}


async def test_prompt_forms() -> None:
    model = ScriptedModel(handler=lambda r: str(len(r.messages)))
    runtime = AgentRuntime(model=model)
    assert (await runtime.arun(Message.user("a"))).output == "1"
    transcript = [Message.user("a"), Message.assistant("b"), Message.user("c")]
    assert (await runtime.arun(transcript)).output == "3"
    for bad in ([], [1], 42):
        with pytest.raises(ConfigurationError, match="prompt"):
            await runtime.arun(bad)  # type: ignore[arg-type]


async def test_a_thread_keeps_its_history_across_runs() -> None:
    model = ScriptedModel(handler=lambda r: f"seen {len(r.messages)}")
    runtime = AgentRuntime(model=model)
    first = await runtime.arun("one", thread_id="t")
    second = await runtime.arun("two", thread_id="t")
    assert (first.output, second.output) == ("seen 1", "seen 3")
    assert len(second.messages) == 4
    assert len(second.steps) == 1  # steps and usage are per run
    assert second.usage.requests == 1


async def test_parallel_tool_calls_run_concurrently() -> None:
    started: list[str] = []
    both_running = asyncio.Event()

    @tool
    async def wait_for_other(name: str) -> str:
        """Wait until both calls are running."""
        started.append(name)
        if len(started) == 2:
            both_running.set()
        await asyncio.wait_for(both_running.wait(), timeout=5)
        return name

    model = ScriptedModel(
        ["", "done"],
        tool_calls=[
            calls(("wait_for_other", {"name": "a"}), ("wait_for_other", {"name": "b"})),
            [],
        ],
    )
    response = await AgentRuntime(model=model, tools=[wait_for_other]).arun("go")
    assert sorted(r.content for r in response.steps[0].tool_results) == ["a", "b"]


async def test_parallelism_is_bounded_and_can_be_switched_off() -> None:
    running = 0
    peak = 0

    @tool
    async def slow() -> None:
        """Sleep a little."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1

    def script() -> ScriptedModel:
        return ScriptedModel(["", "done"], tool_calls=[calls(*[("slow", {})] * 6), []])

    await AgentRuntime(model=script(), tools=[slow], max_parallel=2).arun("go")
    assert peak == 2
    peak = 0
    await AgentRuntime(model=script(), tools=[slow], parallel_tools=False).arun("go")
    assert peak == 1


async def test_serial_tools_are_journaled_one_at_a_time() -> None:
    checkpointer = MemoryCheckpointer()
    model = ScriptedModel(
        ["", "ok"], tool_calls=[calls(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})), []]
    )
    runtime = AgentRuntime(
        model=model, tools=[add], parallel_tools=False, checkpointer=checkpointer
    )
    response = await runtime.arun("x", thread_id="t")
    records = await checkpointer.read("t")
    kinds = [r.event.kind for r in records]
    # The first call starts with its turn; the second only once the first has finished.
    assert kinds == [
        "user_message",
        "model_response",
        "tool_finished",
        "tool_started",
        "tool_finished",
        "model_response",
        "finished",
    ]
    turn, second = records[1].event, records[3].event
    assert isinstance(turn, ModelTurn) and isinstance(second, ToolStarted)
    first_call, second_call = turn.response.message.tool_calls
    assert turn.started == (first_call.id,)
    assert second.call == second_call
    assert [r.content for r in response.steps[0].tool_results] == ["2", "4"]


class CountingCheckpointer(MemoryCheckpointer):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def append(self, thread_id: str, events: Sequence[JournalEvent], *, after: int) -> int:
        self.batches.append(len(events))
        return await super().append(thread_id, events, after=after)


async def test_each_iteration_appends_a_constant_number_of_events() -> None:
    """Nothing rewrites the conversation: iteration 60 writes what iteration 2 writes."""
    checkpointer = CountingCheckpointer()
    n = 60
    model = ScriptedModel(
        handler=lambda r: (
            Message.assistant("", tool_calls=(ToolCall(name="add", arguments={"a": 1, "b": 1}),))
            if len(r.messages) < 2 * n
            else "done"
        )
    )
    await AgentRuntime(
        model=model, tools=[add], checkpointer=checkpointer, max_iterations=n + 1
    ).arun("loop")
    # The user message; per tool turn, [turn, its calls marked started] then [finished];
    # then [turn + finished].
    assert checkpointer.batches == [1] + [1, 1] * n + [2]


async def test_max_iterations_raises_with_the_partial_run() -> None:
    model = ScriptedModel(
        handler=lambda _: Message.assistant(
            "again", tool_calls=(ToolCall(name="add", arguments={"a": 1, "b": 2}),)
        )
    )
    runtime = AgentRuntime(model=model, tools=[add], max_iterations=3)
    with pytest.raises(MaxIterationsExceeded) as info:
        await runtime.arun("loop forever", thread_id="t")
    assert info.value.value == 3
    partial = info.value.response
    assert partial is not None
    assert len(partial.steps) == 3
    assert all(s.tool_results[0].content == "3" for s in partial.steps)
    assert partial.usage.requests == 3
    state = await runtime.astate("t")
    assert state is not None
    assert state.status == "failed"
    # The thread takes a new run afterwards, with a larger budget if asked.
    model.handler = lambda _: "finally"
    assert (await runtime.arun("stop", thread_id="t", max_iterations=1)).output == "finally"


async def test_per_run_budget_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="at least 1"):
        await AgentRuntime(model=ScriptedModel()).arun("x", max_iterations=0)


@pytest.mark.parametrize(
    ("bad_call", "expected"),
    [
        (ToolCall(name="ad", arguments={"a": 1, "b": 2}), "Did you mean 'add'"),
        (ToolCall(name="add", arguments={"a": "x", "b": 2}), "Invalid arguments for tool 'add'"),
        (ToolCall(name="add", raw_arguments='{"a": 1,'), "not a JSON object"),
    ],
    ids=["unknown-tool", "invalid-arguments", "unparseable-json"],
)
async def test_bad_calls_go_back_to_the_model_which_corrects_itself(
    bad_call: ToolCall, expected: str
) -> None:
    good = ToolCall(name="add", arguments={"a": 1, "b": 2})
    model = ScriptedModel(["", "", "3"], tool_calls=[[bad_call], [good], []], strict=True)
    response = await AgentRuntime(model=model, tools=[add], tool_call_retries=1).arun("1+2")
    assert response.output == "3"
    error = response.steps[0].tool_results[0]
    assert error.is_error
    assert expected in error.content
    assert model.requests[1].messages[-1].is_error
    assert expected in model.requests[1].messages[-1].content


async def test_an_exception_inside_a_tool_is_shown_to_the_model() -> None:
    @tool
    def flaky(x: int) -> int:
        """Fails on zero."""
        return 10 // x

    model = ScriptedModel(["", "ok"], tool_calls=[calls(("flaky", {"x": 0})), []], strict=True)
    response = await AgentRuntime(model=model, tools=[flaky]).arun("go")
    result = response.steps[0].tool_results[0]
    assert result.is_error
    assert result.content == "The tool raised ZeroDivisionError: integer division or modulo by zero"


async def test_tool_call_retries_bound_the_corrections() -> None:
    bad = ToolCall(name="nope")
    model = ScriptedModel(
        handler=lambda _: Message.assistant(
            "", tool_calls=(bad.model_copy(update={"id": f"c{len(model.requests)}"}),)
        )
    )
    runtime = AgentRuntime(model=model, tools=[add], tool_call_retries=2, max_iterations=10)
    with pytest.raises(ToolRetriesExceeded) as info:
        await runtime.arun("go", thread_id="t")
    assert len(model.requests) == 3  # the first try and two retries
    assert "no tool named 'nope'" in info.value.last_error
    assert info.value.response is not None
    assert len(info.value.response.steps) == 3
    state = await runtime.astate("t")
    assert state is not None
    assert state.status == "failed"


async def test_zero_retries_fail_on_the_first_bad_call() -> None:
    model = ScriptedModel([""], tool_calls=[[ToolCall(name="nope")]])
    with pytest.raises(ToolRetriesExceeded):
        await AgentRuntime(model=model, tools=[add], tool_call_retries=0).arun("go")
    assert len(model.requests) == 1


async def test_malformed_calls_from_the_provider_are_corrections() -> None:
    attempts = 0

    def handler(request: ModelRequest) -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise MalformedToolCall("nested call in arguments")
        return "recovered"

    model = ScriptedModel(handler=handler)
    response = await AgentRuntime(model=model, tool_call_retries=1).arun("go")
    assert response.output == "recovered"
    assert response.steps[0].note == "[recovered] nested call in arguments"
    feedback = model.requests[1].messages[-1]
    assert feedback.role == Role.USER
    assert "could not be parsed" in feedback.content

    def always(request: ModelRequest) -> str:
        raise MalformedToolCall("again")

    with pytest.raises(ToolRetriesExceeded, match="again"):
        await AgentRuntime(model=ScriptedModel(handler=always), tool_call_retries=1).arun("go")


async def test_tools_get_a_context_with_a_stable_idempotency_key() -> None:
    seen: list[ToolContext] = []

    @tool
    def record(ctx: ToolContext) -> str:
        """Record the context."""
        seen.append(ctx)
        return "ok"

    call = ToolCall(name="record")
    model = ScriptedModel(["", "done"], tool_calls=[[call], []])
    await AgentRuntime(model=model, tools=[record], name="clerk").arun("x", thread_id="th")
    assert seen == [
        ToolContext(thread_id="th", call_id=call.id, tool_name="record", attempt=1, agent="clerk")
    ]
    assert seen[0].idempotency_key == f"th/{call.id}"


async def test_a_thread_with_an_unfinished_run_refuses_a_new_one() -> None:
    def explode(request: ModelRequest) -> str:
        raise RuntimeError("provider down")

    model = ScriptedModel(handler=explode)
    runtime = AgentRuntime(model=model)
    with pytest.raises(RuntimeError):
        await runtime.arun("x", thread_id="t")
    with pytest.raises(ThreadBusy, match="unfinished run"):
        await runtime.arun("y", thread_id="t")
    # resume() continues it once the provider is back; the model is asked again.
    model.handler = lambda _: "back"
    assert (await runtime.aresume("t")).output == "back"
    with pytest.raises(ApprovalError, match="nothing to resume"):
        await runtime.aresume("t")


async def test_tools_need_a_model_that_can_call_them() -> None:
    model = ScriptedModel()
    model.supports_tools = False
    with pytest.raises(ConfigurationError, match="cannot call tools"):
        AgentRuntime(model=model, tools=[add])


@pytest.mark.parametrize(
    "kwargs", [{"max_iterations": 0}, {"tool_call_retries": -1}, {"max_parallel": 0}]
)
def test_bad_bounds_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigurationError):
        AgentRuntime(model=ScriptedModel(), **kwargs)  # type: ignore[arg-type]


async def test_stream_yields_deltas_tool_events_and_the_response() -> None:
    model = ScriptedModel(
        ["Adding.", "The sum is 5."], tool_calls=[calls(("add", {"a": 2, "b": 3})), []]
    )
    runtime = AgentRuntime(model=model, tools=[add], checkpointer=MemoryCheckpointer())
    events = [e async for e in runtime.astream("2+3?", thread_id="s")]
    kinds = [e.type for e in events]
    assert kinds == [
        "text",
        "tool_call_delta",
        "response",
        "tool_call",
        "tool_result",
        "text",
        "text",
        "text",
        "text",
        "response",
        "done",
    ]
    assert isinstance(events[3], ToolCallStart)
    assert events[3].call.name == "add"
    assert isinstance(events[4], ToolCallEnd)
    assert events[4].result.content == "5"
    done = events[-1]
    assert isinstance(done, RunDone)
    assert done.response.output == "The sum is 5."
    assert "".join(e.delta for e in events[5:9] if isinstance(e, TextDelta)) == "The sum is 5."
    assert isinstance(events[2], ResponseDone)


async def test_streamed_and_plain_runs_journal_the_same_events() -> None:
    def script() -> ScriptedModel:
        return ScriptedModel(
            ["", "5"], tool_calls=[[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})], []]
        )

    plain, streamed = MemoryCheckpointer(), MemoryCheckpointer()
    await AgentRuntime(model=script(), tools=[add], checkpointer=plain).arun("q", thread_id="t")
    async for _ in AgentRuntime(model=script(), tools=[add], checkpointer=streamed).astream(
        "q", thread_id="t"
    ):
        pass

    def shape(records: list[JournalEvent]) -> list[object]:
        out: list[object] = []
        for event in records:
            if isinstance(event, ModelTurn):
                out.append(
                    ("turn", event.response.message.content, event.response.message.tool_calls)
                )
            elif isinstance(event, ToolStarted):
                out.append(("started", event.call))
            else:
                out.append(event.model_dump(exclude={"run_id", "decided_at"}))
        return out

    assert shape([r.event for r in await plain.read("t")]) == shape(
        [r.event for r in await streamed.read("t")]
    )


async def test_astream_text_yields_only_text() -> None:
    model = ScriptedModel(["a b c"])
    chunks = [c async for c in AgentRuntime(model=model).astream_text("x")]
    assert "".join(chunks) == "a b c"


def test_stream_text_is_the_blocking_twin_and_takes_the_run_bounds() -> None:
    looping = ScriptedModel(
        handler=lambda _: Message.assistant(
            "again", tool_calls=tuple(calls(("add", {"a": 1, "b": 2})))
        )
    )
    runtime = AgentRuntime(model=ScriptedModel(["a b c"]))
    assert "".join(runtime.stream_text("x")) == "a b c"
    with pytest.raises(MaxIterationsExceeded) as info:
        list(AgentRuntime(model=looping, tools=[add]).stream_text("go", max_iterations=2))
    assert info.value.value == 2


def test_sync_methods_work_from_plain_code_and_inside_a_running_loop() -> None:
    runtime = AgentRuntime(model=ScriptedModel(["one", "two", "three"]))
    assert runtime.run("x").output == "one"
    assert [e.type for e in runtime.stream("y")][-1] == "done"

    async def inside() -> str:
        return runtime.run("z").output  # blocking call inside a loop, as in a notebook

    assert asyncio.run(inside()) == "three"
    runtime.close()


def test_describe_is_json_safe() -> None:
    import json

    runtime = AgentRuntime(model=ScriptedModel(), tools=[add], name="calc", system_prompt="S")
    described = runtime.describe()
    assert json.loads(json.dumps(described)) == described
    assert described["name"] == "calc"
    assert described["tools"] == [
        {"name": "add", "description": "Add two numbers.", "requires_approval": False}
    ]


async def test_a_call_left_in_flight_is_rerun_only_when_asked() -> None:
    """A journal that ends after `tool_started`: the process died mid-call (or is still busy)."""
    from tidemill.agents.journal import UserInput
    from tidemill.types import ModelResponse

    seen: list[ToolContext] = []

    @tool
    def charge(ctx: ToolContext) -> str:
        """Charge once."""
        seen.append(ctx)
        return "charged"

    call = ToolCall(name="charge")
    checkpointer = MemoryCheckpointer()
    await checkpointer.append(
        "t",
        [
            UserInput(messages=(Message.user("charge it"),), run_id="r1"),
            ModelTurn(response=ModelResponse(message=Message.assistant("", tool_calls=(call,)))),
            ToolStarted(call=call),
        ],
        after=0,
    )
    runtime = AgentRuntime(model=ScriptedModel(["done"]), tools=[charge], checkpointer=checkpointer)
    with pytest.raises(ThreadBusy, match="was started and has no result") as info:
        await runtime.aresume("t")
    assert "retry_in_flight=True" in str(info.value)
    assert seen == []
    response = await runtime.aresume("t", retry_in_flight=True)
    assert response.output == "done"
    assert [(c.attempt, c.idempotency_key) for c in seen] == [(2, f"t/{call.id}")]


async def test_a_stream_says_why_it_stopped_before_raising() -> None:
    model = ScriptedModel(
        handler=lambda _: Message.assistant(
            "", tool_calls=(ToolCall(name="add", arguments={"a": 1, "b": 1}),)
        )
    )
    runtime = AgentRuntime(model=model, tools=[add], max_iterations=2)
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async for event in runtime.astream("spin"):
            seen.append(event)

    with pytest.raises(MaxIterationsExceeded):
        await consume()
    stopped = seen[-1]
    assert stopped.type == "stopped"
    assert (stopped.limit, stopped.error) == ("max_iterations", "MaxIterationsExceeded")
    assert len(stopped.response.steps) == 2


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_result_with_undecodable_bytes_is_journaled_not_lost(
    backend: str, tmp_path: Path
) -> None:
    """Text decoded with surrogateescape has no UTF-8 form; the model gets U+FFFD instead."""
    ran: list[str] = []

    @tool
    def listing() -> str:
        """The folder's one file name, as os.listdir gives it for non-UTF-8 bytes."""
        name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
        ran.append(name)
        return name

    checkpointer = (
        MemoryCheckpointer() if backend == "memory" else SQLiteCheckpointer(tmp_path / "j.db")
    )
    model = ScriptedModel(["", "done"], tool_calls=[calls(("listing", {})), []])
    try:
        response = await AgentRuntime(model=model, tools=[listing], checkpointer=checkpointer).arun(
            "What is in the folder?", thread_id="t"
        )
        assert response.output == "done"
        assert len(ran) == 1
        (result,) = response.steps[0].tool_results
        assert result.content == "caf\ufffd.txt"
        assert model.requests[1].messages[-1].content == "caf\ufffd.txt"
        stored = [r.event for r in await checkpointer.read("t")]
        assert [e.result.content for e in stored if isinstance(e, ToolFinished)] == [
            "caf\ufffd.txt"
        ]
    finally:
        await checkpointer.aclose()
