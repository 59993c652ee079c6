"""The fast path for OpenAI-format upstreams: the same bytes as the general path, for less."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from llm_replay import API_KEY, FAST_RETRY, ReplayServer, Reply, fixture_bytes
from proxy_serve import sdk, serve, upstream_router

from tidemill.errors import TidemillError
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.llm._adapter import HttpCall
from tidemill.llm.http._transport import StreamingTransport
from tidemill.llm.proxy import ChunkEncoder, ModelRouter, create_app
from tidemill.llm.proxy._relay import ChatRelay
from tidemill.llm.proxy._streaming import Frames, encoded
from tidemill.types import Message

HELLO = ModelRequest([Message.user("Hello")])
STREAMS = [
    ("openai", "openai-chat/text-stream.sse"),
    ("openai", "openai-chat/parallel-tool-calls-stream.sse"),
    ("openai", "openai-chat/parallel-tool-calls-two-functions-stream.sse"),
    ("openai", "openai-chat/gateway-tool-index-1-stream.sse"),
    ("openai", "openai-chat/multiple-choices-stream.sse"),
    ("openai", "openai-chat/refusal-stream.sse"),
    ("openai", "openai-chat/max-tokens-stream.sse"),
    ("deepseek", "deepseek/reasoning-stream.sse"),
    ("deepseek", "deepseek/reasoning-tool-call-stream.chunks.jsonl"),
    ("groq", "groq/tool-call-stream.sse"),
    ("groq", "groq/reasoning-text-stream.sse"),
    ("groq", "groq/error-in-stream.sse"),
    ("mistral", "mistral/thinking-stream.sse"),
    ("mistral", "mistral/incremental-tool-call-stream.chunks.jsonl"),
    ("openrouter", "openrouter/reasoning-stream.sse"),
    ("openrouter", "openrouter/error-in-stream.sse"),
    ("openrouter", "openrouter/tool-call-repeated-delta-stream.sse"),
    ("openrouter", "openrouter/tool-call-null-args-stream.sse"),
]


def router_for(server: ReplayServer, **options: Any) -> ModelRouter:
    providers = ("openai", "deepseek", "groq", "mistral", "openrouter")
    base = {name: {"base_url": f"{server.url}/v1", "api_key": API_KEY} for name in providers}
    base["anthropic"] = {"base_url": server.url, "api_key": API_KEY}
    return ModelRouter(provider_options=base, **options)


def encoder() -> ChunkEncoder:
    return ChunkEncoder(
        model="client-name", response_id="chatcmpl-1", created=7, include_usage=True
    )


async def collect(frames: Frames) -> tuple[bytes, str | None]:
    """Every byte the client would get, and the error that ended the frames, if one did."""
    sent: list[bytes] = []
    try:
        async for data, final in frames:
            sent.append(data)
            if final:
                break
    except TidemillError as exc:  # a ProviderError, or what a dialect turns it into
        return b"".join(sent), f"{type(exc).__name__}: {exc.message}"
    finally:
        await frames.aclose()
    return b"".join(sent), None


async def relay_once(server: ReplayServer, **options: Any) -> tuple[bytes, str | None]:
    """What the relay of `openai:gpt-4o` sends for one request (router built with `options`)."""
    router = router_for(server, **options)
    relay = router.relay(router.resolve("openai:gpt-4o"))
    assert isinstance(relay, ChatRelay)
    try:
        return await collect(relay.frames(HELLO, encoder()))
    finally:
        await router.aclose()


async def both_paths(
    server: ReplayServer, body: bytes, spec: str
) -> tuple[tuple[bytes, str | None], tuple[bytes, str | None]]:
    """What the relay and then the general path send for the same upstream `body`."""
    server.replies += [Reply(body), Reply(body)]
    router = router_for(server)
    model = router.resolve(spec)
    relay = router.relay(model)
    assert isinstance(relay, ChatRelay)
    try:
        fast = await collect(relay.frames(HELLO, encoder()))
        general = await collect(encoded(model.stream(HELLO), encoder()))
    finally:
        await router.aclose()
    return fast, general


@pytest.mark.parametrize(("provider", "fixture"), STREAMS, ids=[f for _, f in STREAMS])
async def test_the_relay_sends_what_the_general_path_sends(
    server: ReplayServer, provider: str, fixture: str
) -> None:
    fast, general = await both_paths(server, fixture_bytes(fixture), f"{provider}:model-x")
    assert fast == general
    assert server.seen[0].body == server.seen[1].body
    assert server.seen[0].headers["authorization"] == f"Bearer {API_KEY}"


def chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None, **top: Any) -> bytes:
    body: dict[str, Any] = {"id": "c1", "model": "m", **top}
    body["choices"] = (
        [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    )
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def calls(*fragments: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"type": "function", **fragment} for fragment in fragments]}


DONE = b"data: [DONE]\n\n"
USAGE = chunk(
    None,
    usage={
        "prompt_tokens": 30,
        "completion_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 12},
        "completion_tokens_details": {"reasoning_tokens": 5},
    },
)
CALL = {"index": 0, "id": "call_1", "function": {"name": "zoom", "arguments": '{"f": 2}'}}
ENDS = {
    "stop with tool calls": chunk(calls(CALL)) + chunk({}, finish="stop") + USAGE + DONE,
    "no finish reason, tool calls": chunk(calls(CALL)) + DONE,
    "no finish reason, text": chunk({"content": "Hi"}) + USAGE + DONE,
    "length": chunk({"content": "Hi"}, finish="length") + USAGE + DONE,
    "unknown reason": chunk({"content": "Hi"}, finish="something_new") + USAGE + DONE,
    "refusal then stop": chunk({"refusal": "No."}, finish="stop") + USAGE + DONE,
    "usage on the finish chunk, no [DONE]": chunk({"content": "Hi"}, finish="stop", usage={}),
    "a nameless first fragment": chunk(calls({"index": 3}))
    + chunk(calls({"index": 3, "id": "c", "function": {"name": "f", "arguments": "{}"}}))
    + chunk({}, finish="tool_calls")
    + DONE,
    "a call without a name": chunk({"content": "Hi"})
    + chunk(calls({"index": 0, "id": "c", "function": {"arguments": "{}"}}))
    + DONE,
    "finished without usage or [DONE]": chunk({"content": "Hi"}, finish="stop"),
    "no [DONE], last event unterminated": chunk({"content": "Hi"}).rstrip(b"\n"),
    "a broken last event": chunk({"content": "Hi"}) + b"data: {",
}


@pytest.mark.parametrize("body", ENDS.values(), ids=ENDS.keys())
async def test_the_end_of_the_stream_is_what_the_general_path_sends(
    server: ReplayServer, body: bytes
) -> None:
    # The relay ends a stream from the parser's finish reason and usage alone, without the
    # whole response: its closing events (and errors) must still be the general path's.
    fast, general = await both_paths(server, body, "openai:gpt-4o")
    assert fast == general


def scored(delta: dict[str, Any], logprobs: Any, finish: str | None = None) -> bytes:
    """A chunk whose choice carries `logprobs`."""
    choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
    return (
        b"data: " + json.dumps({"id": "c1", "model": "m", "choices": [choice]}).encode() + b"\n\n"
    )


async def test_log_probabilities_go_out_alike_on_both_paths(server: ReplayServer) -> None:
    """Each text chunk's `logprobs` as the upstream's had them, a scored chunk without text too."""
    hi = {"content": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105], "top_logprobs": []}]}
    call = {"content": [{"token": "{}", "logprob": -0.25, "bytes": [123, 125], "top_logprobs": []}]}
    body = b"".join(
        [scored({"content": "Hi"}, hi), scored(calls(CALL), call), scored({}, None, "tool_calls")]
    )
    fast, general = await both_paths(server, body + USAGE + DONE, "openai:gpt-4o")
    assert fast == general
    sent = [json.loads(line[6:]) for line in fast[0].splitlines() if line.startswith(b"data: {")]
    scores = [c["choices"][0]["logprobs"] for c in sent if c["choices"]]
    assert scores == [hi, None, call, None]  # text, the call, the scored empty text, the finish


async def test_each_request_carries_its_own_headers_though_heads_are_reused(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The relay writes a request head once per URL and header set; a model whose headers
    # change (rotated credentials) sends the new ones, and old heads are not kept forever.
    body = fixture_bytes("openai-chat/text-stream.sse")
    keys = [f"key-{i % 20}" for i in range(24)]
    server.replies += [Reply(body) for _ in keys]
    router = router_for(server)
    model = router.resolve("openai:gpt-4o")
    relay = router.relay(model)
    assert isinstance(relay, ChatRelay)
    build_call = model.build_call
    calls = iter(keys)

    def rotating(request: ModelRequest, *, stream: bool) -> HttpCall:
        call = build_call(request, stream=stream)
        return HttpCall(call.url, {**call.headers, "authorization": next(calls)}, call.body)

    monkeypatch.setattr(model, "build_call", rotating)
    try:
        for _ in keys:
            sent, error = await collect(relay.frames(HELLO, encoder()))
            assert error is None and sent.endswith(b"data: [DONE]\n\n")
    finally:
        await router.aclose()
    assert [seen.headers["authorization"] for seen in server.seen] == keys
    assert {seen.headers["content-type"] for seen in server.seen} == {"application/json"}
    assert len(relay._heads) <= 16
    assert server.seen[0].body["messages"] == [{"role": "user", "content": "Hello"}]


async def test_streams_keep_their_upstream_connection(server: ReplayServer) -> None:
    body = fixture_bytes("openai-chat/text-stream.sse")
    server.replies += [Reply(body), Reply(body), Reply(body)]
    router = router_for(server)
    relay = router.relay(router.resolve("openai:gpt-4o"))
    assert relay is not None
    try:
        for _ in range(3):
            sent, error = await collect(relay.frames(HELLO, encoder()))
            assert error is None and sent.endswith(b"data: [DONE]\n\n")
    finally:
        await router.aclose()
    assert len({seen.client_port for seen in server.seen}) == 1


async def test_a_refusal_before_the_first_byte_is_retried_as_the_policy_says(
    server: ReplayServer,
) -> None:
    busy = json.dumps({"error": {"message": "Slow down", "type": "rate_limit"}}).encode()
    server.replies += [
        Reply(busy, status=429, content_type="application/json"),
        Reply(fixture_bytes("openai-chat/text-stream.sse")),
    ]
    sent, error = await relay_once(server, retry=FAST_RETRY)
    assert error is None
    assert b'"content":"420"' in sent
    assert len(server.seen) == 2


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (
            Reply(
                json.dumps({"error": {"message": "No such model"}}).encode(),
                content_type="application/json",
            ),
            "ProviderError: openai reported an error in the stream: No such model",
        ),
        (
            Reply(b'{"choices": []}', content_type="application/json"),
            "ProviderError: openai answered a streaming request with plain JSON",
        ),
        (
            Reply(b"data: {}\n\n", headers={"content-encoding": "br"}),
            "ProviderError: openai answered a streaming request with a br-encoded body",
        ),
    ],
)
async def test_an_answer_that_is_no_event_stream_is_an_error(
    server: ReplayServer, reply: Reply, error: str
) -> None:
    server.replies.append(reply)
    sent, raised = await relay_once(server)
    assert sent == b""
    assert raised is not None and raised.startswith(error)


async def test_a_stream_cut_midway_keeps_what_came_and_ends_with_an_error(
    server: ReplayServer,
) -> None:
    body = fixture_bytes("openai-chat/text-stream.sse")
    server.replies.append(Reply(body, cut_after=len(body) // 2))
    sent, error = await relay_once(server)
    assert b'"content":"420"' in sent
    assert error == "ProviderError: The openai stream broke off: RemoteProtocolError."


async def test_only_models_on_the_routers_own_transport_take_the_relay(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = router_for(server)
    assert isinstance(own._http_client()._transport, StreamingTransport)
    assert own.relay(own.resolve("openai:gpt-4o")) is not None
    assert own.relay(own.resolve("anthropic:claude-x")) is None  # another wire format

    injected = router_for(server)
    injected.provider_options["openai"]["http_client"] = httpx.AsyncClient()
    assert injected.relay(injected.resolve("openai:gpt-4o")) is None

    scripted = ScriptedModel(["Hi"])
    assert ModelRouter(aliases={"echo": scripted}).relay(scripted) is None

    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    proxied = router_for(server)
    assert not isinstance(proxied._http_client()._transport, StreamingTransport)
    assert proxied.relay(proxied.resolve("openai:gpt-4o")) is None
    for router in (own, injected, proxied):
        await router.aclose()
    await injected.provider_options["openai"]["http_client"].aclose()


def test_the_served_proxy_relays_openai_streams(server: ReplayServer) -> None:
    body = fixture_bytes("openai-chat/text-stream.sse")
    server.replies += [Reply(body), Reply(body)]
    router = upstream_router(server)
    with serve(create_app(router)) as url:
        for _ in range(2):
            stream = sdk(url).chat.completions.create(
                model="openai:gpt-4o",
                messages=[{"role": "user", "content": "Hello"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = list(stream)
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text == "4200 + 42 equals 4242."
            assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 10
        assert router.relay(router.resolve("openai:gpt-4o")) is not None
    assert server.seen[0].client_port == server.seen[1].client_port
