"""Structured output: the final answer validated, corrected by the model, or refused."""

from __future__ import annotations

import pydantic
import pytest

from tidemill import (
    AgentRuntime,
    ConfigurationError,
    OutputValidationError,
    agent,
)
from tidemill.agents import OutputSpec
from tidemill.agents.checkpoint import Checkpointer
from tidemill.llm import ScriptedModel
from tidemill.types import Role


class Tide(pydantic.BaseModel):
    port: str
    height_m: float


SCHEMA = {
    "type": "object",
    "properties": {"port": {"type": "string"}, "height_m": {"type": "number"}},
    "required": ["port", "height_m"],
    "additionalProperties": False,
}


async def test_a_valid_answer_becomes_the_typed_output(checkpointer: Checkpointer) -> None:
    model = ScriptedModel(['```json\n{"port": "Brest", "height_m": 6.1}\n```'])
    runtime = AgentRuntime(model=model, output=OutputSpec.of(Tide), checkpointer=checkpointer)
    response = await runtime.arun("High tide?", thread_id="t")
    assert response.output == Tide(port="Brest", height_m=6.1)
    # The model was told the schema.
    system = model.requests[0].messages[0]
    assert system.role == Role.SYSTEM and '"height_m"' in system.content
    # The journal keeps JSON; another runtime reading the thread gets the same object back.
    state = await runtime.astate("t")
    assert state is not None and state.output == {"port": "Brest", "height_m": 6.1}


async def test_an_invalid_answer_goes_back_with_the_errors_and_is_corrected() -> None:
    model = ScriptedModel(['{"port": "Brest"}', "not json", '{"port": "Brest", "height_m": 6}'])
    runtime = AgentRuntime(model=model, output=OutputSpec.of(Tide, retries=2), max_iterations=5)
    response = await runtime.arun("High tide?")
    assert response.output == Tide(port="Brest", height_m=6.0)
    first_feedback = model.requests[1].messages[-1]
    assert first_feedback.role == Role.USER
    assert "height_m: Field required" in first_feedback.content
    assert "not JSON" in model.requests[2].messages[-1].content
    assert response.usage.requests == 3


async def test_the_retry_budget_ends_with_the_last_raw_output() -> None:
    model = ScriptedModel(['{"port": 1}'] * 5)
    runtime = AgentRuntime(model=model, output=OutputSpec.of(Tide, retries=1), max_iterations=9)
    with pytest.raises(OutputValidationError) as info:
        await runtime.arun("High tide?", thread_id="t")
    assert info.value.raw_output == '{"port": 1}'
    assert any("height_m" in e for e in info.value.errors)
    assert len(model.requests) == 2
    assert info.value.response is not None
    state = await runtime.astate("t")
    assert state is not None and state.status == "failed"


async def test_a_json_schema_gives_the_validated_json_value() -> None:
    model = ScriptedModel(
        ['{"port": "Brest", "height_m": "high"}', '{"port": "Brest", "height_m": 6}']
    )
    runtime = AgentRuntime(model=model, output=OutputSpec.of(SCHEMA))
    response = await runtime.arun("High tide?")
    assert response.output == {"port": "Brest", "height_m": 6}
    assert "height_m: 'high' is not of type 'number'" in model.requests[1].messages[-1].content


def test_the_builder_takes_a_type_or_a_schema() -> None:
    bot = agent().llm("fake", responses=['{"port": "Oban", "height_m": 4}']).output(Tide)
    assert bot.run("?").output == Tide(port="Oban", height_m=4)
    assert bot.describe()["output_schema"] == Tide.model_json_schema()


def test_bad_output_specs_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="not a valid JSON Schema"):
        OutputSpec.of({"type": "no-such-type"})
    with pytest.raises(ConfigurationError, match="negative"):
        OutputSpec.of(Tide, retries=-1)

    class Opaque:
        pass

    with pytest.raises(ConfigurationError, match="Cannot use"):
        OutputSpec.of(Opaque)
