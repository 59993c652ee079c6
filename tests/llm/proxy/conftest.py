"""Proxy fixtures: the app served by a real uvicorn server, the official SDK as its client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llm_replay import ReplayServer
from proxy_serve import serve, upstream_router

from tidemill.llm.proxy import create_app


@pytest.fixture
def proxy(server: ReplayServer) -> Iterator[str]:
    """The proxy's base URL, with every provider pointed at the replay server."""
    with serve(create_app(upstream_router(server), keepalive=5.0)) as url:
        yield url


@pytest.fixture(autouse=True)
def _fresh_operator_notices() -> Iterator[None]:
    """What the operator was told once is told again in each test."""
    from tidemill.llm.proxy import _notices

    _notices.forget()
    yield
    _notices.forget()
