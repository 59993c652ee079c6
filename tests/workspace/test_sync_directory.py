"""`pull` and `push`: a workspace as files, and files applied to a workspace in one transaction."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tidemill.errors import ConfigurationError, PermissionDenied
from tidemill.workspace import AsyncWorkspace, Keyring, MasterKey, Workspace
from tidemill.workspace._sync import DIFF_LINES, PushPlan, SyncMethods, pull, push
from tidemill.workspace._tree import SyncFileError

EXAMPLE = Path(__file__).parents[2] / "examples" / "workspace"
PLAINTEXT = "sk-very-secret-value-7f3a"

GREET = '''"""Greet someone.

Used by the hello flow.
"""


def main(name: str) -> str:
    return "hello " + name
'''

HELLO = {
    "summary": "Say hello",
    "steps": [
        {"id": "greet", "script": {"path": "f/support/greet"}, "inputs": {"name": "ada"}},
    ],
}


def _other_url(store_url: str, tmp_path: Path) -> tuple[str, str]:
    """Another store (SQLite) or another workspace of the same one (PostgreSQL schema)."""
    if store_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path}/other.db", "default"
    return store_url, "copy"


@pytest.fixture
def keyring() -> Keyring:
    return Keyring(MasterKey.generate())


@pytest.fixture
async def ws(store_url: str, keyring: Keyring) -> AsyncIterator[AsyncWorkspace]:
    workspace = AsyncWorkspace(store_url, user="ada", keyring=keyring, migrate=True)
    try:
        yield workspace
    finally:
        await workspace.close()


@pytest.fixture
async def target(store_url: str, tmp_path: Path, keyring: Keyring) -> AsyncIterator[AsyncWorkspace]:
    url, name = _other_url(store_url, tmp_path)
    workspace = AsyncWorkspace(url, workspace=name, user="ada", keyring=keyring, migrate=True)
    try:
        yield workspace
    finally:
        await workspace.close()


async def _fill(ws: AsyncWorkspace) -> None:
    """A folder with one of each kind, a secret among them, and a user's own item."""
    await ws.add_user("bo")
    await ws.add_folder("support", summary="Customer support", roles={"bo": "viewer"})
    await ws.write("f/support/greet", "script", GREET, message="first")
    await ws.write("f/support/hello", "flow", HELLO)
    await ws.write("f/support/token", "variable", PLAINTEXT, secret=True, summary="The key")
    await ws.write("f/support/region", "variable", "eu-west-1", summary="Where")
    await ws.write(
        "f/support/llm",
        "resource",
        {"base_url": "http://localhost:11434/v1", "api_key": "$var:f/support/token"},
        resource_type="openai_compatible",
        summary="A local server",
    )
    schema = {"type": "object", "title": "A ticket", "properties": {"id": {"type": "string"}}}
    await ws.write("f/support/ticket", "resource_type", schema)
    await ws.write(
        "f/support/ticket_one", "resource", {"id": "T-1"}, resource_type="f/support/ticket"
    )
    await ws.write("u/ada/notes", "variable", "remember the milk")


async def _state(ws: AsyncWorkspace) -> list[tuple[Any, ...]]:
    """Every item with its versions: what must not change when a push fails."""
    found: list[tuple[Any, ...]] = []
    for item in await ws.list(limit=1000):
        full = await ws.get(item.path)
        versions = [v.version for v in await ws.history(item.path)]
        found.append((item.path, item.kind, item.summary, full.value, item.version, versions))
    folders = [(f.name, f.summary, dict(f.roles)) for f in await ws.folders()]
    found.append(("folders", folders))
    return found


def _write(root: Path, file: str, text: str) -> None:
    path = root / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# --- pull -------------------------------------------------------------------------------------


async def test_pull_writes_every_readable_item_and_folder(
    ws: AsyncWorkspace, tmp_path: Path
) -> None:
    await _fill(ws)
    report = await pull(ws, tmp_path / "tree")
    assert report.files == (
        "f/support/folder.meta.yaml",
        "f/support/greet.py",
        "f/support/hello.flow.yaml",
        "f/support/llm.resource.yaml",
        "f/support/region.variable.yaml",
        "f/support/ticket.resource_type.yaml",
        "f/support/ticket_one.resource.yaml",
        "f/support/token.variable.yaml",
        "u/ada/notes.variable.yaml",
    )
    assert report.counts == {
        "folder": 1,
        "script": 1,
        "flow": 1,
        "resource": 2,
        "variable": 3,
        "resource_type": 1,
    }
    assert report.secrets == ("f/support/token",)
    assert json.loads(json.dumps(report.to_dict()))["secrets_without_value"] == ["f/support/token"]
    root = tmp_path / "tree"
    assert (root / "f/support/greet.py").read_text() == GREET
    meta = (root / "f/support/folder.meta.yaml").read_text()
    assert "Customer support" in meta and "bo: viewer" in meta
    token = (root / "f/support/token.variable.yaml").read_text()
    assert "secret: true" in token and "value" not in token


async def test_a_pull_never_writes_a_secret(ws: AsyncWorkspace, tmp_path: Path) -> None:
    await _fill(ws)
    await pull(ws, tmp_path / "tree")
    for path in (tmp_path / "tree").rglob("*"):
        if path.is_file():
            assert PLAINTEXT not in path.read_text(), path
    entries = await ws.audit(action="secret.decrypt")
    assert entries == []


async def test_a_pull_holds_only_what_the_principal_may_read(
    ws: AsyncWorkspace, tmp_path: Path
) -> None:
    await _fill(ws)
    await ws.add_folder("ops", summary="Operations")
    await ws.write("f/ops/region", "variable", "us-east-1")
    bo = await ws.acting_as("bo")
    report = await pull(bo, tmp_path / "bo")
    assert "f/ops/region.variable.yaml" not in report.files
    assert "f/ops/folder.meta.yaml" not in report.files
    assert "u/ada/notes.variable.yaml" not in report.files
    assert "f/support/folder.meta.yaml" in report.files
    assert not (tmp_path / "bo" / "f" / "ops").exists()


# --- push -------------------------------------------------------------------------------------


async def test_pull_then_push_reproduces_the_items_but_not_secret_values(
    ws: AsyncWorkspace, target: AsyncWorkspace, tmp_path: Path
) -> None:
    await _fill(ws)
    await pull(ws, tmp_path / "tree")
    await target.add_user("bo")
    # A pulled secret has no value: the target keeps its own.
    await target.add_folder("support", summary="old summary")
    await target.write("f/support/token", "variable", "the target's own", secret=True)
    plan = await push(target, tmp_path / "tree", message="copied")
    assert plan.applied
    changes = {change.path: change.change for change in plan.items}
    assert changes.pop("f/support/token") == "update"  # its summary
    assert set(changes.values()) == {"create"}
    assert [(f.folder, f.change, f.fields) for f in plan.folders] == [
        ("support", "update", ("summary", "roles"))
    ]

    def shape(items: list[Any]) -> list[tuple[Any, ...]]:
        return [(i.path, i.kind, i.summary, i.description, i.resource_type) for i in items]

    assert shape(await target.list(limit=100)) == shape(await ws.list(limit=100))
    for item in await ws.list(limit=100):
        copied = await target.get(item.path)
        if not item.secret:
            assert copied.value == (await ws.get(item.path)).value, item.path
    assert (await target.get("f/support/token", reveal=True)).value == "the target's own"
    folder = (await target.folders())[0]
    assert (folder.summary, folder.roles) == ("Customer support", {"bo": "viewer"})
    history = await target.history("f/support/greet")
    assert [(v.version, v.message) for v in history] == [(1, "copied")]
    audit = await target.audit(action="sync.push")
    assert {entry.path for entry in audit} == {i.path for i in await ws.list(limit=100)}


async def test_a_secret_without_value_and_nothing_stored_is_an_error(
    ws: AsyncWorkspace, target: AsyncWorkspace, tmp_path: Path
) -> None:
    await _fill(ws)
    await pull(ws, tmp_path / "tree")
    await target.add_user("bo")
    before = await _state(target)
    with pytest.raises(ConfigurationError, match="has no value and nothing is stored") as caught:
        await push(target, tmp_path / "tree")
    assert caught.value.message.startswith("f/support/token.variable.yaml: ")
    assert caught.value.context["file"] == "f/support/token.variable.yaml"
    assert await _state(target) == before


async def test_pushing_twice_changes_nothing_the_second_time(
    ws: AsyncWorkspace, tmp_path: Path
) -> None:
    await _fill(ws)
    root = tmp_path / "tree"
    await pull(ws, root)
    before = await _state(ws)
    plan = await push(ws, root)
    assert plan.counts() == {"create": 0, "update": 0, "unchanged": 9}
    assert plan.changes == ()
    assert await _state(ws) == before
    assert await ws.audit(action="sync.push") == []


async def test_pushing_a_directory_twice_into_an_empty_workspace(
    target: AsyncWorkspace, tmp_path: Path
) -> None:
    root = tmp_path / "tree"
    _write(root, "f/support/folder.meta.yaml", "summary: Support\n")
    _write(root, "f/support/greet.py", GREET)
    _write(root, "f/support/hello.flow.yaml", "summary: Say hello\n" + _flow_steps())
    _write(root, "f/support/token.variable.yaml", f"secret: true\nvalue: {PLAINTEXT}\n")
    _write(root, "f/support/t.resource_type.yaml", "schema: {type: object, title: T}\n")
    first = await push(target, root, message="one")
    assert first.counts() == {"create": 5, "update": 0, "unchanged": 0}
    second = await push(target, root, message="two")
    assert second.counts() == {"create": 0, "update": 0, "unchanged": 5}
    assert [v.message for v in await target.history("f/support/hello")] == ["one"]
    assert (await target.get("f/support/token", reveal=True)).value == PLAINTEXT
    assert (await target.get("f/support/t")).summary == "T"


def _flow_steps(script: str = "f/support/greet") -> str:
    return f"steps:\n  - id: greet\n    script: {{path: {script}}}\n    inputs: {{name: ada}}\n"


async def test_an_edited_file_is_one_update_and_one_new_version(
    ws: AsyncWorkspace, tmp_path: Path
) -> None:
    await _fill(ws)
    root = tmp_path / "tree"
    await pull(ws, root)
    script = root / "f/support/greet.py"
    script.write_text(GREET.replace('"hello "', '"hi "'))
    plan = await push(ws, root, message="shorter")
    updates = [change for change in plan.items if change.change == "update"]
    assert [(c.path, c.fields, c.file) for c in updates] == [
        ("f/support/greet", ("value",), "f/support/greet.py")
    ]
    assert '-    return "hello " + name' in updates[0].diff
    assert '+    return "hi " + name' in updates[0].diff
    assert updates[0].diff.startswith("--- f/support/greet@1\n+++ f/support/greet.py\n")
    history = await ws.history("f/support/greet")
    assert [(v.version, v.message) for v in history] == [(2, "shorter"), (1, "first")]
    assert [v.version for v in await ws.history("f/support/hello")] == [1]


async def test_a_long_diff_is_cut(ws: AsyncWorkspace, tmp_path: Path) -> None:
    await ws.add_folder("support")
    await ws.write("f/support/big", "variable", "\n".join(f"line {n}" for n in range(100)))
    root = tmp_path / "tree"
    await pull(ws, root)
    _write(
        root,
        "f/support/big.variable.yaml",
        "value: |\n" + "".join(f"  other {n}\n" for n in range(100)),
    )
    plan = await push(ws, root, dry_run=True)
    diff = plan.items[0].diff
    assert len(diff.splitlines()) == DIFF_LINES + 1
    assert diff.splitlines()[-1].endswith("more lines")


async def test_a_broken_file_changes_nothing(ws: AsyncWorkspace, tmp_path: Path) -> None:
    await _fill(ws)
    root = tmp_path / "tree"
    await pull(ws, root)
    (root / "f/support/greet.py").write_text(GREET.replace("hello", "hey"))
    _write(root, "f/support/extra.variable.yaml", "value: fine\n")
    _write(root, "f/support/region.variable.yaml", "value: eu-west-1\nsummary: a: b\n")
    before = await _state(ws)
    with pytest.raises(SyncFileError) as caught:
        await push(ws, root)
    assert (caught.value.file, caught.value.line) == ("f/support/region.variable.yaml", 2)
    assert "f/support/region.variable.yaml, line 2" in str(caught.value)
    assert await _state(ws) == before


async def test_a_flow_naming_a_missing_script_changes_nothing(
    ws: AsyncWorkspace, tmp_path: Path
) -> None:
    await _fill(ws)
    root = tmp_path / "tree"
    await pull(ws, root)
    (root / "f/support/greet.py").write_text(GREET.replace("hello", "hey"))
    _write(root, "f/support/extra.variable.yaml", "value: fine\n")
    _write(root, "f/support/broken.flow.yaml", _flow_steps("f/support/nothing_here"))
    before = await _state(ws)
    with pytest.raises(ConfigurationError) as caught:
        await push(ws, root)
    assert caught.value.message.startswith("f/support/broken.flow.yaml: ")
    assert "f/support/nothing_here" in caught.value.message
    assert await _state(ws) == before
    dry = await push(ws, root, dry_run=True)
    assert dry.problem is not None and "f/support/broken.flow.yaml" in dry.problem
    assert not dry.applied
    assert await _state(ws) == before


async def test_a_bad_resource_value_names_its_file(ws: AsyncWorkspace, tmp_path: Path) -> None:
    await ws.add_folder("ai")
    root = tmp_path / "tree"
    _write(root, "f/ai/llm.resource.yaml", "type: openai_compatible\nvalue: {api_key: plain}\n")
    with pytest.raises(ConfigurationError, match=r"^f/ai/llm\.resource\.yaml: "):
        await push(ws, root)
    assert await ws.list() == []


async def test_a_pushed_secret_file_without_value_keeps_the_stored_value(
    ws: AsyncWorkspace, tmp_path: Path
) -> None:
    await _fill(ws)
    root = tmp_path / "tree"
    await pull(ws, root)
    _write(root, "f/support/token.variable.yaml", "summary: The API key\nsecret: true\n")
    plan = await push(ws, root)
    change = next(c for c in plan.items if c.path == "f/support/token")
    assert (change.change, change.fields, change.diff) == ("update", ("summary",), "")
    token = await ws.get("f/support/token", reveal=True)
    assert (token.value, token.summary, token.secret) == (PLAINTEXT, "The API key", True)


async def test_a_pushed_secret_value_is_encrypted_and_never_shown(
    ws: AsyncWorkspace, tmp_path: Path
) -> None:
    await _fill(ws)
    root = tmp_path / "tree"
    await pull(ws, root)
    _write(root, "f/support/token.variable.yaml", "secret: true\nvalue: sk-new-one\n")
    _write(root, "f/support/other.variable.yaml", "secret: true\nvalue: sk-other\n")
    plan = await push(ws, root)
    shown = json.dumps(plan.to_dict())
    assert "sk-new-one" not in shown and PLAINTEXT not in shown and "sk-other" not in shown
    assert (await ws.get("f/support/token", reveal=True)).value == "sk-new-one"
    assert (await ws.get("f/support/other")).value is None

    def body(ctx: Any) -> str:
        stored = ctx.q.item("f/support/other")
        return str(stored.body)

    assert "sk-other" not in await ws.transact(body)
    again = await push(ws, root)
    assert again.changes == ()


async def test_a_dry_run_changes_nothing(ws: AsyncWorkspace, tmp_path: Path) -> None:
    await _fill(ws)
    root = tmp_path / "tree"
    await pull(ws, root)
    (root / "f/support/greet.py").write_text(GREET.replace("hello", "hey"))
    _write(root, "f/support/extra.variable.yaml", "value: fine\n")
    _write(root, "f/newfolder/folder.meta.yaml", "summary: New\n")
    before = await _state(ws)
    audit = await ws.audit()
    plan = await push(ws, root, dry_run=True)
    assert not plan.applied and plan.problem is None
    assert {(c.path, c.change) for c in plan.items if c.change != "unchanged"} == {
        ("f/support/greet", "update"),
        ("f/support/extra", "create"),
    }
    assert [(f.folder, f.change) for f in plan.folders] == [
        ("newfolder", "create"),
        ("support", "unchanged"),
    ]
    assert await _state(ws) == before
    assert await ws.audit() == audit


async def test_a_viewers_push_is_refused(ws: AsyncWorkspace, tmp_path: Path) -> None:
    await _fill(ws)
    bo = await ws.acting_as("bo")
    root = tmp_path / "tree"
    await pull(bo, root)
    unchanged = await push(bo, root)  # nothing to change: nothing to refuse
    assert unchanged.changes == ()
    (root / "f/support/greet.py").write_text(GREET.replace("hello", "hey"))
    before = await _state(ws)
    with pytest.raises(PermissionDenied) as caught:
        await push(bo, root)
    message = caught.value.message
    assert message.startswith("f/support/greet.py: ") and "f/support/greet" in message
    assert await _state(ws) == before
    dry = await push(bo, root, dry_run=True)
    assert dry.problem is not None and "may not write f/support/greet" in dry.problem


async def test_folders_need_an_admin(ws: AsyncWorkspace, tmp_path: Path) -> None:
    await _fill(ws)
    await ws.add_user("cy")
    await ws.grant("f/support", "cy", "writer")
    cy = await ws.acting_as("cy")
    root = tmp_path / "tree"
    _write(root, "f/ops/folder.meta.yaml", "summary: Ops\n")
    with pytest.raises(PermissionDenied, match=r"^f/ops/folder\.meta\.yaml: .*create the folder"):
        await push(cy, root)
    (root / "f/ops/folder.meta.yaml").unlink()
    _write(root, "f/support/folder.meta.yaml", "summary: Customer support\nroles: {cy: admin}\n")
    with pytest.raises(PermissionDenied, match=r"may not admin f/support"):
        await push(cy, root)
    plan = await push(ws, root)
    assert plan.folders[0].fields == ("roles",)
    assert (await ws.folders())[0].roles == {"cy": "admin"}  # bo's grant was revoked
    _write(root, "f/support/folder.meta.yaml", "summary: Customer support\n")
    assert (await push(ws, root)).changes == ()  # no roles: the grants stay


async def test_a_role_for_nobody_is_refused(ws: AsyncWorkspace, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    _write(root, "f/ops/folder.meta.yaml", "roles: {ghost: viewer}\n")
    with pytest.raises(Exception, match=r"f/ops/folder\.meta\.yaml: There is no user 'ghost'"):
        await push(ws, root)
    assert await ws.folders() == []


async def test_flows_may_include_scripts_and_flows_of_the_same_push(
    target: AsyncWorkspace, tmp_path: Path
) -> None:
    root = tmp_path / "tree"
    _write(root, "f/support/folder.meta.yaml", "summary: Support\n")
    _write(root, "f/support/greet.py", GREET)
    # `a_parent` sorts before `z_child`, which it includes: the push writes the child first.
    _write(root, "f/support/z_child.flow.yaml", _flow_steps())
    _write(
        root,
        "f/support/a_parent.flow.yaml",
        "steps:\n  - id: child\n    flow: f/support/z_child\n",
    )
    plan = await push(target, root)
    assert plan.counts()["create"] == 4
    run_plan = await target.run_plan("f/support/a_parent")
    assert set(run_plan.source["items"]) == {"f/support/z_child", "f/support/greet"}


async def test_a_kind_change_is_refused_naming_the_file(ws: AsyncWorkspace, tmp_path: Path) -> None:
    await ws.add_folder("support")
    await ws.write("f/support/greet", "variable", "x")
    root = tmp_path / "tree"
    _write(root, "f/support/greet.py", GREET)
    plan = await push(ws, root, dry_run=True)
    assert plan.items[0].fields[0] == "kind"
    assert plan.problem is not None and plan.problem.startswith("f/support/greet.py: ")
    with pytest.raises(Exception, match=r"^f/support/greet\.py: f/support/greet holds a variable"):
        await push(ws, root)


async def test_sync_methods_mixin(store_url: str, keyring: Keyring, tmp_path: Path) -> None:
    class _W(AsyncWorkspace, SyncMethods):
        pass

    ws = _W(store_url, user="ada", keyring=keyring, migrate=True)
    try:
        await ws.add_folder("ops")
        await ws.write("f/ops/region", "variable", "eu-west-1")
        report = await ws.pull(tmp_path / "tree")
        assert report.counts == {"folder": 1, "variable": 1}
        plan = await ws.push(tmp_path / "tree", dry_run=True)
        assert isinstance(plan, PushPlan) and plan.changes == ()
    finally:
        await ws.close()


# --- the example workspace ---------------------------------------------------------------------


async def test_the_example_workspace_pushes_into_a_fresh_workspace(
    target: AsyncWorkspace,
) -> None:
    plan = await push(target, EXAMPLE, message="the demo")
    assert plan.applied
    assert {(c.folder, c.change) for c in plan.folders} == {("ai", "create"), ("support", "create")}
    assert {c.path for c in plan.items} == {
        "f/ai/llm",
        "f/support/format_reply",
        "f/support/responder",
        "f/support/pay_refund",
        "f/support/refund",
        "f/support/triage",
    }
    assert all(c.change == "create" for c in plan.items)
    assert (await push(target, EXAMPLE)).changes == ()


def test_the_example_flow_runs_by_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tidemill.engine import Engine

    monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    url = f"sqlite:///{tmp_path}/demo.db"

    async def deploy() -> None:
        async with AsyncWorkspace(url, user="ada") as ws:
            await push(ws, EXAMPLE, message="the demo")

    asyncio.run(deploy())
    ticket = {"customer": "ada@example.com", "ticket": "My order A-1001 arrived broken."}
    with Engine(url) as engine, Workspace(url, user="ada") as ws, engine.worker():
        run = engine.submit_path(ws, "f/support/triage", ticket)
        result = run.wait(timeout=120)
        source = run.info().source
        linked = engine.linked_agents(run.id)
    assert result is not None and source is not None
    assert result["to"] == "ada@example.com"
    assert result["category"] in ("refund", "bug", "question")
    assert "A-1001" in result["body"]
    # The reply's script is read when the run starts; the answer's agent (and its
    # refund flow) when its step starts.
    assert set(source["items"]) == {"f/support/format_reply"}
    assert [(a["step_id"], a["path"], a["version"]) for a in linked] == [
        ("answer", "f/support/responder", 1)
    ]
