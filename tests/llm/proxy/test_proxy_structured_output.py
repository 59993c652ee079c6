"""The proxy's `response_format`: read into an `OutputFormat`, sent upstream, or refused."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from llm_replay import Recorder, chat_model, json_reply

from tidemill.llm import OutputFormat
from tidemill.llm.proxy import InvalidRequest, ModelRouter, create_app, parse_chat_request

HELLO = [{"role": "user", "content": "Which city? Answer in JSON."}]
CITY: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}


def parse(**fields: Any) -> Any:
    return parse_chat_request({"model": "m", "messages": HELLO, **fields})


def test_json_schema_becomes_the_output_format() -> None:
    assert parse(response_format=JSON_SCHEMA).request.output_format == OutputFormat("city", CITY)
    strict = {
        "type": "json_schema",
        "json_schema": {"name": "city", "schema": CITY, "strict": True, "description": "A city."},
    }
    assert parse(response_format=strict).request.output_format == OutputFormat(
        "city", CITY, strict=True, description="A city."
    )


def test_json_object_and_text() -> None:
    fmt = parse(response_format={"type": "json_object"}).request.output_format
    assert fmt == OutputFormat.json_object()
    assert parse(response_format={"type": "text"}).request.output_format is None
    assert parse().request.output_format is None


def test_a_json_schema_without_a_schema_is_json_mode_under_its_name() -> None:
    fmt = parse(response_format={"type": "json_schema", "json_schema": {"name": "any"}})
    assert fmt.request.output_format == OutputFormat("any")


@pytest.mark.parametrize(
    ("response_format", "param", "words"),
    [
        ("json", "response_format", "expected an object"),
        ({"type": "yaml"}, "response_format.type", "'text', 'json_object' and 'json_schema'"),
        ({}, "response_format.type", "Supported values"),
        ({"type": "json_schema"}, "response_format.json_schema", "expected an object"),
        (
            {"type": "json_schema", "json_schema": {"schema": CITY}},
            "response_format.json_schema.name",
            "a non-empty string",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "a city", "schema": CITY}},
            "response_format.json_schema.name",
            "letters, digits",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "c", "schema": [1]}},
            "response_format.json_schema.schema",
            "a JSON Schema object",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "c", "schema": {"type": 5}}},
            "response_format.json_schema.schema",
            "not a valid JSON Schema",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "c", "schema": CITY, "strict": "y"}},
            "response_format.json_schema.strict",
            "a boolean",
        ),
        (
            {
                "type": "json_schema",
                "json_schema": {"name": "c", "schema": {"type": "object"}, "strict": True},
            },
            "response_format.json_schema.schema",
            "strict mode",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "c", "strict": True}},
            "response_format.json_schema.schema",
            "needs a",
        ),
    ],
)
def test_a_bad_response_format_names_the_field(
    response_format: Any, param: str, words: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse(response_format=response_format)
    assert caught.value.param == param
    assert words in caught.value.message


# -- through the app, to a real adapter --------------------------------------------------------


async def post(router: ModelRouter, **fields: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=create_app(router))
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as client:
        body = {"model": "up", "messages": HELLO, **fields}
        return await client.post("/v1/chat/completions", json=body)


ANTHROPIC_ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "city", "input": {"name": "Lyon"}}],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 5, "output_tokens": 3},
}


async def test_json_schema_reaches_anthropic_as_a_forced_tool_and_comes_back_as_text() -> None:
    recorder = Recorder([json_reply(ANTHROPIC_ANSWER)])
    router = ModelRouter(aliases={"up": chat_model("anthropic", recorder)})
    reply = await post(router, response_format=JSON_SCHEMA)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    assert json.loads(choice["message"]["content"]) == {"name": "Lyon"}
    assert not choice["message"].get("tool_calls")
    assert choice["finish_reason"] == "stop"
    (sent,) = recorder.bodies()
    assert sent["tool_choice"] == {"type": "tool", "name": "city"}
    assert sent["tools"][0]["input_schema"] == CITY


@pytest.mark.parametrize("stream", [False, True])
async def test_a_schema_whose_root_is_not_an_object_is_a_400_for_anthropic(stream: bool) -> None:
    recorder = Recorder([])
    router = ModelRouter(aliases={"up": chat_model("anthropic", recorder)})
    names = {"type": "array", "items": {"type": "string"}}
    response_format = {"type": "json_schema", "json_schema": {"name": "names", "schema": names}}
    reply = await post(router, response_format=response_format, stream=stream)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "unsupported_for_model"
    assert "of type 'array'" in error["message"]
    assert "must be a JSON object" in error["message"]
    assert '"properties": {"value": <schema>}' in error["message"]  # the hint
    assert recorder.requests == []


async def test_a_root_ref_schema_reaches_anthropic_as_an_inlined_object() -> None:
    defs = {"City": CITY}
    recorder = Recorder([json_reply(ANTHROPIC_ANSWER)])
    router = ModelRouter(aliases={"up": chat_model("anthropic", recorder)})
    schema = {"$ref": "#/$defs/City", "$defs": defs}
    response_format = {"type": "json_schema", "json_schema": {"name": "city", "schema": schema}}
    reply = await post(router, response_format=response_format)
    assert reply.status_code == 200, reply.text
    assert json.loads(reply.json()["choices"][0]["message"]["content"]) == {"name": "Lyon"}
    (sent,) = recorder.bodies()
    assert sent["tools"][0]["input_schema"] == {"$defs": defs, **CITY}


CHAT_ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "model-test",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": '{"name":"Lyon"}'},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
}


@pytest.mark.parametrize(
    ("response_format", "upstream"),
    [
        (
            {**JSON_SCHEMA, "json_schema": {**JSON_SCHEMA["json_schema"], "strict": True}},
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "city",
                    "schema": {**CITY, "additionalProperties": False},
                    "strict": True,
                },
            },
        ),
        ({"type": "json_object"}, {"type": "json_object"}),
    ],
)
async def test_response_format_reaches_an_openai_upstream(
    response_format: dict[str, Any], upstream: dict[str, Any]
) -> None:
    recorder = Recorder([json_reply(CHAT_ANSWER)])
    router = ModelRouter(aliases={"up": chat_model("openai", recorder)})
    reply = await post(router, response_format=response_format)
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == '{"name":"Lyon"}'
    (sent,) = recorder.bodies()
    assert sent["response_format"] == upstream


async def test_a_bad_response_format_is_a_400_in_openai_form() -> None:
    recorder = Recorder([])
    router = ModelRouter(aliases={"up": chat_model("openai", recorder)})
    reply = await post(router, response_format={"type": "xml"})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "response_format.type"
    assert "'xml'" in error["message"]
    assert recorder.requests == []
