"""Provider-layer fixtures: no real network, no real keys, a local replay server."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from llm_replay import ReplayServer

_LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost", None}
_VENDOR_ENV = [
    f"{prefix}_{suffix}"
    for prefix in (
        "OPENAI",
        "ANTHROPIC",
        "MISTRAL",
        "DEEPSEEK",
        "GROQ",
        "TOGETHER",
        "OPENROUTER",
        "OLLAMA",
        "VLLM",
        "OPENAI_COMPATIBLE",
    )
    for suffix in ("API_KEY", "BASE_URL")
] + [
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_API_VERSION",
    "GEMINI_API_KEY",
    "GEMINI_BASE_URL",
    "GOOGLE_API_KEY",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "CLOUD_ML_REGION",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_AD_TOKEN",
]


@pytest.fixture(autouse=True)
def _no_vendor_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys and base URLs from the developer's shell must not reach a test."""
    for name in _VENDOR_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _block_real_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Refuse DNS and connections to anything but loopback; fail the test if one was tried."""
    attempts: list[str] = []
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in _LOCAL_HOSTS:
            attempts.append(f"DNS {name}")
            raise socket.gaierror(f"real network is blocked in tests (tried {name})")
        return real_getaddrinfo(host, *args, **kwargs)

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOCAL_HOSTS:
            attempts.append(f"connect {address}")
            raise ConnectionRefusedError(f"real network is blocked in tests (tried {address})")
        real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    yield attempts
    assert not attempts, f"a test tried the real network: {attempts}"


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    """A real HTTP server on 127.0.0.1 that plays the replies a test queues."""
    replay = ReplayServer().start()
    yield replay
    replay.stop()
