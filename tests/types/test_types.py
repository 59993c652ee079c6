from __future__ import annotations

from datetime import UTC, datetime

import pydantic
import pytest

from tidemill.types import (
    STREAM_EVENT,
    AgentResponse,
    AgentStep,
    ApprovalRecord,
    ApprovalRequired,
    Decision,
    ImageRef,
    Message,
    ModelResponse,
    Reasoning,
    ReasoningDelta,
    ResponseDone,
    Role,
    RunDone,
    RunStopped,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolDefinition,
    ToolResult,
    Usage,
)


def full_assistant_message() -> Message:
    return Message.assistant(
        "Checking.",
        tool_calls=(
            ToolCall(id="c1", name="search", arguments={"q": "ünïcode", "n": [1, 2.5, None]}),
            ToolCall(id="c2", name="broken", raw_arguments="{not json", signature="sig-g"),
        ),
        reasoning=(
            Reasoning(text="think", signature="sig-a", provider="anthropic"),
            Reasoning(redacted_data="opaque==", provider="anthropic"),
        ),
    )


def test_message_round_trips_through_json_with_every_part() -> None:
    messages = [
        Message.system("Be brief."),
        Message.user("Look", images=(ImageRef(url="https://x/y.png", media_type="image/png"),)),
        full_assistant_message(),
        Message.tool(ToolResult(call_id="c1", name="search", content="3 hits", is_error=True)),
    ]
    for message in messages:
        assert Message.model_validate_json(message.model_dump_json()) == message


def test_tool_message_carries_the_result() -> None:
    message = Message.tool(ToolResult(call_id="c9", name="add", content="3"))
    assert (message.role, message.tool_call_id, message.name, message.content) == (
        Role.TOOL,
        "c9",
        "add",
        "3",
    )


def test_messages_are_immutable_and_reject_unknown_fields() -> None:
    message = Message.user("hi")
    with pytest.raises(pydantic.ValidationError):
        message.content = "changed"  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError, match="extra"):
        Message.model_validate({"role": "user", "content": "x", "colour": "red"})


def test_tool_calls_get_unique_ids() -> None:
    ids = {ToolCall(name="t").id for _ in range(100)}
    assert len(ids) == 100
    assert all(i.startswith("call_") for i in ids)


def test_tool_call_arguments_must_be_json() -> None:
    with pytest.raises(pydantic.ValidationError):
        ToolCall(name="t", arguments={"when": datetime.now(UTC)})  # type: ignore[dict-item]


def test_usage_adds_every_counter() -> None:
    a = Usage(
        requests=1,
        input_tokens=10,
        output_tokens=5,
        cache_read_tokens=3,
        cache_write_tokens=2,
        reasoning_tokens=1,
    )
    total = a + a
    assert total == Usage(
        requests=2,
        input_tokens=20,
        output_tokens=10,
        cache_read_tokens=6,
        cache_write_tokens=4,
        reasoning_tokens=2,
    )
    assert total.total_tokens == 30


def test_decisions() -> None:
    assert Decision.approve() == Decision(action="approve")
    assert Decision.approve({"a": 1}, actor="ann").arguments == {"a": 1}
    assert Decision.reject("no").feedback == "no"
    assert Decision.reject().feedback is None
    with pytest.raises(pydantic.ValidationError):
        Decision.model_validate({"action": "maybe"})


def test_every_stream_event_round_trips_through_the_union() -> None:
    response = ModelResponse(
        message=full_assistant_message(),
        usage=Usage(requests=1),
        finish_reason="tool_calls",
        model="m",
        provider="p",
    )
    record = ApprovalRecord(
        call_id="c1",
        tool="search",
        outcome="edited",
        arguments={"q": "a"},
        edited_arguments={"q": "b"},
        decided_at=datetime.now(UTC),
    )
    agent_response = AgentResponse(
        output="done",
        messages=[Message.user("hi")],
        steps=[
            AgentStep(index=0, thought="t", tool_calls=[ToolCall(name="x")], approvals=[record])
        ],
        usage=Usage(requests=1),
        thread_id="t1",
        latency_ms=1.5,
    )
    events = [
        TextDelta(delta="he"),
        ReasoningDelta(delta="hm", signature="s"),
        ToolCallDelta(index=1, call_id="c", name="n", arguments_delta='{"a"'),
        ResponseDone(response=response),
        ToolCallStart(call=ToolCall(name="x")),
        ToolCallEnd(result=ToolResult(call_id="c", name="x", content="ok")),
        ApprovalRequired(thread_id="t", calls=(ToolCall(name="x"),)),
        RunStopped(error="LimitExceeded", message="m", limit="requests", response=agent_response),
        RunDone(response=agent_response),
    ]
    for event in events:
        assert STREAM_EVENT.validate_json(STREAM_EVENT.dump_json(event)) == event
    assert [e.type for e in events] == [
        "text",
        "reasoning",
        "tool_call_delta",
        "response",
        "tool_call",
        "tool_result",
        "approval_required",
        "stopped",
        "done",
    ]


def test_log_probabilities_round_trip_and_are_left_out_of_the_json_when_none() -> None:
    scores = {"content": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}]}
    scored = ModelResponse(message=Message.assistant("Hi"), logprobs=scores)
    for event in (TextDelta(delta="Hi", logprobs=scores), ResponseDone(response=scored)):
        assert STREAM_EVENT.validate_json(STREAM_EVENT.dump_json(event)) == event
    assert scored.logprobs == scores
    assert TextDelta(delta="Hi").logprobs is None
    assert TextDelta(delta="Hi").model_dump_json() == '{"type":"text","delta":"Hi"}'
    assert "logprobs" not in ModelResponse(message=Message.assistant("Hi")).model_dump()


def test_agent_response_prints_its_output() -> None:
    assert str(AgentResponse(output="Hello!")) == "Hello!"
    assert AgentResponse().schema_version == 1


def test_tool_definition_defaults_to_an_empty_object_schema() -> None:
    assert ToolDefinition(name="t").parameters == {"type": "object", "properties": {}}
