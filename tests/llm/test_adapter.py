"""`HttpModel` end to end: recorded responses served by a real HTTP server on 127.0.0.1.

The models here own their `httpx` client (none is injected), so real
sockets, chunked transfer encoding, connection reuse and closing are all
exercised, as in production.
"""

from __future__ import annotations

from typing import Any

import pytest
from llm_replay import (
    API_KEY,
    HELLO,
    ReplayServer,
    Reply,
    fixture_bytes,
    stream_all,
    summary,
)

from tidemill.errors import ProviderError, ProviderTimeout, RateLimitError
from tidemill.llm import HttpModel, Model, ModelRequest, ModelSettings, RetryPolicy, resolve_model
from tidemill.types import Message, ModelResponse, ResponseDone, TextDelta

JSON = "application/json"

STREAMS = [
    ("openai", "openai-chat/parallel-tool-calls-two-functions-stream.sse", "/v1/chat/completions"),
    ("openai", "openai-chat/text-stream.sse", "/v1/chat/completions"),
    ("anthropic", "anthropic/thinking-tool-use-stream.sse", "/v1/messages"),
    ("anthropic", "anthropic/parallel-tool-use-stream.sse", "/v1/messages"),
    ("mistral", "mistral/thinking-stream.sse", "/v1/chat/completions"),
    ("mistral", "mistral/incremental-tool-call-stream.chunks.jsonl", "/v1/chat/completions"),
    ("deepseek", "deepseek/reasoning-stream.sse", "/v1/chat/completions"),
    ("openrouter", "openrouter/reasoning-stream.sse", "/v1/chat/completions"),
]
WHOLE = [
    ("openai", "openai-chat/parallel-tool-calls.json"),
    ("anthropic", "anthropic/thinking.json"),
    ("mistral", "mistral/tool-call.json"),
    ("together", "together/text.json"),
    ("ollama", "ollama/tool-call.json"),
    ("ollama", "ollama/text.json"),
]


def served_model(provider: str, server: ReplayServer, **options: Any) -> HttpModel:
    """A model from a spec string, pointed at the local server, owning its HTTP client."""
    base = server.url if provider == "anthropic" else server.url + "/v1"
    options.setdefault("retry", RetryPolicy(max_retries=0))
    model = resolve_model(f"{provider}:model-x", api_key=API_KEY, base_url=base, **options)
    assert isinstance(model, HttpModel) and model.http.owns_client
    return model


class TestRealServer:
    @pytest.mark.parametrize(("provider", "file", "path"), STREAMS)
    async def test_stream_over_real_sockets_matches_the_in_memory_parse(
        self, server: ReplayServer, provider: str, file: str, path: str
    ) -> None:
        from llm_replay import replay_stream

        body = fixture_bytes(file)
        server.replies.append(Reply(body))
        model = served_model(provider, server)
        try:
            streamed = await stream_all(model)
        finally:
            await model.aclose()
        expected = await replay_stream(provider, [body])
        assert summary(streamed.response) == summary(expected.response)
        assert streamed.text == expected.text and streamed.reasoning == expected.reasoning
        (seen,) = server.seen
        assert seen.path == path and seen.body["stream"] is True
        auth = seen.headers.get("x-api-key") or seen.headers.get("authorization")
        assert auth in (API_KEY, f"Bearer {API_KEY}")

    @pytest.mark.parametrize(("provider", "file"), WHOLE)
    async def test_whole_response_over_real_sockets(
        self, server: ReplayServer, provider: str, file: str
    ) -> None:
        from llm_replay import Recorder, chat_model, json_reply

        body = fixture_bytes(file)
        server.replies.append(Reply(body, content_type=JSON))
        model = served_model(provider, server)
        try:
            response = await model.request(HELLO)
        finally:
            await model.aclose()
        expected = await chat_model(provider, Recorder([json_reply(body)])).request(HELLO)
        assert summary(response) == summary(expected)
        assert server.seen[0].body["stream"] is False

    async def test_one_connection_serves_many_calls(self, server: ReplayServer) -> None:
        body = fixture_bytes("openai-chat/text.json")
        server.replies += [Reply(body, content_type=JSON) for _ in range(3)]
        model = served_model("openai", server)
        try:
            for _ in range(3):
                assert (await model.request(HELLO)).message.content == "\\(4200 + 42 = 4242\\)."
        finally:
            await model.aclose()
        assert len(server.seen) == 3
        assert len({seen.client_port for seen in server.seen}) == 1  # kept alive and reused

    async def test_a_connection_cut_mid_stream_is_a_typed_error_and_not_retried(
        self, server: ReplayServer
    ) -> None:
        body = fixture_bytes("anthropic/parallel-tool-use-stream.sse")
        server.replies += [Reply(body, cut_after=len(body) // 2), Reply(body)]
        model = served_model("anthropic", server, retry=RetryPolicy(max_retries=3, initial_delay=0))
        try:
            with pytest.raises(ProviderError) as caught:
                await stream_all(model)
        finally:
            await model.aclose()
        assert "broke off" in caught.value.message or "before message_stop" in caught.value.message
        assert len(server.seen) == 1

    async def test_a_stalled_stream_times_out_instead_of_hanging(
        self, server: ReplayServer
    ) -> None:
        body = fixture_bytes("openai-chat/text-stream.sse")
        server.replies.append(Reply(body, stall_after=300))
        model = served_model("openai", server, timeout=0.3)
        try:
            with pytest.raises(ProviderTimeout):
                await stream_all(model)
        finally:
            await model.aclose()

    async def test_the_settings_timeout_bounds_the_whole_call(self, server: ReplayServer) -> None:
        body = fixture_bytes("anthropic/thinking-stream.sse")
        server.replies.append(Reply(body, stall_after=2000))
        model = served_model("anthropic", server)
        request = ModelRequest([Message.user("Hi")], settings=ModelSettings(timeout=0.3))
        try:
            with pytest.raises(ProviderTimeout, match=r"0\.3 s timeout"):
                await stream_all(model, request)
        finally:
            await model.aclose()

    async def test_429_then_success_over_the_wire(self, server: ReplayServer) -> None:
        limited = Reply(
            b'{"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}',
            status=429,
            content_type=JSON,
            headers={"retry-after": "0"},
        )
        server.replies += [limited, Reply(fixture_bytes("openai-chat/text-stream.sse"))]
        model = served_model("openai", server, retry=RetryPolicy(max_retries=1))
        try:
            streamed = await stream_all(model)
        finally:
            await model.aclose()
        assert streamed.response.message.content == "4200 + 42 equals 4242."
        assert len(server.seen) == 2

    async def test_rate_limit_errors_surface_when_retries_run_out(
        self, server: ReplayServer
    ) -> None:
        body = fixture_bytes("openrouter/error-429.json")
        server.replies.append(Reply(body, status=429, content_type=JSON))
        model = served_model("openrouter", server)
        try:
            with pytest.raises(RateLimitError, match="rate-limited upstream") as caught:
                await model.request(HELLO)
        finally:
            await model.aclose()
        assert API_KEY not in str(caught.value)

    async def test_an_unreachable_server_is_a_typed_error(self) -> None:
        import socket

        with socket.socket() as probe:  # a port nobody listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        model = resolve_model(
            "vllm:m", base_url=f"http://127.0.0.1:{port}/v1", retry=RetryPolicy(max_retries=0)
        )
        try:
            with pytest.raises(ProviderError, match="Could not reach vllm") as caught:
                await model.request(HELLO)
        finally:
            await model.aclose()
        assert caught.value.retryable and caught.value.status_code is None


class TestAgentOnARealAdapter:
    """The agent runtime drives an adapter through a tool call and its result."""

    def test_sync_run_with_tools(self, server: ReplayServer) -> None:
        from tidemill import agent, tool

        @tool
        def secret_retrieval_tool(password: str) -> str:
            """Return the secret behind a password.

            Args:
                password: The password.
            """
            return {"mellon": "the door opens", "radiance": "light"}[password]

        server.replies += [
            Reply(fixture_bytes("openai-chat/parallel-tool-calls.json"), content_type=JSON),
            Reply(fixture_bytes("openai-chat/text.json"), content_type=JSON),
        ]
        bot = (
            agent()
            .llm("openai:gpt-4o", api_key=API_KEY, base_url=server.url + "/v1")
            .tool(secret_retrieval_tool)
            .system("Use parallel tool calling.")
        )
        try:
            result = bot.run("Secrets for mellon and radiance, please.")
        finally:
            bot.close()
        assert result.output == "\\(4200 + 42 = 4242\\)."
        assert result.usage.requests == 2
        assert result.usage.input_tokens == 75 + 16
        first, second = (seen.body for seen in server.seen)
        assert [m["role"] for m in first["messages"]] == ["system", "user"]
        assert first["tools"][0]["function"]["name"] == "secret_retrieval_tool"
        calls = second["messages"][2]["tool_calls"]
        assert [c["id"] for c in calls] == [
            "call_v6LacIrChvs6ITVpIZqy5tFc",
            "call_onyWzk4mLTGKzW9cthmf4Llq",
        ]
        results = {m["tool_call_id"]: m["content"] for m in second["messages"][3:]}
        assert results == {
            "call_v6LacIrChvs6ITVpIZqy5tFc": "the door opens",
            "call_onyWzk4mLTGKzW9cthmf4Llq": "light",
        }

    async def test_streamed_run_with_anthropic_thinking(self, server: ReplayServer) -> None:
        from tidemill import agent, tool
        from tidemill.types import RunDone, TextDelta

        @tool
        def fixed_version() -> str:
            """Return a fixed test version string."""
            return "1.2.3"

        server.replies += [
            Reply(fixture_bytes("anthropic/thinking-tool-use-stream.sse")),
            Reply(fixture_bytes("anthropic/text-stream.sse")),
        ]
        bot = (
            agent()
            .llm("anthropic:claude-haiku-4-5", api_key=API_KEY, base_url=server.url)
            .tool(fixed_version)
        )
        try:
            events = [event async for event in bot.astream("Use the fixed_version tool.")]
        finally:
            await bot.aclose()
        assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == "4200 + 42 = 4242"
        assert isinstance(events[-1], RunDone)
        follow_up = server.seen[1].body["messages"]
        assert follow_up[1]["content"][0]["type"] == "thinking"
        assert follow_up[1]["content"][0]["signature"].startswith("EoQDCm0IDhgCKkCDzGs2")
        assert follow_up[2] == {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01825dXWLSoJwCst1qTsiWdb",
                    "content": "1.2.3",
                }
            ],
        }

    async def test_streamed_run_with_a_gemini_thought_signature(self, server: ReplayServer) -> None:
        from tidemill import agent, tool
        from tidemill.types import RunDone, TextDelta

        @tool
        def get_country() -> str:
            """Return the user's country."""
            return "France"

        server.replies += [
            Reply(fixture_bytes("gemini/function-call-stream.sse")),
            Reply(fixture_bytes("gemini/text-stream.sse")),
        ]
        bot = (
            agent()
            .llm("gemini:gemini-3-pro-preview", api_key=API_KEY, base_url=server.url + "/v1beta")
            .tool(get_country)
            .system("Use the tools.")
        )
        try:
            events = [
                event
                async for event in bot.astream(
                    "What is the capital of the user country? Call the tool"
                )
            ]
        finally:
            await bot.aclose()
        assert isinstance(events[-1], RunDone)
        answer = "".join(e.delta for e in events if isinstance(e, TextDelta))
        assert answer.endswith("So, 4200 + 42 = **4242**.")
        first, second = (seen.body for seen in server.seen)
        assert server.seen[0].path == (
            "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
        )
        assert first["systemInstruction"] == {"parts": [{"text": "Use the tools."}]}
        assert first["tools"] == [
            {
                "functionDeclarations": [
                    {"name": "get_country", "description": "Return the user's country."}
                ]
            }
        ]
        model_turn, results = second["contents"][1:]
        (call,) = model_turn["parts"]
        assert call["functionCall"] == {"name": "get_country", "args": {}}
        # The signature of the recorded call goes back verbatim, on the call it came with.
        assert call["thoughtSignature"].startswith("EpwICpkIAXLI2nxlU6gsWZaZHRYkX1orzuM8")
        assert call["thoughtSignature"].endswith("jY1V7mjb2D/7NoL5owonoBDAXOk15QuFyU=")
        assert results == {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_country", "response": {"result": "France"}}}
            ],
        }
        done = events[-1].response
        assert done.usage.requests == 2
        assert done.usage.input_tokens == 29 + 13


async def test_a_model_without_a_stream_of_its_own_streams_its_log_probabilities() -> None:
    """`Model.stream`'s fallback: the whole text in one delta, with the answer's scores."""
    scores = {"content": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}]}

    class Whole(Model):
        async def request(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(message=Message.assistant("Hi"), logprobs=scores)

    first, last = [event async for event in Whole().stream(HELLO)]
    assert first == TextDelta(delta="Hi", logprobs=scores)
    assert isinstance(last, ResponseDone) and last.response.logprobs == scores
