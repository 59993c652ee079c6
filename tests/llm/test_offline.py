"""What the offline model answers with no script: an echo, or a value the schema accepts."""

from __future__ import annotations

import json
from datetime import date, datetime
from enum import Enum
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field, JsonValue

from tidemill.agents import OutputSpec
from tidemill.llm import ModelRequest, OutputFormat, ScriptedModel, offline_answer
from tidemill.llm._offline import example_value, requested_schema
from tidemill.types import Message, ToolCall, ToolResult


def valid(schema: Any, value: Any) -> bool:
    return jsonschema.validators.validator_for(schema)(schema).is_valid(value)


class TestEcho:
    async def test_it_answers_the_last_user_message(self) -> None:
        request = ModelRequest(
            [
                Message.system("Be brief."),
                Message.user("first"),
                Message.assistant("ok"),
                Message.user("tide tables"),
            ]
        )
        assert offline_answer(request) == "tide tables"
        assert (await ScriptedModel().request(request)).message.content == "tide tables"

    def test_after_tool_results_it_still_answers_the_users_words(self) -> None:
        call = ToolCall(name="t")
        request = ModelRequest(
            [
                Message.user("look it up"),
                Message.assistant(tool_calls=(call,)),
                Message.tool(ToolResult(call_id=call.id, name="t", content="42")),
            ]
        )
        assert offline_answer(request) == "look it up"

    def test_a_conversation_without_a_user_message_gets_an_empty_answer(self) -> None:
        assert offline_answer(ModelRequest([Message.system("Hi")])) == ""
        assert offline_answer(ModelRequest([])) == ""

    async def test_strict_with_no_script_still_refuses_every_call(self) -> None:
        from tidemill import ScriptExhausted

        with pytest.raises(ScriptExhausted):
            await ScriptedModel(strict=True).request(ModelRequest([Message.user("hi")]))


class Ticket(BaseModel):
    class Urgency(Enum):
        LOW = "low"
        HIGH = "high"

    label: Literal["refund", "bug", "question"]
    urgency: Urgency
    order_id: str = Field(min_length=3, max_length=10)
    amount: float = Field(gt=0, le=500)
    items: list[int] = Field(min_length=2)
    seen: datetime
    due: date | None = None
    tags: dict[str, int] = {}
    reply: Ticket | None = None


SCHEMAS: list[Any] = [
    {"type": "object", "properties": {"label": {"enum": ["refund", "bug"]}}, "required": ["label"]},
    {"type": "string"},
    {"type": "string", "minLength": 4, "maxLength": 6},
    {"type": "integer", "minimum": 3},
    {"type": "integer", "exclusiveMinimum": 3, "multipleOf": 5},
    {"type": "integer", "maximum": -2},
    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    {"type": "number", "minimum": 2.5},
    {"type": "boolean"},
    {"type": "null"},
    {"type": ["null", "integer"]},
    {"const": {"a": 1}},
    {"type": "array", "items": {"type": "integer"}, "minItems": 3, "uniqueItems": True},
    {"type": "array", "items": {"type": "string"}, "minItems": 2, "uniqueItems": True},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}]},
    {"type": "array", "contains": {"const": 7}},
    {"type": "object", "required": ["x"], "additionalProperties": {"type": "integer"}},
    {
        "allOf": [
            {"properties": {"a": {"type": "string"}}},
            {"required": ["b"], "properties": {"b": {"type": "integer", "minimum": 1}}},
        ]
    },
    {"anyOf": [{"type": "null"}, {"type": "string", "format": "email"}]},
    {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "uuid"},
    {
        "$defs": {"n": {"type": "integer", "minimum": 10}},
        "properties": {"n": {"$ref": "#/$defs/n"}},
    },
    {
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
        "$ref": "#/$defs/node",
    },
    {"minLength": 2},
    {"maximum": -1},
    {"properties": {"a": {"type": "integer"}}},
    {},
    True,
    Ticket.model_json_schema(),
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: json.dumps(s)[:60])
def test_the_example_matches_its_schema(schema: Any) -> None:
    assert valid(schema, example_value(schema))


def test_the_example_is_the_simplest_value_and_fills_every_property() -> None:
    value = example_value(Ticket.model_json_schema())
    assert value == {
        "label": "refund",
        "urgency": "low",
        "order_id": "xxx",
        "amount": 1.0,
        "items": [0, 0],
        "seen": "2000-01-01T00:00:00Z",
        "due": "2000-01-01",
        "tags": {},
        "reply": None,
    }


@pytest.mark.parametrize(
    "schema",
    [
        False,
        {"not": {}},
        {"$ref": "#/nowhere"},
        {"$ref": "https://example.com/schema.json"},
        {"$defs": {"loop": {"$ref": "#/$defs/loop"}}, "$ref": "#/$defs/loop"},
        {
            "$defs": {
                "n": {
                    "type": "object",
                    "required": ["n"],
                    "properties": {"n": {"$ref": "#/$defs/n"}},
                }
            },
            "$ref": "#/$defs/n",
        },
        {"type": "string", "pattern": "^[A-Z]{3}$"},
        {"type": "integer", "minimum": 5, "maximum": 2},
        {"type": "array", "items": {"type": "integer"}, "minItems": 10**9},
        {"type": "string", "minLength": 10**9},
        {"type": 12, "properties": "no", "items": 3, "enum": "x", "required": "x", "allOf": 5},
    ],
    ids=repr,
)
def test_a_schema_no_simple_value_satisfies_gets_a_best_effort_and_no_crash(schema: Any) -> None:
    value = example_value(schema)
    json.dumps(value)  # always JSON, never a crash or a hang
    assert len(json.dumps(value)) < 100_000


class TestTheSchemaAskedFor:
    def test_a_native_output_format_gives_the_schema(self) -> None:
        schema: dict[str, JsonValue] = {
            "type": "object",
            "properties": {"city": {"type": "string"}},
        }
        request = ModelRequest([Message.user("Where?")], output_format=OutputFormat("c", schema))
        assert requested_schema(request) == schema
        assert json.loads(offline_answer(request)) == {"city": ""}

    def test_json_mode_gives_an_empty_object(self) -> None:
        request = ModelRequest([Message.user("JSON")], output_format=OutputFormat.json_object())
        assert offline_answer(request) == "{}"

    def test_the_schema_an_output_spec_writes_into_the_system_prompt(self) -> None:
        # How ai_action's output_schema (and a non-object `.output()` type) asks for a shape.
        spec = OutputSpec.of({"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1})
        system = f"Classify tickets.\n\n{spec.instructions}\n\nIt is 09:00."
        request = ModelRequest([Message.system(system), Message.user("Hi")])
        answer = offline_answer(request)
        assert spec.parse(answer) == (["a"], [])

    def test_json_on_a_line_after_no_mention_of_a_schema_is_not_taken(self) -> None:
        request = ModelRequest([Message.system('Data:\n{"type": "integer"}'), Message.user("Hi")])
        assert offline_answer(request) == "Hi"

    def test_a_broken_schema_line_is_not_taken(self) -> None:
        system = "Reply with JSON matching this JSON Schema:\n{not json"
        request = ModelRequest([Message.system(system), Message.user("Hi")])
        assert offline_answer(request) == "Hi"
