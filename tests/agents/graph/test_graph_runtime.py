"""The graph runtime's loop: answers, tools, corrections, bounds, limits, streaming."""

from __future__ import annotations

import pytest
from graph_agents import add, explode

from tidemill import (
    ApprovalError,
    ConfigurationError,
    LimitExceeded,
    MalformedToolCall,
    MaxIterationsExceeded,
    ThreadBusy,
    ToolRetriesExceeded,
)
from tidemill.agents import AgentRuntime, UsageLimits
from tidemill.agents.checkpoint import MemoryCheckpointer
from tidemill.agents.graph import GraphRuntime
from tidemill.agents.journal import ModelTurn, RunFailed, UserInput
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import (
    Message,
    ModelResponse,
    ResponseDone,
    Role,
    RunDone,
    RunStopped,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)


def looping() -> ScriptedModel:
    """Calls `add` on every turn, never answering."""
    return ScriptedModel(handler=lambda _: Message.assistant("again", tool_calls=(adding(),)))


def adding(a: int = 1, b: int = 2) -> ToolCall:
    return ToolCall(name="add", arguments={"a": a, "b": b})


async def test_a_plain_answer() -> None:
    model = ScriptedModel(["Hello!"], strict=True)
    runtime = GraphRuntime(model=model, system_prompt="Be kind.")
    response = await runtime.arun("Hi")
    assert response.output == "Hello!"
    assert [m.role for m in response.messages] == [Role.USER, Role.ASSISTANT]
    assert response.usage.requests == 1
    assert response.thread_id.startswith("thread_")
    assert [m.role for m in model.requests[0].messages] == [Role.SYSTEM, Role.USER]
    state = await runtime.astate(response.thread_id)
    assert state is not None
    assert (state.status, state.output) == ("finished", "Hello!")


async def test_a_tool_loop_answers_with_what_the_tool_said() -> None:
    model = ScriptedModel(["", "It is 5."], tool_calls=[[adding(2, 3)], []], strict=True)
    response = await GraphRuntime(model=model, tools=[add]).arun("2+3?")
    assert response.output == "It is 5."
    assert [m.role for m in response.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert response.messages[2].content == "5"
    assert model.requests[1].messages[-1].content == "5"
    assert [len(s.tool_calls) for s in response.steps] == [1, 0]
    assert response.steps[0].tool_results[0].content == "5"
    assert response.usage.requests == 2


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (ToolCall(name="add", arguments={"a": "two"}), "Invalid arguments for tool 'add'"),
        (ToolCall(name="ad", arguments={}), "There is no tool named 'ad'. Did you mean 'add'?"),
        (ToolCall(name="explode"), "The tool raised ValueError: the fuse blew"),
    ],
)
async def test_tool_errors_go_back_to_the_model_as_in_the_built_in_loop(
    call: ToolCall, expected: str
) -> None:
    answers = ["", "Fixed: 3."]
    plan = [[call], []]
    graph_model = ScriptedModel(answers, tool_calls=plan, strict=True)
    loop_model = ScriptedModel(answers, tool_calls=plan, strict=True)
    response = await GraphRuntime(model=graph_model, tools=[add, explode]).arun("go")
    await AgentRuntime(model=loop_model, tools=[add, explode]).arun("go")
    assert response.output == "Fixed: 3."
    error = graph_model.requests[1].messages[-1]
    assert error.is_error
    assert expected in error.content
    assert error == loop_model.requests[1].messages[-1]


async def test_failing_tool_turns_are_bounded() -> None:
    model = ScriptedModel(handler=lambda _: Message.assistant(tool_calls=(ToolCall(name="x"),)))
    runtime = GraphRuntime(model=model, tools=[add], tool_call_retries=1)
    with pytest.raises(ToolRetriesExceeded) as info:
        await runtime.arun("go", thread_id="t")
    assert len(model.requests) == 2
    assert info.value.response is not None
    state = await runtime.astate("t")
    assert state is not None
    assert state.status == "failed"


async def test_a_malformed_call_is_corrected() -> None:
    def handler(request: ModelRequest) -> str:
        if len(request.messages) == 1:
            raise MalformedToolCall("not JSON", feedback="Send JSON, please.")
        return "Corrected."

    model = ScriptedModel(handler=handler)
    response = await GraphRuntime(model=model, tools=[add]).arun("go")
    assert response.output == "Corrected."
    assert model.requests[1].messages[-1] == Message.user("Send JSON, please.")
    assert response.steps[0].note == "[recovered] not JSON"


async def test_max_iterations_stops_with_the_partial_run() -> None:
    model = looping()
    runtime = GraphRuntime(model=model, tools=[add], max_iterations=2)
    with pytest.raises(MaxIterationsExceeded) as info:
        await runtime.arun("loop", thread_id="t")
    assert (info.value.limit, info.value.value) == ("max_iterations", 2)
    assert len(model.requests) == 2
    partial = info.value.response
    assert partial is not None
    assert len(partial.steps) == 2
    assert [m.role for m in partial.messages][-2:] == [Role.ASSISTANT, Role.TOOL]
    # A run's own budget replaces the agent's.
    model.requests.clear()
    with pytest.raises(MaxIterationsExceeded):
        await runtime.arun("loop", thread_id="t", max_iterations=3)
    assert len(model.requests) == 3


async def test_a_graph_loop_that_skips_the_model_hits_the_recursion_limit() -> None:
    runtime = GraphRuntime(model=ScriptedModel(["never"]), max_iterations=2)
    graph = runtime.native_graph()
    graph.add_node("spin", lambda state: {"messages": [Message.user("spin")]})
    graph.edges.discard(("__start__", "agent"))
    graph.add_edge("__start__", "spin")
    graph.add_edge("spin", "spin")
    runtime.recompile()
    with pytest.raises(MaxIterationsExceeded) as info:
        await runtime.arun("go", thread_id="t")
    assert info.value.response is not None
    assert info.value.response.messages[-1] == Message.user("spin")
    history = await runtime.ahistory("t")
    failed = [r.event for r in history if isinstance(r.event, RunFailed)]
    assert [(e.reason, e.limit) for e in failed] == [("limit", "max_iterations")]


async def test_the_request_limit_stops_before_the_call() -> None:
    model = looping()
    runtime = GraphRuntime(model=model, tools=[add], limits=UsageLimits(requests=2))
    with pytest.raises(LimitExceeded) as info:
        await runtime.arun("go")
    assert (info.value.limit, info.value.value) == ("requests", 2)
    assert len(model.requests) == 2


async def test_a_batch_that_would_cross_the_tool_call_limit_does_not_start() -> None:
    ran: list[int] = []

    def handler(request: ModelRequest) -> Message:
        ran.append(len(request.messages))
        return Message.assistant(tool_calls=(adding(), adding(3, 4)))

    model = ScriptedModel(handler=handler)
    runtime = GraphRuntime(model=model, tools=[add])
    with pytest.raises(LimitExceeded) as info:
        await runtime.arun("go", thread_id="t", limits=UsageLimits(tool_calls=3))
    assert info.value.limit == "tool_calls"
    state = await runtime.astate("t")
    assert state is not None
    assert state.tool_calls == 2  # the second turn's batch of two would cross 3
    partial = info.value.response
    assert partial is not None
    assert "Not run: the run reached its tool_calls limit of 3." in partial.messages[-1].content


async def test_token_limits_stop_after_the_answer_that_crosses_them() -> None:
    big = ScriptedModel(handler=lambda _: "x" * 400)
    runtime = GraphRuntime(model=big, limits=UsageLimits(output_tokens=50))
    with pytest.raises(LimitExceeded) as info:
        await runtime.arun("go")
    assert info.value.limit == "output_tokens"
    assert info.value.response is not None
    assert info.value.response.usage.output_tokens > 50


async def test_token_limits_are_checked_before_the_call_too() -> None:
    model = ScriptedModel(["ok", "ok"])
    runtime = GraphRuntime(model=model, limits=UsageLimits(input_tokens=100, output_tokens=500))
    assert (await runtime.arun("x" * 400)).output == "ok"  # estimated at exactly 100: sent
    assert model.requests[0].settings.get("max_tokens") == 500  # lowered to the budget
    with pytest.raises(LimitExceeded) as info:
        await runtime.arun("x" * 404)  # estimated at 101: never sent
    assert len(model.requests) == 1
    assert info.value.limit == "input_tokens" and "estimated" in info.value.message
    partial = info.value.response
    assert partial is not None
    state = await runtime.astate(partial.thread_id)
    assert state is not None and state.status == "failed"


async def test_threads_keep_the_conversation_across_runs() -> None:
    model = ScriptedModel(["One.", "Two."], strict=True)
    runtime = GraphRuntime(model=model)
    await runtime.arun("first", thread_id="t")
    response = await runtime.arun("second", thread_id="t")
    assert [m.content for m in model.requests[1].messages] == ["first", "One.", "second"]
    assert response.output == "Two."
    assert len(response.steps) == 1  # steps and usage are this run's
    inputs = [r.event for r in await runtime.ahistory("t") if isinstance(r.event, UserInput)]
    assert len(inputs) == 2


async def test_a_paused_or_unfinished_thread_takes_no_new_run() -> None:
    checkpointer = MemoryCheckpointer()
    runtime = GraphRuntime(model=ScriptedModel(["ok"]), checkpointer=checkpointer)
    started = UserInput(messages=(Message.user("x"),), run_id="r")
    await checkpointer.append("busy", [started], after=0)
    with pytest.raises(ThreadBusy, match="unfinished run"):
        await runtime.arun("again", thread_id="busy")


async def test_streaming_yields_deltas_tool_events_and_the_response() -> None:
    model = ScriptedModel(["", "It is 3."], tool_calls=[[adding()], []], strict=True)
    runtime = GraphRuntime(model=model, tools=[add])
    events = [event async for event in runtime.astream("1+2?")]
    kinds = [event.type for event in events]
    assert kinds[-1] == "done"
    assert kinds.count("response") == 2
    assert [e.type for e in events if isinstance(e, ToolCallStart | ToolCallEnd)] == [
        "tool_call",
        "tool_result",
    ]
    text = "".join(e.delta for e in events if isinstance(e, TextDelta))
    assert text == "It is 3."
    done = events[-1]
    assert isinstance(done, RunDone)
    assert done.response.output == "It is 3."
    assert isinstance(events[kinds.index("response")], ResponseDone)


async def test_a_stopped_stream_says_why_before_raising() -> None:
    runtime = GraphRuntime(model=looping(), tools=[add], max_iterations=1)
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async for event in runtime.astream("go"):
            seen.append(event)

    with pytest.raises(MaxIterationsExceeded):
        await consume()
    stopped = seen[-1]
    assert isinstance(stopped, RunStopped)
    assert (stopped.error, stopped.limit) == ("MaxIterationsExceeded", "max_iterations")


async def test_astream_text_yields_only_text() -> None:
    runtime = GraphRuntime(model=ScriptedModel(["Hello there world"]))
    assert "".join([piece async for piece in runtime.astream_text("hi")]) == "Hello there world"


def test_the_blocking_methods() -> None:
    model = ScriptedModel(["", "3"], tool_calls=[[adding()], []], strict=True)
    runtime = GraphRuntime(model=model, tools=[add])
    try:
        response = runtime.run("1+2", thread_id="t")
        assert response.output == "3"
        state = runtime.state("t")
        assert state is not None
        assert (state.status, state.usage.requests) == ("finished", 2)
        assert runtime.pending_approvals("t") == []
        everything = runtime.history("t")
        assert runtime.history("t", limit=2) == everything[-2:]
        assert everything[-1].event.kind == "finished"
        assert runtime.graph_state("t").values["messages"][-1] == Message.assistant("3")
        streamed = list(GraphRuntime(model=ScriptedModel(["hi"])).stream("yo"))
        assert streamed[-1].type == "done"
    finally:
        runtime.close()


def test_describe_names_the_runtime_and_its_graph() -> None:
    runtime = GraphRuntime(model=ScriptedModel(["x"]), tools=[add], name="grapher")
    description = runtime.describe()
    assert description["runtime"] == "langgraph"
    assert description["name"] == "grapher"
    assert description["nodes"] == ["agent", "tools"]
    assert description["tools"] == [
        {"name": "add", "description": "Add two numbers.", "requires_approval": False}
    ]
    assert description["checkpointer"] == "MemoryCheckpointer"


def test_configuration_is_checked() -> None:
    with pytest.raises(ConfigurationError):
        GraphRuntime(model=ScriptedModel(), max_iterations=0)
    with pytest.raises(ConfigurationError):
        GraphRuntime(model=ScriptedModel(), tool_call_retries=-1)
    runtime = GraphRuntime(model=ScriptedModel(["x"]))
    with pytest.raises(ConfigurationError, match="max_iterations"):
        runtime.run("x", max_iterations=0)
    with pytest.raises(ConfigurationError, match="A prompt is a string"):
        runtime.run([])
    runtime.close()


async def test_resume_refuses_a_thread_with_nothing_to_resume() -> None:
    runtime = GraphRuntime(model=ScriptedModel(["done"]))
    await runtime.arun("go", thread_id="t")
    with pytest.raises(ApprovalError, match="nothing to resume"):
        await runtime.aresume("t")


async def test_a_turn_journaled_before_a_crash_is_not_asked_again() -> None:
    checkpointer = MemoryCheckpointer()

    def down(request: ModelRequest) -> str:
        raise ConnectionError("the process died here")

    crashed = GraphRuntime(
        model=ScriptedModel(handler=down), tools=[add], checkpointer=checkpointer
    )
    with pytest.raises(ConnectionError):
        await crashed.arun("2+3?", thread_id="t")
    # As if the agent node had journaled its turn just before the process died.
    call = adding(2, 3)
    turn = ModelResponse(message=Message.assistant(tool_calls=(call,)), usage=Usage(requests=1))
    records = await checkpointer.read("t")
    await checkpointer.append("t", [ModelTurn(response=turn)], after=records[-1].seq)

    # The whole script: the resumed thread is at its second turn (one assistant turn journaled).
    model = ScriptedModel(["", "It is 5."], tool_calls=[[call], []], strict=True)
    response = await GraphRuntime(model=model, tools=[add], checkpointer=checkpointer).aresume("t")
    assert response.output == "It is 5."
    assert len(model.requests) == 1  # only the turn after the tool result
    assert [m.content for m in model.requests[0].messages] == ["2+3?", "", "5"]
    assert response.usage.requests == 2
