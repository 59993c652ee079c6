"""Usage limits: checked before the work that would cross them, on every backend."""

from __future__ import annotations

import pytest

from tidemill import (
    AgentInterrupt,
    AgentRuntime,
    ConfigurationError,
    LimitExceeded,
    MaxIterationsExceeded,
    tool,
)
from tidemill.agents import UsageLimits
from tidemill.agents.checkpoint import Checkpointer
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, ModelResponse, ToolCall, Usage

ran: list[int] = []


@tool
def work(n: int) -> int:
    """Do a unit of work."""
    ran.append(n)
    return n


@tool(requires_approval=True)
def sensitive(n: int) -> int:
    """Work that needs approval."""
    ran.append(-n)
    return n


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()


def calls_per_turn(width: int, turns: int, *, tokens: int = 10) -> ScriptedModel:
    """Asks for `width` parallel calls per turn for `turns` turns, then answers."""

    def handler(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "assistant")
        usage = Usage(requests=1, input_tokens=tokens, output_tokens=tokens)
        if done >= turns:
            return ModelResponse(message=Message.assistant("done"), usage=usage)
        calls = tuple(
            ToolCall(name="work", arguments={"n": done * width + i}) for i in range(width)
        )
        return ModelResponse(message=Message.assistant("", tool_calls=calls), usage=usage)

    return ScriptedModel(handler=handler)


def runtime(
    model: ScriptedModel, checkpointer: Checkpointer | None = None, **limits: int
) -> AgentRuntime:
    return AgentRuntime(
        model=model,
        tools=[work, sensitive],
        checkpointer=checkpointer,
        limits=UsageLimits(**limits),
        max_iterations=50,
    )


async def test_the_request_limit_stops_before_the_call(checkpointer: Checkpointer) -> None:
    model = calls_per_turn(1, 10)
    agent = runtime(model, checkpointer, requests=3)
    with pytest.raises(LimitExceeded) as info:
        await agent.arun("go", thread_id="t")
    assert (info.value.limit, info.value.value) == ("requests", 3)
    assert len(model.requests) == 3  # the fourth call never happened
    assert ran == [0, 1, 2]
    partial = info.value.response
    assert partial is not None and partial.usage.requests == 3
    state = await agent.astate("t")
    assert state is not None and state.status == "failed"


async def test_a_batch_that_would_cross_the_tool_call_limit_does_not_start() -> None:
    agent = runtime(calls_per_turn(3, 5), tool_calls=5)
    with pytest.raises(LimitExceeded, match="tool_calls limit of 5") as info:
        await agent.arun("go", thread_id="t")
    assert ran == [0, 1, 2]  # the second batch of 3 would have made 6
    partial = info.value.response
    assert partial is not None
    last = partial.steps[-1]
    assert len(last.tool_calls) == 3 and all(r.is_error for r in last.tool_results)
    assert "Not run" in last.tool_results[0].content
    # The transcript stays well-formed: every call has a result, so the thread takes a new run.
    agent2 = runtime(ScriptedModel(["fine"]), agent.checkpointer)
    assert (await agent2.arun("and now?", thread_id="t")).output == "fine"


async def test_token_limits_stop_after_the_answer_that_crosses_them() -> None:
    agent = runtime(calls_per_turn(1, 10, tokens=40), total_tokens=200)
    with pytest.raises(LimitExceeded) as info:
        await agent.arun("go")
    assert info.value.limit == "total_tokens"
    # 80 tokens a turn: turns 1 and 2 ran their tools; turn 3 crossed 200, its call did not run.
    assert ran == [0, 1]
    assert info.value.response is not None
    assert info.value.response.usage.total_tokens == 240


@pytest.mark.parametrize("name", ["input_tokens", "output_tokens"])
async def test_input_and_output_token_limits(name: str) -> None:
    agent = runtime(calls_per_turn(1, 10, tokens=40), **{name: 100})
    with pytest.raises(LimitExceeded) as info:
        await agent.arun("go")
    assert info.value.limit == name
    assert ran == [0, 1]


async def test_usage_accumulates_across_an_approval_pause(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="sensitive", arguments={"n": 1})
    model = ScriptedModel(
        ["", "", "done"],
        tool_calls=[[call], [ToolCall(name="work", arguments={"n": 2})], []],
    )
    agent = runtime(model, checkpointer, requests=2)
    with pytest.raises(AgentInterrupt):
        await agent.arun("go", thread_id="t")
    with pytest.raises(LimitExceeded) as info:
        await agent.aresume("t", approved=True)
    assert info.value.limit == "requests"
    assert ran == [-1, 2]
    assert info.value.response is not None
    assert info.value.response.usage.requests == 2


async def test_max_iterations_is_a_limit_too() -> None:
    agent = AgentRuntime(model=calls_per_turn(1, 10), tools=[work], max_iterations=2)
    with pytest.raises(LimitExceeded) as info:
        await agent.arun("go")
    assert isinstance(info.value, MaxIterationsExceeded)
    assert (info.value.limit, info.value.value) == ("max_iterations", 2)


def test_limits_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="tool_calls limit must be at least 1"):
        UsageLimits(tool_calls=0)


def test_limits_are_described() -> None:
    agent = runtime(ScriptedModel(), requests=4, total_tokens=9)
    assert agent.describe()["limits"] == {"requests": 4, "total_tokens": 9}
