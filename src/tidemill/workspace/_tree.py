r"""The files of `tidemill sync pull DIR` and `tidemill sync push DIR` (no database here).

`read_tree` reads a directory into a `Tree` of records; `write_tree` writes one.
The layout is fixed:

```text
f/<folder>/folder.meta.yaml           summary, roles: {alice: writer, g/ops: viewer}
f/<folder>/<name>.flow.yaml           a flow: the flow document (any keys), with summary/description
f/<folder>/<name>.py                  a script; its module docstring's first line is its summary
f/<folder>/<name>.resource.yaml       {type: ..., value: {...}, summary: ..., description: ...}
f/<folder>/<name>.variable.yaml       {value: "...", secret: false, summary: ..., description: ...}
f/<folder>/<name>.resource_type.yaml  {schema: {...JSON Schema...}, summary: ..., description: ...}
f/<folder>/<name>.agent.yaml          a reusable agent: a resource of type "ai_agent"
u/<user>/...                          the same kinds, but no folder.meta.yaml
```

A name may nest: `f/support/agents/triage.flow.yaml` is the item `f/support/agents/triage`.
Each segment (folder, user, part of a name) matches `[a-z0-9][a-z0-9_-]{0,63}`; paths ≤ 255.

Rules:

- Only `f/` and `u/` are read: anything else at the root (a README, `.git`) is
  ignored, and so are dotfiles, dot-directories and `__pycache__` anywhere.
- In `roles`, a plain key is a user (`alice`) and `g/<group>` is a group.
- A script's summary is the first line of its module docstring, its
  description the rest; `write_tree` writes a script's code as it is.
- A variable's value must be a string (quote numbers: `value: "42"`). A secret
  pulled without its value has no `value` key and reads as `None`; only a
  secret may leave it out.
- Resource, variable, resource type and folder files take only their own keys:
  a misspelt `secert: true` is an error, not a public variable.
- A resource of type `ai_agent` whose value is a mapping is written as
  `<name>.agent.yaml` (the value's keys at the top), others as `.resource.yaml`.
- `read_tree` reads every file before it answers: broken files raise one
  `SyncFileError` listing every problem of every file, and nothing is returned.
  Symlinks leading outside the directory, symlinked directories, files over
  1 MiB and files that are not UTF-8 are problems too.
- `write_tree` writes only: it deletes no file, even one not in the tree.

Examples:
    >>> import shutil, tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> flow = TreeItem("f/support/triage", "flow", {"steps": []}, summary="Sort tickets")
    >>> write_tree(root, Tree(items=(flow,)))
    ['f/support/triage.flow.yaml']
    >>> print((root / "f/support/triage.flow.yaml").read_text(), end="")
    summary: Sort tickets
    steps: []
    >>> read_tree(root).items[0].summary
    'Sort tickets'
    >>> _ = (root / "f/support/bad.flow.yaml").write_text("steps: []\nsummary: a: b")
    >>> read_tree(root)
    Traceback (most recent call last):
    ...
    tidemill.workspace._tree.SyncFileError: f/support/bad.flow.yaml, line 2: mapping values ...
    >>> shutil.rmtree(root)
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import yaml

from tidemill.errors import ConfigurationError
from tidemill.flows._load import _Loader  # Dates stay strings; duplicate keys are errors.
from tidemill.workspace._models import KINDS, ROLES, ItemKind, Role
from tidemill.workspace._paths import NAME

__all__ = [
    "MAX_FILE_BYTES",
    "FolderMeta",
    "SyncFileError",
    "Tree",
    "TreeItem",
    "item_file",
    "read_tree",
    "write_tree",
]

Problem: TypeAlias = tuple[str, int | None, str]
Lines: TypeAlias = dict[tuple[Any, ...], int]

MAX_FILE_BYTES = 1024 * 1024  # Files bigger than this (1 MiB) are refused.

FOLDER_META = "folder.meta.yaml"
AGENT_TYPE = "ai_agent"
_YAMLKINDS = ("flow", "resource", "variable", "resource_type", "agent", "schedule")
_SUFFIXES = {".py": "script", **{f".{kind}.yaml": kind for kind in _YAMLKINDS}}
_TEXT_KEYS = ("summary", "description")
_BAD_NAME = "{!r} is not a valid name: use 1 to 64 of a-z, 0-9, '_', '-', first a letter or digit"
_TOO_LONG = "the item path is longer than 255 characters"


@dataclass(frozen=True, slots=True)
class TreeItem:
    """One workspace item, as read from or written to its file.

    Attributes:
        path: The workspace path, such as `"f/support/triage"`.
        kind: What the item is.
        value: A flow's mapping (without summary/description), a script's code,
            a resource's value mapping, a variable's value (`None` when a secret
            was pulled without it) or a resource type's schema.
        summary: One line saying what it is.
        description: More about it.
        resource_type: A resource's type; `None` for the other kinds.
        secret: Whether a variable is secret; `False` for the other kinds.
        file: The file it came from, relative to the root (set by `read_tree`).
    """

    path: str
    kind: ItemKind
    value: Any
    summary: str = ""
    description: str = ""
    resource_type: str | None = None
    secret: bool = False
    file: str = ""


@dataclass(frozen=True, slots=True)
class FolderMeta:
    """A folder's `folder.meta.yaml`.

    Attributes:
        folder: The folder's name, such as `"support"`.
        summary: One line saying what the folder holds.
        roles: Who may do what: a user (`"alice"`) or a group (`"g/ops"`) to its role.
        file: The file it came from, relative to the root (set by `read_tree`).
    """

    folder: str
    summary: str = ""
    roles: Mapping[str, Role] = field(default_factory=dict)
    file: str = ""


@dataclass(frozen=True, slots=True)
class Tree:
    """Everything a sync directory holds: items sorted by path, folders by name."""

    items: tuple[TreeItem, ...] = ()
    folders: tuple[FolderMeta, ...] = ()


class SyncFileError(ConfigurationError):
    """Files of a sync directory are broken, or a tree cannot be written; nothing was changed.

    Attributes:
        problems: Every problem, as `(file, line or None, message)`, in file order.
        file: The first problem's file.
        line: The first problem's line (from 1), when known.
        problem: The first problem's message.

    Examples:
        >>> error = SyncFileError([("f/a/x.flow.yaml", 3, "bad"), ("f/a/y.py", None, "worse")])
        >>> error.message
        'f/a/x.flow.yaml, line 3: bad; and 1 more problem'
    """

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.file, self.line, self.problem = self.problems[0]
        more = len(self.problems) - 1
        where = self.file if self.line is None else f"{self.file}, line {self.line}"
        tail = f"; and {more} more problem{'s' if more > 1 else ''}" if more else ""
        many = len({file for file, _line, _text in self.problems}) > 1
        super().__init__(
            f"{where}: {self.problem}{tail}",
            hint=f"Fix the file{'s' if many else ''} and push again; nothing was changed.",
            context={
                "problems": [{"file": f, "line": n, "problem": p} for f, n, p in self.problems]
            },
        )


def _type_name(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


class _Dumper(yaml.SafeDumper):
    """`SafeDumper` writing multi-line strings as `|` blocks, so diffs stay readable."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def _dump(data: Mapping[str, Any]) -> str:
    return yaml.dump(
        dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False
    )


def _parse_yaml(file: str, text: str, problems: list[Problem]) -> tuple[Any, Lines] | None:
    """Parse one YAML document, with the line (from 1) of it and of its keys two levels deep."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problems.append((file, mark.line + 1 if mark else None, exc.problem or str(exc)))
        return None
    except (yaml.YAMLError, RecursionError) as exc:
        problems.append((file, None, f"invalid YAML: {exc or 'nested too deeply'}"))
        return None
    finally:
        loader.dispose()
    lines: Lines = {} if node is None else {(): node.start_mark.line + 1}
    for key, value in node.value if isinstance(node, yaml.MappingNode) else ():
        if isinstance(key, yaml.ScalarNode):
            lines.setdefault((key.value,), key.start_mark.line + 1)
        for inner, _value in value.value if isinstance(value, yaml.MappingNode) else ():
            if isinstance(key, yaml.ScalarNode) and isinstance(inner, yaml.ScalarNode):
                lines.setdefault((key.value, inner.value), inner.start_mark.line + 1)
    return data, lines


class _Doc:
    """One parsed YAML file being checked: its data, its key lines, the problems found."""

    def __init__(self, file: str, data: dict[Any, Any], lines: Lines, problems: list[Problem]):
        self.file, self.data, self.lines, self.problems = file, data, lines, problems

    def problem(self, key: tuple[Any, ...], message: str) -> None:
        line = self.lines.get(key, self.lines.get(key[:1], self.lines.get(())))
        self.problems.append((self.file, line, message))

    def only(self, *allowed: str) -> None:
        for key in self.data:
            if key not in allowed:
                self.problem((key,), f"unknown key {key!r}: use {', '.join(allowed)}")

    def text(self, key: str) -> str:
        value = self.data.get(key)
        if value is not None and not isinstance(value, str):
            self.problem((key,), f"{key} must be a string, not {_type_name(value)}")
        return value if isinstance(value, str) else ""

    def mapping(self, key: str) -> dict[Any, Any]:
        value = self.data.get(key)
        if key not in self.data:
            self.problem((), f"{key} is missing: it must be a mapping")
        elif not isinstance(value, dict):
            self.problem((key,), f"{key} must be a mapping, not {_type_name(value)}")
        return value if isinstance(value, dict) else {}

    def common(self, path: str) -> dict[str, Any]:
        texts = {key: self.text(key) for key in _TEXT_KEYS}
        return {"path": path, "file": self.file, **texts}

    def rest(self) -> dict[Any, Any]:
        return {key: value for key, value in self.data.items() if key not in _TEXT_KEYS}


def _who_problem(who: Any) -> str | None:
    name = who[2:] if isinstance(who, str) and who.startswith("g/") else who
    if isinstance(name, str) and NAME.fullmatch(name):
        return None
    return f"{who!r} is neither a user (alice) nor a group (g/ops)"


def _folder_meta(doc: _Doc, folder: str) -> FolderMeta:
    doc.only("summary", "roles")
    roles: dict[str, Role] = {}
    given = doc.data.get("roles")
    if given is not None and not isinstance(given, dict):
        doc.problem(("roles",), f"roles must be a mapping, not {_type_name(given)}")
    for who, role in given.items() if isinstance(given, dict) else ():
        problem = _who_problem(who)
        if problem is None and role not in ROLES:
            problem = f"unknown role {role!r} for {who!r}: use {', '.join(ROLES)}"
        if problem is None:
            roles[who] = role
        else:
            doc.problem(("roles", who), problem)
    return FolderMeta(folder, summary=doc.text("summary"), roles=roles, file=doc.file)


def _resource(doc: _Doc, path: str) -> TreeItem:
    doc.only("type", "value", *_TEXT_KEYS)
    type_ = doc.data.get("type")
    if "type" not in doc.data:
        doc.problem((), "type is missing: name the resource type")
    elif not isinstance(type_, str) or not type_:
        doc.problem(("type",), f"type must be a resource type's name, not {type_!r}")
    kept = type_ if isinstance(type_, str) else None
    return TreeItem(
        kind="resource", value=doc.mapping("value"), resource_type=kept, **doc.common(path)
    )


def _variable(doc: _Doc, path: str) -> TreeItem:
    doc.only("value", "secret", *_TEXT_KEYS)
    secret = doc.data.get("secret", False)
    if not isinstance(secret, bool):
        doc.problem(("secret",), f"secret must be true or false, not {secret!r}")
        secret = True  # Never treat a doubtful variable as public.
    value = doc.data.get("value")
    if value is not None and not isinstance(value, str):
        message = f'value must be a string, not {_type_name(value)}: quote it ("{value}")'
        doc.problem(("value",), message)
    elif value is None and not secret:
        doc.problem(("value",), "value is missing: only a secret variable may leave it out")
    return TreeItem(kind="variable", value=value, secret=secret, **doc.common(path))


_READERS: dict[str, Callable[[_Doc, str], TreeItem]] = {
    "flow": lambda doc, path: TreeItem(kind="flow", value=doc.rest(), **doc.common(path)),
    "agent": lambda doc, path: TreeItem(
        kind="resource", value=doc.rest(), resource_type=AGENT_TYPE, **doc.common(path)
    ),
    "resource": _resource,
    "variable": _variable,
    "resource_type": lambda doc, path: TreeItem(
        kind="resource_type", value=doc.mapping("schema"), **doc.common(path)
    ),
    "schedule": lambda doc, path: TreeItem(kind="schedule", value=doc.rest(), **doc.common(path)),
}


def _script(file: str, path: str, text: str, problems: list[Problem]) -> TreeItem | None:
    try:
        module = ast.parse(text, filename=file)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line, message = getattr(exc, "lineno", None), getattr(exc, "msg", None) or str(exc)
        problems.append((file, line, f"invalid Python: {message}"))
        return None
    first, _, rest = (ast.get_docstring(module) or "").partition("\n")
    return TreeItem(path, "script", text, first.strip(), rest.strip(), file=file)


def _split(file: str) -> tuple[str, str, str] | str:
    """Split a file into `(item path, kind, "")` or `("", "folder", name)`, or say why not."""
    parts = file.split("/")
    if len(parts) < 3:
        return f"files belong in {parts[0]}/<{'folder' if parts[0] == 'f' else 'user'}>/"
    if parts[-1] == FOLDER_META:
        if parts[0] != "f" or len(parts) != 3:
            return f"{FOLDER_META} belongs directly in f/<folder>/"
        return (
            _BAD_NAME.format(parts[1]) if not NAME.fullmatch(parts[1]) else ("", "folder", parts[1])
        )
    for suffix, kind in _SUFFIXES.items():
        if parts[-1].endswith(suffix) and len(parts[-1]) > len(suffix):
            segments = [*parts[1:-1], parts[-1][: -len(suffix)]]
            bad = [segment for segment in segments if not NAME.fullmatch(segment)]
            path = "/".join([parts[0], *segments])
            if bad or len(path) > 255:
                return _BAD_NAME.format(bad[0]) if bad else _TOO_LONG
            return path, kind, ""
    return f"unknown kind of file: name it <name> plus one of {', '.join(_SUFFIXES)}"


def _read_text(file: str, path: Path, problems: list[Problem]) -> str | None:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        problems.append((file, None, f"cannot read the file: {exc.strerror or exc}"))
        return None
    if len(data) > MAX_FILE_BYTES:
        problems.append((file, None, "the file is bigger than 1 MiB, the limit"))
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        problems.append((file, line, f"not UTF-8 text (byte {exc.start})"))
        return None


def _walk(
    root: Path, directory: Path, prefix: str, files: list[tuple[str, Path]], problems: list[Problem]
) -> None:
    """Collect the regular files under `directory`, refusing symlinks that leave `root`."""
    try:
        entries = sorted(directory.iterdir(), key=lambda entry: entry.name)
    except OSError as exc:
        problems.append((prefix.rstrip("/"), None, f"cannot list: {exc.strerror or exc}"))
        return
    for entry in entries:
        file = prefix + entry.name
        skip = entry.name.startswith(".") or entry.name == "__pycache__"
        if skip or not (prefix or entry.name in ("f", "u")):
            continue
        if entry.is_symlink():
            try:
                target = entry.resolve(strict=True)
            except (OSError, RuntimeError):
                problems.append((file, None, "a broken symlink"))
                continue
            if not target.is_relative_to(root):
                problems.append((file, None, "a symlink leading outside the directory"))
                continue
            if target.is_dir():
                problems.append((file, None, "a symlink to a directory, which is not followed"))
                continue
        if entry.is_dir():
            _walk(root, entry, file + "/", files, problems)
        elif not entry.is_file():
            problems.append((file, None, "not a regular file"))
        elif prefix:
            files.append((file, entry))
        else:
            problems.append((file, None, "f and u must be directories"))


def _read_file(file: str, path: Path, problems: list[Problem]) -> TreeItem | FolderMeta | None:
    """Read one file into its record, or add its problems and answer `None`."""
    split = _split(file)
    if isinstance(split, str):
        problems.append((file, None, split))
        return None
    item_path, kind, folder = split
    text = _read_text(file, path, problems)
    if text is None:
        return None
    if kind == "script":
        return _script(file, item_path, text, problems)
    parsed = _parse_yaml(file, text, problems)
    if parsed is None:
        return None
    data, lines = parsed
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {_type_name(data)}"
        problems.append((file, lines.get(()), f"the file is {what}: it must be a mapping"))
        return None
    doc = _Doc(file, data, lines, problems)
    return _folder_meta(doc, folder) if kind == "folder" else _READERS[kind](doc, item_path)


def read_tree(root: Path) -> Tree:
    """Read a sync directory (see the module docstring for its layout).

    Args:
        root: The directory holding `f/` and `u/`.

    Returns:
        Every item and folder, each with the `file` it came from.

    Raises:
        SyncFileError: Listing every problem of every file; nothing is returned.
    """
    root = Path(root)
    if not root.is_dir():
        raise SyncFileError([(str(root), None, "no such directory")])
    problems: list[Problem] = []
    files: list[tuple[str, Path]] = []
    _walk(root.resolve(), root, "", files, problems)
    items: dict[str, TreeItem] = {}
    folders: list[FolderMeta] = []
    for file, path in sorted(files):
        found = _read_file(file, path, problems)
        if isinstance(found, FolderMeta):
            folders.append(found)
        elif found is not None and found.path in items:
            first = items[found.path].file
            problems.append((file, None, f"{first} and {file} both define {found.path}; keep one"))
        elif found is not None:
            items[found.path] = found
    if problems:
        raise SyncFileError(sorted(problems, key=lambda problem: problem[0]))
    return Tree(
        items=tuple(items[path] for path in sorted(items)),
        folders=tuple(sorted(folders, key=lambda meta: meta.folder)),
    )


def _is_agent(item: TreeItem) -> bool:
    return (
        item.kind == "resource"
        and item.resource_type == AGENT_TYPE
        and isinstance(item.value, Mapping)
        and not any(key in item.value for key in _TEXT_KEYS)
    )


def item_file(item: TreeItem) -> str:
    """The file, relative to the sync directory, that holds `item`.

    Examples:
        >>> item_file(TreeItem("f/support/agents/triage", "flow", {}))
        'f/support/agents/triage.flow.yaml'
        >>> item_file(TreeItem("u/bo/helper", "resource", {"model": "m"}, resource_type="ai_agent"))
        'u/bo/helper.agent.yaml'

    Raises:
        SyncFileError: When the path or the kind is not valid.
    """
    parts = item.path.split("/")
    bad = [part for part in parts[1:] if not NAME.fullmatch(part)]
    problem = _BAD_NAME.format(bad[0]) if bad else None
    problem = _TOO_LONG if len(item.path) > 255 else problem
    if len(parts) < 3 or parts[0] not in ("f", "u"):
        problem = "an item path is f/<folder>/<name> or u/<user>/<name>"
    elif item.kind not in KINDS:
        problem = f"unknown kind {item.kind!r}: use {', '.join(KINDS)}"
    if problem is not None:
        raise SyncFileError([(item.path, None, problem)])
    kind = "agent" if _is_agent(item) else item.kind
    return item.path + next(suffix for suffix, known in _SUFFIXES.items() if known == kind)


def _render(item: TreeItem) -> str:
    """The text of an item's file.

    Raises:
        ValueError: Saying what is wrong with the item.
    """
    data: dict[str, Any] = {key: getattr(item, key) for key in _TEXT_KEYS if getattr(item, key)}
    if item.kind == "script" and isinstance(item.value, str):
        return item.value
    if item.kind == "variable" and (item.value is None or isinstance(item.value, str)):
        data["secret"] = item.secret
        data.update({} if item.value is None else {"value": item.value})
    elif item.kind in ("script", "variable") or not isinstance(item.value, Mapping):
        raise ValueError(f"a {item.kind} cannot have a value of type {_type_name(item.value)}")
    elif item.kind == "resource_type":
        data["schema"] = dict(item.value)
    elif item.kind == "resource" and not item.resource_type:
        raise ValueError("a resource needs a resource_type")
    elif item.kind == "resource" and not _is_agent(item):
        data.update(type=item.resource_type, value=dict(item.value))
    elif any(key in item.value for key in _TEXT_KEYS):
        raise ValueError("the value holds summary or description: set the item's fields instead")
    else:
        data.update(item.value)
    try:
        return _dump(data)
    except yaml.YAMLError as exc:
        raise ValueError(f"cannot be written as YAML: {exc}") from None


def write_tree(root: Path, tree: Tree) -> list[str]:
    """Write a tree's files under `root`, creating directories; other files are left alone.

    The output is deterministic: summary and description come first, then the
    other keys in a fixed order (a flow's and an agent's in the order given).

    Args:
        root: The sync directory.
        tree: What to write.

    Returns:
        The files written, relative to `root`, sorted.

    Raises:
        SyncFileError: Before anything is written, when an item or folder cannot
            be (a bad path or value, two items in one file, a symlink leading
            outside `root`).
    """
    root = Path(root)
    problems: list[Problem] = []
    outputs: dict[str, str] = {}
    for meta in tree.folders:
        file = f"f/{meta.folder}/{FOLDER_META}"
        found = [_who_problem(who) for who in meta.roles]
        found += [f"unknown role {role!r}" for role in meta.roles.values() if role not in ROLES]
        found.append(None if NAME.fullmatch(meta.folder) else _BAD_NAME.format(meta.folder))
        found.append(f"{meta.folder} is written twice" if file in outputs else None)
        problems += [(file, None, problem) for problem in found if problem]
        data = {"summary": meta.summary} if meta.summary else {}
        if not any(found):
            outputs[file] = _dump({**data, "roles": dict(meta.roles)} if meta.roles else data)
    for item in tree.items:
        try:
            file = item_file(item)
            text = _render(item)
        except SyncFileError as exc:
            problems += exc.problems
            continue
        except ValueError as exc:
            problems.append((item.path, None, str(exc)))
            continue
        if file in outputs:
            problems.append((file, None, f"{item.path} is written twice"))
        outputs[file] = text
    resolved = root.resolve()
    for file in sorted(outputs):
        if not (root / file).resolve().is_relative_to(resolved):
            problems.append((file, None, "a symlink leads outside the directory"))
    if problems:
        raise SyncFileError(problems)
    for file in sorted(outputs):
        target = root / file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(outputs[file], encoding="utf-8", newline="\n")
    return sorted(outputs)
