"""Structured output on the graph runtime: the schema to the model, validation, retries."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from graph_agents import add
from pydantic import BaseModel, JsonValue

from tidemill import OutputValidationError
from tidemill.agents import OutputSpec
from tidemill.agents.graph import GraphRuntime, GraphState
from tidemill.agents.journal import OutputRejected, RunFailed, RunFinished
from tidemill.llm import ScriptedModel
from tidemill.types import Message, Role, RunDone, RunStopped, StreamEvent, ToolCall


class Sum(BaseModel):
    total: int
    words: str


GOOD = '{"total": 5, "words": "five"}'


async def collect(stream: AsyncIterator[StreamEvent], into: list[StreamEvent]) -> None:
    """Append what `stream` yields to `into`, until it ends or raises."""
    async for event in stream:
        into.append(event)


async def test_the_answer_is_validated_into_the_output_type() -> None:
    call = ToolCall(name="add", arguments={"a": 2, "b": 3})
    model = ScriptedModel(["", GOOD], tool_calls=[[call], []], strict=True)
    runtime = GraphRuntime(
        model=model, tools=[add], system_prompt="Add.", output=OutputSpec.of(Sum)
    )
    response = await runtime.arun("2+3?", thread_id="t")
    assert response.output == Sum(total=5, words="five")
    for request in model.requests:  # natively, on every request that may bring the answer
        assert request.output_format is not None
        schema = request.output_format.schema
        assert schema is not None
        assert schema["properties"] == Sum.model_json_schema()["properties"]
        assert request.messages[0].role == Role.SYSTEM
        assert request.messages[0].content.startswith("Add.\n\nWhen you give your final answer")
    state = await runtime.astate("t")
    assert state is not None
    assert state.output == {"total": 5, "words": "five"}
    assert runtime.describe()["output_schema"] == OutputSpec.of(Sum).schema


async def test_an_invalid_answer_goes_back_to_the_model_with_what_is_wrong() -> None:
    model = ScriptedModel(['{"total": "many"}', GOOD], strict=True)
    runtime = GraphRuntime(model=model, output=OutputSpec.of(Sum))
    response = await runtime.arun("2+3?", thread_id="t")
    assert response.output == Sum(total=5, words="five")
    feedback = model.requests[1].messages[-1]
    assert feedback.role == Role.USER
    assert "total: Input should be a valid integer" in feedback.content
    assert "words: Field required" in feedback.content
    [rejected] = [r.event for r in await runtime.ahistory("t") if r.event.kind == "output_rejected"]
    assert isinstance(rejected, OutputRejected)
    assert rejected.feedback == feedback.content
    assert [m.content for m in response.messages] == [
        "2+3?",
        '{"total": "many"}',
        feedback.content,
        GOOD,
    ]
    assert response.usage.requests == 2


async def test_answers_that_keep_failing_end_the_run() -> None:
    model = ScriptedModel(["nope", "still no", "never"], strict=True)
    runtime = GraphRuntime(model=model, output=OutputSpec.of(Sum, retries=1))
    with pytest.raises(OutputValidationError) as info:
        await runtime.arun("2+3?", thread_id="t")
    assert info.value.raw_output == "still no"
    assert info.value.errors[0].startswith("the answer is not JSON")
    assert info.value.response is not None
    assert len(model.requests) == 2
    failed = [r.event for r in await runtime.ahistory("t") if isinstance(r.event, RunFailed)]
    assert [f.reason for f in failed] == ["output_validation"]


async def test_a_stream_that_keeps_failing_ends_with_run_stopped() -> None:
    runtime = GraphRuntime(model=ScriptedModel(["x", "y"]), output=OutputSpec.of(Sum, retries=0))
    seen: list[StreamEvent] = []
    with pytest.raises(OutputValidationError):
        await collect(runtime.astream("go", thread_id="t"), seen)
    assert isinstance(seen[-1], RunStopped)
    assert seen[-1].error == "OutputValidationError"


async def test_a_streamed_run_answers_the_validated_value() -> None:
    runtime = GraphRuntime(model=ScriptedModel([GOOD]), output=OutputSpec.of(Sum))
    seen = [event async for event in runtime.astream("go", thread_id="t")]
    assert isinstance(seen[-1], RunDone)
    assert seen[-1].response.output == Sum(total=5, words="five")


async def test_a_graph_of_yours_that_ends_on_something_else_than_the_type_is_refused() -> None:
    def sign(state: GraphState) -> dict[str, list[Message]]:
        return {"messages": [Message.assistant("Signed, the team.")]}

    runtime = GraphRuntime(model=ScriptedModel([GOOD]), output=OutputSpec.of(Sum))
    graph = runtime.native_graph()
    graph.add_node("sign", sign)
    graph.branches.pop("agent")
    graph.add_edge("agent", "sign")
    graph.add_edge("sign", "__end__")
    runtime.recompile()
    with pytest.raises(OutputValidationError, match="not JSON"):
        await runtime.arun("go", thread_id="t")
    history = [r.event for r in await runtime.ahistory("t")]
    assert not any(isinstance(e, RunFinished) for e in history)
    assert [e.reason for e in history if isinstance(e, RunFailed)] == ["output_validation"]


async def test_a_json_schema_output_answers_the_json_value() -> None:
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
    }
    runtime = GraphRuntime(model=ScriptedModel(['{"ok": true}']), output=OutputSpec.of(schema))
    assert (await runtime.arun("go")).output == {"ok": True}
