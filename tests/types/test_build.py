"""`validator`: models built from dicts of fields, as their constructors build them."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from tidemill.agents.journal import ModelTurn, ToolFinished
from tidemill.types import (
    AgentStep,
    Message,
    ModelResponse,
    Role,
    ToolCall,
    ToolResult,
    Usage,
)
from tidemill.types._build import validator

CALL = ToolCall(id="c1", name="echo", arguments={"i": 1})
RESULT = ToolResult(call_id="c1", name="echo", content="1")
RESPONSE = ModelResponse(
    message=Message.assistant(tool_calls=(CALL,)), usage=Usage(requests=1), model="m"
)

CASES: list[tuple[type[pydantic.BaseModel], dict[str, Any]]] = [
    (Usage, {"requests": 1, "input_tokens": 5, "cost_usd": 0.25}),
    (ToolResult, {"call_id": "c1", "name": "echo", "content": "1", "is_error": False}),
    (Message, {"role": Role.TOOL, "content": "1", "tool_call_id": "c1", "name": "echo"}),
    (ModelResponse, {"message": RESPONSE.message, "usage": Usage(), "finish_reason": "stop"}),
    (AgentStep, {"index": 0, "thought": "", "tool_calls": [CALL], "usage": Usage(requests=1)}),
    (ModelTurn, {"response": RESPONSE, "started": ("c1",)}),
    (ToolFinished, {"result": RESULT, "usage": None, "tool_calls": 0}),
]


@pytest.mark.parametrize(("model", "fields"), CASES, ids=[c[0].__name__ for c in CASES])
def test_a_built_model_is_the_one_its_constructor_builds(
    model: type[pydantic.BaseModel], fields: dict[str, Any]
) -> None:
    built = validator(model)(dict(fields))
    made = model(**fields)
    assert type(built) is model
    assert built == made
    # The same fields count as set, so `exclude_unset` dumps agree too.
    assert built.model_fields_set == made.model_fields_set
    assert built.model_dump_json(exclude_unset=True) == made.model_dump_json(exclude_unset=True)


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (Usage, {"requests": "many"}),
        (ToolResult, {"call_id": "c1", "name": "echo"}),  # content is missing
        (Message, {"role": "robot"}),
        (ModelTurn, {"response": RESPONSE, "surprise": 1}),  # extra fields are refused
    ],
)
def test_bad_fields_are_refused_as_the_constructor_refuses_them(
    model: type[pydantic.BaseModel], fields: dict[str, Any]
) -> None:
    with pytest.raises(pydantic.ValidationError) as built:
        validator(model)(dict(fields))
    with pytest.raises(pydantic.ValidationError) as made:
        model(**fields)
    assert built.value.errors(include_url=False) == made.value.errors(include_url=False)


def test_message_constructors_build_their_own_class() -> None:
    class Note(Message):
        pass

    assert type(Note.user("hi")) is Note
    assert type(Note.tool(RESULT)) is Note
    assert type(Message.tool(RESULT)) is Message
    assert Message.tool(RESULT).role is Role.TOOL
    assert Message.assistant("ok").role is Role.ASSISTANT
    assert Message.system("be brief").role is Role.SYSTEM
