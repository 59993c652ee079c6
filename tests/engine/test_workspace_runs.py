"""Workspace flows run by path, as who started them: references resolved as that identity.

A folder `f/x` holds a script, a sub-flow using it and a flow using both; a
plain variable, a secret one, and a resource whose value refers to the
secret. `ada` is the first (admin) user, `bob` a viewer of `f/x`, `carol`
a plain member with no role on it. Runs of the workspace's flows record who
they run as and the versions they ran; their `$var:`/`$res:` step inputs
resolve as the run's identity when the job runs, and a secret is masked in
what the step prints and appears in the database only as ciphertext.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from provider_answers import OPENAI_ANSWER
from tidemill.engine import AsyncEngine
from tidemill.errors import RunFailed
from tidemill.flows import Flow
from tidemill.workspace import AsyncWorkspace, MasterKey

pytestmark = pytest.mark.timeout(120)

DOUBLE = "'''Double a number.'''\ndef main(x: int):\n    return x * 2\n"
TRIPLE = "'''Triple a number.'''\ndef main(x: int):\n    return x * 3\n"
CHILD = {
    "steps": [
        {"id": "inner", "script": {"path": "f/x/double"}, "inputs": {"x": {"expr": "flow_input.x"}}}
    ]
}
MAIN = {
    "steps": [
        {"id": "a", "script": {"path": "f/x/double"}, "inputs": {"x": {"expr": "flow_input.n"}}},
        {"id": "child", "flow": "f/x/child", "inputs": {"x": {"expr": "results.a"}}},
        {
            "id": "out",
            "identity": {},
            "inputs": {"a": {"expr": "results.a"}, "child": {"expr": "results.child"}},
        },
    ]
}
CONF_TYPE = {
    "type": "object",
    "properties": {"token": {"type": "string", "writeOnly": True}, "region": {"type": "string"}},
}
PRINT_SECRET = (
    "def main(token: str, plain: str):\n"
    "    import sys, time\n"
    "    print('the token is', token)\n"
    "    print('in two writes', token[:5], end='', flush=True)\n"
    "    time.sleep(0.1)\n"
    "    print(token[5:], flush=True)\n"
    "    print('and on stderr', token, file=sys.stderr)\n"
    "    return {'length': len(token), 'plain': plain}\n"
)


@dataclass
class Setup:
    engine: AsyncEngine
    ada: AsyncWorkspace
    bob: AsyncWorkspace
    carol: AsyncWorkspace
    secret: str
    url: str


@pytest.fixture
async def setup(store_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Setup]:
    """An engine and a workspace on one store, filled by its admin `ada`."""
    if store_url.startswith("postgres"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    secret = f"sk-PLAIN-{uuid.uuid4().hex}"
    engine = AsyncEngine(store_url, migrate=True)
    await engine._open()
    ada = AsyncWorkspace(engine.store, user="ada")
    try:
        for name in ("bob", "carol"):
            await ada.add_user(name)
        await ada.add_folder("x", roles={"bob": "viewer"})
        await ada.write("f/x/double", "script", DOUBLE, message="v1")
        await ada.write("f/x/child", "flow", CHILD)
        await ada.write("f/x/main", "flow", MAIN)
        await ada.write("f/x/plain", "variable", "a plain value")
        await ada.write("f/x/token", "variable", secret, secret=True)
        await ada.write("f/x/conf_type", "resource_type", CONF_TYPE)
        await ada.write(
            "f/x/conf",
            "resource",
            {"token": "$var:f/x/token", "region": "eu"},
            resource_type="f/x/conf_type",
        )
        bob = await ada.acting_as("bob")
        carol = await ada.acting_as("carol")
        yield Setup(engine, ada, bob, carol, secret, store_url)
    finally:
        await ada.close()
        await engine.close()


def _flow(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"steps": steps}


async def test_a_deployed_flow_runs_by_path_and_records_its_source(setup: Setup) -> None:
    engine = setup.engine
    async with engine.worker():
        run_id = await engine.submit_path(setup.bob, "f/x/main", {"n": 5})
        result = await engine.wait(run_id, timeout=60)
    assert result == {"a": 10, "child": 20}
    info = await engine.get(run_id)
    assert info.run_as == "bob"
    assert info.source is not None
    expected = {
        "workspace": "default",
        "path": "f/x/main",
        "version": 1,
        "draft": False,
        "items": {"f/x/double": 1, "f/x/child": 1},
    }
    assert {key: info.source[key] for key in expected} == expected
    # The child run of the sub-flow has its root's identity and source.
    rows = await engine.store.transact(lambda tx: tx.tree(run_id))
    assert len(rows) == 2
    assert {row.run_as for row in rows} == {"bob"}
    assert all(row.source == info.source for row in rows)
    audit = await setup.ada.audit(action="run.start")
    assert [(entry.actor, entry.path, entry.details["run_id"]) for entry in audit] == [
        ("bob", "f/x/main", run_id)
    ]


async def test_a_draft_run_is_the_callers_draft_and_others_run_what_is_deployed(
    setup: Setup,
) -> None:
    engine, ada = setup.engine, setup.ada
    await ada.save_draft("f/x/double", "script", TRIPLE)
    async with engine.worker():
        # A draft of a script changes nothing in what is deployed, even for its author.
        own = await engine.submit_path(ada, "f/x/main", {"n": 1})
        assert await engine.wait(own, timeout=60) == {"a": 2, "child": 4}
        # A preview runs the caller's drafts: of the script here (the flow has none yet).
        script_only = await engine.submit_path(ada, "f/x/main", {"n": 1}, draft=True)
        assert await engine.wait(script_only, timeout=60) == {"a": 3, "child": 9}
        await ada.save_draft("f/x/main", "flow", {"steps": MAIN["steps"][:1]})
        preview = await engine.submit_path(ada, "f/x/main", {"n": 1}, draft=True)
        deployed = await engine.submit_path(setup.bob, "f/x/main", {"n": 1})
        assert await engine.wait(preview, timeout=60) == 3  # the draft flow: one step
        assert await engine.wait(deployed, timeout=60) == {"a": 2, "child": 4}
    source = (await engine.get(preview)).source
    assert source is not None
    assert (source["version"], source["draft"]) == (0, True)
    assert source["items"]["f/x/double"] == 0  # the caller's draft of the script
    assert (await engine.get(deployed)).source["draft"] is False  # type: ignore[index]


async def test_plain_and_secret_variables_resolve_and_the_secret_is_masked(
    setup: Setup,
) -> None:
    engine = setup.engine
    await setup.ada.write(
        "f/x/show",
        "flow",
        _flow(
            [
                {
                    "id": "show",
                    "script": PRINT_SECRET,
                    "inputs": {"token": "$var:f/x/token", "plain": "$var:f/x/plain"},
                },
                {"id": "pass", "identity": {}, "inputs": {"t": "$var:f/x/token"}},
            ]
        ),
    )
    async with engine.worker(log_flush=0.01):
        run_id = await engine.submit_path(setup.bob, "f/x/show")
        result = await engine.wait(run_id, timeout=60)
    assert result == {"t": "***"}  # an identity step does not keep a secret in its result
    jobs = await engine.jobs(run_id)
    show = await engine.store.transact(lambda tx: tx.payload(run_id, "result"))
    assert show == {"t": "***"}
    results = await engine.store.transact(lambda tx: tx.results(run_id))
    assert results["show"] == {"length": len(setup.secret), "plain": "a plain value"}
    logs = "".join(row.body for row in await engine.logs(run_id))
    assert setup.secret not in logs
    assert "the token is ***" in logs
    assert "in two writes ***" in logs  # a secret printed in two writes is masked too
    assert "and on stderr ***" in logs
    assert len(jobs) == 2
    await _nowhere_in_store(setup, setup.secret)


async def test_a_reference_the_identity_may_not_read_fails_the_step_and_leaks_nothing(
    setup: Setup,
) -> None:
    engine = setup.engine
    flow = Flow.model_validate(
        _flow(
            [
                {
                    "id": "use",
                    "script": PRINT_SECRET,
                    "inputs": {"token": "$var:f/x/token", "plain": "p"},
                }
            ]
        )
    )
    async with engine.worker():
        run_id = await engine.submit(flow, run_as="carol")
        with pytest.raises(RunFailed):
            await engine.wait(run_id, timeout=60)
    info = await engine.get(run_id)
    assert info.error is not None
    assert info.error["type"] == "UnresolvedReference"
    assert "$var:f/x/token" in info.error["message"]
    assert "carol" in info.error["message"]
    (job,) = await engine.jobs(run_id)
    assert job.attempt == 1  # not retried
    assert setup.secret not in json.dumps(info.error) + json.dumps(job.error)
    await _nowhere_in_store(setup, setup.secret)


async def test_a_run_with_no_identity_cannot_resolve_references(setup: Setup) -> None:
    engine = setup.engine
    flow = Flow.model_validate(
        _flow([{"id": "use", "identity": {}, "inputs": {"v": "$var:f/x/plain"}}])
    )
    async with engine.worker():
        run_id = await engine.submit(flow)
        with pytest.raises(RunFailed):
            await engine.wait(run_id, timeout=60)
    info = await engine.get(run_id)
    assert info.run_as is None
    assert info.error is not None
    assert info.error["type"] == "UnresolvedReference"
    assert "no identity" in info.error["message"]


async def test_a_disabled_users_run_fails(setup: Setup) -> None:
    engine = setup.engine
    flow = Flow.model_validate(
        _flow([{"id": "use", "identity": {}, "inputs": {"v": "$var:f/x/plain"}}])
    )
    await setup.ada.set_user("bob", disabled=True)
    async with engine.worker():
        run_id = await engine.submit(flow, run_as="bob")
        with pytest.raises(RunFailed):
            await engine.wait(run_id, timeout=60)
        with pytest.raises(Exception, match="may run"):
            await engine.submit_path(setup.bob, "f/x/main", {"n": 1})
    info = await engine.get(run_id)
    assert info.error is not None
    assert info.error["type"] == "UnresolvedReference"


async def test_references_inside_a_resource_resolve(setup: Setup) -> None:
    engine = setup.engine
    script = (
        "def main(conf: dict):\n    return {'region': conf['region'], 'n': len(conf['token'])}\n"
    )
    flow = Flow.model_validate(
        _flow([{"id": "use", "script": script, "inputs": {"conf": "$res:f/x/conf"}}])
    )
    async with engine.worker():
        run_id = await engine.submit(flow, run_as="bob")
        assert await engine.wait(run_id, timeout=60) == {"region": "eu", "n": len(setup.secret)}
    assert (await engine.get(run_id)).run_as == "bob"


async def test_a_sub_flow_passes_references_on_unresolved(setup: Setup) -> None:
    """A container step's references reach its child run as written, resolved by its leaf."""
    engine = setup.engine
    child = _flow(
        [
            {
                "id": "show",
                "script": PRINT_SECRET,
                "inputs": {"token": {"expr": "flow_input.t"}, "plain": "p"},
            }
        ]
    )
    await setup.ada.write("f/x/shows", "flow", child)
    await setup.ada.write(
        "f/x/outer",
        "flow",
        _flow([{"id": "sub", "flow": "f/x/shows", "inputs": {"t": "$var:f/x/token"}}]),
    )
    async with engine.worker(log_flush=0.01):
        run_id = await engine.submit_path(setup.bob, "f/x/outer")
        assert await engine.wait(run_id, timeout=60) == {"length": len(setup.secret), "plain": "p"}
    logs = "".join(row.body for row in await engine.logs(run_id))
    assert "the token is ***" in logs
    await _nowhere_in_store(setup, setup.secret)


def test_submit_path_from_blocking_code(tmp_path: Path) -> None:
    from tidemill import Engine
    from tidemill.workspace import Workspace

    url = f"sqlite:///{tmp_path}/t.db"
    with Engine(url) as engine, Workspace(url, user="ada") as ws, engine.worker():
        ws.add_folder("demo")
        ws.write("f/demo/who", "variable", "the team")
        step = {"id": "a", "identity": {}, "inputs": {"who": "$var:f/demo/who"}}
        ws.write("f/demo/echo", "flow", {"steps": [step]})
        run = engine.submit_path(ws, "f/demo/echo")
        assert run.wait(timeout=60) == {"who": "the team"}
        assert run.info().run_as == "ada"
        run = engine.submit_path(ws.core, "f/demo/echo")
        assert run.wait(timeout=60) == {"who": "the team"}


async def test_submit_path_refuses_a_workspace_in_another_database(
    setup: Setup, tmp_path: Path
) -> None:
    other = AsyncWorkspace(f"sqlite:///{tmp_path}/other.db", user="ada")
    try:
        with pytest.raises(Exception, match="engine's database"):
            await setup.engine.submit_path(other, "f/x/main", {"n": 1})
    finally:
        await other.close()


# --- AI steps name their provider as a resource --------------------------------------


class Upstream:
    """An OpenAI-compatible server on 127.0.0.1 that keeps each request's Authorization."""

    def __init__(self) -> None:
        self.authorizations: list[str | None] = []
        self.bodies: list[bytes] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                upstream.bodies.append(
                    self.rfile.read(int(self.headers.get("content-length", "0")))
                )
                upstream.authorizations.append(self.headers.get("authorization"))
                body = json.dumps(OPENAI_ANSWER).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    try:
        yield server
    finally:
        server.stop()


def _ai_flow(**settings: Any) -> dict[str, Any]:
    step = {"id": "ask", "ai_action": {"model": "openai:gpt-4o-mini", "prompt": "Hi", **settings}}
    return _flow([step])


async def test_an_ai_step_uses_its_provider_resource_as_the_runs_identity(
    setup: Setup, upstream: Upstream
) -> None:
    engine, ada = setup.engine, setup.ada
    await ada.add_folder("ai", roles={"bob": "viewer"})
    await ada.write("f/ai/openai_key", "variable", setup.secret, secret=True)
    await ada.write(
        "f/ai/openai",
        "resource",
        {"api_key": "$var:f/ai/openai_key", "base_url": upstream.url},
        resource_type="openai",
    )
    await ada.write("f/x/ask", "flow", _ai_flow(provider="$res:f/ai/openai"))
    async with engine.worker():
        run_id = await engine.submit_path(setup.bob, "f/x/ask")
        answer = await engine.wait(run_id, timeout=60)
        assert isinstance(answer, str) and answer
        assert upstream.authorizations == [f"Bearer {setup.secret}"]
        # carol may not read f/ai/openai: the step fails, the provider is never called.
        flow = Flow.model_validate(_ai_flow(provider="$res:f/ai/openai"))
        refused = await engine.submit(flow, run_as="carol")
        with pytest.raises(RunFailed):
            await engine.wait(refused, timeout=60)
    info = await engine.get(refused)
    assert info.error is not None
    assert info.error["type"] == "UnresolvedReference"
    assert "$res:f/ai/openai" in info.error["message"]
    assert len(upstream.authorizations) == 1
    await _nowhere_in_store(setup, setup.secret)


async def test_an_ai_steps_api_key_may_be_a_workspace_variable(
    setup: Setup, upstream: Upstream
) -> None:
    engine = setup.engine
    flow = Flow.model_validate(_ai_flow(api_key="$var:f/x/token", base_url=upstream.url))
    async with engine.worker():
        run_id = await engine.submit(flow, run_as="bob")
        await engine.wait(run_id, timeout=60)
    assert upstream.authorizations == [f"Bearer {setup.secret}"]


async def test_an_offline_ai_step_with_a_provider_resolves_it(setup: Setup) -> None:
    engine, ada = setup.engine, setup.ada
    await ada.write("f/x/openai", "resource", {"api_key": "$var:f/x/token"}, resource_type="openai")
    step = {
        "id": "ask",
        "ai_action": {"model": "fake", "prompt": "Hi", "provider": "$res:f/x/openai"},
    }
    flow = Flow.model_validate(_flow([step]))
    async with engine.worker():
        ok = await engine.submit(flow, run_as="bob")
        assert await engine.wait(ok, timeout=60) == "Hi"
        refused = await engine.submit(flow, run_as="carol")
        with pytest.raises(RunFailed):
            await engine.wait(refused, timeout=60)
    error = (await engine.get(refused)).error
    assert error is not None and error["type"] == "UnresolvedReference"


def test_ai_settings_accept_only_resource_providers_and_env_or_variable_keys() -> None:
    def check(**settings: Any) -> None:
        Flow.model_validate(_ai_flow(**settings)).check()

    check(provider="$res:f/ai/openai", api_key="$var:f/ai/key")
    check(api_key="env:OPENAI_API_KEY")
    with pytest.raises(ValueError, match=r"\$res:<path>"):
        check(provider="openai")
    with pytest.raises(ValueError, match=r"\$var:<path>"):
        check(api_key="sk-plaintext")


async def _nowhere_in_store(setup: Setup, secret: str) -> None:
    """The secret's plaintext is in no row of the store (only its ciphertext is)."""
    if setup.url.startswith("sqlite"):
        path = Path(setup.url.removeprefix("sqlite:///"))
        await setup.engine.store.transact(lambda tx: None)
        for file in path.parent.glob(path.name + "*"):
            if file.suffix != ".key":
                assert secret.encode() not in file.read_bytes(), file
        return

    def dump(tx: Any) -> str:
        tables = [
            row[0]
            for row in tx.all(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        ]
        found = []
        for table in tables:
            for row in tx.all(f'SELECT * FROM "{table}"'):
                found.append(repr(row))
        return "\n".join(found)

    text = await setup.engine.store.transact(dump)
    assert "tm_ws_items" in text or text  # the dump read rows
    assert secret not in text


async def test_a_steps_references_are_resolved_in_the_transaction_claiming_it(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker resolves them while it claims the job: no transaction of their own."""
    engine = setup.engine
    flow = _flow([{"id": "pass", "identity": {}, "inputs": {"plain": "$var:f/x/plain"}}])
    await setup.ada.write("f/x/claimed", "flow", flow)
    async with engine.worker():
        # A first run checks the schema for the worker's session of bob (one resolve).
        await engine.wait(await engine.submit_path(setup.bob, "f/x/claimed"), timeout=60)

        async def refused(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("resolved in a transaction of its own")

        monkeypatch.setattr(AsyncWorkspace, "resolve", refused)
        run_id = await engine.submit_path(setup.bob, "f/x/claimed")
        assert await engine.wait(run_id, timeout=60) == {"plain": "a plain value"}
