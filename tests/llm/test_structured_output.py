"""Structured output: `OutputFormat` on the wire of every adapter, and OpenAI's strict schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bedrock_replay import bedrock_model, delta, event, event_stream, finish, isolate_aws
from llm_replay import Recorder, chat_model, fixture_bytes, json_reply, split, sse, stream_all
from replay_models import anthropic_vertex_model, gemini_model, responses_model, vertex_model

from tidemill.errors import ConfigurationError, ProviderError
from tidemill.llm import (
    HttpModel,
    ModelRequest,
    OutputFormat,
    ScriptedModel,
    strict_json_schema,
)
from tidemill.llm._forced_output import output_tool
from tidemill.llm._strict_schema import inline_root_ref
from tidemill.llm.google._gemini import build_generate_content_request
from tidemill.types import Message, ToolDefinition

CITY: dict[str, Any] = {
    "type": "object",
    "title": "City",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "population": {"type": "integer", "default": 0},
    },
    "required": ["name"],
}
STRICT_CITY = {
    "type": "object",
    "title": "City",
    "properties": {"name": {"type": "string"}, "population": {"type": ["integer", "null"]}},
    "required": ["name", "population"],
    "additionalProperties": False,
}
FORMAT = OutputFormat("city", CITY)
ASK = ModelRequest([Message.user("Which city?")], output_format=FORMAT)
WEATHER = ToolDefinition(
    name="get_weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
ANTHROPIC_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
CHAT_DONE = b'data: {"choices":[],"usage":{}}\n\ndata: [DONE]\n\n'


async def sent(model: HttpModel, recorder: Recorder, request: ModelRequest) -> dict[str, Any]:
    try:
        await stream_all(model, request)
    finally:
        await model.aclose()
    (body,) = recorder.bodies()
    assert isinstance(body, dict)
    return body


# -- OutputFormat ------------------------------------------------------------------------------


def test_a_request_has_no_output_format_by_default() -> None:
    assert ModelRequest([]).output_format is None


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"name": "a city"}, "name 'a city' is not valid"),
        ({"name": "x" * 65}, "is not valid"),
        ({"schema": ["not", "a", "schema"]}, "must be a JSON Schema object"),
        ({"strict": True}, "Strict mode needs a schema"),
    ],
)
def test_a_bad_output_format_is_a_configuration_error(options: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        OutputFormat(**options)
    assert words in caught.value.message
    assert caught.value.hint


# -- OpenAI Chat Completions and its dialects ---------------------------------------------------


async def chat_body(provider: str, request: ModelRequest) -> dict[str, Any]:
    recorder = Recorder([sse(CHAT_DONE)])
    return await sent(chat_model(provider, recorder), recorder, request)


async def test_chat_sends_a_json_schema_response_format() -> None:
    body = await chat_body("openai", ASK)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "city", "schema": CITY, "strict": False},
    }


async def test_chat_sends_a_strict_schema_when_asked() -> None:
    fmt = OutputFormat("city", CITY, strict=True, description="The city asked about.")
    body = await chat_body("openai", ModelRequest([Message.user("?")], output_format=fmt))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "city",
            "description": "The city asked about.",
            "schema": STRICT_CITY,
            "strict": True,
        },
    }


async def test_chat_json_mode_without_a_schema() -> None:
    request = ModelRequest([Message.user("JSON please")], output_format=OutputFormat.json_object())
    assert (await chat_body("openai", request))["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(
    "provider", ["mistral", "groq", "together", "openrouter", "ollama", "vllm"]
)
async def test_compatible_vendors_take_json_schema(provider: str) -> None:
    body = await chat_body(provider, ASK)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == CITY


async def test_deepseek_only_has_json_mode() -> None:
    assert (await chat_body("deepseek", ASK))["response_format"] == {"type": "json_object"}


async def test_chat_without_a_format_sends_no_response_format() -> None:
    assert "response_format" not in await chat_body("openai", ModelRequest([Message.user("Hi")]))


async def test_a_schema_that_cannot_be_strict_fails_before_the_call() -> None:
    fmt = OutputFormat("free", {"type": "object"}, strict=True)
    recorder = Recorder([])
    model = chat_model("openai", recorder)
    with pytest.raises(ConfigurationError, match="free-form object"):
        await model.request(ModelRequest([Message.user("?")], output_format=fmt))
    await model.aclose()
    assert recorder.requests == []


# -- OpenAI Responses ---------------------------------------------------------------------------


async def responses_text(request: ModelRequest) -> Any:
    recorder = Recorder([json_reply({"error": {"message": "stop here"}}, status=400)])
    model = responses_model(recorder)
    with pytest.raises(ProviderError, match="stop here"):
        await model.request(request)
    await model.aclose()
    return recorder.bodies()[0]["text"]


async def test_responses_sends_a_strict_text_format() -> None:
    fmt = OutputFormat("city", CITY, strict=True)
    assert await responses_text(ModelRequest([Message.user("?")], output_format=fmt)) == {
        "format": {"type": "json_schema", "name": "city", "schema": STRICT_CITY, "strict": True}
    }


async def test_responses_json_mode_and_plain_schema() -> None:
    json_mode = ModelRequest([], output_format=OutputFormat.json_object())
    assert await responses_text(json_mode) == {"format": {"type": "json_object"}}
    assert await responses_text(ASK) == {
        "format": {"type": "json_schema", "name": "city", "schema": CITY, "strict": False}
    }


# -- Gemini and Vertex Gemini -------------------------------------------------------------------

GEMINI_DONE = (
    b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"{}"}]},'
    b'"finishReason":"STOP"}],"usageMetadata":{}}\n\n'
)
GEMINI_CITY = {
    "type": "OBJECT",
    "properties": {"name": {"type": "STRING", "minLength": 1}, "population": {"type": "INTEGER"}},
    "required": ["name"],
}


@pytest.mark.parametrize("factory", [gemini_model, vertex_model])
async def test_gemini_sends_a_response_schema_through_the_gemini_adapter(factory: Any) -> None:
    recorder = Recorder([sse(GEMINI_DONE)])
    body = await sent(factory(recorder), recorder, ASK)
    assert body["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseSchema": GEMINI_CITY,
    }


async def test_gemini_json_mode_has_only_the_mime_type() -> None:
    recorder = Recorder([sse(GEMINI_DONE)])
    request = ModelRequest([Message.user("?")], output_format=OutputFormat.json_object())
    body = await sent(gemini_model(recorder), recorder, request)
    assert body["generationConfig"] == {"responseMimeType": "application/json"}


async def test_gemini_before_3_leaves_the_format_out_beside_tools() -> None:
    request = ModelRequest([Message.user("?")], tools=[WEATHER], output_format=FORMAT)
    recorder = Recorder([sse(GEMINI_DONE)])
    body = await sent(gemini_model(recorder), recorder, request)
    assert "generationConfig" not in body
    three = build_generate_content_request(request, output_with_tools=True)
    assert three["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseSchema": GEMINI_CITY,
    }


# -- Anthropic: the forced tool, and its call turned back into text -----------------------------


def anthropic_output_tool(schema: dict[str, Any] = CITY) -> dict[str, Any]:
    return {
        "name": "city",
        "description": "Give your final answer. Call this tool with the answer as its input, "
        "and nothing else.",
        "input_schema": schema,
    }


async def anthropic_body(request: ModelRequest, **options: Any) -> dict[str, Any]:
    recorder = Recorder([sse(ANTHROPIC_STOP)])
    return await sent(chat_model("anthropic", recorder, **options), recorder, request)


async def test_anthropic_forces_the_output_tool() -> None:
    body = await anthropic_body(ASK)
    assert body["tools"] == [anthropic_output_tool()]
    assert body["tool_choice"] == {"type": "tool", "name": "city"}


async def test_anthropic_json_mode_forces_a_tool_taking_any_object() -> None:
    request = ModelRequest([Message.user("?")], output_format=OutputFormat.json_object("answer"))
    body = await anthropic_body(request)
    assert body["tools"][0]["name"] == "answer"
    assert body["tools"][0]["input_schema"] == {"type": "object"}


async def test_anthropic_beside_other_tools_forces_some_tool() -> None:
    request = ModelRequest([Message.user("?")], tools=[WEATHER], output_format=FORMAT)
    body = await anthropic_body(request)
    assert [tool["name"] for tool in body["tools"]] == ["get_weather", "city"]
    assert body["tool_choice"] == {"type": "any"}


async def test_anthropic_with_thinking_does_not_force() -> None:
    body = await anthropic_body(ASK, thinking_budget=1024)
    assert body["tool_choice"] == {"type": "auto"}


async def test_an_output_format_named_like_a_tool_is_refused() -> None:
    request = ModelRequest([], tools=[WEATHER], output_format=OutputFormat("get_weather", CITY))
    with pytest.raises(ConfigurationError, match="like one of the tools"):
        await anthropic_body(request)


ANTHROPIC_TOOL_ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "city", "input": {"name": "Lyon"}},
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 5, "output_tokens": 3},
}


async def test_anthropic_whole_answer_becomes_json_text() -> None:
    model = chat_model("anthropic", Recorder([json_reply(ANTHROPIC_TOOL_ANSWER)]))
    response = await model.request(ASK)
    await model.aclose()
    assert response.message.content == '{"name":"Lyon"}'
    assert response.message.tool_calls == ()
    assert response.finish_reason == "stop"


def anthropic_stream(*events: dict[str, Any]) -> bytes:
    return (
        b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
        + ANTHROPIC_STOP
    )


ANTHROPIC_TOOL_STREAM = anthropic_stream(
    {"type": "message_start", "message": {**ANTHROPIC_TOOL_ANSWER, "content": []}},
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "city", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"name": '},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '"Lyon"}'},
    },
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
)


async def test_anthropic_streamed_tool_input_streams_as_text() -> None:
    model = chat_model("anthropic", Recorder([sse(ANTHROPIC_TOOL_STREAM)]))
    streamed = await stream_all(model, ASK)
    await model.aclose()
    assert streamed.text == '{"name": "Lyon"}'
    assert streamed.calls_from_deltas() == {}
    assert json.loads(streamed.response.message.content) == {"name": "Lyon"}
    assert streamed.response.message.tool_calls == ()
    assert streamed.response.finish_reason == "stop"


async def test_anthropic_other_calls_stay_calls() -> None:
    answer = {
        **ANTHROPIC_TOOL_ANSWER,
        "content": [
            {"type": "tool_use", "id": "toolu_0", "name": "get_weather", "input": {"city": "Lyon"}},
            *ANTHROPIC_TOOL_ANSWER["content"],
        ],
    }
    model = chat_model("anthropic", Recorder([json_reply(answer)]))
    request = ModelRequest([Message.user("?")], tools=[WEATHER], output_format=FORMAT)
    response = await model.request(request)
    await model.aclose()
    assert response.message.content == '{"name":"Lyon"}'
    assert [call.name for call in response.message.tool_calls] == ["get_weather"]
    assert response.finish_reason == "tool_calls"


async def test_anthropic_without_a_format_keeps_tool_calls() -> None:
    model = chat_model("anthropic", Recorder([json_reply(ANTHROPIC_TOOL_ANSWER)]))
    response = await model.request(ModelRequest([Message.user("?")]))
    await model.aclose()
    assert [call.name for call in response.message.tool_calls] == ["city"]
    assert response.message.content == ""


async def test_anthropic_on_vertex_forces_and_converts_too() -> None:
    recorder = Recorder([json_reply(ANTHROPIC_TOOL_ANSWER)])
    model = anthropic_vertex_model(recorder)
    response = await model.request(ASK)
    await model.aclose()
    (body,) = recorder.bodies()
    assert body["tool_choice"] == {"type": "tool", "name": "city"}
    assert body["tools"] == [anthropic_output_tool()]
    assert response.message.content == '{"name":"Lyon"}'


# -- Bedrock Converse ---------------------------------------------------------------------------


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


BEDROCK_TOOL = {
    "toolSpec": {
        "name": "city",
        "description": "Give your final answer. Call this tool with the answer as its input, "
        "and nothing else.",
        "inputSchema": {"json": CITY},
    }
}
CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


async def bedrock_body(request: ModelRequest, model: str = CLAUDE, **options: Any) -> Any:
    recorder = Recorder([event_stream(chunks=[delta(0, text="{}"), *finish()])])
    return await sent(bedrock_model(recorder, model, **options), recorder, request)


@pytest.mark.usefixtures("aws")
async def test_bedrock_forces_the_output_tool() -> None:
    body = await bedrock_body(ASK)
    assert body["toolConfig"] == {"tools": [BEDROCK_TOOL], "toolChoice": {"tool": {"name": "city"}}}


@pytest.mark.usefixtures("aws")
async def test_bedrock_beside_other_tools_forces_some_tool() -> None:
    request = ModelRequest([Message.user("?")], tools=[WEATHER], output_format=FORMAT)
    body = await bedrock_body(request, "amazon.nova-pro-v1:0")
    assert [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]] == ["get_weather", "city"]
    assert body["toolConfig"]["toolChoice"] == {"any": {}}


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize(
    ("model", "options"),
    [("meta.llama3-70b-instruct-v1:0", {}), (CLAUDE, {"thinking_budget": 1024})],
)
async def test_bedrock_leaves_the_choice_to_models_that_cannot_be_forced(
    model: str, options: dict[str, Any]
) -> None:
    body = await bedrock_body(ASK, model, **options)
    assert body["toolConfig"] == {"tools": [BEDROCK_TOOL]}


@pytest.mark.usefixtures("aws")
async def test_bedrock_whole_answer_becomes_json_text() -> None:
    answer = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"toolUse": {"toolUseId": "t1", "name": "city", "input": {"name": "Lyon"}}}
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5},
    }
    model = bedrock_model(Recorder([json_reply(answer)]), CLAUDE)
    response = await model.request(ASK)
    await model.aclose()
    assert response.message.content == '{"name":"Lyon"}'
    assert response.message.tool_calls == ()
    assert response.finish_reason == "stop"


@pytest.mark.usefixtures("aws")
async def test_bedrock_streamed_tool_input_streams_as_text() -> None:
    chunks = [
        event("messageStart", {"role": "assistant"}),
        event(
            "contentBlockStart",
            {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t1", "name": "city"}}},
        ),
        delta(0, toolUse={"input": '{"name": '}),
        delta(0, toolUse={"input": '"Lyon"}'}),
        event("contentBlockStop", {"contentBlockIndex": 0}),
        *finish("tool_use"),
    ]
    model = bedrock_model(Recorder([event_stream(chunks=chunks)]), CLAUDE)
    streamed = await stream_all(model, ASK)
    await model.aclose()
    assert streamed.text == '{"name": "Lyon"}'
    assert streamed.calls_from_deltas() == {}
    assert json.loads(streamed.response.message.content) == {"name": "Lyon"}
    assert streamed.response.finish_reason == "stop"


def _as_output(name: str, properties: dict[str, Any]) -> ModelRequest:
    fmt = OutputFormat(name, {"type": "object", "properties": properties})
    return ModelRequest([Message.user("?")], output_format=fmt)


@pytest.mark.parametrize(
    ("file", "name", "content"),
    [
        # Text first, then the tool's input over input_json_delta fragments (the first empty).
        ("anthropic/tool-use-stream.sse", "get_weather", '{"location": "Paris"}'),
        # Two calls of the tool, each with an empty input: the first is the answer.
        ("anthropic/parallel-tool-use-no-args-stream.sse", "pelican_name_generator", "{}"),
    ],
)
async def test_a_recorded_anthropic_tool_stream_streams_exactly_the_answer(
    file: str, name: str, content: str
) -> None:
    chunks = split(fixture_bytes(file), (50,))
    model = chat_model("anthropic", Recorder([sse(b"", chunks=chunks)]))
    streamed = await stream_all(model, _as_output(name, {}))
    await model.aclose()
    assert streamed.response.message.content == content
    assert streamed.text == content
    assert streamed.calls_from_deltas() == {}
    assert streamed.response.message.tool_calls == ()
    assert streamed.response.finish_reason == "stop"


@pytest.mark.usefixtures("aws")
async def test_a_recorded_bedrock_tool_stream_streams_exactly_the_answer() -> None:
    # Nova writes a <thinking> text block before its toolUse.
    body = fixture_bytes("bedrock-converse/tool-use-stream.bin")
    model = bedrock_model(Recorder([event_stream(chunks=[body])]))
    streamed = await stream_all(model, _as_output("get_temperature", {"city": {}}))
    await model.aclose()
    assert streamed.response.message.content == '{"city":"Paris"}'
    assert streamed.text == streamed.response.message.content
    assert streamed.response.message.tool_calls == ()
    assert streamed.response.finish_reason == "stop"


async def test_a_plain_text_answer_without_the_output_tool_still_streams_as_text() -> None:
    chunks = split(fixture_bytes("anthropic/tool-use-stream.sse"), (50,))
    model = chat_model("anthropic", Recorder([sse(b"", chunks=chunks)]))
    streamed = await stream_all(model, _as_output("final_answer", {}))
    await model.aclose()
    assert streamed.text == streamed.response.message.content
    assert streamed.text == "I'll check the current weather in Paris for you."
    assert [call.name for call in streamed.response.message.tool_calls] == ["get_weather"]


# -- output_tool: the forced tool's input must be an object -------------------------------------

NODE: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string"}, "next": {"$ref": "#/$defs/Node"}},
    "required": ["label"],
}


def tool_schema(schema: dict[str, Any]) -> Any:
    tool = output_tool(ModelRequest([], output_format=OutputFormat("answer", schema)))
    assert tool is not None
    return tool.parameters


def test_the_output_tool_inlines_a_root_ref_and_keeps_the_defs() -> None:
    schema = {"$ref": "#/$defs/Node", "$defs": {"Node": NODE}}
    assert tool_schema(schema) == {**NODE, "$defs": {"Node": NODE}}
    assert schema == {"$ref": "#/$defs/Node", "$defs": {"Node": NODE}}  # left unchanged


def test_the_output_tool_takes_properties_without_a_type_for_an_object() -> None:
    schema = {"properties": {"name": {"type": "string"}}, "required": ["name"]}
    assert tool_schema(schema) == {"type": "object", **schema}


def test_the_output_tool_keeps_an_object_schema_as_it_is() -> None:
    assert tool_schema(CITY) == CITY


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "array", "items": {"type": "string"}}, "of type 'array'"),
        ({"type": "string"}, "of type 'string'"),
        ({"anyOf": [{"type": "object", "properties": {}}]}, "without a 'type'"),
    ],
)
def test_the_output_tool_refuses_a_root_that_is_not_an_object(
    schema: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        tool_schema(schema)
    assert words in caught.value.message
    assert "must be a JSON object" in caught.value.message
    assert caught.value.hint is not None
    assert '"properties": {"value": <schema>}' in caught.value.hint


@pytest.mark.usefixtures("aws")
async def test_bedrock_refuses_a_root_that_is_not_an_object_before_the_call() -> None:
    recorder = Recorder([])
    model = bedrock_model(recorder, CLAUDE)
    request = ModelRequest(
        [Message.user("?")], output_format=OutputFormat("n", {"type": "integer"})
    )
    with pytest.raises(ConfigurationError, match="of type 'integer'"):
        await stream_all(model, request)
    await model.aclose()
    assert recorder.requests == []


@pytest.mark.parametrize(
    "schema",
    [
        CITY,  # no $ref
        {"$ref": "https://example.com/node.json", "$defs": {"Node": NODE}},  # not into $defs
        {"$ref": "#/definitions/Node", "definitions": {"Node": NODE}},
        {"$ref": "#/$defs/Missing", "$defs": {"Node": NODE}},  # no such target
        {"$ref": "#/$defs/Node"},  # no $defs at all
    ],
)
def test_inline_root_ref_leaves_other_schemas_unchanged(schema: dict[str, Any]) -> None:
    assert inline_root_ref(schema) == schema


def test_inline_root_ref_inlines_a_pydantic_recursive_model() -> None:
    from pydantic import BaseModel

    class Tree(BaseModel):
        label: str
        children: list[Tree] = []

    schema = Tree.model_json_schema()
    assert schema["$ref"] == "#/$defs/Tree"
    inlined = inline_root_ref(schema)
    assert "$ref" not in inlined
    assert inlined["type"] == "object"
    assert inlined["$defs"] == schema["$defs"]
    assert inlined["properties"] == schema["$defs"]["Tree"]["properties"]


# -- the scripted model -------------------------------------------------------------------------


async def test_the_scripted_model_records_the_format_it_was_sent() -> None:
    model = ScriptedModel(['{"name": "Lyon"}'])
    assert model.supports_output_format
    response = await model.request(ASK)
    assert model.requests[0].output_format is FORMAT
    assert response.message.content == '{"name": "Lyon"}'


# -- strict_json_schema -------------------------------------------------------------------------


def test_strict_closes_objects_requires_everything_and_drops_what_it_cannot_keep() -> None:
    schema = {
        "$defs": {
            "Tag": {
                "type": "object",
                "properties": {"label": {"type": "string", "format": "uri", "maxLength": 9}},
            }
        },
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time", "pattern": "^2"},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "uniqueItems": True},
            "main": {"$ref": "#/$defs/Tag", "description": "The main tag."},
            "kind": {"oneOf": [{"const": "a"}, {"const": "b"}], "discriminator": {}},
            "size": {"allOf": [{"type": "integer", "minimum": 1}], "default": 1},
        },
        "required": ["when"],
    }
    before = json.dumps(schema, sort_keys=True)
    tag = {
        "type": "object",
        "properties": {"label": {"type": ["string", "null"]}},
        "required": ["label"],
        "additionalProperties": False,
    }
    assert strict_json_schema(schema) == {
        "$defs": {"Tag": tag},
        "type": "object",
        "properties": {  # the optional ones nullable: OpenAI's way to leave one out
            "when": {"type": "string", "format": "date-time", "pattern": "^2"},
            "tags": {"type": ["array", "null"], "items": {"$ref": "#/$defs/Tag"}},
            "main": {**tag, "type": ["object", "null"], "description": "The main tag."},
            "kind": {"anyOf": [{"anyOf": [{"const": "a"}, {"const": "b"}]}, {"type": "null"}]},
            "size": {"type": ["integer", "null"], "minimum": 1},
        },
        "required": ["when", "tags", "main", "kind", "size"],
        "additionalProperties": False,
    }
    assert json.dumps(schema, sort_keys=True) == before  # the input is left alone


def test_strict_keeps_nullable_objects_and_recursive_refs() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": ["object", "null"],
                "properties": {"next": {"$ref": "#/$defs/Node"}},
            }
        },
        "type": "object",
        "properties": {"head": {"$ref": "#/$defs/Node"}},
    }
    strict = strict_json_schema(schema)
    assert strict["$defs"] == {
        "Node": {
            "type": ["object", "null"],
            "properties": {"next": {"$ref": "#/$defs/Node"}},
            "required": ["next"],
            "additionalProperties": False,
        }
    }


def test_strict_accepts_a_pydantic_model_schema() -> None:
    from pydantic import BaseModel

    class Address(BaseModel):
        street: str
        zip: str | None = None

    class Person(BaseModel):
        name: str
        address: Address
        nicknames: list[str] = []

    strict = strict_json_schema(Person.model_json_schema())
    assert strict["required"] == ["name", "address", "nicknames"]
    assert strict["$defs"]["Address"]["required"] == ["street", "zip"]
    assert strict["$defs"]["Address"]["additionalProperties"] is False


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "array", "items": {"type": "string"}}, "an object"),
        ({"anyOf": [{"type": "object", "properties": {}}]}, "an object"),
        ({"type": "object"}, "(a free-form object) at '(root)'"),
        (
            {
                "type": "object",
                "properties": {"m": {"type": "object", "additionalProperties": True}},
            },
            "allows extra properties",
        ),
        (
            {"type": "object", "properties": {"x": {"not": {"type": "string"}}}},
            "'not' is not supported at '(root).x'",
        ),
        ({"type": "object", "properties": {}, "patternProperties": {}}, "patternProperties"),
        (
            {"type": "object", "properties": {"x": {"allOf": [{}, {}]}}},
            "'allOf' with more than one schema",
        ),
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope", "title": "X"}}},
            "points nowhere",
        ),
    ],
)
def test_schemas_that_cannot_be_strict(schema: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        strict_json_schema(schema)
    assert words in caught.value.message
    assert caught.value.hint
