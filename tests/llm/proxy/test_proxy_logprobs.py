"""Log probabilities through the proxy: asked for as the client asked, given back as they came.

The upstreams are a local replay server (127.0.0.1) answering with log
probabilities; the clients are the official `openai` SDK and plain `httpx`,
which shows each streamed chunk's JSON exactly. An OpenAI-format upstream
must receive `logprobs` and `top_logprobs` unchanged, and its
`choices[0].logprobs` must reach the client unchanged: in a whole answer,
and in each chunk of a stream, on the relay (`openai:`) and on the general
path (`model.stream()`, taken by a model with a whole-call `timeout`). The
Responses API gets them in its own form and answers in its own; the
offline model has none, and refuses them by name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from bedrock_replay import ACCESS_KEY, SECRET_KEY, isolate_aws
from llm_replay import API_KEY, ReplayServer, Reply, fixture_bytes
from proxy_serve import sdk, serve

from tidemill.llm import HttpModel, resolve_model
from tidemill.llm.proxy import (
    InvalidRequest,
    ModelRouter,
    check_fields,
    create_app,
    parse_chat_request,
)

HELLO: list[Any] = [{"role": "user", "content": "Hello"}]
ASKED = {"logprobs": True, "top_logprobs": 2}


def token(text: str, logprob: float, runner_up: str) -> dict[str, Any]:
    """One token's entry of Chat Completions' `logprobs.content`, with two alternatives."""
    return {
        "token": text,
        "logprob": logprob,
        "bytes": list(text.encode()),
        "top_logprobs": [
            {"token": text, "logprob": logprob, "bytes": list(text.encode())},
            {"token": runner_up, "logprob": -7.25, "bytes": list(runner_up.encode())},
        ],
    }


PIECES = [("Hi", -0.0021, "Hello"), (" there", -0.31, " you"), ("!", -1.5e-05, ".")]
SCORES = [{"content": [token(*piece)], "refusal": None} for piece in PIECES]
"""The `logprobs` of each streamed text chunk, as the upstream sends them."""
WHOLE = {"content": [token(*piece) for piece in PIECES], "refusal": None}
"""The `logprobs` of the whole answer."""


def completion(logprobs: Any) -> bytes:
    body = {
        "id": "chatcmpl-up",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hi there!", "refusal": None},
                "logprobs": logprobs,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 8, "completion_tokens": 3, "total_tokens": 11},
    }
    return json.dumps(body).encode()


def chunk(delta: dict[str, Any], logprobs: Any, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
    body = {"id": "chatcmpl-up", "object": "chat.completion.chunk", "choices": [choice]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


STREAM = b"".join(
    [
        chunk({"role": "assistant", "content": "", "refusal": None}, None),
        *(
            chunk({"content": text}, scores)
            for (text, _, _), scores in zip(PIECES, SCORES, strict=True)
        ),
        chunk({}, None, "stop"),
        b'data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,'
        b'"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":3}}\n\n',
        b"data: [DONE]\n\n",
    ]
)
"""An OpenAI stream with log probabilities on its text chunks, `null` on the others."""

RELAY, GENERAL = "openai:gpt-4o", "openai-compatible:local"
"""A model the relay streams, and one it leaves to the general path (its whole-call timeout)."""


@pytest.fixture
def proxy(server: ReplayServer) -> Iterator[str]:
    url, keyed = server.url, {"api_key": API_KEY}
    router = ModelRouter(
        aliases={"offline": "fake"},
        provider_options={
            "openai": {"base_url": f"{url}/v1", **keyed},
            "openai-compatible": {"base_url": f"{url}/v1", "settings": {"timeout": 30.0}},
            "openai-responses": {"base_url": f"{url}/v1", **keyed},
        },
    )
    with serve(create_app(router, keepalive=5.0)) as base:
        yield base


def events(proxy: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks of a streamed answer, as the client's bytes had them."""
    answer = httpx.post(f"{proxy}/v1/chat/completions", json=body, timeout=20.0)
    assert answer.status_code == 200, answer.text
    data = [line[6:] for line in answer.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(item) for item in data[:-1]]


def test_a_whole_answer_carries_the_upstream_s_log_probabilities(
    proxy: str, server: ReplayServer
) -> None:
    server.replies.append(Reply(completion(WHOLE), content_type="application/json"))
    raw = sdk(proxy).chat.completions.with_raw_response.create(
        model=RELAY, messages=HELLO, logprobs=True, top_logprobs=2
    )
    sent = server.seen[0].body
    assert (sent["logprobs"], sent["top_logprobs"]) == (True, 2)
    assert json.loads(raw.http_response.content)["choices"][0]["logprobs"] == WHOLE
    logprobs = raw.parse().choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None
    assert [(t.token, t.logprob, t.bytes) for t in logprobs.content] == [
        (text, logprob, list(text.encode())) for text, logprob, _ in PIECES
    ]
    assert [top.token for top in logprobs.content[1].top_logprobs] == [" there", " you"]


@pytest.mark.parametrize("model", [RELAY, GENERAL], ids=["relay", "general"])
def test_each_streamed_chunk_carries_the_upstream_s_log_probabilities(
    proxy: str, server: ReplayServer, model: str
) -> None:
    server.replies.append(Reply(STREAM))
    chunks = events(proxy, {"model": model, "messages": HELLO, "stream": True, **ASKED})
    seen = server.seen[0]
    assert (seen.body["logprobs"], seen.body["top_logprobs"]) == (True, 2)
    # The relay says so in its user agent: each path was taken as meant.
    assert seen.headers["user-agent"].endswith(" proxy") is (model == RELAY)
    choices = [c["choices"][0] for c in chunks if c["choices"]]
    texts = [(c["delta"]["content"], c["logprobs"]) for c in choices if c["delta"].get("content")]
    assert texts == [(text, scores) for (text, _, _), scores in zip(PIECES, SCORES, strict=True)]
    others = [c["logprobs"] for c in choices if not c["delta"].get("content")]
    assert others == [None, None]  # the role chunk and the finish chunk


def test_the_sdk_reads_each_chunk_s_log_probabilities(proxy: str, server: ReplayServer) -> None:
    server.replies.append(Reply(STREAM))
    stream = sdk(proxy).chat.completions.create(
        model=RELAY, messages=HELLO, stream=True, logprobs=True, top_logprobs=2
    )
    scored = [
        (entry.token, entry.logprob)
        for c in stream
        if c.choices and c.choices[0].logprobs is not None
        for entry in c.choices[0].logprobs.content or []
    ]
    assert scored == [(text, logprob) for text, logprob, _ in PIECES]


# -- the Responses API: asked for in its form, answered in Chat Completions' ---------------------


def responses_stream() -> tuple[bytes, list[tuple[str, Any]]]:
    """The recorded Responses stream, each text delta scored; and each delta's scores."""
    blocks, deltas = [], []
    for block in fixture_bytes("openai-responses/text-stream.sse").decode().split("\n\n"):
        lines = block.splitlines()
        for at, line in enumerate(lines):
            data = json.loads(line[6:]) if line.startswith("data: ") else None
            if data is not None and data["type"] == "response.output_text.delta":
                data["logprobs"] = [{"token": data["delta"], "logprob": -0.5, "top_logprobs": []}]
                deltas.append((data["delta"], data["logprobs"]))
                lines[at] = "data: " + json.dumps(data)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks).encode(), deltas


def test_the_responses_api_is_asked_in_its_own_form(proxy: str, server: ReplayServer) -> None:
    whole = json.loads(fixture_bytes("openai-responses/text.json"))
    scores = [{"token": "4200", "bytes": [52, 50, 48, 48], "logprob": -0.01, "top_logprobs": []}]
    whole["output"][0]["content"][0]["logprobs"] = scores
    server.replies.append(Reply(json.dumps(whole).encode(), content_type="application/json"))
    body = {"model": "openai-responses:gpt-4.1-mini", "messages": HELLO, **ASKED}
    answer = httpx.post(f"{proxy}/v1/chat/completions", json=body, timeout=20.0)
    assert answer.status_code == 200, answer.text
    sent = server.seen[0].body
    assert sent["include"] == ["reasoning.encrypted_content", "message.output_text.logprobs"]
    assert sent["top_logprobs"] == 2 and "logprobs" not in sent
    assert answer.json()["choices"][0]["logprobs"] == {"content": scores, "refusal": None}

    stream, deltas = responses_stream()
    server.replies.append(Reply(stream))
    chunks = events(proxy, {**body, "stream": True})
    texts = [
        (c["choices"][0]["delta"]["content"], c["choices"][0]["logprobs"])
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("content")
    ]
    assert texts == [(text, {"content": found, "refusal": None}) for text, found in deltas]


# -- where none come back ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_offline_model_refuses_them_by_name(proxy: str, stream: bool) -> None:
    client = sdk(proxy)
    for fields, param, code in [
        ({"logprobs": True}, "logprobs", "unsupported_value"),
        ({"top_logprobs": 1}, "top_logprobs", "unsupported_parameter"),
    ]:
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(
                model="offline", messages=HELLO, stream=stream, extra_body=fields
            )
        error = caught.value.response.json()["error"]
        assert (error["param"], error["code"]) == (param, code)
        assert "its answers carry no log probabilities" in error["message"]
    answer = client.chat.completions.create(model="offline", messages=HELLO, logprobs=False)
    assert answer.choices[0].message.content == "Hello"
    assert answer.choices[0].logprobs is None


TRANSLATED = [
    ("anthropic:claude-sonnet-4-5", {"api_key": API_KEY}),
    ("gemini:gemini-2.5-flash", {"api_key": API_KEY}),
    (
        "bedrock:us.amazon.nova-micro-v1:0",
        {"region": "us-east-1", "access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY},
    ),
    ("openai-responses:gpt-4.1-mini", {"api_key": API_KEY}),
]


@pytest.mark.parametrize(
    ("spec", "options"), TRANSLATED, ids=lambda value: value if isinstance(value, str) else None
)
def test_a_translated_vendor_gets_false_as_nothing_and_true_in_its_form_or_a_400(
    spec: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_aws(monkeypatch, tmp_path)
    model = resolve_model(spec, **options)
    assert isinstance(model, HttpModel)

    def sent(**fields: Any) -> list[str]:
        parsed = parse_chat_request({"model": spec, "messages": HELLO, **fields})
        check_fields(parsed, model)
        return [json.dumps(model.build_call(parsed.request, stream=s).body) for s in (False, True)]

    assert all("logprobs" not in body for body in sent(logprobs=False))
    if spec.startswith("openai-responses:"):
        assert all('"message.output_text.logprobs"' in body for body in sent(logprobs=True))
        return
    with pytest.raises(InvalidRequest) as caught:
        sent(logprobs=True)
    assert (caught.value.param, caught.value.code) == ("logprobs", "unsupported_value")
