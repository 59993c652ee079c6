"""Items: every kind written and read, versions, restore, drafts, delete, list, search, refusals."""

from __future__ import annotations

from typing import Any

import pytest
from tests.workspace.conftest import FLOW, SCRIPT, SCRIPT_V2, Team

from tidemill.errors import (
    ConfigurationError,
    FlowValidationError,
    ItemNotFound,
    PermissionDenied,
    VersionConflict,
)
from tidemill.workspace import AsyncWorkspace, InvalidPath, InvalidValue, ItemKind

INLINE = [{"id": "a", "script": {"code": "def main():\n    return 1\n"}}]
RTYPE = {
    "type": "object",
    "title": "A mailbox",
    "properties": {"host": {"type": "string"}, "port": {"type": "integer", "minimum": 1}},
    "required": ["host"],
    "additionalProperties": False,
}

EVERY_KIND: list[tuple[ItemKind, str, Any, dict[str, Any], str]] = [
    ("script", "f/x/script", SCRIPT, {}, "Say hello."),
    ("flow", "f/x/flow", {"summary": "Nothing much", "steps": INLINE}, {}, "Nothing much"),
    ("resource_type", "f/x/mailbox", RTYPE, {}, "A mailbox"),
    ("resource", "f/x/mail", {"host": "mx", "port": 25}, {"resource_type": "f/x/mailbox"}, ""),
    ("variable", "f/x/region", "eu-west-1", {}, ""),
    ("variable", "f/x/key", "sk-1", {"secret": True}, ""),
    ("resource", "f/x/openai", {"api_key": "$var:f/x/key"}, {"resource_type": "openai"}, ""),
]


@pytest.fixture
async def x(ws: AsyncWorkspace) -> AsyncWorkspace:
    """A workspace with a folder `f/x`, as its admin."""
    await ws.add_folder("x")
    return ws


async def test_write_and_get_every_kind(x: AsyncWorkspace) -> None:
    for kind, path, value, options, summary in EVERY_KIND:
        written = await x.write(path, kind, value, message=f"a {kind}", **options)
        got = await x.get(path, reveal=True)
        assert (got.kind, got.path, got.value, got.summary) == (kind, path, value, summary)
        assert (
            got.version == written.version == (1 if kind in ("script", "flow", "resource") else 0)
        )
        assert got.updated_by == "ada" and got.updated_at > 0
        assert got.secret == bool(options.get("secret"))
        assert got.resource_type == options.get("resource_type")
    # A flow may be YAML text; it is stored as its document.
    text = "summary: From YAML\nsteps:\n  - id: a\n    script:\n      code: |\n" + (
        "        def main():\n            return 1\n"
    )
    flow = await x.write("f/x/yaml", "flow", text)
    assert (flow.value, flow.summary) == ({"summary": "From YAML", "steps": INLINE}, "From YAML")
    assert [i.path for i in await x.list("f/x/", kind="resource")] == ["f/x/mail", "f/x/openai"]


async def test_versions_restore_and_diff(x: AsyncWorkspace) -> None:
    await x.write("f/x/s", "script", SCRIPT, message="one")
    await x.write("f/x/s", "script", SCRIPT_V2, message="two")
    history = await x.history("f/x/s")
    assert [(v.version, v.message, v.created_by) for v in history] == [
        (2, "two", "ada"),
        (1, "one", "ada"),
    ]
    assert history[0].created_at >= history[1].created_at > 0
    assert (await x.get("f/x/s", version=1)).value == SCRIPT
    diff = await x.diff("f/x/s", 1)
    assert "-    return 'hello ' + name" in diff and "+    return 'HELLO ' + name" in diff
    assert "f/x/s@1" in diff and "f/x/s@2" in diff
    restored = await x.restore("f/x/s", 1)
    assert (restored.version, restored.value) == (3, SCRIPT)  # forward, not back
    assert (await x.get("f/x/s")).value == SCRIPT
    assert (await x.history("f/x/s"))[0].message == "restore version 1"
    with pytest.raises(ItemNotFound):
        await x.restore("f/x/s", 9)
    with pytest.raises(ItemNotFound):
        await x.get("f/x/s", version=9)


async def test_at_most_100_superseded_versions_are_kept(x: AsyncWorkspace) -> None:
    await x.write("f/x/rt", "resource_type", {"type": "object"})
    for n in range(1, 106):
        await x.write("f/x/v", "resource", {"h": n}, resource_type="f/x/rt", message=str(n))
    history = await x.history("f/x/v")
    assert len(history) == 101
    assert (history[0].version, history[-1].version) == (105, 5)
    assert (history[-1].value, history[-1].message) == ({"h": 5}, "5")
    with pytest.raises(ItemNotFound):
        await x.get("f/x/v", version=4)
    assert await x.clear_history("f/x/v") == 100
    assert [v.version for v in await x.history("f/x/v")] == [105]
    assert (await x.write("f/x/v", "resource", {"h": 106}, resource_type="f/x/rt")).version == 106


async def test_clear_history_keeps_only_the_current_version(x: AsyncWorkspace) -> None:
    for code in (SCRIPT, SCRIPT_V2, SCRIPT):
        await x.write("f/x/s", "script", code)
    assert await x.clear_history("f/x/s") == 2
    history = await x.history("f/x/s")
    assert [v.version for v in history] == [3]
    assert (await x.get("f/x/s")).version == 3
    assert await x.clear_history("f/x/s") == 0
    assert (await x.write("f/x/s", "script", SCRIPT_V2)).version == 4


async def test_drafts_change_nothing_until_deployed(team: Team) -> None:
    draft = await team.olga.save_draft("f/team/script", "script", SCRIPT)
    assert (draft.owner, draft.value, draft.summary) == ("olga", SCRIPT, "Say hello.")
    for reader in (team.ada, team.olga, team.vic):
        assert (await reader.get("f/team/script")).value == SCRIPT_V2
    assert [d.path for d in await team.olga.drafts()] == ["f/team/script"]
    assert (await team.olga.draft("f/team/script")).value == SCRIPT
    deployed = await team.olga.deploy("f/team/script", message="from the draft")
    assert (deployed.version, deployed.value, deployed.updated_by) == (3, SCRIPT, "olga")
    assert (await team.vic.get("f/team/script")).value == SCRIPT
    assert (await team.ada.history("f/team/script"))[0].message == "from the draft"
    with pytest.raises(ItemNotFound):
        await team.olga.draft("f/team/script")
    with pytest.raises(ItemNotFound):
        await team.olga.deploy("f/team/script")
    # A draft of a new item, discarded.
    await team.olga.save_draft("f/team/new", "script", SCRIPT)
    with pytest.raises(ItemNotFound):
        await team.olga.get("f/team/new")
    await team.olga.discard_draft("f/team/new")
    assert await team.olga.drafts() == []


async def test_delete_keeps_history_and_a_rewrite_continues_the_numbers(x: AsyncWorkspace) -> None:
    await x.write("f/x/s", "script", SCRIPT)
    await x.write("f/x/s", "script", SCRIPT_V2)
    await x.delete("f/x/s")
    with pytest.raises(ItemNotFound):
        await x.get("f/x/s")
    with pytest.raises(ItemNotFound):
        await x.delete("f/x/s")
    assert [v.version for v in await x.history("f/x/s")] == [2, 1]
    assert (await x.get("f/x/s", version=1)).value == SCRIPT
    assert await x.list("f/x/") == []
    listed = await x.list("f/x/", deleted=True)
    assert [(i.path, i.deleted) for i in listed] == [("f/x/s", True)]
    again = await x.write("f/x/s", "script", SCRIPT)
    assert again.version == 3 and not again.deleted
    assert [v.version for v in await x.history("f/x/s")] == [3, 2, 1]


async def test_a_deleted_path_may_take_another_kind_and_back(x: AsyncWorkspace) -> None:
    await x.write("f/x/s", "script", SCRIPT)
    await x.delete("f/x/s")
    await x.write("f/x/s", "variable", "now a variable")
    await x.delete("f/x/s")
    # A script again: its versions continue after the ones kept in history.
    again = await x.write("f/x/s", "script", SCRIPT_V2)
    assert again.version == 2
    assert [v.version for v in await x.history("f/x/s")] == [2, 1]


async def test_base_version_and_kind_conflicts(x: AsyncWorkspace) -> None:
    await x.write("f/x/s", "script", SCRIPT, base_version=0)
    with pytest.raises(VersionConflict, match="at version 1, not 0"):
        await x.write("f/x/s", "script", SCRIPT_V2, base_version=0)
    assert (await x.write("f/x/s", "script", SCRIPT_V2, base_version=1)).version == 2
    with pytest.raises(VersionConflict, match="f/x/s holds a script, not a variable"):
        await x.write("f/x/s", "variable", "text")
    assert (await x.get("f/x/s")).kind == "script"


async def test_list_pages_by_path(x: AsyncWorkspace) -> None:
    expected = sorted(f"f/x/item{n:03d}" for n in range(250))
    await x.add_folder("y")
    for path in expected:
        await x.write(path, "variable", path)
    await x.write("f/y/other", "variable", "not under f/x/")
    pages: list[list[str]] = []
    after: str | None = None
    while True:
        page = [i.path for i in await x.list("f/x/", after=after, limit=100)]
        if not page:
            break
        pages.append(page)
        after = page[-1]
    assert [len(page) for page in pages] == [100, 100, 50]
    assert [path for page in pages for path in page] == expected
    assert all(i.value is None for i in await x.list("f/x/", limit=3))
    with pytest.raises(ConfigurationError):
        await x.list("f/x/", limit=0)


async def test_list_takes_an_underscore_literally(ws: AsyncWorkspace) -> None:
    for folder in ("a_b", "axb", "a_bc"):
        await ws.add_folder(folder)
        await ws.write(f"f/{folder}/v", "variable", folder)
    assert [i.path for i in await ws.list("f/a_b/")] == ["f/a_b/v"]
    assert [i.path for i in await ws.list("f/a_b")] == ["f/a_b/v", "f/a_bc/v"]
    assert [i.path for i in await ws.list("f/axb/")] == ["f/axb/v"]
    assert await ws.list("f/a%") == []


async def test_search_tolerates_typos_and_filters_by_permission(team: Team) -> None:
    await team.max.write("u/max/greeter", "script", SCRIPT, summary="Greet the customer")
    hits = await team.ada.search("helo")
    assert hits[0].path == "f/team/script"
    assert "u/max/greeter" in [h.path for h in await team.ada.search("greet custmer")]
    vic = [h.path for h in await team.vic.search("greet")]
    assert "f/team/flow" in vic and "u/max/greeter" not in vic
    mine = [h.path for h in await team.max.search("greet")]
    assert "u/max/greeter" in mine and not [p for p in mine if p.startswith("f/team/")]
    assert [h.kind for h in await team.ada.search("greet", kinds=["flow"])] == ["flow"]
    # The index follows changes.
    await team.ada.delete("f/team/flow")
    assert "f/team/flow" not in [h.path for h in await team.ada.search("greet someone")]


@pytest.mark.parametrize(
    "bad",
    [
        "f/Team/x",
        "f/x/../y",
        "f/x/a b",
        "f/x",
        "f/x/",
        "x/y/z",
        "",
        "f/x/" + "/".join(["a" * 9] * 30),
    ],
)
async def test_bad_paths_are_refused_with_the_expected_shape(x: AsyncWorkspace, bad: str) -> None:
    with pytest.raises(InvalidPath) as caught:
        await x.write(bad, "variable", "v")
    message = str(caught.value)
    assert repr(bad) in message
    assert "u/<user>/<name> or f/<folder>/<name>" in message
    for call in (x.get(bad), x.history(bad), x.delete(bad), x.draft(bad)):
        with pytest.raises(InvalidPath):
            await call


async def test_a_script_must_define_main(x: AsyncWorkspace) -> None:
    with pytest.raises(ConfigurationError) as caught:
        await x.write("f/x/s", "script", "'''No main.'''\nx = 1\n")
    assert "f/x/s" in str(caught.value) and "main" in str(caught.value)
    with pytest.raises(ConfigurationError, match=r"Script f/x/s, line 3: syntax error"):
        await x.write("f/x/s", "script", "'''Broken.'''\ndef main():\n    return (\n")
    with pytest.raises(ItemNotFound):
        await x.get("f/x/s")


async def test_a_flow_naming_a_missing_script(x: AsyncWorkspace) -> None:
    flow = {"steps": [{"id": "a", "script": {"path": "f/x/missing"}}]}
    with pytest.raises(FlowValidationError) as caught:
        await x.write("f/x/flow", "flow", flow)
    assert "f/x/missing" in str(caught.value) and "step 'a'" in str(caught.value)
    sub = {"steps": [{"id": "b", "flow": "f/x/nothing"}]}
    with pytest.raises(FlowValidationError, match="f/x/nothing"):
        await x.write("f/x/flow", "flow", sub)
    with pytest.raises(InvalidValue):
        await x.write("f/x/flow", "flow", "- not\n- a mapping\n")
    await x.write("f/x/script", "script", SCRIPT)
    assert (await x.write("f/x/flow", "flow", {**FLOW, "steps": [
        {"id": "a", "script": {"path": "f/x/script"}, "inputs": {"name": "n"}}
    ]})).version == 1  # fmt: skip


async def test_a_resource_failing_its_schema_lists_every_problem(x: AsyncWorkspace) -> None:
    await x.write("f/x/mailbox", "resource_type", RTYPE)
    with pytest.raises(InvalidValue) as caught:
        await x.write("f/x/mail", "resource", {"port": 0, "extra": 1}, resource_type="f/x/mailbox")
    problems = caught.value.problems
    assert len(problems) == 3, problems
    assert any("host" in p for p in problems) and any("$.port" in p for p in problems)
    assert any("extra" in p for p in problems)
    with pytest.raises(InvalidValue, match="no resource type f/x/none"):
        await x.write("f/x/mail", "resource", {}, resource_type="f/x/none")
    with pytest.raises(InvalidValue, match="needs a type"):
        await x.write("f/x/mail", "resource", {"host": "h"})
    with pytest.raises(InvalidValue):
        await x.write("f/x/bad", "resource_type", {"type": 5})


async def test_writing_needs_an_existing_owner(ws: AsyncWorkspace) -> None:
    with pytest.raises(ItemNotFound, match="no folder 'nope'"):
        await ws.write("f/nope/x", "variable", "v")
    with pytest.raises(ItemNotFound, match="no user 'nobody'"):
        await ws.write("u/nobody/x", "variable", "v")
    assert (await ws.write("u/ada/x", "variable", "v")).path == "u/ada/x"
    await ws.add_user("max")
    as_max = await ws.acting_as("max")
    with pytest.raises(PermissionDenied):
        await as_max.write("u/ada/x", "variable", "mine now")
