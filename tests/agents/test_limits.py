"""Usage limits: checked before the work that would cross them, on every backend."""

from __future__ import annotations

from typing import NoReturn

import pytest

import tidemill
from tidemill import (
    AgentInterrupt,
    AgentRuntime,
    ConfigurationError,
    LimitExceeded,
    MaxIterationsExceeded,
    tool,
)
from tidemill.agents import UsageLimits, _limits
from tidemill.agents._limits import SAFE_MAX_TOKENS, estimate_input_tokens
from tidemill.agents.checkpoint import Checkpointer
from tidemill.llm import FallbackModel, ModelRequest, ModelSettings, ScriptedModel
from tidemill.llm._scripted import Handler
from tidemill.types import (
    FinishReason,
    Message,
    ModelResponse,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Usage,
)

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


def fixed(output: int, *, input_tokens: int = 10, finish: FinishReason = "stop") -> Handler:
    """Answers "The answer is" with the given usage (`output=-1`: whatever max_tokens allows)."""

    def handler(request: ModelRequest) -> ModelResponse:
        spent = request.settings.get("max_tokens", 1000) if output < 0 else output
        usage = Usage(requests=1, input_tokens=input_tokens, output_tokens=spent)
        return ModelResponse(
            message=Message.assistant("The answer is"), usage=usage, finish_reason=finish
        )

    return handler


def sent_max_tokens(model: ScriptedModel) -> list[int | None]:
    return [r.settings.get("max_tokens") for r in model.requests]


class Defaulted(ScriptedModel):
    """A scripted model with default settings, as the HTTP models have."""

    settings = ModelSettings(max_tokens=50)


class Thinking(ScriptedModel):
    """A scripted model with a reasoning budget, as Anthropic's and Bedrock's have."""

    thinking_budget = 1024


async def test_a_call_whose_estimated_input_would_cross_input_tokens_is_never_sent() -> None:
    model = ScriptedModel(["ok"])
    agent = AgentRuntime(model=model, limits=UsageLimits(input_tokens=100))
    assert (await agent.arun("x" * 400)).output == "ok"  # estimated at exactly 100: sent
    with pytest.raises(LimitExceeded) as info:
        await agent.arun("x" * 404)  # 101
    assert len(model.requests) == 1  # the model never got the second request
    assert (info.value.limit, info.value.value) == ("input_tokens", 100)
    assert "estimated at 101 tokens" in info.value.message
    assert "Raise the limit with .limits(input_tokens=...)" in (info.value.hint or "")
    partial = info.value.response
    assert partial is not None and partial.usage.requests == 0
    state = await agent.astate(partial.thread_id)
    assert state is not None and state.status == "failed"


async def test_a_call_that_would_leave_no_room_within_total_tokens_is_never_sent() -> None:
    model = calls_per_turn(1, 10, tokens=40)
    agent = runtime(model, total_tokens=200)
    with pytest.raises(LimitExceeded) as info:
        await agent.arun("go")
    assert info.value.limit == "total_tokens"
    assert "not sent" in info.value.message and "estimated" in info.value.message
    # 80 tokens a turn: after two turns 160 are used, and the third call's input is estimated
    # above the 40 left, so it is not made, where it used to be made and cross to 240.
    assert len(model.requests) == 2
    assert ran == [0, 1]
    assert info.value.response is not None
    assert info.value.response.usage.total_tokens == 160


async def test_a_run_that_has_reached_a_token_limit_makes_no_further_call() -> None:
    model = calls_per_turn(1, 10, tokens=30)
    agent = runtime(model, output_tokens=60)
    with pytest.raises(LimitExceeded) as info:
        await agent.arun("go")
    assert info.value.limit == "output_tokens"
    assert "has used 60 tokens" in info.value.message
    assert len(model.requests) == 2 and ran == [0, 1]  # reaching is not crossing: its call ran


async def test_max_tokens_is_lowered_to_the_output_budget_left() -> None:
    model = calls_per_turn(1, 10, tokens=30)
    agent = runtime(model, output_tokens=100)
    with pytest.raises(LimitExceeded) as info:
        await agent.arun("go")
    assert sent_max_tokens(model) == [100, 70, 40, 10]
    # The scripted model ignores max_tokens and reports 30: the after-the-fact check stops it.
    assert info.value.limit == "output_tokens"
    assert ran == [0, 1, 2]


async def test_max_tokens_is_lowered_to_the_total_budget_left_after_the_input() -> None:
    model = calls_per_turn(1, 3, tokens=30)
    agent = runtime(model, total_tokens=1000)
    assert (await agent.arun("go")).output == "done"
    expected = [1000 - 60 * i - estimate_input_tokens(r) for i, r in enumerate(model.requests)]
    assert sent_max_tokens(model) == expected


async def test_a_smaller_max_tokens_of_the_caller_is_kept() -> None:
    model = calls_per_turn(1, 2, tokens=30)
    agent = runtime(model, output_tokens=100)
    assert (await agent.arun("go", max_tokens=50)).output == "done"
    assert sent_max_tokens(model) == [50, 50, 40]


async def test_the_models_own_max_tokens_is_never_raised() -> None:
    model = Defaulted(handler=calls_per_turn(1, 2, tokens=30).handler)
    agent = runtime(model, output_tokens=100)
    assert (await agent.arun("go")).output == "done"
    assert sent_max_tokens(model) == [None, None, 40]  # the model's 50 applies until 40 are left


async def test_a_fallback_model_keeps_the_smallest_default_of_its_models() -> None:
    first = Defaulted(handler=calls_per_turn(1, 2, tokens=30).handler)
    agent = runtime(FallbackModel([first, ScriptedModel()]), output_tokens=100)  # type: ignore[arg-type]
    assert (await agent.arun("go")).output == "done"
    assert sent_max_tokens(first) == [None, None, 40]


async def test_a_budget_larger_than_every_model_accepts_is_not_sent() -> None:
    model = calls_per_turn(1, 1, tokens=30)
    agent = runtime(model, output_tokens=SAFE_MAX_TOKENS + 29)
    assert (await agent.arun("go")).output == "done"
    # The model's own maximum is unknown: a larger max_tokens than it takes is refused.
    assert sent_max_tokens(model) == [None, SAFE_MAX_TOKENS - 1]


async def test_max_tokens_is_not_lowered_to_the_models_thinking_budget() -> None:
    model = Thinking(handler=calls_per_turn(1, 1, tokens=30).handler)
    agent = runtime(model, output_tokens=1024 + 30)
    assert (await agent.arun("go")).output == "done"
    assert sent_max_tokens(model) == [1054, None]  # 1024 left: the provider would refuse it


async def test_an_answer_that_overshoots_its_max_tokens_still_ends_the_run() -> None:
    model = calls_per_turn(1, 10, tokens=60)
    agent = runtime(model, output_tokens=50)
    with pytest.raises(LimitExceeded) as info:
        await agent.arun("go")
    assert sent_max_tokens(model) == [50]
    assert info.value.limit == "output_tokens"
    assert ran == []  # the turn that crossed it is kept, its call answered unrun
    partial = info.value.response
    assert partial is not None and partial.usage.output_tokens == 60
    assert "Not run" in partial.steps[-1].tool_results[0].content


@pytest.mark.parametrize("name", ["output_tokens", "total_tokens"])
async def test_an_answer_cut_short_by_the_lowered_max_tokens_ends_the_run(name: str) -> None:
    # The model spends all it is allowed and stops mid-answer. For total_tokens its real
    # input (3) is below the estimate, so the run stays under the limit: only the cut tells.
    model = ScriptedModel(handler=fixed(-1, input_tokens=3, finish="length"))
    agent = runtime(model, None, **{name: 300})
    with pytest.raises(LimitExceeded) as info:
        await agent.arun("go")
    assert (info.value.limit, len(model.requests)) == (name, 1)
    partial = info.value.response
    assert partial is not None and partial.output is None  # not passed off as the answer
    assert getattr(partial.usage, name) <= 300  # reached, not crossed


async def test_an_answer_cut_short_by_the_callers_own_max_tokens_is_the_answer() -> None:
    model = ScriptedModel(handler=fixed(-1, finish="length"))
    agent = runtime(model, output_tokens=1000)
    assert (await agent.arun("go", max_tokens=20)).output == "The answer is"


async def test_token_budgets_count_usage_from_before_a_pause(checkpointer: Checkpointer) -> None:
    call = ToolCall(name="sensitive", arguments={"n": 1})
    usage = Usage(requests=1, input_tokens=10, output_tokens=30)
    model = ScriptedModel(
        handler=lambda request: ModelResponse(
            message=Message.assistant("done")
            if any(m.role == "tool" for m in request.messages)
            else Message.assistant("", tool_calls=(call,)),
            usage=usage,
        )
    )
    agent = runtime(model, checkpointer, output_tokens=100)
    with pytest.raises(AgentInterrupt):
        await agent.arun("go", thread_id="t")
    resumed = runtime(model, checkpointer, output_tokens=100)  # as another process would
    result = await resumed.aresume("t", approved=True)
    assert result.output == "done" and result.usage.output_tokens == 60
    assert sent_max_tokens(model) == [100, 70]


async def test_without_token_limits_no_call_is_estimated_or_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("token limit work without a token limit")

    monkeypatch.setattr(UsageLimits, "fit_model", refuse)
    monkeypatch.setattr(UsageLimits, "after_turn", refuse)
    monkeypatch.setattr(_limits, "estimate_input_tokens", refuse)
    model = calls_per_turn(1, 2)
    assert (await runtime(model, requests=10, tool_calls=10).arun("go")).output == "done"
    assert sent_max_tokens(model) == [None, None, None]


async def test_an_output_budget_alone_needs_no_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: ModelRequest) -> NoReturn:
        raise AssertionError("estimated without an input or total limit")

    monkeypatch.setattr(_limits, "estimate_input_tokens", refuse)
    model = calls_per_turn(1, 1, tokens=30)
    assert (await runtime(model, output_tokens=100).arun("go")).output == "done"
    assert sent_max_tokens(model) == [100, 70]


def test_the_input_estimate_counts_text_tool_calls_results_and_schemas() -> None:
    call = ToolCall(name="work", arguments={"n": 1})  # 4 + 8 characters
    result = ToolResult(call_id=call.id, name="work", content="y" * 40)
    messages = [Message.user("x" * 40), Message.assistant("", tool_calls=(call,))]
    assert estimate_input_tokens(ModelRequest(messages[:1])) == 10
    assert estimate_input_tokens(ModelRequest(messages)) == 13  # 52 characters
    messages.append(Message.tool(result))
    assert estimate_input_tokens(ModelRequest(messages)) == 23  # 92
    schema = ToolDefinition(name="work", description="abcd", parameters={"type": "object"})
    assert estimate_input_tokens(ModelRequest(messages, (schema,))) == 30  # 92 + 4 + 4 + 18


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


@pytest.mark.parametrize("value", [0, -5, 2.5, "10", True])
def test_limits_must_be_whole_numbers_of_at_least_one(value: object) -> None:
    with pytest.raises(ConfigurationError, match="tool_calls limit must be a whole number") as info:
        UsageLimits(tool_calls=value)  # type: ignore[arg-type]
    assert info.value.hint == "Leave a limit out (None) to have none."


@pytest.mark.parametrize("name", ["requests", "input_tokens", "output_tokens", "total_tokens"])
def test_the_builder_refuses_a_limit_below_one(name: str) -> None:
    with pytest.raises(ConfigurationError, match=f"The {name} limit must be"):
        tidemill.agent().llm("fake").limits(**{name: -1})


def test_limits_are_described() -> None:
    agent = runtime(ScriptedModel(), requests=4, total_tokens=9)
    assert agent.describe()["limits"] == {"requests": 4, "total_tokens": 9}
