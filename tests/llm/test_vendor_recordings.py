"""vLLM, Together and Ollama responses the shared fixtures have no recording of.

There is no permissively licensed recording of a vLLM response, nor of a
streamed Together or Ollama one, so these replies are HAND-MADE FROM
DOCUMENTATION (`fixtures/providers/handmade/{vllm,together,ollama}-*`,
listed under "Hand-made from documentation" in MANIFEST.md, each SSE file
opening with `:` comment lines saying so). Ids, timestamps and token counts
are made up: they check that the shared Chat Completions parser reads each
vendor's documented wire format, not how the vendor really behaves.

Each is replayed through the mock transport (cut into odd-sized pieces) and
through the real local server, and the parsed text, tool calls, usage and
finish reason are asserted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from llm_replay import (
    API_KEY,
    HELLO,
    NO_RETRY,
    Recorder,
    ReplayServer,
    Reply,
    chat_model,
    fixture_bytes,
    json_reply,
    replay_stream,
    split,
    stream_all,
    summary,
)

from tidemill.llm import HttpModel, resolve_model
from tidemill.types import ModelResponse


@dataclass(frozen=True)
class Expected:
    file: str
    provider: str
    text: str
    calls: list[tuple[str, str, dict[str, Any]]]
    usage: tuple[int, int]
    """(input tokens, output tokens)."""
    finish: str
    response_id: str
    model: str


HANDMADE = [
    Expected(
        "handmade/vllm-chat-stream.sse",
        "vllm",
        "Paris is the capital of France.",
        [],
        (24, 8),
        "stop",
        "chatcmpl-8f1d2c3b4a5e6f708192a3b4c5d6e7f8",
        "Qwen/Qwen2.5-7B-Instruct",
    ),
    Expected(
        "handmade/vllm-tool-call-stream.sse",
        "vllm",
        "",
        [
            (
                "chatcmpl-tool-4c7e1f0a9b2d4e6f8a1b3c5d7e9f0a2b",
                "get_weather",
                {"city": "Paris", "days": 2},
            )
        ],
        (187, 26),
        "tool_calls",
        "chatcmpl-0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        "Qwen/Qwen2.5-7B-Instruct",
    ),
    Expected(
        "handmade/together-chat-stream.sse",
        "together",
        "Paris is the capital.",
        [],
        (41, 6),
        "stop",
        "oHandmD-2kFHot-8e9f0a1b2c3d4e5f",
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    ),
    Expected(
        "handmade/together-tool-call-stream.sse",
        "together",
        "",
        [("call_7hK2mQx9Lw3nR5tY8vB1cD4f", "get_weather", {"city": "Paris", "days": 2})],
        (212, 23),
        "tool_calls",
        "oHandmE-2kFHot-9f0a1b2c3d4e5f60",
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    ),
    Expected(
        "handmade/ollama-chat-stream.sse",
        "ollama",
        "Paris is the capital of France.",
        [],
        (33, 8),
        "stop",
        "chatcmpl-417",
        "llama3.2",
    ),
    Expected(
        "handmade/ollama-tool-call-stream.sse",
        "ollama",
        "",
        [("call_k3v9q2xw", "get_weather", {"city": "Paris", "days": 2})],
        (176, 21),
        "tool_calls",
        "chatcmpl-902",
        "llama3.2",
    ),
]
VLLM_WHOLE = Expected(
    "handmade/vllm-tool-call.json",
    "vllm",
    "",
    [
        (
            "chatcmpl-tool-9d8c7b6a5f4e4d3c2b1a0f9e8d7c6b5a",
            "get_weather",
            {"city": "Paris", "days": 2},
        )
    ],
    (187, 26),
    "tool_calls",
    "chatcmpl-5e6f708192a3b4c5d6e7f8091a2b3c4d",
    "Qwen/Qwen2.5-7B-Instruct",
)


def check(response: ModelResponse, expected: Expected) -> None:
    message = response.message
    assert (message.content or "") == expected.text
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == expected.calls
    assert all(c.raw_arguments is None for c in message.tool_calls)  # the arguments parsed
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens) == expected.usage
    assert response.finish_reason == expected.finish
    assert (response.response_id, response.model) == (expected.response_id, expected.model)
    assert response.provider == expected.provider


def test_the_files_say_they_are_handmade() -> None:
    for expected in HANDMADE:
        first = fixture_bytes(expected.file).decode().splitlines()[0]
        assert first.startswith(": HAND-MADE FROM DOCUMENTATION, NOT A RECORDING."), expected.file


@pytest.mark.parametrize("expected", HANDMADE, ids=lambda e: e.file.removeprefix("handmade/"))
@pytest.mark.parametrize("sizes", [[1 << 20], [1], [7, 64, 3, 300]], ids=["whole", "1", "mixed"])
async def test_streams_parse_in_any_cut(expected: Expected, sizes: list[int]) -> None:
    body = fixture_bytes(expected.file)
    streamed = await replay_stream(expected.provider, split(body, sizes))
    check(streamed.response, expected)
    assert streamed.text == expected.text
    rebuilt = streamed.calls_from_deltas()
    assert [(rebuilt[i][0], rebuilt[i][1]) for i in sorted(rebuilt)] == [
        (call_id, name) for call_id, name, _ in expected.calls
    ]


def served(provider: str, server: ReplayServer) -> HttpModel:
    model = resolve_model(
        f"{provider}:model-x", api_key=API_KEY, base_url=server.url + "/v1", retry=NO_RETRY
    )
    assert isinstance(model, HttpModel)
    return model


@pytest.mark.parametrize("expected", HANDMADE, ids=lambda e: e.file.removeprefix("handmade/"))
async def test_streams_over_a_real_server(server: ReplayServer, expected: Expected) -> None:
    server.replies.append(Reply(fixture_bytes(expected.file)))
    model = served(expected.provider, server)
    try:
        streamed = await stream_all(model, HELLO)
    finally:
        await model.aclose()
    check(streamed.response, expected)
    (seen,) = server.seen
    assert seen.path == "/v1/chat/completions"
    # The usage these streams carry is only sent when it is asked for.
    assert seen.body["stream"] is True
    assert seen.body["stream_options"] == {"include_usage": True}


async def test_a_whole_vllm_tool_call(server: ReplayServer) -> None:
    body = fixture_bytes(VLLM_WHOLE.file)
    in_memory = await chat_model("vllm", Recorder([json_reply(body)])).request(HELLO)
    check(in_memory, VLLM_WHOLE)
    server.replies.append(Reply(body, content_type="application/json"))
    model = served("vllm", server)
    try:
        over_the_wire = await model.request(HELLO)
    finally:
        await model.aclose()
    assert summary(over_the_wire) == summary(in_memory)
    assert server.seen[0].body["stream"] is False
