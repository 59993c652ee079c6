"""One `httpx` client shared by the models of a process (`new_http_client`).

Models of different providers send through it over one connection pool; each
keeps its own timeout and retry policy; closing a model leaves it open.
"""

from __future__ import annotations

import json

import httpx
import pytest
from llm_replay import API_KEY, FAST_RETRY, HELLO, NO_RETRY, ReplayServer, Reply

from provider_answers import ANTHROPIC_ANSWER, OPENAI_ANSWER
from tidemill.errors import ProviderError
from tidemill.llm import AnthropicModel, HttpModel, OpenAIChatModel, resolve_model
from tidemill.llm.http._client import DEFAULT_TIMEOUT, new_http_client
from tidemill.llm.http._transport import StreamingTransport

_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def two_models(url: str, client: httpx.AsyncClient, **options: object) -> list[HttpModel]:
    openai = resolve_model(
        "openai:gpt-4o-mini", api_key=API_KEY, base_url=f"{url}/v1", http_client=client, **options
    )
    anthropic = resolve_model(
        "anthropic:claude-sonnet-4-5", api_key=API_KEY, base_url=url, http_client=client, **options
    )
    assert isinstance(openai, HttpModel) and isinstance(anthropic, HttpModel)
    return [openai, anthropic]


async def test_models_of_two_providers_share_one_connection_and_leave_the_client_open(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in _PROXIES:
        monkeypatch.delenv(key, raising=False)
    for answer in (OPENAI_ANSWER, ANTHROPIC_ANSWER):
        server.replies.append(Reply(json.dumps(answer).encode(), content_type="application/json"))
    client = new_http_client()
    try:
        models = two_models(server.url, client, retry=NO_RETRY)
        texts = [(await model.request(HELLO)).message.content for model in models]
        assert texts == ["A", "B"]
        assert [seen.path for seen in server.seen] == ["/v1/chat/completions", "/v1/messages"]
        assert len({seen.client_port for seen in server.seen}) == 1  # one pool, kept alive
        for model in models:
            assert not model.http.owns_client
            await model.aclose()
        assert not client.is_closed  # the models' owner closes it, after them
    finally:
        await client.aclose()


async def test_each_model_keeps_its_own_timeout_and_retries_on_a_shared_client() -> None:
    attempts: list[tuple[str, dict[str, float | None]]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append((request.url.path, request.extensions["timeout"]))
        return httpx.Response(503, json={"error": {"message": "busy"}})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler), timeout=DEFAULT_TIMEOUT)
    try:
        # Per-request `httpx` limits are an adapter's `timeout=` (`resolve_model`'s
        # `timeout=` is the whole call's time limit, a setting).
        patient = OpenAIChatModel(
            "gpt-4o-mini",
            api_key=API_KEY,
            base_url="http://up/v1",
            http_client=client,
            timeout=5.0,
            retry=FAST_RETRY,
        )
        hasty = AnthropicModel(
            "claude-sonnet-4-5",
            api_key=API_KEY,
            base_url="http://up",
            http_client=client,
            retry=NO_RETRY,
        )
        for model in (patient, hasty):
            with pytest.raises(ProviderError):
                await model.request(HELLO)
    finally:
        await client.aclose()
    five = {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}
    default = {"connect": 10.0, "read": 600.0, "write": 600.0, "pool": 600.0}
    assert attempts == [("/v1/chat/completions", five)] * 4 + [("/v1/messages", default)]


@pytest.mark.parametrize("transport", ["streaming", "httpx"])
async def test_a_new_client_is_configured_like_an_owned_one(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    for key in _PROXIES:
        monkeypatch.delenv(key, raising=False)
    if transport == "httpx":
        monkeypatch.setenv("TIDEMILL_HTTP_TRANSPORT", "httpx")
    cookie = {"set-cookie": "session=abc; Path=/"}
    server.replies += [Reply(b'{"ok": 1}', content_type="application/json", headers=cookie)] * 2
    client = new_http_client()
    try:
        assert isinstance(client._transport, StreamingTransport) == (transport == "streaming")
        assert client.timeout == DEFAULT_TIMEOUT
        for _ in range(2):
            assert (await client.post(server.url + "/v1", json={})).json() == {"ok": 1}
    finally:
        await client.aclose()
    assert [seen.headers.get("cookie") for seen in server.seen] == [None, None]
