"""Faulty upstreams behind the proxy, with the official SDK as the client.

An upstream that reads a POST and closes without answering gets it once; a
503's `retry-after` reaches the client; a malformed Anthropic 200 is a 502;
botocore's credential chain never stalls the proxy's event loop; a Bedrock
model without an id is refused before anything is signed or sent.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from bedrock_replay import ACCESS_KEY, SECRET_KEY, SESSION_TOKEN, isolate_aws
from llm_replay import API_KEY, ReplayServer, Reply, fixture_bytes
from proxy_serve import sdk, serve, upstream_router

from tidemill.llm.bedrock import _aws
from tidemill.llm.proxy import ModelRouter, create_app

HELLO: list[Any] = [{"role": "user", "content": "Hello"}]


# -- a POST is never sent twice ---------------------------------------------------------------


class Dropper:
    """An upstream that answers the first request of its first connection, then reads each
    request, waits and closes the connection without answering; it counts the POSTs read."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.posts = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                first = self.connections == 1
            threading.Thread(target=self._serve, args=(conn, first), daemon=True).start()

    def _serve(self, conn: socket.socket, first: bool) -> None:
        with conn:
            conn.settimeout(5)
            reader = conn.makefile("rb")
            answered = False
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                reader.read(length)
                with self._lock:
                    self.posts += head.startswith(b"POST ")
                if first and not answered:
                    answered = True
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(self.answer), self.answer)
                    )
                    continue
                time.sleep(0.05)  # as if it had started on the answer
                return

    def __enter__(self) -> Dropper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()


def ask(client: openai.OpenAI, *, stream: bool) -> None:
    if stream:
        list(client.chat.completions.create(model="openai:gpt-4o", messages=HELLO, stream=True))
    else:
        client.chat.completions.create(model="openai:gpt-4o", messages=HELLO)


@pytest.mark.parametrize("stream", [False, True])
def test_a_post_the_upstream_read_and_dropped_is_sent_once(stream: bool) -> None:
    answer = fixture_bytes("openai-chat/text.json")
    with Dropper(answer) as upstream:
        router = ModelRouter(provider_options={"openai": {"base_url": upstream.url,
                                                          "api_key": API_KEY}})  # fmt: skip
        with serve(create_app(router)) as proxy:
            client = sdk(proxy)
            first = client.chat.completions.create(model="openai:gpt-4o", messages=HELLO)
            assert first.choices[0].message.content
            with pytest.raises(openai.APIStatusError) as caught:
                ask(client, stream=stream)
    assert caught.value.status_code == 502
    assert upstream.posts == 2  # the answered one and the dropped one; never a third
    assert upstream.connections == 1


# -- what the upstream says is passed on -------------------------------------------------------


def test_a_503_s_retry_after_reaches_the_client(server: ReplayServer) -> None:
    body = json.dumps({"error": {"message": "overloaded", "type": "server_error"}}).encode()
    server.replies.append(
        Reply(body, status=503, content_type="application/json", headers={"retry-after": "7"})
    )
    with (
        serve(create_app(upstream_router(server))) as proxy,
        pytest.raises(openai.APIStatusError) as caught,
    ):
        sdk(proxy).chat.completions.create(model="openai:gpt-4o", messages=HELLO)
    error = caught.value
    assert error.status_code == 502
    assert error.response.headers["retry-after"] == "7"
    assert error.response.headers["retry-after-ms"] == "7000"


def test_a_malformed_anthropic_200_is_a_502(server: ReplayServer) -> None:
    empty = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    server.replies.append(Reply(json.dumps(empty).encode(), content_type="application/json"))
    with (
        serve(create_app(upstream_router(server))) as proxy,
        pytest.raises(openai.APIStatusError) as caught,
    ):
        sdk(proxy).chat.completions.create(model="anthropic:claude-sonnet-4-5", messages=HELLO)
    assert caught.value.status_code == 502
    assert "neither content nor a stop_reason" in caught.value.message


# -- Bedrock -------------------------------------------------------------------------------------

CONVERSE = {
    "output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 3, "outputTokens": 1},
}


class Frozen:
    access_key = ACCESS_KEY
    secret_key = SECRET_KEY
    token = SESSION_TOKEN


class SlowChain:
    """botocore's chain as slow as an instance without a metadata service; counts lookups."""

    def __init__(self) -> None:
        self.lookups = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.order: list[str] = []

    def __call__(self, session: Any, profile: str | None) -> Any:
        self.lookups += 1
        self.started.set()
        self.release.wait(5)
        self.order.append("lookup")
        return self

    def get_frozen_credentials(self) -> Frozen:
        return Frozen()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


def bedrock_router(server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> ModelRouter:
    # The environment's AWS credentials go only to an endpoint the environment names.
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
    return ModelRouter(
        aliases={"echo": "fake"}, provider_options={"bedrock": {"region": "us-east-1"}}
    )


async def test_a_slow_credential_lookup_does_not_stall_other_requests(
    aws: None, monkeypatch: pytest.MonkeyPatch, server: ReplayServer
) -> None:
    pytest.importorskip("botocore")
    chain = SlowChain()
    monkeypatch.setattr(_aws, "_botocore_credentials", chain)
    for _ in range(3):
        server.replies.append(Reply(json.dumps(CONVERSE).encode(), content_type="application/json"))
    with serve(create_app(bedrock_router(server, monkeypatch))) as proxy:
        client = openai.AsyncOpenAI(base_url=f"{proxy}/v1", api_key="unused", max_retries=0)
        model = "bedrock:us.amazon.nova-micro-v1:0"
        calls = [
            asyncio.create_task(client.chat.completions.create(model=model, messages=HELLO))
            for _ in range(3)
        ]
        assert await asyncio.to_thread(chain.started.wait, 5)
        other = await client.chat.completions.create(model="echo", messages=HELLO)
        chain.order.append("other")  # answered by the proxy's loop while the lookup waits
        chain.release.set()
        answers = await asyncio.gather(*calls)
        await client.close()
    assert other.choices[0].message.content
    assert chain.order == ["other", "lookup"]
    assert [a.choices[0].message.content for a in answers] == ["hi"] * 3
    assert chain.lookups == 1
    assert [seen.headers["x-amz-security-token"] for seen in server.seen] == [SESSION_TOKEN] * 3


def test_a_failed_credential_lookup_is_asked_once_and_never_a_500(
    aws: None, monkeypatch: pytest.MonkeyPatch, server: ReplayServer
) -> None:
    pytest.importorskip("botocore")
    lookups: list[str | None] = []
    real = _aws._botocore_credentials  # the real chain, which finds nothing here

    def counted(session: Any, profile: str | None) -> Any:
        lookups.append(profile)
        return real(session, profile)

    monkeypatch.setattr(_aws, "_botocore_credentials", counted)
    statuses = []
    with serve(create_app(bedrock_router(server, monkeypatch))) as proxy:
        client = sdk(proxy)
        for _ in range(4):
            with pytest.raises(openai.APIStatusError) as caught:
                client.chat.completions.create(
                    model="bedrock:amazon.nova-micro-v1:0", messages=HELLO
                )
            statuses.append(caught.value.status_code)
            assert "AWS" not in caught.value.message
    assert statuses == [404] * 4  # the model is not served here; the operator's log says why
    assert lookups == [None]  # asked once: the failure is remembered
    assert server.seen == []


@pytest.mark.parametrize("name", ["bedrock:", "bedrock", "bedrock: ", "bedrock:\t"])
def test_bedrock_without_a_model_is_refused_not_sent(
    aws: None, monkeypatch: pytest.MonkeyPatch, server: ReplayServer, name: str
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    with (
        serve(create_app(bedrock_router(server, monkeypatch))) as proxy,
        pytest.raises(openai.APIStatusError) as caught,
    ):
        sdk(proxy).chat.completions.create(model=name, messages=HELLO)
    assert caught.value.status_code in (400, 404)
    assert "model" in caught.value.message
    assert server.seen == []
