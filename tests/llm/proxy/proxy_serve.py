"""Serving the proxy for tests: a real uvicorn server in a thread, the official SDK as client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import uvicorn
from llm_replay import API_KEY, ReplayServer
from starlette.types import ASGIApp

from tidemill.llm.proxy import ModelRouter


@contextmanager
def serve(app: ASGIApp) -> Iterator[str]:
    """Serve `app` with uvicorn on a free 127.0.0.1 port in a thread; yield its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.005)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        assert not thread.is_alive(), "uvicorn did not stop"


def sdk(base_url: str, **options: Any) -> openai.OpenAI:
    """The official OpenAI client pointed at the proxy, without retries."""
    options.setdefault("max_retries", 0)
    options.setdefault("timeout", 20.0)
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="client-key-unused", **options)


def upstream_router(server: ReplayServer, **options: Any) -> ModelRouter:
    """A router whose OpenAI-compatible and Anthropic models talk to the replay server."""
    base: dict[str, dict[str, Any]] = {
        "openai": {"base_url": f"{server.url}/v1", "api_key": API_KEY},
        "mistral": {"base_url": f"{server.url}/v1", "api_key": API_KEY},
        "anthropic": {"base_url": server.url, "api_key": API_KEY},
    }
    return ModelRouter(provider_options=base, **options)
