"""A stand-in for every wire-format family on 127.0.0.1, and a router that points the proxy at it.

`VendorServer` answers each POST the way its vendor would, with a recorded
text answer (whole or streamed, from `tests/fixtures/providers/`), chosen by
the request's path: OpenAI's and Mistral's `/v1/chat/completions`,
Anthropic's `/v1/messages`, Gemini's `:generateContent` and
`:streamGenerateContent`, Bedrock's `/converse` and `/converse-stream`. It
keeps each request body it was sent, so a test can check what went upstream.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from bedrock_replay import ACCESS_KEY, SECRET_KEY, isolate_aws
from llm_replay import API_KEY, fixture_bytes
from proxy_serve import serve

from tidemill.llm.proxy import ModelRouter, create_app

FAMILIES = {
    "offline": "fake",
    "openai": "openai:gpt-4o",
    "mistral": "mistral:mistral-small-latest",
    "anthropic": "anthropic:claude-sonnet-4-5",
    "gemini": "gemini:gemini-2.5-flash",
    "bedrock": "bedrock:us.amazon.nova-micro-v1:0",
}
"""An alias per wire-format family (and the offline model), as clients of the proxy name them."""

SECRETS = (API_KEY, ACCESS_KEY, SECRET_KEY)
"""The upstream credentials the proxy holds: no answer and no log line may show one."""

_JSON = "application/json"
_SSE = "text/event-stream"
_EVENT_STREAM = "application/vnd.amazon.eventstream"


def _answer(path: str, stream: bool) -> tuple[str, str]:
    """The fixture and content type a vendor answers `path` with."""
    if path.endswith("/chat/completions"):
        return ("openai-chat/text-stream.sse", _SSE) if stream else ("openai-chat/text.json", _JSON)
    if path.endswith("/messages"):
        return ("anthropic/text-stream.sse", _SSE) if stream else ("anthropic/text.json", _JSON)
    if ":streamGenerateContent" in path:
        return "gemini/text-stream.sse", _SSE
    if ":generateContent" in path:
        return "gemini/text.json", _JSON
    if path.endswith("/converse-stream"):
        return "bedrock-converse/text-stream.bin", _EVENT_STREAM
    if path.endswith("/converse"):
        return "bedrock-converse/text.json", _JSON
    raise AssertionError(f"no vendor serves {path}")


class VendorServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 answering like each vendor; keeps what it got."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                server.bodies.append(raw)
                path = self.path.partition("?")[0]
                stream = path.endswith((":streamGenerateContent", "/converse-stream")) or bool(
                    json.loads(raw).get("stream")
                )
                name, kind = _answer(path, stream)
                data = fixture_bytes(name)
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @contextmanager
    def running(self) -> Iterator[VendorServer]:
        self._thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)


def vendor_router(url: str, **options: Any) -> ModelRouter:
    """A router serving `FAMILIES`, every vendor's calls sent to the server at `url`."""
    return ModelRouter(
        aliases=FAMILIES,
        provider_options={
            "openai": {"base_url": f"{url}/v1", "api_key": API_KEY},
            "mistral": {"base_url": f"{url}/v1", "api_key": API_KEY},
            "anthropic": {"base_url": url, "api_key": API_KEY},
            "gemini": {"base_url": f"{url}/v1beta", "api_key": API_KEY},
            "bedrock": {
                "base_url": url,
                "region": "us-east-1",
                "access_key_id": ACCESS_KEY,
                "secret_access_key": SECRET_KEY,
            },
        },
        **options,
    )


@contextmanager
def vendor_proxy(aws_home: Path, **app_options: Any) -> Iterator[tuple[VendorServer, str]]:
    """A `VendorServer` and the proxy in front of it (`create_app(**app_options)`), served
    on loopback with no AWS setting of the machine's; yields the server and the proxy's URL."""
    with pytest.MonkeyPatch.context() as patch:
        isolate_aws(patch, aws_home)
        with (
            VendorServer().running() as vendors,
            serve(create_app(vendor_router(vendors.url), **app_options)) as url,
        ):
            yield vendors, url
