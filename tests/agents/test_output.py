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
from tidemill.llm import ScriptedModel, strict_json_schema
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


# -- the schema sent to the model as a native output format -----------------------------------


async def test_the_schema_goes_to_a_model_that_takes_an_output_format() -> None:
    model = ScriptedModel(['{"port": "Brest"}', '{"port": "Brest", "height_m": 6}'])
    runtime = AgentRuntime(model=model, output=OutputSpec.of(Tide), max_iterations=5)
    response = await runtime.arun("High tide?")
    # Validation still decides: the first answer was sent back, the second accepted.
    assert response.output == Tide(port="Brest", height_m=6.0)
    formats = [request.output_format for request in model.requests]
    assert len(formats) == 2
    for fmt in formats:
        assert fmt is not None
        assert (fmt.name, fmt.schema, fmt.strict) == (
            "final_answer",
            Tide.model_json_schema(),
            False,
        )


async def test_no_output_format_without_output_or_for_a_model_that_cannot_take_one() -> None:
    plain = ScriptedModel(["done"])
    await AgentRuntime(model=plain).arun("?")
    assert plain.requests[0].output_format is None

    class PromptOnly(ScriptedModel):
        supports_output_format = False

    model = PromptOnly(['{"port": "Brest", "height_m": 6}'])
    response = await AgentRuntime(model=model, output=OutputSpec.of(Tide)).arun("?")
    assert response.output == Tide(port="Brest", height_m=6.0)
    assert model.requests[0].output_format is None


async def test_a_schema_whose_root_is_not_an_object_stays_in_the_prompt() -> None:
    model = ScriptedModel(["[1, 2]"])
    spec = OutputSpec.of(list[int])
    assert spec.format is None
    response = await AgentRuntime(model=model, output=spec).arun("?")
    assert response.output == [1, 2]
    assert model.requests[0].output_format is None


def test_strict_output_specs() -> None:
    spec = OutputSpec.of(Tide, strict=True)
    assert spec.format is not None and spec.format.strict
    assert spec.parse('{"port": "Brest", "height_m": 6}') == (
        {"port": "Brest", "height_m": 6.0},
        [],
    )

    class Tags(pydantic.BaseModel):
        counts: dict[str, int]

    with pytest.raises(ConfigurationError, match="cannot be made strict") as info:
        OutputSpec.of(Tags, strict=True)
    assert info.value.hint and "strict=False" in info.value.hint


class Tidal(pydantic.BaseModel):
    port: str
    notes: list[str] = []
    range_m: float | None = None


def test_a_strict_answer_may_leave_an_optional_field_out_with_null() -> None:
    # strict_json_schema makes the optional fields nullable, OpenAI's way to leave one out.
    fmt = OutputSpec.of(Tidal, strict=True).format
    assert fmt is not None
    strict = strict_json_schema(fmt.schema)
    assert strict["properties"]["notes"]["type"] == ["array", "null"]  # type: ignore[index]
    spec = OutputSpec.of(Tidal, strict=True)
    answer = '{"port": "Oban", "notes": null, "range_m": null}'
    assert spec.parse(answer) == ({"port": "Oban", "notes": [], "range_m": None}, [])
    assert spec.parse('{"port": null, "notes": null, "range_m": 2}')[1] == ["port: Field required"]
    plain = OutputSpec.of(SCHEMA | {"required": ["port"]}, strict=True)
    assert plain.parse('{"port": "Oban", "height_m": null}') == ({"port": "Oban"}, [])


class Chart(pydantic.BaseModel):
    name: str
    parts: list[Chart] = []


def test_a_recursive_model_has_a_native_format_and_can_be_strict() -> None:
    # pydantic gives a recursive model's schema as {"$ref": "#/$defs/Chart", "$defs": ...}.
    assert "$ref" in Chart.model_json_schema()
    spec = OutputSpec.of(Chart, strict=True)
    assert spec.format is not None and spec.format.schema["type"] == "object"
    strict = strict_json_schema(Chart.model_json_schema())
    assert strict["type"] == "object" and strict["additionalProperties"] is False
    assert strict["required"] == ["name", "parts"]
    answer = '{"name": "Oban", "parts": [{"name": "Kerrera", "parts": null}]}'
    assert spec.parse(answer)[1] == []


async def test_the_builder_asks_for_strict_mode() -> None:
    model = ScriptedModel(['{"port": "Brest", "height_m": 6}'])
    bot = agent().llm(model).output(Tide, strict=True)
    assert (await bot.arun("High tide?")).output == Tide(port="Brest", height_m=6.0)
    fmt = model.requests[0].output_format
    assert fmt is not None and fmt.strict
    with pytest.raises(ConfigurationError, match="cannot be made strict"):
        agent().llm("fake").output({"type": "object", "additionalProperties": True}, strict=True)


async def test_an_anthropic_forced_tool_answer_becomes_the_validated_output() -> None:
    import json

    import httpx

    from tidemill.llm import AnthropicModel

    sent: list[dict[str, object]] = []

    def reply(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        content = [
            {
                "type": "tool_use",
                "id": "t1",
                "name": "final_answer",
                "input": {"port": "Oban", "height_m": 4},
            }
        ]
        body = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 5, "output_tokens": 3},
        }
        return httpx.Response(200, json=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(reply))
    model = AnthropicModel("claude-test", api_key="sk-ant-test", http_client=client)
    response = await AgentRuntime(model=model, output=OutputSpec.of(Tide)).arun("High tide?")
    await client.aclose()
    assert response.output == Tide(port="Oban", height_m=4.0)
    assert sent[0]["tool_choice"] == {"type": "tool", "name": "final_answer"}
