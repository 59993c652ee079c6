"""A real server per test: uvicorn on a free port of 127.0.0.1, over SQLite and PostgreSQL.

`live` starts the server on a workspace of its own in a store shared by the
tests of this folder (PostgreSQL builds its schema once), with the team of
the workspace tests' permission matrix:

- `ada`: the first user, a workspace admin (her token: `live.tokens["ada"]`);
- `olga`: admin of folder `f/team`; `vic`: viewer of `f/team` via `g/readers`;
- `max`: a plain member with only his own `u/max/`;
- `f/team/script` (a script), `f/team/flow` (a flow running it), `u/max/notes`.

Each principal has an unscoped token; `live.client(user)` is an httpx
client sending it, and `live.anonymous()` one sending nothing. `serving`
starts such a server with extra routers (a test's deliberately broken route).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import APIRouter
from tests.conftest import POSTGRES_ENV, drop_postgres_schema, unique_schema

from tidemill.server import ServerConfig, create_app
from tidemill.server._serve import uvicorn_server
from tidemill.workspace import MasterKey, Workspace

SCRIPT = "'''Say hello.'''\ndef main(name: str):\n    return 'hello ' + name\n"
FLOW = {
    "summary": "Greet someone",
    "inputs": {"type": "object", "properties": {"name": {"type": "string"}}},
    "steps": [
        {
            "id": "greet",
            "script": {"path": "f/team/script"},
            "inputs": {"name": {"expr": "flow_input.name"}},
        }
    ],
}
PASSWORD = "correct horse battery"
TEAM = ("ada", "olga", "vic", "max")


@dataclass
class Live:
    """A running server, its workspace (as ada, blocking) and a token per user."""

    url: str
    db: str
    workspace: str
    ws: Workspace
    tokens: dict[str, str] = field(default_factory=dict)

    def client(self, user: str | None = None, **kwargs: Any) -> httpx.Client:
        """A client with `user`'s token (None: anonymous)."""
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def anonymous(self) -> httpx.Client:
        """A client that presents nothing."""
        return self.client(None)

    def token(self, user: str, *scopes: str) -> str:
        """A new token of `user` with `scopes` (none: `*`)."""
        return self.ws.acting_as(user).create_token("test", scopes=list(scopes) or ["*"]).text


class ServerThread:
    """uvicorn serving an app in a thread of its own, on its own event loop."""

    def __init__(self, app: Any) -> None:
        self.server = uvicorn_server(app, host="127.0.0.1", port=0)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self.server.serve())
        except BaseException as exc:  # pragma: no cover - shown by start()
            self.error = exc

    def start(self) -> str:
        """Start serving; the base URL."""
        self.thread.start()
        for _ in range(1000):
            if self.server.started:
                port = self.server.servers[0].sockets[0].getsockname()[1]
                return f"http://127.0.0.1:{port}"
            if not self.thread.is_alive():
                raise RuntimeError(f"the server did not start: {self.error!r}")
            threading.Event().wait(0.01)
        raise RuntimeError("the server did not start within 10 s")

    def stop(self) -> None:
        """Shut down gracefully."""
        self.server.should_exit = True
        self.thread.join(timeout=15)


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def server_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A store URL on each backend, shared by this folder's tests (a workspace each)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('server')}/tidemill.db"
        return
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server (CI sets it)")
    schema = unique_schema()
    try:
        yield f"{base}?schema={schema}"
    finally:
        drop_postgres_schema(base, schema)


def build_team(ws: Workspace) -> None:
    """The team of the module docstring, made by ada."""
    for name in TEAM[1:]:
        ws.add_user(name)
    ws.add_group("readers")
    ws.set_member("readers", "vic")
    ws.add_folder("team")
    ws.grant("f/team", "olga", "admin")
    ws.grant("f/team", "g/readers", "viewer")
    ws.write("f/team/script", "script", SCRIPT)
    ws.write("f/team/flow", "flow", FLOW)
    ws.acting_as("max").write("u/max/notes", "variable", "max's notes")


@contextlib.contextmanager
def serving(
    server_store: str, monkeypatch: pytest.MonkeyPatch, *, routers: Sequence[APIRouter] = ()
) -> Iterator[Live]:
    """A server on a workspace of its own, with the team; `routers` are added to its app."""
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    if not server_store.startswith("sqlite"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    name = f"w{uuid.uuid4().hex[:12]}"
    ws = Workspace(server_store, workspace=name, user="ada", migrate=True)
    build_team(ws)
    tokens = {user: ws.acting_as(user).create_token("test").text for user in TEAM}
    app = create_app(ServerConfig(db=server_store, workspace=name, concurrency=2))
    for router in routers:
        app.include_router(router)
    thread = ServerThread(app)
    try:
        url = thread.start()
        yield Live(url, server_store, name, ws, tokens)
    finally:
        thread.stop()
        ws.close()


@pytest.fixture
def live(server_store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    """A server on a workspace of its own, with the team, and a worker in its process."""
    with serving(server_store, monkeypatch) as running:
        yield running


def settled(client: httpx.Client, run_id: str) -> dict[str, Any]:
    """The run once it has ended, as `client` sees it (60 s at most)."""
    deadline = time.monotonic() + 60
    while True:
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        if run["status"] in ("succeeded", "failed", "cancelled"):
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.05)


def sse_messages(text: str) -> list[dict[str, Any]]:
    """The SSE messages of `text`, each with its id, event and data (parsed JSON)."""
    messages = []
    for block in text.split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            if name in ("id", "event", "data"):
                fields[name] = json.loads(value) if name == "data" else value
        if "data" in fields:
            messages.append(fields)
    return messages
