"""Reading OpenAI-format requests into Tidemill types, with inline snapshots."""

from __future__ import annotations

from typing import Any

import pytest

from tidemill.llm import ScriptedModel
from tidemill.llm.proxy import InvalidRequest, check_fields, parse_chat_request, parse_json


def parse(**fields: Any) -> Any:
    body = {"model": "openai:gpt-4o", "messages": [{"role": "user", "content": "Hi"}], **fields}
    return parse_chat_request(body)


def dump_messages(**fields: Any) -> list[dict[str, Any]]:
    return [m.model_dump(exclude_defaults=True) for m in parse(**fields).request.messages]


def test_every_role_and_part_is_read() -> None:
    messages = dump_messages(
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
            {
                "role": "user",
                "name": "ada",
                "content": [
                    {"type": "text", "text": "What is "},
                    {"type": "text", "text": "this?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,iVBO", "detail": "low"},
                    },
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Zoom first.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "zoom", "arguments": '{"factor": 2}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "crop", "arguments": '{"broken'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "a pelican"},
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "?"}]},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
        ]
    )
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Use tools."},
        {
            "role": "user",
            "content": "What is this?",
            "name": "ada",
            "images": (
                {"url": "data:image/png;base64,iVBO", "media_type": "image/png", "detail": "low"},
                {"url": "https://example.com/a.jpg"},
            ),
        },
        {
            "role": "assistant",
            "reasoning": ({"text": "Zoom first."},),
            "tool_calls": (
                {"id": "call_1", "name": "zoom", "arguments": {"factor": 2}},
                {"id": "call_2", "name": "crop", "raw_arguments": '{"broken'},
            ),
        },
        {"role": "tool", "content": "a pelican", "tool_call_id": "call_1", "name": "zoom"},
        {"role": "tool", "content": "?", "tool_call_id": "call_2", "name": "crop"},
        {"role": "assistant", "content": "I can't."},
    ]


def test_tools_and_settings_are_read() -> None:
    parsed = parse(
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "zoom",
                    "description": "Zoom in.",
                    "parameters": {"type": "object", "properties": {"factor": {"type": "number"}}},
                    "strict": True,
                },
            },
            {"type": "function", "function": {"name": "reset"}},
        ],
        tool_choice="auto",
        temperature=1,
        top_p=0.5,
        max_tokens=10,
        max_completion_tokens=20,
        stop=["a", "b"],
        seed=3,
        stream=True,
        stream_options={"include_usage": True},
        user="someone",
        metadata={"k": "v"},
        parallel_tool_calls=False,
        presence_penalty=0.1,
    )
    assert [t.model_dump() for t in parsed.request.tools] == [
        {
            "name": "zoom",
            "description": "Zoom in.",
            "parameters": {"type": "object", "properties": {"factor": {"type": "number"}}},
        },
        {"name": "reset", "description": "", "parameters": {"type": "object", "properties": {}}},
    ]
    assert parsed.request.settings == {
        "temperature": 1.0,
        "top_p": 0.5,
        "max_tokens": 20,
        "stop": ["a", "b"],
        "seed": 3,
    }
    assert (parsed.model, parsed.stream, parsed.include_usage) == ("openai:gpt-4o", True, True)


def test_tool_choice_none_keeps_the_tools_and_usage_needs_a_stream() -> None:
    parsed = parse(
        tools=[{"type": "function", "function": {"name": "zoom"}}],
        tool_choice="none",
        stream_options={"include_usage": True},
    )
    assert [tool.name for tool in parsed.request.tools] == ["zoom"]
    assert parsed.request.tool_choice == "none"
    assert (parsed.stream, parsed.include_usage) == (False, False)


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ([1], None, "must be a JSON object, not an array"),
        ({"messages": []}, "model", "provide a 'model'"),
        ({"model": 3, "messages": []}, "model", "expected a non-empty string, but got a number"),
        ({"model": "m"}, "messages", "expected an array of messages, but got null"),
        ({"model": "m", "messages": []}, "messages", "at least one message"),
        ({"model": "m", "messages": ["hi"]}, "messages[0]", "a message object"),
        ({"model": "m", "messages": [{"role": "bot"}]}, "messages[0].role", "'bot'"),
        ({"model": "m", "messages": [{"role": "function"}]}, "messages[0].role", "legacy"),
        (
            {"model": "m", "messages": [{"role": "user", "content": 5}]},
            "messages[0].content",
            "got a number",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "file"}]}]},
            "messages[0].content[0].type",
            "'file'",
        ),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
            },
            "messages[0].content[0].image_url.url",
            "non-empty string",
        ),
        (
            {"model": "m", "messages": [{"role": "system", "content": [{"type": "image_url"}]}]},
            "messages[0].content[0].type",
            "only 'text' parts",
        ),
        (
            {"model": "m", "messages": [{"role": "tool", "content": "x"}]},
            "messages[0].tool_call_id",
            "non-empty string",
        ),
        (
            {
                "model": "m",
                "messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}],
            },
            "messages[0].tool_calls[0].function.name",
            "non-empty string",
        ),
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 3}}],
                    }
                ],
            },
            "messages[0].tool_calls[0].function.arguments",
            "a string of JSON",
        ),
    ],
)
def test_a_bad_request_names_the_field(body: Any, param: str | None, words: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_chat_request(body)
    assert caught.value.status == 400
    assert caught.value.param == param
    assert words in caught.value.message


@pytest.mark.parametrize(
    ("fields", "param", "words"),
    [
        ({"tools": {"name": "x"}}, "tools", "an array of tools"),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type", "Only 'function'"),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]},
            "tools[0].function.parameters",
            "JSON Schema object",
        ),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "f", "parameters": {"type": "objekt"}},
                    }
                ]
            },
            "tools[0].function.parameters",
            "not a valid JSON Schema at 'type'",
        ),
        (
            {"tools": [{"function": {"name": "f"}}, {"function": {"name": "f"}}]},
            "tools[1].function.name",
            "Duplicate",
        ),
        ({"tool_choice": "required"}, "tool_choice", "has no 'tools'"),
        (
            {"tool_choice": {"type": "function", "function": {"name": "f"}}},
            "tool_choice.function.name",
            "not one of 'tools'",
        ),
        ({"tool_choice": "sometimes"}, "tool_choice", "'auto', 'none', 'required'"),
        ({"temperature": "hot"}, "temperature", "a number"),
        ({"temperature": True}, "temperature", "a number"),
        ({"max_tokens": 0}, "max_tokens", "at least 1"),
        ({"max_completion_tokens": 2.5}, "max_completion_tokens", "an integer"),
        ({"stop": [1]}, "stop[0]", "a string"),
        ({"seed": "x"}, "seed", "an integer"),
        ({"stream": "yes"}, "stream", "a boolean"),
        ({"stream_options": {"include_usage": 1}}, "stream_options.include_usage", "boolean"),
        ({"n": 2}, "n", "one choice"),
        ({"modalities": ["text", "audio"]}, "modalities", "Audio"),
        ({"functions": [{"name": "f"}]}, "functions", "legacy"),
    ],
)
def test_a_bad_option_names_the_field(fields: dict[str, Any], param: str, words: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse(**fields)
    assert caught.value.param == param
    assert words in caught.value.message


def test_options_that_change_nothing_here_are_accepted() -> None:
    parsed = parse(n=1, response_format={"type": "text"}, logprobs=False, modalities=["text"])
    assert parsed.request.settings == {}


def test_log_probabilities_are_options_refused_where_none_come_back() -> None:
    """`logprobs` and `top_logprobs` go on like any field; a model without `request_fields`
    (the offline model, one of your own) returns none, so asking for them is a 400 there."""
    parsed = parse(logprobs=True, top_logprobs=3)
    assert parsed.request.options == {"logprobs": True, "top_logprobs": 3}
    check_fields(parse(logprobs=False), ScriptedModel())
    for fields, param, code in [
        ({"logprobs": True}, "logprobs", "unsupported_value"),
        ({"top_logprobs": 0}, "top_logprobs", "unsupported_parameter"),
        ({"logprobs": False, "top_logprobs": 2}, "top_logprobs", "unsupported_parameter"),
    ]:
        with pytest.raises(InvalidRequest) as caught:
            check_fields(parse(**fields), ScriptedModel())
        assert (caught.value.param, caught.value.code) == (param, code)
        assert "no log probabilities" in caught.value.message


def test_json_that_does_not_parse_says_where() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_json(b'{"model": ')
    assert caught.value.code == "invalid_json"
    assert "line 1 column 11" in caught.value.message
    with pytest.raises(InvalidRequest):
        parse_json(b"\xff\xfe")
    with pytest.raises(InvalidRequest):
        parse_json(b"[" * 100_000)


def test_a_lone_surrogate_escape_becomes_the_replacement_character() -> None:
    content = b'"half \\ud83d, pair \\ud83d\\ude00"'
    body = b'{"model": "m", "messages": [{"role": "user", "content": ' + content + b"}]}"
    request = parse_chat_request(parse_json(body))
    assert request.request.messages[0].content == "half \ufffd, pair \U0001f600"
