"""The proxy served by uvicorn, with the official OpenAI SDK as its client.

Upstream models are Tidemill's own adapters pointed at a local replay server
that plays recorded provider responses, so the whole path runs: SDK → proxy
→ adapter → HTTP → adapter parser → proxy writer → SDK.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from llm_replay import API_KEY, ReplayServer, Reply, fixture_bytes, fixture_json
from proxy_serve import sdk, serve, upstream_router

from tidemill.llm.proxy import create_app

TOOLS: list[Any] = fixture_json("openai-chat/parallel-tool-calls-stream.request.json")["tools"]
ASK_SECRETS: list[Any] = [
    {"role": "system", "content": "Use parallel tool calling."},
    {
        "role": "user",
        "content": "Please retrieve the secrets associated with each of these passwords: "
        "mellon,radiance",
    },
]
HELLO: list[Any] = [{"role": "user", "content": "Hello"}]


def json_reply(name: str, status: int = 200, **options: Any) -> Reply:
    return Reply(fixture_bytes(name), status=status, content_type="application/json", **options)


def error_reply(status: int, message: str, **options: Any) -> Reply:
    body = {"error": {"message": message, "type": "error", "code": None}}
    return Reply(
        json.dumps(body).encode(), status=status, content_type="application/json", **options
    )


class TestChat:
    def test_a_plain_answer_through_the_openai_adapter(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(json_reply("openai-chat/text.json"))
        completion = sdk(proxy).chat.completions.create(
            model="openai:gpt-4o",
            messages=[{"role": "developer", "content": "Be exact."}, *HELLO],
            temperature=0.2,
            max_completion_tokens=64,
            seed=7,
            stop=["END"],
        )
        assert completion.object == "chat.completion"
        assert completion.id.startswith("chatcmpl-")
        assert completion.model == "openai:gpt-4o"
        choice = completion.choices[0]
        assert choice.message.content == "\\(4200 + 42 = 4242\\)."
        assert choice.finish_reason == "stop"
        assert completion.usage is not None
        assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (16, 12)
        upstream = server.seen[0]
        assert upstream.path == "/v1/chat/completions"
        assert upstream.headers["authorization"] == f"Bearer {API_KEY}"
        assert upstream.body == {
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "Be exact."},
                {"role": "user", "content": "Hello"},
            ],
            "stream": False,
            "temperature": 0.2,
            "max_completion_tokens": 64,
            "stop": ["END"],
            "seed": 7,
        }

    def test_a_streamed_answer_ends_with_usage_and_done(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(Reply(fixture_bytes("openai-chat/text-stream.sse")))
        stream = sdk(proxy).chat.completions.create(
            model="openai:gpt-4o",
            messages=HELLO,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        assert chunks[0].choices[0].delta.role == "assistant"
        assert len({chunk.id for chunk in chunks}) == 1
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "4200 + 42 equals 4242."
        assert chunks[-2].choices[0].finish_reason == "stop"
        assert chunks[-1].choices == []
        assert chunks[-1].usage is not None
        assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (16, 10)
        assert all(chunk.usage is None for chunk in chunks[:-1])

    def test_without_include_usage_no_usage_chunk_is_sent(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(Reply(fixture_bytes("openai-chat/text-stream.sse")))
        chunks = list(
            sdk(proxy).chat.completions.create(model="openai:gpt-4o", messages=HELLO, stream=True)
        )
        assert all(chunk.choices for chunk in chunks)
        assert chunks[-1].choices[0].finish_reason == "stop"

    def test_parallel_tool_calls_are_reassembled_by_the_sdk_stream_helper(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(Reply(fixture_bytes("openai-chat/parallel-tool-calls-stream.sse")))
        done: list[tuple[str, str]] = []
        with sdk(proxy).chat.completions.stream(
            model="openai:gpt-4o",
            messages=ASK_SECRETS,
            tools=TOOLS,
            stream_options={"include_usage": True},
        ) as stream:
            for event in stream:
                if event.type == "tool_calls.function.arguments.done":
                    done.append((event.name, event.arguments))
            final = stream.get_final_completion()
        assert done == [
            ("secret_retrieval_tool", '{"password": "mellon"}'),
            ("secret_retrieval_tool", '{"password": "radiance"}'),
        ]
        choice = final.choices[0]
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls or []
        assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
            ("call_M26z19sncd7b4LBgzKRRbaUE", "secret_retrieval_tool", {"password": "mellon"}),
            ("call_KPXe5NX7IcKkaBUhc6dto2QV", "secret_retrieval_tool", {"password": "radiance"}),
        ]
        assert final.usage is not None and final.usage.total_tokens == 128
        sent = server.seen[0].body
        assert sent["tools"] == [
            {
                "type": "function",
                "function": {k: v for k, v in TOOLS[0]["function"].items() if k != "strict"},
            }
        ]
        assert sent["stream_options"] == {"include_usage": True}

    def test_a_tool_loop_turn_is_forwarded_whole(self, proxy: str, server: ReplayServer) -> None:
        server.replies.append(json_reply("openai-chat/text.json"))
        sdk(proxy).chat.completions.create(
            model="openai:gpt-4o",
            messages=[
                *ASK_SECRETS,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "secret_retrieval_tool",
                                "arguments": '{"password":"mellon"}',
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "s3cr3t"},
            ],
            tools=TOOLS,
        )
        assert server.seen[0].body["messages"][2:] == [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "secret_retrieval_tool",
                            "arguments": '{"password":"mellon"}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "s3cr3t"},
        ]


class TestAnthropicBehindTheProxy:
    """Anthropic's Messages API, translated to OpenAI's format on the way back."""

    def test_a_streamed_turn_with_parallel_tool_calls(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(Reply(fixture_bytes("anthropic/parallel-tool-use-stream.sse")))
        with sdk(proxy).chat.completions.stream(
            model="anthropic:claude-sonnet-4-5",
            messages=ASK_SECRETS,
            tools=TOOLS,
            max_completion_tokens=1000,
            stream_options={"include_usage": True},
        ) as stream:
            final = stream.get_final_completion()
        choice = final.choices[0]
        assert choice.message.content == (
            "I'll retrieve the secrets for both passwords you provided."
        )
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls or []
        assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
            ("toolu_015cUijgET79LXjgeYQerN2h", "secret_retrieval_tool", {"password": "mellon"}),
            ("toolu_01XZTimPexA7h3EVKesnKt5T", "secret_retrieval_tool", {"password": "radiance"}),
        ]
        assert final.usage is not None
        assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (416, 109)
        upstream = server.seen[0]
        assert upstream.path == "/v1/messages"
        assert upstream.headers["x-api-key"] == API_KEY
        assert upstream.body == {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1000,
            "system": "Use parallel tool calling.",
            "messages": [{"role": "user", "content": ASK_SECRETS[1]["content"]}],
            "tools": [
                {
                    "name": "secret_retrieval_tool",
                    "description": "A tool that requires a password to retrieve a secret.",
                    "input_schema": TOOLS[0]["function"]["parameters"],
                }
            ],
            "stream": True,
        }

    def test_a_whole_answer(self, proxy: str, server: ReplayServer) -> None:
        server.replies.append(json_reply("anthropic/text.json"))
        completion = sdk(proxy).chat.completions.create(
            model="anthropic:claude-sonnet-4-5", messages=HELLO
        )
        assert completion.choices[0].message.content == "4200 + 42 = 4242"
        assert completion.usage is not None
        assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (17, 15)

    def test_images_and_tool_results_become_anthropic_blocks(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(json_reply("anthropic/text.json"))
        sdk(proxy).chat.completions.create(
            model="anthropic:claude-sonnet-4-5",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": "Let me look.",
                    "tool_calls": [
                        {
                            "id": "toolu_1",
                            "type": "function",
                            "function": {"name": "zoom", "arguments": '{"factor": 2}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "toolu_1", "content": "a pelican"},
            ],
            tools=[{"type": "function", "function": {"name": "zoom"}}],
        )
        assert server.seen[0].body["messages"] == [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                    },
                    {"type": "text", "text": "What is this?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "zoom", "input": {"factor": 2}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a pelican"}
                ],
            },
        ]


class TestErrors:
    def test_a_body_that_is_not_json_is_a_400(self, proxy: str) -> None:
        answer = httpx.post(f"{proxy}/v1/chat/completions", content=b"{not json")
        assert answer.status_code == 400
        assert answer.json()["error"]["type"] == "invalid_request_error"
        assert answer.json()["error"]["code"] == "invalid_json"

    def test_a_missing_model_is_a_400_naming_the_field(self, proxy: str) -> None:
        with pytest.raises(openai.BadRequestError) as caught:
            sdk(proxy).chat.completions.create(model="", messages=HELLO)
        assert caught.value.status_code == 400
        assert caught.value.param == "model"

    def test_a_malformed_message_is_a_400_naming_its_path(self, proxy: str) -> None:
        with pytest.raises(openai.BadRequestError) as caught:
            sdk(proxy).chat.completions.create(
                model="openai:gpt-4o",
                messages=[*HELLO, {"role": "user", "content": [{"type": "input_audio"}]}],
            )
        assert caught.value.param == "messages[1].content[0].type"
        assert "input_audio" in caught.value.message

    def test_an_unknown_model_is_a_404_with_did_you_mean(self, server: ReplayServer) -> None:

        router = upstream_router(server, aliases={"claude": "anthropic:claude-sonnet-4-5"})
        with serve(create_app(router)) as url, pytest.raises(openai.NotFoundError) as caught:
            sdk(url).chat.completions.create(model="claud", messages=HELLO)
        assert caught.value.code == "model_not_found"
        assert "Did you mean 'claude'?" in caught.value.message

    def test_an_unknown_provider_is_a_404_with_did_you_mean(self, proxy: str) -> None:
        with pytest.raises(openai.NotFoundError) as caught:
            sdk(proxy).chat.completions.create(model="antropic:claude-sonnet-4-5", messages=HELLO)
        assert "Did you mean 'anthropic:claude-sonnet-4-5'" in caught.value.message

    def test_an_upstream_rate_limit_is_a_429_with_retry_after(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(error_reply(429, "Slow down.", headers={"retry-after": "7"}))
        with pytest.raises(openai.RateLimitError) as caught:
            sdk(proxy).chat.completions.create(model="openai:gpt-4o", messages=HELLO)
        assert caught.value.status_code == 429
        assert caught.value.response.headers["retry-after"] == "7"
        assert "Slow down." in caught.value.message

    def test_an_upstream_auth_failure_is_a_401_without_the_key(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(error_reply(401, f"Incorrect API key provided: {API_KEY}."))
        with pytest.raises(openai.AuthenticationError) as caught:
            sdk(proxy).chat.completions.create(model="openai:gpt-4o", messages=HELLO)
        assert caught.value.status_code == 401
        assert API_KEY not in caught.value.response.text
        assert "Incorrect API key provided" in caught.value.message

    def test_an_upstream_failure_is_a_502(self, proxy: str, server: ReplayServer) -> None:
        server.replies.append(error_reply(500, "The server had an error."))
        with pytest.raises(openai.InternalServerError) as caught:
            sdk(proxy).chat.completions.create(model="openai:gpt-4o", messages=HELLO, stream=True)
        assert caught.value.status_code == 502
        assert "The server had an error." in caught.value.message

    def test_an_upstream_model_not_found_is_a_404(self, proxy: str, server: ReplayServer) -> None:
        server.replies.append(json_reply("openai-chat/error-404-model-not-found.json", 404))
        with pytest.raises(openai.NotFoundError) as caught:
            sdk(proxy).chat.completions.create(model="openai:gpt-5-nope", messages=HELLO)
        assert caught.value.code == "model_not_found"

    def test_an_upstream_timeout_is_a_504(self, server: ReplayServer) -> None:

        router = upstream_router(server)
        router.provider_options["openai"]["timeout"] = 0.3
        server.replies.append(Reply(fixture_bytes("openai-chat/text-stream.sse"), stall_after=0))
        with serve(create_app(router)) as url, pytest.raises(openai.InternalServerError) as caught:
            sdk(url).chat.completions.create(model="openai:gpt-4o", messages=HELLO, stream=True)
        assert caught.value.status_code == 504

    def test_a_stream_cut_before_its_first_event_is_a_502(
        self, proxy: str, server: ReplayServer
    ) -> None:
        server.replies.append(Reply(fixture_bytes("openai-chat/text-stream.sse"), cut_after=20))
        with pytest.raises(openai.InternalServerError) as caught:
            sdk(proxy).chat.completions.create(model="openai:gpt-4o", messages=HELLO, stream=True)
        assert caught.value.status_code == 502

    def test_a_stream_cut_midway_ends_with_an_error_event(
        self, proxy: str, server: ReplayServer
    ) -> None:
        body = fixture_bytes("openai-chat/text-stream.sse")
        server.replies.append(Reply(body, cut_after=len(body) // 2))
        stream = sdk(proxy).chat.completions.create(
            model="openai:gpt-4o", messages=HELLO, stream=True
        )
        received: list[str] = []

        def read_all() -> None:
            for chunk in stream:
                received.append(chunk.choices[0].delta.content or "")

        with pytest.raises(openai.APIError) as caught:
            read_all()
        assert "".join(received).startswith("4200")
        assert "stream" in caught.value.message
        assert isinstance(caught.value.body, dict) and caught.value.body["type"] == "api_error"

    def test_the_proxy_without_an_upstream_key_serves_no_such_model(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:

        with (
            caplog.at_level("WARNING", logger="tidemill.llm.proxy"),
            serve(create_app()) as url,
            pytest.raises(openai.NotFoundError) as caught,
        ):
            sdk(url).chat.completions.create(model="openai:gpt-4o", messages=HELLO)
        assert caught.value.code == "model_not_found"
        assert "not served by this proxy" in caught.value.message
        assert "OPENAI_API_KEY" not in caught.value.message  # that is for the operator's log
        assert any("OPENAI_API_KEY" in r.getMessage() for r in caplog.records)


def test_credentials_come_from_the_environment(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setenv("MISTRAL_API_KEY", API_KEY)
    monkeypatch.setenv("MISTRAL_BASE_URL", f"{server.url}/v1")
    server.replies.append(json_reply("mistral/text.json"))
    with serve(create_app()) as url:
        completion = sdk(url).chat.completions.create(
            model="mistral:mistral-small-latest", messages=HELLO
        )
    assert completion.choices[0].message.content
    assert server.seen[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert server.seen[0].body["model"] == "mistral-small-latest"


def test_models_are_listed_and_retrieved(server: ReplayServer) -> None:

    router = upstream_router(
        server,
        aliases={"claude": "anthropic:claude-sonnet-4-5"},
        models=["openai:gpt-4o-mini"],
    )
    with serve(create_app(router)) as url:
        client = sdk(url)
        listed = [(m.id, m.owned_by) for m in client.models.list()]
        assert listed == [("openai:gpt-4o-mini", "openai"), ("claude", "anthropic")]
        assert client.models.retrieve("claude").owned_by == "anthropic"
        with pytest.raises(openai.NotFoundError):
            client.models.retrieve("nope")


def test_a_proxy_key_is_required_when_configured(server: ReplayServer) -> None:

    server.replies.append(json_reply("openai-chat/text.json"))
    with serve(create_app(upstream_router(server), api_key="proxy-secret")) as url:
        with pytest.raises(openai.AuthenticationError):
            sdk(url).chat.completions.create(model="openai:gpt-4o", messages=HELLO)
        with pytest.raises(openai.AuthenticationError):
            sdk(url).models.list()
        good = openai.OpenAI(base_url=f"{url}/v1", api_key="proxy-secret", max_retries=0)
        assert good.chat.completions.create(model="openai:gpt-4o", messages=HELLO).choices
