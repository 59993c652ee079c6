from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator

import httpx
import pytest
from llm_replay import API_KEY, FAST_RETRY, Recorder, ReplayServer, Reply, json_reply, sse

from tidemill.errors import ConfigurationError, ProviderError, ProviderTimeout, RateLimitError
from tidemill.llm import RetryPolicy
from tidemill.llm.http._client import HttpClient

URL = "https://api.example.invalid/v1/chat"


class Sleeps:
    """Records the waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def make(recorder: Recorder, retry: RetryPolicy = FAST_RETRY) -> tuple[HttpClient, Sleeps]:
    sleeps = Sleeps()
    http = HttpClient(
        "openai", client=recorder.client(), retry=retry, secrets=[API_KEY], sleep=sleeps
    )
    return http, sleeps


async def post(http: HttpClient, **kwargs: float) -> object:
    return await http.post_json(
        URL, {"q": 1}, headers={"authorization": f"Bearer {API_KEY}"}, **kwargs
    )


async def test_429_waits_as_long_as_retry_after_says() -> None:
    recorder = Recorder(
        [
            json_reply({"error": {"message": "slow"}}, status=429, headers={"retry-after": "2"}),
            json_reply({"ok": True}),
        ]
    )
    http, sleeps = make(recorder)
    assert await post(http) == {"ok": True}
    assert sleeps.waits == [2.0] and len(recorder.requests) == 2


async def test_503_then_success_backs_off() -> None:
    policy = RetryPolicy(max_retries=2, initial_delay=0.25, jitter=0.0)
    recorder = Recorder(
        [json_reply({}, status=503), json_reply({}, status=502), json_reply({"ok": 1})]
    )
    http, sleeps = make(recorder, policy)
    assert await post(http) == {"ok": 1}
    assert sleeps.waits == [0.25, 0.5]


async def test_retries_run_out_and_the_last_error_is_raised() -> None:
    recorder = Recorder([json_reply({"error": {"message": "down"}}, status=500)] * 4)
    http, _ = make(recorder)
    with pytest.raises(ProviderError) as caught:
        await post(http)
    assert caught.value.status_code == 500 and caught.value.retryable
    assert len(recorder.requests) == 4  # the first try and 3 retries


async def test_a_client_error_is_not_retried() -> None:
    recorder = Recorder([json_reply({"error": {"message": "bad"}}, status=400)])
    http, sleeps = make(recorder)
    with pytest.raises(ProviderError):
        await post(http)
    assert sleeps.waits == [] and len(recorder.requests) == 1


async def test_a_retry_after_too_long_fails_at_once_with_the_wait() -> None:
    recorder = Recorder([json_reply({}, status=429, headers={"retry-after": "120"})])
    http, sleeps = make(recorder)
    with pytest.raises(RateLimitError) as caught:
        await post(http)
    assert caught.value.retry_after == 120.0 and sleeps.waits == []


async def test_connection_errors_are_retried() -> None:
    recorder = Recorder([httpx.ConnectError("refused"), json_reply({"ok": 1})])
    http, sleeps = make(recorder)
    assert await post(http) == {"ok": 1}
    assert len(sleeps.waits) == 1


async def test_a_timeout_becomes_provider_timeout() -> None:
    recorder = Recorder([httpx.ReadTimeout("slow")] * 2)
    http, _ = make(recorder, RetryPolicy(max_retries=1, initial_delay=0))
    with pytest.raises(ProviderTimeout) as caught:
        await post(http)
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    assert len(recorder.requests) == 2


async def test_the_call_deadline_covers_everything() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return json_reply({})

    recorder = Recorder([slow])
    http, _ = make(recorder)
    with pytest.raises(ProviderTimeout, match=r"0\.05 s timeout"):
        await post(http, time_limit=0.05)


async def test_no_retry_sleeps_past_the_deadline() -> None:
    recorder = Recorder([json_reply({}, status=429, headers={"retry-after": "30"})])
    http, sleeps = make(recorder)
    with pytest.raises(RateLimitError):
        await post(http, time_limit=5)
    assert sleeps.waits == []


async def test_a_non_json_success_body_is_a_provider_error() -> None:
    recorder = Recorder([httpx.Response(200, content=b"<html>proxy login</html>")])
    http, _ = make(recorder)
    with pytest.raises(ProviderError, match="not a JSON object") as caught:
        await post(http)
    assert caught.value.status_code == 200


async def test_a_bad_url_is_a_configuration_error() -> None:
    http = HttpClient("openai", client=Recorder().client())
    with pytest.raises(ConfigurationError, match="base_url"):
        await http.post_json("http://host:notaport/v1", {}, headers={})


# -- streams --------------------------------------------------------------------------------


async def chunks_then(error: Exception, *chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
    raise error


async def read_stream(http: HttpClient, **kwargs: float) -> bytes:
    parts = [chunk async for chunk in http.post_stream(URL, {}, headers={}, **kwargs)]
    return b"".join(parts)


async def test_a_stream_is_never_retried_after_its_first_byte() -> None:
    broken = httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=chunks_then(httpx.ReadError("reset"), b"data: {}\n\n"),
    )
    recorder = Recorder([broken, sse(b"data: never\n\n")])
    http, sleeps = make(recorder)
    with pytest.raises(ProviderError, match="broke off") as caught:
        await read_stream(http)
    assert isinstance(caught.value.__cause__, httpx.ReadError)
    assert len(recorder.requests) == 1 and sleeps.waits == []


async def test_a_stream_failing_before_its_first_byte_is_retried() -> None:
    broken = httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=chunks_then(httpx.ReadError("reset")),
    )
    recorder = Recorder([broken, sse(b"data: ok\n\n")])
    http, sleeps = make(recorder)
    assert await read_stream(http) == b"data: ok\n\n"
    assert len(recorder.requests) == 2 and len(sleeps.waits) == 1


async def test_a_stream_with_an_error_status_is_retried() -> None:
    recorder = Recorder([json_reply({}, status=529), sse(b"data: ok\n\n")])
    http, _ = make(recorder)
    assert await read_stream(http) == b"data: ok\n\n"


async def test_a_stream_answered_with_a_json_error() -> None:
    body = {"error": {"message": "quota", "code": "insufficient_quota"}}
    recorder = Recorder([json_reply(body)])
    http, _ = make(recorder)
    with pytest.raises(RateLimitError, match="quota"):
        await read_stream(http)


async def test_a_stalled_stream_hits_the_deadline() -> None:
    async def stall() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        await asyncio.sleep(10)
        yield b"never"

    recorder = Recorder([httpx.Response(200, content=stall())])
    http, _ = make(recorder)
    with pytest.raises(ProviderTimeout):
        await read_stream(http, time_limit=0.1)


async def test_closing_a_stream_early_releases_the_response() -> None:
    async def body() -> AsyncIterator[bytes]:
        for i in range(100):
            yield b"data: %d\n\n" % i

    response = httpx.Response(200, content=body())
    http, _ = make(Recorder([response]))
    stream = http.post_stream(URL, {}, headers={})
    assert await anext(stream) == b"data: 0\n\n"
    assert not response.is_closed
    await stream.aclose()
    assert response.is_closed


# -- client ownership -----------------------------------------------------------------------


async def test_an_injected_client_is_left_open() -> None:
    recorder = Recorder([json_reply({"ok": 1})])
    client = recorder.client()
    http = HttpClient("openai", client=client)
    await http.post_json(URL, {}, headers={})
    await http.aclose()
    assert not client.is_closed and not http.owns_client
    await client.aclose()


async def test_an_owned_client_is_created_on_use_and_closed(server: ReplayServer) -> None:
    server.replies += [Reply(b'{"ok": 1}', content_type="application/json")] * 2
    http = HttpClient("openai")
    assert http.owns_client
    assert await http.post_json(server.url + "/v1", {}, headers={}) == {"ok": 1}
    owned = http._owned[asyncio.get_running_loop()]
    states = [owned.is_closed]
    await http.aclose()
    states.append(owned.is_closed)
    assert states == [False, True]
    # A later call opens a fresh client.
    assert await http.post_json(server.url + "/v1", {}, headers={}) == {"ok": 1}
    await http.aclose()


async def test_an_owned_client_uses_the_streaming_transport_and_reuses_its_connection(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tidemill.llm.http._transport import StreamingTransport

    for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(key, raising=False)
    server.replies += [Reply(b'{"ok": 1}', content_type="application/json")] * 2
    http = HttpClient("openai")
    for _ in range(2):
        assert await http.post_json(server.url + "/v1", {}, headers={}) == {"ok": 1}
    owned = http._owned[asyncio.get_running_loop()]
    assert isinstance(owned._transport, StreamingTransport)
    assert len({seen.client_port for seen in server.seen}) == 1  # one connection, kept alive
    await http.aclose()


@pytest.mark.parametrize("transport", ["streaming", "httpx"])
async def test_cookies_an_answer_sets_are_not_sent_with_later_calls(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    if transport == "httpx":
        monkeypatch.setenv("TIDEMILL_HTTP_TRANSPORT", "httpx")
    cookie = {"set-cookie": "session=abc; Path=/"}
    server.replies += [Reply(b'{"ok": 1}', content_type="application/json", headers=cookie)] * 2
    http = HttpClient("openai")
    for _ in range(2):
        assert await http.post_json(server.url + "/v1", {}, headers={}) == {"ok": 1}
    await http.aclose()
    assert [seen.headers.get("cookie") for seen in server.seen] == [None, None]


@pytest.mark.parametrize(
    ("variable", "value"), [("TIDEMILL_HTTP_TRANSPORT", "httpx"), ("HTTPS_PROXY", "http://h:9")]
)
async def test_httpx_s_own_transport_when_asked_or_behind_a_proxy(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tidemill.llm.http._transport import StreamingTransport

    monkeypatch.setenv(variable, value)
    http = HttpClient("openai")
    client = http._client()
    assert not isinstance(client._transport, StreamingTransport)
    await http.aclose()


def test_a_model_closed_at_the_end_of_each_asyncio_run_works_in_the_next(
    server: ReplayServer,
) -> None:
    server.replies += [Reply(b'{"ok": 1}', content_type="application/json")] * 2
    http = HttpClient("openai", retry=RetryPolicy(max_retries=0))

    async def once() -> object:
        try:
            return await http.post_json(server.url + "/v1", {}, headers={})
        finally:
            await http.aclose()

    assert asyncio.run(once()) == asyncio.run(once()) == {"ok": 1}
    gc.collect()  # no socket of the first loop is left to warn about


def test_aclose_closes_the_client_of_another_threads_loop(server: ReplayServer) -> None:
    server.replies += [Reply(b'{"ok": 1}', content_type="application/json")] * 2
    http = HttpClient("openai", retry=RetryPolicy(max_retries=0))
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:
        request = http.post_json(server.url + "/v1", {}, headers={})
        assert asyncio.run_coroutine_threadsafe(request, other).result(5) == {"ok": 1}
        theirs = http._owned[other]

        async def here() -> None:
            await http.post_json(server.url + "/v1", {}, headers={})
            assert len(http._owned) == 2  # one client per loop
            await http.aclose()

        asyncio.run(here())
        assert theirs.is_closed and http._owned == {}
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(5)
        other.close()
    gc.collect()
