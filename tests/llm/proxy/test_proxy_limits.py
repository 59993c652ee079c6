"""Hostile request bodies get a 4xx in OpenAI's error shape, never a stall or a 500.

Issue 18: a body of a million tiny messages (item 5), raw surrogate bytes in
a text field (item 8), a schema nested a hundred levels deep (item 9), and
malformed HTTP framing (item 10), on every wire-format family, streamed or not.
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from proxy_serve import serve
from proxy_vendors import FAMILIES, SECRETS, VendorServer, vendor_proxy
from starlette.testclient import TestClient

from tidemill.cli import main
from tidemill.errors import ConfigurationError
from tidemill.llm.proxy import ModelRouter, create_app
from tidemill.llm.proxy import _request as request_module
from tidemill.llm.proxy._framing import http_protocol
from tidemill.llm.proxy._limits import MAX_DEPTH, too_deep

HELLO = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VendorServer, str]]:
    """One proxy for the module, serving every family (`FAMILIES`) from one `VendorServer`."""
    with vendor_proxy(tmp_path_factory.mktemp("aws")) as both:
        yield both


@pytest.fixture
def vendors(served: tuple[VendorServer, str]) -> VendorServer:
    """The vendors, having seen nothing yet."""
    served[0].bodies.clear()
    return served[0]


@pytest.fixture
def client(served: tuple[VendorServer, str], vendors: VendorServer) -> Iterator[httpx.Client]:
    """A client of the proxy."""
    with httpx.Client(base_url=served[1], timeout=20.0) as http:
        yield http


def post(client: httpx.Client, body: bytes | dict[str, Any]) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(
        "/v1/chat/completions", content=content, headers={"content-type": "application/json"}
    )


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """The OpenAI error object of a response that must be one, with `status`."""
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str)
    assert not any(secret in response.text for secret in SECRETS)
    return dict(error)


def text_of(answer: httpx.Response, stream: bool) -> str:
    """The assistant's text in a whole or streamed answer."""
    if not stream:
        return str(answer.json()["choices"][0]["message"]["content"])
    text = ""
    for line in answer.text.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                text += choice["delta"].get("content") or ""
    return text


def quiet(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing logged as an error: no traceback, no internal error."""
    loud = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not loud, [r.getMessage() for r in loud]


# -- item 5: big bodies ---------------------------------------------------------------------


class TestBigBodies:
    def test_a_million_tiny_messages_are_refused_before_they_are_parsed(
        self, client: httpx.Client, caplog: pytest.LogCaptureFixture
    ) -> None:
        messages = b",".join([b'{"role":"user","content":"x"}'] * 1_000_000)
        body = b'{"model":"offline","messages":[' + messages + b"]}"
        assert 28 * 2**20 < len(body) < 32 * 2**20  # under the size limit
        error = error_of(post(client, body), 413)
        assert error["code"] == "request_too_large"
        assert "1000000" in error["message"]
        quiet(caplog)

    def test_more_messages_than_the_limit_are_a_400_naming_messages(self) -> None:
        router = ModelRouter(aliases={"offline": "fake"})
        with serve(create_app(router, max_messages=5)) as url, httpx.Client(base_url=url) as http:
            assert post(http, {"model": "offline", "messages": HELLO * 5}).status_code == 200
            error = error_of(post(http, {"model": "offline", "messages": HELLO * 6}), 400)
        assert error["param"] == "messages"
        assert error["code"] == "array_above_max_length"
        assert "at most 5 messages, but got 6" in error["message"]

    def test_more_values_than_the_limit_are_a_413(self) -> None:
        router = ModelRouter(aliases={"offline": "fake"})
        stop = ["s"] * 3000
        with serve(create_app(router, max_values=2000)) as url, httpx.Client(base_url=url) as http:
            error = error_of(post(http, {"model": "offline", "messages": HELLO, "stop": stop}), 413)
        assert error["code"] == "request_too_large"

    def test_the_size_limit_holds_for_a_body_without_a_length(self) -> None:
        router = ModelRouter(aliases={"offline": "fake"})
        body = json.dumps(
            {"model": "offline", "messages": [{"role": "user", "content": "x" * 5000}]}
        )

        def chunks() -> Iterator[bytes]:  # sent chunked: no content-length to refuse it by
            for start in range(0, len(body), 1000):
                yield body[start : start + 1000].encode()

        with (
            serve(create_app(router, max_body_bytes=4096)) as url,
            httpx.Client(base_url=url) as http,
        ):
            answer = http.post("/v1/chat/completions", content=chunks())
        assert error_of(answer, 413)["code"] == "request_too_large"

    @pytest.mark.parametrize("limit", ["max_body_bytes", "max_messages", "max_depth", "max_values"])
    @pytest.mark.parametrize("value", [0, -1, 2.5, True])
    def test_a_limit_that_is_not_a_positive_whole_number_is_refused(
        self, limit: str, value: Any
    ) -> None:
        with pytest.raises(ConfigurationError, match=limit):
            create_app(ModelRouter(), **{limit: value})

    def test_a_small_request_is_served_while_a_large_one_is_parsed(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The large body's parsing waits until the small request is answered: on the event
        loop it would wait in vain (the small request could not be served meanwhile)."""
        parsing, answered = threading.Event(), threading.Event()
        seen: dict[str, bool] = {}
        real = request_module.parse_messages

        def parse_messages(value: object) -> Any:
            if isinstance(value, list) and len(json.dumps(value)) > 100_000:  # the large one
                parsing.set()
                seen["answered while parsing"] = answered.wait(5)
            return real(value)

        monkeypatch.setattr(request_module, "parse_messages", parse_messages)
        large = {"model": "offline", "messages": [{"role": "user", "content": "y" * 200_000}]}
        answers: dict[str, int] = {}
        router = ModelRouter(aliases={"offline": "fake"})
        with serve(create_app(router)) as url:

            def send_large() -> None:
                with httpx.Client(base_url=url, timeout=20.0) as http:
                    answers["large"] = post(http, large).status_code

            sender = threading.Thread(target=send_large)
            sender.start()
            assert parsing.wait(10)
            with httpx.Client(base_url=url, timeout=3.0) as http:
                try:
                    answers["small"] = post(
                        http, {"model": "offline", "messages": HELLO}
                    ).status_code
                    answered.set()
                except httpx.TimeoutException:
                    answers["small"] = 0
            sender.join(20)
        assert answers == {"large": 200, "small": 200}
        assert seen == {"answered while parsing": True}


# -- item 8: raw surrogate bytes -------------------------------------------------------------

SURROGATE = b"x\xed\xa0\x80y"
"""A lone surrogate (U+D800) encoded as if it were a character: not UTF-8."""


def _with_raw_text(family: str, stream: bool, field: str) -> bytes:
    """A request whose `field` holds `SURROGATE` as raw bytes; the rest is plain JSON."""
    marker = "@@RAW@@"
    body: dict[str, Any] = {"model": family, "stream": stream, "messages": list(HELLO)}
    if field == "content":
        body["messages"] = [{"role": "user", "content": marker}]
    elif field == "system":
        body["messages"] = [{"role": "system", "content": marker}, *HELLO]
    elif field == "tool description":
        tool = {"name": "f", "description": marker, "parameters": {"type": "object"}}
        body["tools"] = [{"type": "function", "function": tool}]
    elif field == "tool arguments":
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": marker}}
        body["messages"] = [
            *HELLO,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ]
    elif field == "model":
        body["model"] = marker
    else:
        raise AssertionError(field)
    return json.dumps(body).encode().replace(marker.encode(), SURROGATE)


class TestSurrogateBytes:
    @pytest.mark.parametrize("family", list(FAMILIES))
    @pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
    @pytest.mark.parametrize(
        "field", ["content", "system", "tool description", "tool arguments", "model"]
    )
    def test_they_are_a_400_and_nothing_goes_upstream(
        self,
        client: httpx.Client,
        vendors: VendorServer,
        caplog: pytest.LogCaptureFixture,
        family: str,
        stream: bool,
        field: str,
    ) -> None:
        error = error_of(post(client, _with_raw_text(family, stream, field)), 400)
        assert error["code"] == "invalid_json"
        assert "not valid UTF-8" in error["message"]
        assert vendors.bodies == []
        quiet(caplog)

    @pytest.mark.parametrize("family", list(FAMILIES))
    @pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
    def test_an_escaped_one_is_sent_on_as_the_replacement_character(
        self,
        client: httpx.Client,
        vendors: VendorServer,
        caplog: pytest.LogCaptureFixture,
        family: str,
        stream: bool,
    ) -> None:
        body = b'{"model":"%s","stream":%s,"messages":[{"role":"user","content":"x\\ud800y"}]}' % (
            family.encode(),
            b"true" if stream else b"false",
        )
        answer = post(client, body)
        assert answer.status_code == 200, answer.text
        if family == "offline":  # it echoes the text back
            assert text_of(answer, stream) == "x\ufffdy"
        else:
            (sent,) = vendors.bodies
            assert "x\ufffdy" in sent.decode("utf-8")
        quiet(caplog)


# -- item 9: deep values ---------------------------------------------------------------------


def nested(levels: int, leaf: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON Schema nesting arrays `levels` JSON levels deep (one per level: the worst shape)."""
    schema: dict[str, Any] = leaf or {"type": "string"}
    for _ in range(levels - 1):
        schema = {"type": "array", "items": schema}
    return schema


def depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def with_tool(family: str, stream: bool, schema: dict[str, Any]) -> dict[str, Any]:
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    return {"model": family, "stream": stream, "messages": HELLO, "tools": [tool]}


def with_format(family: str, stream: bool, schema: dict[str, Any]) -> dict[str, Any]:
    spec = {"name": "answer", "schema": schema}
    fmt = {"type": "json_schema", "json_schema": spec}
    return {"model": family, "stream": stream, "messages": HELLO, "response_format": fmt}


class TestDeepValues:
    @pytest.mark.parametrize("family", list(FAMILIES))
    @pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
    def test_a_tool_schema_nested_97_levels_is_a_400_naming_it(
        self,
        client: httpx.Client,
        vendors: VendorServer,
        caplog: pytest.LogCaptureFixture,
        family: str,
        stream: bool,
    ) -> None:
        schema: dict[str, Any] = {"type": "string"}
        for _ in range(97):
            schema = {"type": "object", "properties": {"a": schema}}
        error = error_of(post(client, with_tool(family, stream, schema)), 400)
        assert error["param"] == "tools[0].function.parameters"
        assert error["code"] == "nested_too_deeply"
        assert f"at most {MAX_DEPTH} levels" in error["message"]
        assert vendors.bodies == []
        quiet(caplog)

    @pytest.mark.parametrize("family", list(FAMILIES))
    @pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
    @pytest.mark.parametrize("levels", [98, 150])
    def test_a_response_format_schema_nested_too_deep_is_a_400_naming_it(
        self,
        client: httpx.Client,
        caplog: pytest.LogCaptureFixture,
        family: str,
        stream: bool,
        levels: int,
    ) -> None:
        error = error_of(post(client, with_format(family, stream, nested(levels))), 400)
        assert error["param"] == "response_format.json_schema.schema"
        quiet(caplog)

    @pytest.mark.parametrize("family", list(FAMILIES))
    @pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
    def test_schemas_as_deep_as_the_limit_are_served(
        self, client: httpx.Client, caplog: pytest.LogCaptureFixture, family: str, stream: bool
    ) -> None:
        """The limit leaves every family's recursion room to spare, in its worst shape."""
        tool = with_tool(family, stream, nested(MAX_DEPTH - 4))
        # Anthropic and Bedrock take an object at the root of an output format.
        root = {"type": "object", "properties": {"a": nested(MAX_DEPTH - 5)}, "required": ["a"]}
        fmt = with_format(family, stream, root)
        assert depth(tool) == depth(fmt) == MAX_DEPTH
        for body in (tool, fmt):
            answer = post(client, body)
            assert answer.status_code == 200, answer.text[:300]
        quiet(caplog)

    def test_one_level_past_the_limit_is_refused(self, client: httpx.Client) -> None:
        body = with_tool("offline", False, nested(MAX_DEPTH - 3))
        assert depth(body) == MAX_DEPTH + 1
        assert error_of(post(client, body), 400)["code"] == "nested_too_deeply"

    @pytest.mark.parametrize("where", ["metadata", "messages", "stop"])
    def test_any_field_is_bounded(self, client: httpx.Client, where: str) -> None:
        deep: Any = "x"
        for _ in range(100):
            deep = [deep]
        body: dict[str, Any] = {"model": "offline", "messages": HELLO}
        if where == "messages":
            body["messages"] = [{"role": "user", "content": deep}]
        else:
            body[where] = deep
        error = error_of(post(client, body), 400)
        assert error["param"] is not None and error["param"].startswith(where)

    def test_a_body_deeper_than_the_json_decoder_goes_is_a_400(
        self, client: httpx.Client, caplog: pytest.LogCaptureFixture
    ) -> None:
        body = b'{"model":"offline","messages":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
        assert error_of(post(client, body), 400)["code"] in ("invalid_json", "nested_too_deeply")
        quiet(caplog)

    def test_the_check_does_not_recurse(self) -> None:
        deep: list[Any] = []
        for _ in range(200_000):
            deep = [deep]
        assert too_deep(deep, 200_001) is None
        assert too_deep(deep, 64) == "[0]" * 8
        assert too_deep({"a": {"b": {"c": {"d": deep}}}}, 5) == "a.b.c"


# -- item 10: malformed HTTP -----------------------------------------------------------------

BAD_FRAMING = {
    "not HTTP": b"GARBAGE\r\n\r\n",
    "a length that is no number": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
    b"Content-Length: abc\r\n\r\n",
    "a space in a header name": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
    b"Bad Header: x\r\n\r\n",
    "a NUL in the path": b"GET /he\x00alth HTTP/1.1\r\nHost: x\r\n\r\n",
    "a broken chunked body": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
    b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    "a non-ASCII path": b"GET /h\xc3\xa9alth HTTP/1.1\r\nHost: x\r\n\r\n",
}


def exchange(port: int, data: bytes, until: bytes | None = None) -> bytes:
    """Send `data` on a new connection; what came back before the server closed it
    (or until `until` arrived)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        received = b""
        try:
            while part := sock.recv(65536):
                received += part
                if until is not None and received.endswith(until):
                    break
        except (TimeoutError, ConnectionResetError):
            pass
    return received


@pytest.fixture(params=["h11", "httptools"])
def raw_port(request: pytest.FixtureRequest) -> Iterator[int]:
    """The port of the proxy served with each of uvicorn's HTTP parsers, as the command does."""
    app = create_app(ModelRouter(aliases={"offline": "fake"}))
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="critical",
        http=http_protocol(request.param),
        ws="none",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.005)
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    thread.join(10)


class TestMalformedHttp:
    @pytest.mark.parametrize("case", list(BAD_FRAMING))
    def test_it_is_answered_with_an_openai_error_body(self, raw_port: int, case: str) -> None:
        answer = exchange(raw_port, BAD_FRAMING[case])
        head, _, body = answer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        assert status_line.startswith("HTTP/1.1 400"), answer[:300]
        assert headers["content-type"] == "application/json"
        assert int(headers["content-length"]) == len(body)
        assert json.loads(body)["error"]["code"] == "invalid_http_request"
        assert headers["connection"] == "close"

    def test_a_websocket_upgrade_is_served_as_plain_http(self, raw_port: int) -> None:
        upgrade = (
            b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        answer = exchange(raw_port, upgrade, until=b'{"status":"ok"}')
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert answer.endswith(b'{"status":"ok"}')

    @pytest.mark.parametrize("name", ["h11", "httptools"])
    def test_each_parser_is_the_one_asked_for(self, name: str) -> None:
        assert http_protocol(name).__mro__[1].__module__ == f"uvicorn.protocols.http.{name}_impl"

    def test_auto_is_httptools_when_installed(self) -> None:
        assert http_protocol("auto") is http_protocol("httptools")


def test_the_command_serves_with_these_protocols_and_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr("uvicorn.run", lambda app, **options: seen.update(options, app=app))
    monkeypatch.delenv("TIDEMILL_PROXY_API_KEY", raising=False)
    flags = ["--max-body-bytes", "4096", "--max-messages", "3"]
    assert main(["proxy", "--model-alias", "t=fake", *flags]) == 0
    assert seen["http"] is http_protocol("auto")
    assert seen["ws"] == "none"
    with TestClient(seen["app"]) as test:
        too_many = test.post("/v1/chat/completions", json={"model": "t", "messages": HELLO * 4})
        too_big = test.post(
            "/v1/chat/completions",
            json={"model": "t", "messages": [{"role": "user", "content": "x" * 5000}]},
        )
    assert too_many.status_code == 400 and too_many.json()["error"]["param"] == "messages"
    assert too_big.status_code == 413


def test_the_command_defaults_are_the_apps() -> None:
    from tidemill.cli._proxy import register
    from tidemill.llm.proxy._limits import MAX_BODY_BYTES, MAX_MESSAGES

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["proxy"])
    assert (args.max_body_bytes, args.max_messages) == (MAX_BODY_BYTES, MAX_MESSAGES)
