"""The sync directory format: `read_tree`, `write_tree` and `item_file`."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from tidemill.errors import ConfigurationError
from tidemill.workspace._tree import (
    MAX_FILE_BYTES,
    FolderMeta,
    SyncFileError,
    Tree,
    TreeItem,
    item_file,
    read_tree,
    write_tree,
)

SCRIPT = '''"""Refund an order.

Calls the payments API; idempotent.
"""


def main(order_id: str) -> dict[str, str]:
    return {"refunded": order_id}
'''

ITEMS = (
    TreeItem(
        "f/support/agents/triage",
        "flow",
        {"name": "triage", "steps": [{"id": "a", "prompt": "Réponds en français.\nMerci ✓"}]},
        summary="Sort tickets 🎫",
        description="Routes each ticket.\nTwo lines.",
    ),
    TreeItem(
        "f/support/refund",
        "script",
        SCRIPT,
        summary="Refund an order.",
        description="Calls the payments API; idempotent.",
    ),
    TreeItem(
        "f/support/db",
        "resource",
        {"host": "db.internal", "port": 5432},
        summary="The database",
        resource_type="postgresql",
    ),
    TreeItem(
        "f/support/helper",
        "resource",
        {"model": "openai:gpt-4o", "instructions": "Be brief."},
        summary="A helper agent",
        resource_type="ai_agent",
    ),
    TreeItem("f/support/region", "variable", "eu-west-1", description="Where we run"),
    TreeItem("f/support/token", "variable", None, summary="API token", secret=True),
    TreeItem("f/support/known", "variable", "s3cr3t", secret=True),
    TreeItem(
        "f/support/types/ticket",
        "resource_type",
        {"type": "object", "properties": {"id": {"type": "string"}}},
        summary="A ticket",
    ),
    TreeItem("u/alice/notes", "flow", {"steps": []}),
    TreeItem("u/alice/deep/er/thing", "variable", "ünïcödé"),
)
FOLDERS = (
    FolderMeta("ops", roles={"g/oncall": "admin"}),
    FolderMeta("support", summary="Customer support", roles={"alice": "writer", "g/ops": "viewer"}),
)


def _without_file(tree: Tree) -> Tree:
    return Tree(
        items=tuple(dataclasses.replace(item, file="") for item in tree.items),
        folders=tuple(dataclasses.replace(meta, file="") for meta in tree.folders),
    )


def _read_error(root: Path) -> SyncFileError:
    with pytest.raises(SyncFileError) as caught:
        read_tree(root)
    return caught.value


def _write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


# --- round trips -----------------------------------------------------------------------------


def test_every_kind_round_trips(tmp_path: Path) -> None:
    tree = Tree(items=ITEMS, folders=FOLDERS)
    written = write_tree(tmp_path, tree)
    assert written == sorted(
        [item_file(item) for item in ITEMS]
        + ["f/ops/folder.meta.yaml", "f/support/folder.meta.yaml"]
    )
    read = read_tree(tmp_path)
    assert _without_file(read) == Tree(
        items=tuple(sorted(ITEMS, key=lambda item: item.path)), folders=FOLDERS
    )
    assert all(item.file == item_file(item) for item in read.items)
    assert [meta.file for meta in read.folders] == [
        "f/ops/folder.meta.yaml",
        "f/support/folder.meta.yaml",
    ]
    # Writing what was read gives the same files, byte for byte.
    again = tmp_path / "again"
    write_tree(again, read)
    for file in written:
        assert (again / file).read_bytes() == (tmp_path / file).read_bytes()


def test_files_are_laid_out_and_readable(tmp_path: Path) -> None:
    write_tree(tmp_path, Tree(items=ITEMS, folders=FOLDERS))
    assert (tmp_path / "f/support/refund.py").read_text() == SCRIPT
    assert (tmp_path / "f/support/token.variable.yaml").read_text() == (
        "summary: API token\nsecret: true\n"
    )
    assert (tmp_path / "f/support/region.variable.yaml").read_text() == (
        "description: Where we run\nsecret: false\nvalue: eu-west-1\n"
    )
    assert (tmp_path / "f/support/db.resource.yaml").read_text() == (
        "summary: The database\ntype: postgresql\nvalue:\n  host: db.internal\n  port: 5432\n"
    )
    assert (tmp_path / "f/support/helper.agent.yaml").read_text() == (
        "summary: A helper agent\nmodel: openai:gpt-4o\ninstructions: Be brief.\n"
    )
    flow = (tmp_path / "f/support/agents/triage.flow.yaml").read_text(encoding="utf-8")
    assert flow.startswith("summary: Sort tickets 🎫\ndescription: |-\n  Routes each ticket.\n")
    assert "prompt: |-\n    Réponds en français.\n    Merci ✓\n" in flow
    assert (tmp_path / "f/support/folder.meta.yaml").read_text() == (
        "summary: Customer support\nroles:\n  alice: writer\n  g/ops: viewer\n"
    )


def test_flow_keys_keep_their_order_and_dates_stay_strings(tmp_path: Path) -> None:
    value = {"steps": [], "name": "z", "input": {"b": 1, "a": 2}, "since": "2024-01-01"}
    write_tree(tmp_path, Tree(items=(TreeItem("f/x/y", "flow", value),)))
    text = (tmp_path / "f/x/y.flow.yaml").read_text()
    assert text == "steps: []\nname: z\ninput:\n  b: 1\n  a: 2\nsince: '2024-01-01'\n"
    _write(tmp_path, {"f/x/z.flow.yaml": "when: 2024-01-01\n"})
    items = {item.path: item for item in read_tree(tmp_path).items}
    assert items["f/x/y"].value == value
    assert items["f/x/z"].value == {"when": "2024-01-01"}


def test_script_summary_and_description_come_from_its_docstring(tmp_path: Path) -> None:
    _write(tmp_path, {"f/a/s.py": SCRIPT, "f/a/bare.py": "x = 1\n"})
    items = {item.path: item for item in read_tree(tmp_path).items}
    assert items["f/a/s"].summary == "Refund an order."
    assert items["f/a/s"].description == "Calls the payments API; idempotent."
    assert items["f/a/s"].value == SCRIPT
    assert (items["f/a/bare"].summary, items["f/a/bare"].description) == ("", "")


def test_agent_files_are_ai_agent_resources(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {"f/a/bot.agent.yaml": "summary: Bot\ndescription: Helps\nmodel: m\ntools: []\n"},
    )
    (item,) = read_tree(tmp_path).items
    assert (item.path, item.kind, item.resource_type) == ("f/a/bot", "resource", "ai_agent")
    assert item.value == {"model": "m", "tools": []}
    assert (item.summary, item.description) == ("Bot", "Helps")


def test_only_f_and_u_are_read_and_dotfiles_are_ignored(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "README.md": "# hello",
            ".gitignore": "*.pyc",
            "other/thing.txt": "ignored",
            ".git/config": "[core]",
            "f/a/.DS_Store": b"\x00\xff",
            "f/a/.hidden/x.txt": "ignored",
            "f/a/__pycache__/s.cpython-311.pyc": b"\x00",
            "f/a/s.py": "x = 1\n",
        },
    )
    assert [item.path for item in read_tree(tmp_path).items] == ["f/a/s"]


def test_an_empty_directory_is_an_empty_tree(tmp_path: Path) -> None:
    assert read_tree(tmp_path) == Tree()


def test_an_ai_agent_value_holding_a_summary_goes_to_a_resource_file() -> None:
    item = TreeItem("f/a/b", "resource", {"summary": "x"}, resource_type="ai_agent")
    assert item_file(item) == "f/a/b.resource.yaml"


# --- broken files ----------------------------------------------------------------------------

BROKEN = [
    # (file, content, line, part of the message)
    ("f/a/x.flow.yaml", "steps: []\nsummary: a: b\n", 2, "mapping values are not allowed"),
    ("f/a/x.flow.yaml", "a: 1\nb: 2\na: 3\n", 3, "found the key 'a' twice"),
    ("f/a/x.flow.yaml", "- 1\n- 2\n", 1, "the file is a list: it must be a mapping"),
    ("f/a/x.flow.yaml", "", None, "the file is empty"),
    ("f/a/x.flow.yaml", "steps: []\nsummary: [1]\n", 2, "summary must be a string"),
    ("f/a/x.flow.yaml", "steps: !!python/object:os.system []\n", 1, "could not determine"),
    ("f/a/notes.txt", "hello", None, "unknown kind of file"),
    ("f/a/x.yml", "a: 1", None, "unknown kind of file"),
    ("f/Support/x.flow.yaml", "a: 1", None, "'Support' is not a valid name"),
    ("f/a/My Flow.flow.yaml", "a: 1", None, "'My Flow' is not a valid name"),
    ("f/a/x.y.flow.yaml", "a: 1", None, "'x.y' is not a valid name"),
    ("f/a/" + "n" * 65 + ".py", "x = 1", None, "is not a valid name"),
    ("f/x.py", "x = 1", None, "files belong in f/<folder>/"),
    ("u/x.flow.yaml", "a: 1", None, "files belong in u/<user>/"),
    ("f/a/db.resource.yaml", "summary: s\nvalue: {}\n", 1, "type is missing"),
    ("f/a/db.resource.yaml", "type: pg\nvalue: [1]\n", 2, "value must be a mapping, not list"),
    ("f/a/db.resource.yaml", "type: pg\n", 1, "value is missing"),
    ("f/a/db.resource.yaml", "value: {}\ntype: 3\n", 2, "type must be a resource type's name"),
    ("f/a/v.variable.yaml", "value: x\nsecret: 'true'\n", 2, "secret must be true or false"),
    (
        "f/a/v.variable.yaml",
        "summary: s\nvalue: 42\n",
        2,
        'must be a string, not int: quote it ("42")',
    ),
    ("f/a/v.variable.yaml", "secret: false\n", 1, "only a secret variable may leave it out"),
    ("f/a/v.variable.yaml", "value: x\nsecert: true\n", 2, "unknown key 'secert'"),
    ("f/a/t.resource_type.yaml", "summary: s\nschema: [1]\n", 2, "schema must be a mapping"),
    ("f/a/t.resource_type.yaml", "summary: s\n", 1, "schema is missing"),
    ("f/a/folder.meta.yaml", "summary: s\nroles:\n  bo: owner\n", 3, "viewer, writer, admin"),
    ("f/a/folder.meta.yaml", "roles:\n  ok: viewer\n  Bad Guy: viewer\n", 3, "neither a user"),
    ("f/a/folder.meta.yaml", "roles: [alice]\n", 1, "roles must be a mapping"),
    ("f/a/folder.meta.yaml", "summary: s\nowner: bo\n", 2, "unknown key 'owner'"),
    ("u/alice/folder.meta.yaml", "summary: s\n", None, "belongs directly in f/<folder>/"),
    ("f/a/b/folder.meta.yaml", "summary: s\n", None, "belongs directly in f/<folder>/"),
    ("f/a/s.py", "x = 1\ndef f(:\n    pass\n", 2, "invalid Python"),
    ("f/a/s.py", "x = 1\0\n", None, "invalid Python"),
    ("f/a/s.py", b"x = 1\ny = '\xff'\n", 2, "not UTF-8"),
    ("f/a/x.flow.yaml", b"a: 1\nb: \xc3\x28\n", 2, "not UTF-8"),
]


@pytest.mark.parametrize(("file", "content", "line", "message"), BROKEN)
def test_a_broken_file_is_named_with_its_line(
    tmp_path: Path, file: str, content: str | bytes, line: int | None, message: str
) -> None:
    _write(tmp_path, {file: content, "f/a/fine.py": "x = 1\n"})
    error = _read_error(tmp_path)
    assert (error.file, error.line) == (file, line)
    assert message in error.problem
    assert len(error.problems) == 1
    where = f"{file}, line {line}: " if line else f"{file}: "
    assert error.message == where + error.problem
    assert error.hint == "Fix the file and push again; nothing was changed."
    assert isinstance(error, ConfigurationError)


def test_a_file_over_one_mebibyte_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, {"f/a/big.flow.yaml": "a: '" + "x" * MAX_FILE_BYTES + "'\n"})
    error = _read_error(tmp_path)
    assert (error.file, error.line) == ("f/a/big.flow.yaml", None)
    assert "bigger than 1 MiB" in error.problem


def test_two_files_for_one_item_are_both_named(tmp_path: Path) -> None:
    _write(tmp_path, {"f/a/x.flow.yaml": "steps: []\n", "f/a/x.py": "x = 1\n"})
    error = _read_error(tmp_path)
    assert error.file == "f/a/x.py"
    assert "f/a/x.flow.yaml and f/a/x.py both define f/a/x" in error.problem


def test_symlinks_leading_outside_are_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    _write(outside, {"secret.flow.yaml": "steps: []\n", "dir/x.py": "x = 1\n"})
    _write(root, {"f/a/real.py": "x = 1\n"})
    (root / "f/a/stolen.flow.yaml").symlink_to(outside / "secret.flow.yaml")
    (root / "f/b").symlink_to(outside / "dir")
    (root / "f/a/alias.py").symlink_to(root / "f/a/real.py")  # inside: read as a file
    (root / "f/a/inner").symlink_to(root / "f/a", target_is_directory=True)
    (root / "f/a/gone.py").symlink_to(root / "nowhere.py")
    error = _read_error(root)
    assert [(file, text) for file, _line, text in error.problems] == [
        ("f/a/gone.py", "a broken symlink"),
        ("f/a/inner", "a symlink to a directory, which is not followed"),
        ("f/a/stolen.flow.yaml", "a symlink leading outside the directory"),
        ("f/b", "a symlink leading outside the directory"),
    ]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_is_refused_without_reading_it(tmp_path: Path) -> None:
    (tmp_path / "f/a").mkdir(parents=True)
    os.mkfifo(tmp_path / "f/a/pipe.py")
    error = _read_error(tmp_path)
    assert (error.file, error.problem) == ("f/a/pipe.py", "not a regular file")


def test_every_broken_file_is_reported_together(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "f/a/ok.flow.yaml": "steps: []\n",
            "f/a/bad.flow.yaml": "a: [\n",
            "f/a/db.resource.yaml": "value: 3\n",
            "u/bo/s.py": "def (:\n",
            "f/a/notes.txt": "",
        },
    )
    error = _read_error(tmp_path)
    files = [file for file, _line, _text in error.problems]
    assert files == [
        "f/a/bad.flow.yaml",
        "f/a/db.resource.yaml",
        "f/a/db.resource.yaml",
        "f/a/notes.txt",
        "u/bo/s.py",
    ]
    assert error.message.startswith("f/a/bad.flow.yaml, line 2: ")
    assert error.message.endswith("; and 4 more problems")
    assert error.hint == "Fix the files and push again; nothing was changed."
    context = json.loads(json.dumps(error.context))
    assert context["problems"][-1] == {
        "file": "u/bo/s.py",
        "line": 1,
        "problem": "invalid Python: invalid syntax",
    }


def test_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    error = _read_error(tmp_path / "nope")
    assert error.problem == "no such directory"


# --- writing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (TreeItem("f/../x", "flow", {}), "'..' is not a valid name"),
        (TreeItem("f/a", "flow", {}), "an item path is f/<folder>/<name>"),
        (TreeItem("x/a/b", "flow", {}), "an item path is f/<folder>/<name>"),
        (TreeItem("f/A/b", "flow", {}), "'A' is not a valid name"),
        (TreeItem("f/a/" + "b/" * 130 + "c", "flow", {}), "longer than 255"),
        (TreeItem("f/a/b", "agent", {}), "unknown kind 'agent'"),  # type: ignore[arg-type]
    ],
)
def test_item_file_refuses_bad_items(item: TreeItem, message: str) -> None:
    with pytest.raises(SyncFileError) as caught:
        item_file(item)
    assert message in caught.value.problem


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (TreeItem("f/a/s", "script", {"code": 1}), "a script cannot have a value of type dict"),
        (TreeItem("f/a/v", "variable", 42), "a variable cannot have a value of type int"),
        (TreeItem("f/a/f", "flow", "steps: []"), "a flow cannot have a value of type str"),
        (TreeItem("f/a/r", "resource", {}), "a resource needs a resource_type"),
        (TreeItem("f/a/f", "flow", {"summary": "s"}), "holds summary or description"),
        (TreeItem("f/a/f", "flow", {"when": object()}), "cannot be written as YAML"),
    ],
)
def test_write_tree_refuses_bad_values_and_writes_nothing(
    tmp_path: Path, item: TreeItem, message: str
) -> None:
    good = TreeItem("f/a/good", "flow", {"steps": []})
    with pytest.raises(SyncFileError) as caught:
        write_tree(tmp_path, Tree(items=(good, item)))
    assert message in caught.value.problem
    assert caught.value.file == item.path
    assert list(tmp_path.iterdir()) == []


def test_write_tree_refuses_bad_folders_and_items_in_one_file(tmp_path: Path) -> None:
    tree = Tree(
        items=(TreeItem("f/a/x", "flow", {}), TreeItem("f/a/x", "flow", {"steps": []})),
        folders=(
            FolderMeta("Bad"),
            FolderMeta("twice"),
            FolderMeta("twice", summary="again"),
            FolderMeta("ok", roles={"bo": "owner", "Not Ok": "viewer"}),  # type: ignore[dict-item]
        ),
    )
    with pytest.raises(SyncFileError) as caught:
        write_tree(tmp_path, tree)
    assert [text for _file, _line, text in caught.value.problems] == [
        "'Bad' is not a valid name: use 1 to 64 of a-z, 0-9, '_', '-', first a letter or digit",
        "twice is written twice",
        "'Not Ok' is neither a user (alice) nor a group (g/ops)",
        "unknown role 'owner'",
        "f/a/x is written twice",
    ]
    assert list(tmp_path.iterdir()) == []


def test_write_tree_does_not_follow_a_symlink_outside(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "f").mkdir(parents=True)
    outside.mkdir()
    (root / "f/a").symlink_to(outside, target_is_directory=True)
    with pytest.raises(SyncFileError) as caught:
        write_tree(root, Tree(items=(TreeItem("f/a/x", "flow", {}),)))
    assert caught.value.problems == (
        ("f/a/x.flow.yaml", None, "a symlink leads outside the directory"),
    )
    assert list(outside.iterdir()) == []


def test_write_tree_overwrites_and_leaves_other_files(tmp_path: Path) -> None:
    _write(tmp_path, {"f/a/x.flow.yaml": "old: 1\n", "f/a/keep.py": "x = 1\n"})
    write_tree(tmp_path, Tree(items=(TreeItem("f/a/x", "flow", {"new": 2}),)))
    assert (tmp_path / "f/a/x.flow.yaml").read_text() == "new: 2\n"
    assert (tmp_path / "f/a/keep.py").exists()
