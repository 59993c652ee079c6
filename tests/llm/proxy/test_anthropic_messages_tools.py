"""`POST /v1/messages` with tools and images, the official `anthropic` SDK as the client.

The proxy is served by uvicorn; upstream is a scripted model (or one that
streams tool calls in fragments), or Tidemill's OpenAI adapter talking to a
replay server playing recorded OpenAI tool-call answers.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import anthropic
import httpx
import pytest
from llm_replay import ReplayServer, Reply, fixture_bytes, fixture_json
from proxy_serve import serve, upstream_router
from starlette.testclient import TestClient

from tidemill.llm import ScriptedModel
from tidemill.llm._model import ForcedTool, Model, ModelRequest, ModelStreamEvent
from tidemill.llm.proxy import ModelRouter, create_app
from tidemill.types import (
    ImageRef,
    Message,
    ModelResponse,
    ResponseDone,
    Role,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)

WEATHER: dict[str, Any] = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
ASK = {"role": "user", "content": "What is the weather in Paris?"}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(32))).decode()


def weather(request: ModelRequest) -> Message:
    """Call the tool, then answer from its result."""
    last = request.messages[-1]
    if last.role is Role.TOOL:
        return Message.assistant(f"It is {last.content} in Paris.")
    call = ToolCall(id="call_w1", name="get_weather", arguments={"city": "Paris"})
    return Message.assistant("Let me look.", tool_calls=(call,))


def sdk(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=20.0)


@pytest.fixture
def scripted() -> ScriptedModel:
    return ScriptedModel(handler=weather)


@pytest.fixture
def url(scripted: ScriptedModel) -> Iterator[str]:
    router = ModelRouter(aliases={"fake": scripted}, allow_unlisted=False)
    with serve(create_app(router, access_log=False)) as base:
        yield base


def sse(text: str) -> list[dict[str, Any]]:
    """The `data` of every event of a Messages stream."""
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def blocks(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """The block events in order, as (type, index)."""
    return [(e["type"], e["index"]) for e in events if e["type"].startswith("content_block")]


class TestToolLoop:
    def test_a_two_turn_loop_whole(self, url: str, scripted: ScriptedModel) -> None:
        client = sdk(url)
        first = client.messages.create(
            model="fake", max_tokens=100, tools=[WEATHER], messages=[ASK]
        )
        assert first.stop_reason == "tool_use"
        assert [block.type for block in first.content] == ["text", "tool_use"]
        use = first.content[1]
        assert use.type == "tool_use"
        assert (use.id, use.name, use.input) == ("call_w1", "get_weather", {"city": "Paris"})

        second = client.messages.create(
            model="fake",
            max_tokens=100,
            tools=[WEATHER],
            messages=[
                ASK,
                {"role": "assistant", "content": first.content},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
                },
            ],
        )
        assert second.stop_reason == "end_turn"
        assert second.content[0].type == "text"
        assert second.content[0].text == "It is sunny in Paris."
        assert second.usage.input_tokens > 0 and second.usage.output_tokens > 0

        sent = scripted.requests[1]
        assert [tool.name for tool in sent.tools] == ["get_weather"]
        assert sent.tools[0].parameters == WEATHER["input_schema"]
        assistant, result = sent.messages[1], sent.messages[2]
        assert assistant.content == "Let me look."
        assert assistant.tool_calls == (
            ToolCall(id="call_w1", name="get_weather", arguments={"city": "Paris"}),
        )
        assert (result.role, result.tool_call_id, result.name, result.content) == (
            Role.TOOL,
            "call_w1",
            "get_weather",
            "sunny",
        )
        assert len(sent.messages) == 3  # no empty user message after the tool result

    def test_a_two_turn_loop_streamed(self, url: str, scripted: ScriptedModel) -> None:
        client = sdk(url)
        with client.messages.stream(
            model="fake", max_tokens=100, tools=[WEATHER], messages=[ASK]
        ) as stream:
            first = stream.get_final_message()
        assert first.stop_reason == "tool_use"
        use = first.content[-1]
        assert use.type == "tool_use"
        assert (use.id, use.name, use.input) == ("call_w1", "get_weather", {"city": "Paris"})
        assert first.content[0].type == "text" and first.content[0].text == "Let me look."

        turn = [
            ASK,
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use.id,
                        "content": [{"type": "text", "text": "rainy"}],
                        "is_error": False,
                    }
                ],
            },
        ]
        with client.messages.stream(
            model="fake", max_tokens=100, tools=[WEATHER], messages=turn
        ) as stream:
            text = "".join(stream.text_stream)
            second = stream.get_final_message()
        assert text == "It is rainy in Paris."
        assert second.stop_reason == "end_turn"
        assert scripted.requests[1].messages[2].tool_call_id == "call_w1"

    def test_a_failed_tool_call_is_sent_as_an_error(
        self, url: str, scripted: ScriptedModel
    ) -> None:
        sdk(url).messages.create(
            model="fake",
            max_tokens=100,
            tools=[WEATHER],
            messages=[
                ASK,
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True},
                        {"type": "text", "text": "Try again."},
                    ],
                },
            ],
        )
        tool, user = scripted.requests[0].messages[2:]
        assert (tool.role, tool.is_error, tool.content) == (Role.TOOL, True, "")
        assert (user.role, user.content) == (Role.USER, "Try again.")


class _Fragments(Model):
    """Streams text and tool-call fragments as given, then the whole answer."""

    provider = "fragments"

    def __init__(self, events: list[ModelStreamEvent], answer: Message) -> None:
        self.events = events
        self.answer = answer

    async def request(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(
            message=self.answer,
            usage=Usage(requests=1, input_tokens=9, output_tokens=4),
            finish_reason="tool_calls" if self.answer.tool_calls else "stop",
        )

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        for item in self.events:
            yield item
        yield ResponseDone(response=await self.request(request))


def _paris_and_rome() -> Message:
    return Message.assistant(
        "Checking.",
        tool_calls=(
            ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id="call_b", name="get_weather", arguments={"city": "Rome"}),
        ),
    )


def _stream_through(model: Model) -> tuple[list[dict[str, Any]], anthropic.types.Message]:
    router = ModelRouter(aliases={"frag": model}, allow_unlisted=False)
    body = {"model": "frag", "max_tokens": 50, "tools": [WEATHER], "messages": [ASK]}
    with serve(create_app(router, access_log=False)) as base:
        raw = httpx.post(f"{base}/v1/messages", json={**body, "stream": True}, timeout=20)
        with sdk(base).messages.stream(**body) as stream:
            final = stream.get_final_message()
    return sse(raw.text), final


class TestStreamedBlocks:
    def test_interleaved_calls_keep_their_own_indexes(self) -> None:
        events: list[ModelStreamEvent] = [
            TextDelta(delta="Checking."),
            ToolCallDelta(index=0, call_id="call_a", name="get_weather", arguments_delta='{"ci'),
            ToolCallDelta(index=1, call_id="call_b", name="get_weather", arguments_delta='{"c'),
            ToolCallDelta(index=0, arguments_delta='ty": "Paris"}'),
            ToolCallDelta(index=1, arguments_delta='ity": "Rome"}'),
        ]
        data, final = _stream_through(_Fragments(events, _paris_and_rome()))
        assert data[0]["type"] == "message_start"
        assert [e["type"] for e in data][-2:] == ["message_delta", "message_stop"]
        assert blocks(data) == [
            ("content_block_start", 0),
            ("content_block_delta", 0),
            ("content_block_stop", 0),
            ("content_block_start", 1),
            ("content_block_delta", 1),
            ("content_block_start", 2),  # call 0's arguments are not whole: it stays open
            ("content_block_delta", 2),
            ("content_block_delta", 1),
            ("content_block_delta", 2),
            ("content_block_stop", 1),
            ("content_block_stop", 2),
        ]
        starts = [e["content_block"] for e in data if e["type"] == "content_block_start"]
        assert starts[1] == {"type": "tool_use", "id": "call_a", "name": "get_weather", "input": {}}
        partial = [
            e["delta"]["partial_json"]
            for e in data
            if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"
        ]
        assert partial == ['{"ci', '{"c', 'ty": "Paris"}', 'ity": "Rome"}']
        assert [(b.type, getattr(b, "input", None)) for b in final.content] == [
            ("text", None),
            ("tool_use", {"city": "Paris"}),
            ("tool_use", {"city": "Rome"}),
        ]
        assert final.stop_reason == "tool_use"
        assert (final.usage.input_tokens, final.usage.output_tokens) == (9, 4)

    def test_text_between_calls_opens_a_block_of_its_own(self) -> None:
        answer = Message.assistant(
            "First. Then.",
            tool_calls=(
                ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
                ToolCall(id="call_b", name="get_weather", arguments={"city": "Rome"}),
            ),
        )
        events: list[ModelStreamEvent] = [
            TextDelta(delta="First."),
            ToolCallDelta(index=0, call_id="call_a", name="get_weather"),
            ToolCallDelta(index=0, arguments_delta='{"city": "Paris"}'),
            TextDelta(delta=" Then."),
            ToolCallDelta(index=1, call_id="call_b", name="get_weather"),
            ToolCallDelta(index=1, arguments_delta='{"city": "Rome"}'),
        ]
        data, final = _stream_through(_Fragments(events, answer))
        assert blocks(data) == [
            ("content_block_start", 0),
            ("content_block_delta", 0),
            ("content_block_stop", 0),
            ("content_block_start", 1),
            ("content_block_delta", 1),
            ("content_block_stop", 1),
            ("content_block_start", 2),
            ("content_block_delta", 2),
            ("content_block_stop", 2),
            ("content_block_start", 3),
            ("content_block_delta", 3),
            ("content_block_stop", 3),
        ]
        assert [b.type for b in final.content] == ["text", "tool_use", "text", "tool_use"]

    def test_a_call_whose_name_comes_late_and_an_unstreamed_call(self) -> None:
        events: list[ModelStreamEvent] = [
            ToolCallDelta(index=3, arguments_delta='{"city": '),
            ToolCallDelta(index=3, call_id="call_a", name="get_weather"),
            ToolCallDelta(index=3, arguments_delta='"Paris"}'),
        ]
        data, final = _stream_through(_Fragments(events, _paris_and_rome()))
        # What was never streamed (the text, the second call) comes at the end.
        assert [(b.type, getattr(b, "input", None)) for b in final.content] == [
            ("tool_use", {"city": "Paris"}),
            ("text", None),
            ("tool_use", {"city": "Rome"}),
        ]
        assert [b.id for b in final.content if b.type == "tool_use"] == ["call_a", "call_b"]
        assert data[1]["content_block"]["type"] == "tool_use"

    def test_a_call_without_an_id_gets_a_toolu_id(self) -> None:
        answer = Message.assistant(tool_calls=(ToolCall(id="", name="get_weather"),))
        events: list[ModelStreamEvent] = [
            ToolCallDelta(index=0, name="get_weather", arguments_delta="{}")
        ]
        _, final = _stream_through(_Fragments(events, answer))
        assert [b.type for b in final.content] == ["tool_use"]
        assert final.content[0].type == "tool_use" and final.content[0].id.startswith("toolu_")


class TestImages:
    def test_an_image_block_reaches_the_model_as_an_image(self) -> None:
        model = ScriptedModel(["A tiny picture."])
        router = ModelRouter(aliases={"fake": model}, allow_unlisted=False)
        with serve(create_app(router, access_log=False)) as base:
            answer = sdk(base).messages.create(
                model="fake",
                max_tokens=50,
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": PNG,
                                },
                            },
                            {
                                "type": "image",
                                "source": {"type": "url", "url": "https://example.com/cat.jpg"},
                            },
                            {"type": "text", "text": "What is this?"},
                        ],
                    }
                ],
            )
        assert answer.content[0].type == "text"
        user = model.requests[0].messages[-1]
        assert (user.role, user.content) == (Role.USER, "What is this?")
        assert user.images == (
            ImageRef(url=f"data:image/png;base64,{PNG}", media_type="image/png"),
            ImageRef(url="https://example.com/cat.jpg"),
        )

    def test_a_tool_result_s_image_follows_it_in_a_user_message(
        self, url: str, scripted: ScriptedModel
    ) -> None:
        image = {"type": "base64", "media_type": "image/jpeg", "data": PNG}
        sdk(url).messages.create(
            model="fake",
            max_tokens=50,
            tools=[WEATHER],
            messages=[
                ASK,
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": [
                                {"type": "text", "text": "radar:"},
                                {"type": "image", "source": image},
                            ],
                        }
                    ],
                },
            ],
        )
        tool, user = scripted.requests[0].messages[2:]
        assert (tool.role, tool.content, tool.images) == (Role.TOOL, "radar:", ())
        assert user.role is Role.USER and user.content == ""
        assert user.images == (
            ImageRef(url=f"data:image/jpeg;base64,{PNG}", media_type="image/jpeg"),
        )


def _client(model: Model) -> TestClient:
    router = ModelRouter(aliases={"fake": model}, allow_unlisted=False)
    return TestClient(create_app(router, access_log=False))


@pytest.mark.parametrize(
    ("choice", "expected", "options"),
    [
        (None, "auto", {}),
        ({"type": "auto"}, "auto", {}),
        ({"type": "any"}, "required", {}),
        ({"type": "tool", "name": "get_weather"}, ForcedTool("get_weather"), {}),
        ({"type": "none"}, "none", {}),
        (
            {"type": "auto", "disable_parallel_tool_use": True},
            "auto",
            {"parallel_tool_calls": False},
        ),
        ({"type": "any", "disable_parallel_tool_use": False}, "required", {}),
    ],
)
def test_tool_choice_is_mapped(choice: Any, expected: Any, options: dict[str, Any]) -> None:
    model = ScriptedModel(["ok"])
    body: dict[str, Any] = {"model": "fake", "max_tokens": 8, "tools": [WEATHER], "messages": [ASK]}
    if choice is not None:
        body["tool_choice"] = choice
    with _client(model) as proxy:
        answer = proxy.post("/v1/messages", json=body)
    assert answer.status_code == 200, answer.text
    assert model.requests[0].tool_choice == expected
    assert dict(model.requests[0].options) == options


def test_an_upstream_with_no_parallel_switch_refuses_it_by_the_anthropic_name() -> None:
    router = ModelRouter(
        aliases={"gem": "gemini:gemini-2.5-flash"},
        provider_options={"gemini": {"api_key": "test-key-unused"}},
        allow_unlisted=False,
    )
    body = {
        "model": "gem",
        "max_tokens": 8,
        "tools": [WEATHER],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "messages": [ASK],
    }
    with TestClient(create_app(router, access_log=False)) as proxy:
        answer = proxy.post("/v1/messages", json=body)
    assert answer.status_code == 400, answer.text
    assert "tool_choice.disable_parallel_tool_use" in answer.json()["error"]["message"]


_TOOL_USE = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}],
}


def _image(source: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "image", "source": source}]}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"tools": [{"input_schema": {"type": "object"}}]}, "tools[0].name"),
        ({"tools": [{"name": "", "input_schema": {"type": "object"}}]}, "tools[0].name"),
        ({"tools": [{"name": "x", "input_schema": "object"}]}, "tools[0].input_schema"),
        ({"tools": [{"name": "x", "input_schema": [1]}]}, "tools[0].input_schema"),
        ({"tools": [{"name": "x"}]}, "tools[0].input_schema"),
        ({"tools": [{"name": "x", "input_schema": {"type": "string"}}]}, "tools[0].input_schema"),
        (
            {"tools": [{"name": "x", "input_schema": {"type": "object", "required": 3}}]},
            "tools[0].input_schema",
        ),
        ({"tools": [WEATHER, WEATHER]}, "tools[1].name"),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
        ({"tools": {"name": "x"}}, "tools"),
        ({"tool_choice": {"type": "tool", "name": "nope"}, "tools": [WEATHER]}, "tool_choice.name"),
        ({"tool_choice": {"type": "any"}}, "tool_choice"),
        ({"tool_choice": {"type": "sometimes"}, "tools": [WEATHER]}, "tool_choice.type"),
        ({"tool_choice": "auto", "tools": [WEATHER]}, "tool_choice"),
        (
            {
                "tool_choice": {"type": "auto", "disable_parallel_tool_use": "yes"},
                "tools": [WEATHER],
            },
            "tool_choice.disable_parallel_tool_use",
        ),
        (
            {
                "messages": [
                    ASK,
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "toolu_9"}],
                    },
                ]
            },
            "messages[1].content[0].tool_use_id",
        ),
        (
            {
                "messages": [
                    ASK,
                    _TOOL_USE,
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": 7}]},
                ]
            },
            "messages[2].content[0].tool_use_id",
        ),
        (
            {"messages": [ASK, _TOOL_USE, _TOOL_USE]},
            "messages[2].content[0].id",
        ),
        (
            {
                "messages": [
                    ASK,
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "x", "input": "{}"}],
                    },
                ]
            },
            "messages[1].content[0].input",
        ),
        (
            {
                "messages": [
                    ASK,
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "input": {}}],
                    },
                ]
            },
            "messages[1].content[0].name",
        ),
        (
            {"messages": [_image({"type": "base64", "media_type": "image/tiff", "data": PNG})]},
            "messages[0].content[0].source.media_type",
        ),
        (
            {"messages": [_image({"type": "base64", "data": PNG})]},
            "messages[0].content[0].source.media_type",
        ),
        (
            {"messages": [_image({"type": "base64", "media_type": "image/png", "data": "no!"})]},
            "messages[0].content[0].source.data",
        ),
        (
            {"messages": [_image({"type": "base64", "media_type": "image/png", "data": 5})]},
            "messages[0].content[0].source.data",
        ),
        (
            {"messages": [_image({"type": "file", "file_id": "file_1"})]},
            "messages[0].content[0].source.type",
        ),
        ({"messages": [_image({"type": "url", "url": ""})]}, "messages[0].content[0].source.url"),
        (
            {"messages": [_image({"type": "url", "url": "s3://payroll/scan.png"})]},
            "messages[0].content[0].source.url",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image"}]}]},
            "messages[0].content[0]",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "document",
                                "source": {"type": "text", "media_type": "text/plain", "data": "x"},
                            }
                        ],
                    }
                ]
            },
            "messages[0].content[0]",
        ),
        (
            {
                "messages": [
                    ASK,
                    {
                        "role": "assistant",
                        "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}],
                    },
                ]
            },
            "messages[1].content[0]",
        ),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "image", "source": {}}]}]},
            "messages[0].content[0]",
        ),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": ["hi"]}]}, "messages[0].content[0]"),
        ({"messages": [{"role": "user", "content": [{"text": "hi"}]}]}, "messages[0].content[0]"),
        ({"messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        ({"system": [{"type": "image"}]}, "system[0]"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": "hot"}, "temperature"),
        ({"stop_sequences": "END"}, "stop_sequences"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(change: dict[str, Any], named: str) -> None:
    body: dict[str, Any] = {"model": "fake", "max_tokens": 8, "messages": [ASK], **change}
    model = ScriptedModel(["never"])
    with _client(model) as proxy:
        answer = proxy.post("/v1/messages", json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert named in error["error"]["message"]
    assert not model.requests


def test_the_sdk_sees_a_bad_request_error(url: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        sdk(url).messages.create(
            model="fake",
            max_tokens=8,
            tools=[{"name": "x", "input_schema": {"type": "string"}}],  # type: ignore[list-item]
            messages=[ASK],
        )
    assert "tools[0].input_schema.type" in caught.value.message


def test_a_body_nested_too_deeply_is_a_400() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(80):
        schema = {"type": "object", "properties": {"a": schema}}
    body = {
        "model": "fake",
        "max_tokens": 8,
        "messages": [ASK],
        "tools": [{**WEATHER, "input_schema": schema}],
    }
    with _client(ScriptedModel(["x"])) as proxy:
        answer = proxy.post("/v1/messages", json=body)
    assert answer.status_code == 400 and "nested too deeply" in answer.json()["error"]["message"]


SECRET_TOOL: dict[str, Any] = {
    "name": "secret_retrieval_tool",
    "description": "A tool that requires a password to retrieve a secret.",
    "input_schema": fixture_json("openai-chat/parallel-tool-calls-stream.request.json")["tools"][0][
        "function"
    ]["parameters"],
}
ASK_SECRETS: dict[str, Any] = {
    "role": "user",
    "content": "Please retrieve the secrets associated with each of these passwords: "
    "mellon,radiance",
}


class TestOpenAIUpstream:
    """Recorded OpenAI answers with `tool_calls` come out as Anthropic `tool_use` blocks."""

    @pytest.fixture
    def proxy(self, server: ReplayServer) -> Iterator[str]:
        with serve(create_app(upstream_router(server), access_log=False)) as base:
            yield base

    def test_a_whole_answer(self, proxy: str, server: ReplayServer) -> None:
        body = fixture_bytes("openai-chat/parallel-tool-calls.json")
        server.replies.append(Reply(body, content_type="application/json"))
        answer = sdk(proxy).messages.create(
            model="openai:gpt-4o",
            max_tokens=200,
            system="Use parallel tool calling.",
            tools=[SECRET_TOOL],
            tool_choice={"type": "any"},
            messages=[ASK_SECRETS],
        )
        assert answer.stop_reason == "tool_use"
        uses = [(b.id, b.name, b.input) for b in answer.content if b.type == "tool_use"]
        assert uses == [
            ("call_v6LacIrChvs6ITVpIZqy5tFc", "secret_retrieval_tool", {"password": "mellon"}),
            ("call_onyWzk4mLTGKzW9cthmf4Llq", "secret_retrieval_tool", {"password": "radiance"}),
        ]
        assert [b.type for b in answer.content] == ["tool_use", "tool_use"]
        assert (answer.usage.input_tokens, answer.usage.output_tokens) == (75, 53)
        sent = server.seen[0].body
        assert sent["tool_choice"] == "required"
        assert sent["tools"][0]["function"]["name"] == "secret_retrieval_tool"
        assert sent["tools"][0]["function"]["parameters"] == SECRET_TOOL["input_schema"]
        assert sent["messages"][0] == {"role": "system", "content": "Use parallel tool calling."}

    def test_a_streamed_answer(self, proxy: str, server: ReplayServer) -> None:
        server.replies.append(Reply(fixture_bytes("openai-chat/parallel-tool-calls-stream.sse")))
        with sdk(proxy).messages.stream(
            model="openai:gpt-4o", max_tokens=200, tools=[SECRET_TOOL], messages=[ASK_SECRETS]
        ) as stream:
            answer = stream.get_final_message()
        uses = [b for b in answer.content if b.type == "tool_use"]
        assert [(b.name, b.input) for b in uses] == [
            ("secret_retrieval_tool", {"password": "mellon"}),
            ("secret_retrieval_tool", {"password": "radiance"}),
        ]
        assert all(b.id.startswith("call_") for b in uses)
        assert answer.stop_reason == "tool_use"

    def test_a_streamed_answer_with_text_then_a_call_at_index_1(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(Reply(fixture_bytes("openai-chat/gateway-tool-index-1-stream.sse")))
        raw = httpx.post(
            f"{proxy}/v1/messages",
            json={
                "model": "openai:gpt-4o",
                "max_tokens": 200,
                "stream": True,
                "tools": [
                    {"name": "read_file", "input_schema": {"type": "object", "properties": {}}}
                ],
                "messages": [{"role": "user", "content": "Read a.txt"}],
            },
            timeout=20,
        )
        data = sse(raw.text)
        starts = [e["content_block"] for e in data if e["type"] == "content_block_start"]
        assert starts == [
            {"type": "text", "text": ""},
            {"type": "tool_use", "id": "toolu_sanitized", "name": "read_file", "input": {}},
        ]
        assert blocks(data)[-1] == ("content_block_stop", 1)
        arguments = "".join(
            e["delta"].get("partial_json", "") for e in data if e["type"] == "content_block_delta"
        )
        assert json.loads(arguments) == {"path": "a.txt"}
        assert data[-2]["delta"]["stop_reason"] == "tool_use"


class TestAnthropicUpstream:
    """Through Tidemill's Anthropic adapter and back: the loop's blocks survive the round trip."""

    @pytest.fixture
    def proxy(self, server: ReplayServer) -> Iterator[str]:
        with serve(create_app(upstream_router(server), access_log=False)) as base:
            yield base

    def test_a_tool_loop_turn_reaches_claude_as_blocks(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(
            Reply(
                fixture_bytes("anthropic/parallel-tool-use.json"), content_type="application/json"
            )
        )
        server.replies.append(
            Reply(fixture_bytes("anthropic/text.json"), content_type="application/json")
        )
        client = sdk(proxy)
        first = client.messages.create(
            model="anthropic:claude-sonnet-4-5",
            max_tokens=200,
            tools=[SECRET_TOOL],
            messages=[ASK_SECRETS],
        )
        uses = [b for b in first.content if b.type == "tool_use"]
        assert [b.id for b in uses] == [
            "toolu_01BUvqBj8Yb34pNAbCJJY1oc",
            "toolu_01VPuQJ1LonDBYXrr8pqPkqQ",
        ]
        assert first.stop_reason == "tool_use"
        image = {"type": "base64", "media_type": "image/png", "data": PNG}
        client.messages.create(
            model="anthropic:claude-sonnet-4-5",
            max_tokens=200,
            tools=[SECRET_TOOL],
            messages=[
                ASK_SECRETS,
                {"role": "assistant", "content": first.content},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": uses[0].id, "content": "s3cr3t"},
                        {
                            "type": "tool_result",
                            "tool_use_id": uses[1].id,
                            "content": "no such password",
                            "is_error": True,
                        },
                        {"type": "image", "source": image},
                    ],
                },
            ],
        )
        sent = server.seen[1].body
        assert sent["tools"] == [SECRET_TOOL]
        assert sent["messages"][1:] == [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": first.content[0].text},  # type: ignore[union-attr]
                    {**uses[0].model_dump(include={"type", "id", "name", "input"})},
                    {**uses[1].model_dump(include={"type", "id", "name", "input"})},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": uses[0].id, "content": "s3cr3t"},
                    {
                        "type": "tool_result",
                        "tool_use_id": uses[1].id,
                        "content": "no such password",
                        "is_error": True,
                    },
                    {"type": "image", "source": image},
                ],
            },
        ]
