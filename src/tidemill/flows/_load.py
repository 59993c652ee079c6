"""Reading flows: YAML and JSON documents, and the files they include.

Before a flow is validated, every script `path` is read into `code` and every
sub-flow file is read (recursively) into `flow`, relative to the file that
names it. The loaded flow is then self-contained: its JSON form needs no files.
The flow and step models are arguments (`Flow` and `Step`, which call this
module).

A `path` that reads as a workspace path (`f/<folder>/<name>`, `u/<user>/<name>`:
no file suffix) names a workspace item instead of a file. The workspace reads
those through `Includes` when it validates or runs a flow; a flow loaded with
no workspace behind it cannot include them, and says so.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Hashable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Protocol, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from tidemill.errors import FlowValidationError
from tidemill.flows._convert import problems_from_error
from tidemill.flows._node import KINDS
from tidemill.flows._problems import Problem

__all__ = [
    "WORKSPACE_PATH",
    "DocumentError",
    "Includes",
    "flow_from_data",
    "load_flow",
    "parse_document",
    "parse_flow",
    "read_document",
]

F = TypeVar("F", bound=BaseModel)

_SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}

WORKSPACE_PATH = re.compile(r"^[uf](/[a-z0-9][a-z0-9_-]{0,63}){2,}\Z")
"""A script or sub-flow `path` of this shape names a workspace item, not a file."""


class Includes(Protocol):
    """Where the workspace items a flow names by path are read from (the workspace).

    Each method returns the item and a label for it (its path and version,
    `f/x/y@3`), or raises `LookupError` with a message saying why it cannot:
    no such item, or not one the reader may read.
    """

    def script(self, path: str) -> tuple[str, str]:
        """The code of the workspace script at `path` (`path@N`: its version N), and its label."""
        ...

    def flow(self, path: str) -> tuple[dict[str, Any], str]:
        """The document of the workspace flow at `path`, and its label."""
        ...


def _no_workspace(path: str, kind: str) -> str:
    return (
        f"{path} names a workspace {kind}, and this flow was not read from a workspace: "
        f"push it to one and run it by its path (tidemill run f/<folder>/<name>)"
    )


class _Loader(yaml.SafeLoader):
    """`SafeLoader` that keeps dates as strings and refuses duplicate keys."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _mapping_without_duplicates(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Hashable] = set()
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, Hashable):
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found the key {key!r} twice",
                    key_node.start_mark,
                )
            seen.add(key)
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


class DocumentError(Exception):
    """A document could not be read or parsed; `field` says which part of loading failed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def parse_document(text: str, format: Literal["yaml", "json"]) -> Any:
    """Parse YAML (dates stay strings, duplicate keys are errors) or JSON.

    Raises:
        DocumentError: With the line and column of a syntax error.
    """
    if format == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise DocumentError(
                "json", f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            ) from None
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise DocumentError("yaml", f"invalid YAML{where}: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise DocumentError("yaml", f"invalid YAML: {exc}") from None


def read_document(path: Path) -> Any:
    """Read and parse a `.yaml`, `.yml` or `.json` file.

    Raises:
        DocumentError: When the file is missing, unreadable, of another type, or invalid.
    """
    format = _SUFFIXES.get(path.suffix.lower())
    if format is None:
        raise DocumentError("file", f"{path} is not a flow file: use a .yaml, .yml or .json file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DocumentError("file", f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DocumentError("file", f"cannot read {path}: {exc}") from None
    return parse_document(text, "json" if format == "json" else "yaml")


def _step_lists(kind: Mapping[str, Any]) -> Iterator[list[Any]]:
    """Yield the lists of nested steps inside a kind's raw mapping."""
    for key in ("steps", "default"):
        if isinstance(kind.get(key), list):
            yield kind[key]
    for branch in kind.get("branches", ()) if isinstance(kind.get("branches"), list) else ():
        if isinstance(branch, dict) and isinstance(branch.get("steps"), list):
            yield branch["steps"]


class _Inliner:
    """Reads included files into raw flow data, collecting problems instead of stopping."""

    def __init__(self, includes: Includes | None = None) -> None:
        self.problems: list[Problem] = []
        self.includes = includes

    def flow(
        self, data: dict[str, Any], base: Path, chain: tuple[tuple[Path, str], ...], prefix: str
    ) -> None:
        if isinstance(data.get("steps"), list):
            self.steps(data["steps"], base, chain, prefix)

    def steps(
        self, steps: list[Any], base: Path, chain: tuple[tuple[Path, str], ...], prefix: str
    ) -> None:
        for step in steps:
            if not isinstance(step, dict):
                continue
            step_id = step.get("id") if isinstance(step.get("id"), str) else None
            script = step.get("script")
            if (
                isinstance(script, dict)
                and isinstance(script.get("path"), str)
                and "code" not in script
                and "function" not in script
            ):
                self.script(script, base, step_id, prefix)
            sub = step.get("flow")
            if isinstance(sub, str):
                sub = step["flow"] = {"path": sub}
            if isinstance(sub, dict):
                if isinstance(sub.get("path"), str) and "flow" not in sub:
                    self.sub_flow(sub, base, chain, step_id, prefix)
                elif isinstance(sub.get("flow"), dict):
                    inner = f"{prefix}in the sub-flow of step {step_id!r}: "
                    self.flow(sub["flow"], base, chain, inner)
            for key in KINDS:
                kind = step.get(key)
                if key != "flow" and isinstance(kind, dict):
                    for body in _step_lists(kind):
                        self.steps(body, base, chain, prefix)
            agent = step.get("ai_agent")
            if isinstance(agent, dict):
                self.agent_tools(agent, base, chain, step_id, prefix, "ai_agent")

    def agent_tools(
        self,
        agent: dict[str, Any],
        base: Path,
        chain: tuple[tuple[Path, str], ...],
        step: str | None,
        prefix: str,
        where: str,
    ) -> None:
        """Read the sub-flow files of an agent's `flow` tools, and those of its nested agents."""
        tools = agent.get("tools")
        for index, spec in enumerate(tools if isinstance(tools, list) else ()):
            if not isinstance(spec, dict):
                continue
            field = f"{where}.tools[{index}]"
            sub = spec.get("flow")
            if isinstance(sub, str):
                sub = spec["flow"] = {"path": sub}
            if isinstance(sub, dict) and isinstance(sub.get("path"), str) and "flow" not in sub:
                self.sub_flow(sub, base, chain, step, prefix, field=f"{field}.flow.path")
            elif isinstance(sub, dict) and isinstance(sub.get("flow"), dict):
                self.flow(sub["flow"], base, chain, f"{prefix}in the flow of {field}: ")
            script = spec.get("script")
            written = script.get("path") if isinstance(script, dict) else None
            if isinstance(script, dict) and isinstance(written, str) and "code" not in script:
                self.tool_script(script, step, prefix, f"{field}.script.path")
            if isinstance(spec.get("agent"), dict):
                self.agent_tools(spec["agent"], base, chain, step, prefix, f"{field}.agent")

    def tool_script(
        self, script: dict[str, Any], step: str | None, prefix: str, field: str
    ) -> None:
        """Read a script tool's workspace script (`{path: f/...}`, maybe `@N`) into `code`."""
        written = script["path"]
        try:
            if self.includes is None:
                raise LookupError(_no_workspace(written, "script"))
            code, label = self.includes.script(written)
        except LookupError as exc:
            self.problems.append(Problem(step, field, prefix + str(exc.args[0])))
            return
        del script["path"]
        script["code"], script["source_path"] = code, label

    def script(self, script: dict[str, Any], base: Path, step: str | None, prefix: str) -> None:
        written = script.pop("path")
        if WORKSPACE_PATH.match(written):
            try:
                if self.includes is None:
                    raise LookupError(_no_workspace(written, "script"))
                script["code"], script["source_path"] = self.includes.script(written)
            except LookupError as exc:
                script["path"] = written
                self.problems.append(Problem(step, "script.path", prefix + str(exc.args[0])))
            return
        file = base / written
        try:
            script["code"] = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            message = f"no such file: {file}"
        except (OSError, UnicodeDecodeError) as exc:
            message = f"cannot read {file}: {exc}"
        else:
            script["source_path"] = written
            return
        script["path"] = written
        self.problems.append(Problem(step, "script.path", prefix + message))

    def sub_flow(
        self,
        sub: dict[str, Any],
        base: Path,
        chain: tuple[tuple[Path, str], ...],
        step: str | None,
        prefix: str,
        *,
        field: str = "flow.path",
    ) -> None:
        written = sub["path"]
        item = WORKSPACE_PATH.match(written) is not None
        file = Path(PurePosixPath("/@workspace", written)) if item else (base / written).resolve()
        if any(file == seen for seen, _name in chain):
            names = " -> ".join([*(name for _path, name in chain), written])
            self.problems.append(Problem(step, field, f"{prefix}include cycle: {names}"))
            return
        label = written
        try:
            if not item:
                child = read_document(file)
            elif self.includes is None:
                raise LookupError(_no_workspace(written, "flow"))
            else:
                child, label = self.includes.flow(written)
                child = copy.deepcopy(child)
        except DocumentError as exc:
            self.problems.append(Problem(step, field, prefix + exc.message))
            return
        except LookupError as exc:
            self.problems.append(Problem(step, field, prefix + str(exc.args[0])))
            return
        if not isinstance(child, dict):
            message = f"{written} must hold a mapping (a flow), not {type(child).__name__}"
            self.problems.append(Problem(step, field, prefix + message))
            return
        if not child.get("name"):
            child["name"] = file.stem
        inner = f"{prefix}in the sub-flow of step {step!r} ({written}): "
        self.flow(child, base if item else file.parent, (*chain, (file, written)), inner)
        del sub["path"]
        sub["flow"] = child
        sub["source_path"] = label


def flow_from_data(
    data: Any,
    *,
    flow_model: type[F],
    step_model: type[BaseModel],
    base_dir: str | Path | None = None,
    source: str | None = None,
    name: str | None = None,
    chain: tuple[tuple[Path, str], ...] = (),
    includes: Includes | None = None,
) -> F:
    """Inline the files `data` names, validate it, and return the flow.

    Args:
        data: The flow as plain data; it is not changed.
        flow_model: The model to validate it as (`Flow`).
        step_model: The model of its steps (`Step`), to name them in problems.
        base_dir: Where relative paths are read from; the current directory by default.
        source: Where the data came from, for error messages.
        name: The flow's name when `data` has none.
        chain: The files being loaded, outermost first, to detect include cycles.
        includes: Where the workspace scripts and flows it names by path are
            read from; None: naming one is a problem.

    Raises:
        FlowValidationError: Listing every problem found.
    """
    if not isinstance(data, Mapping):
        message = (
            "the flow is empty"
            if data is None
            else f"a flow must be a mapping, not {type(data).__name__}"
        )
        raise FlowValidationError([Problem(None, "flow", message)], source=source)
    prepared = copy.deepcopy(dict(data))
    if name and not prepared.get("name"):
        prepared["name"] = name
    inliner = _Inliner(includes)
    inliner.flow(prepared, Path(base_dir) if base_dir else Path.cwd(), chain, "")
    problems = list(inliner.problems)
    try:
        flow = flow_model.model_validate(prepared)
    except ValidationError as exc:
        found = problems_from_error(exc, prepared, flow_model=flow_model, step_model=step_model)
        problems.extend(p for p in found if p not in problems)
    if problems:
        raise FlowValidationError(problems, source=source)
    return flow


def parse_flow(
    text: str,
    *,
    flow_model: type[F],
    step_model: type[BaseModel],
    format: Literal["yaml", "json"] = "yaml",
    base_dir: str | Path | None = None,
    source: str | None = None,
) -> F:
    """Parse YAML or JSON text into a flow (see `Flow.parse`)."""
    try:
        data = parse_document(text, format)
    except DocumentError as exc:
        raise FlowValidationError([Problem(None, exc.field, exc.message)], source=source) from None
    return flow_from_data(
        data, flow_model=flow_model, step_model=step_model, base_dir=base_dir, source=source
    )


def load_flow(path: str | Path, *, flow_model: type[F], step_model: type[BaseModel]) -> F:
    """Load a flow file (see `Flow.load`)."""
    file = Path(path)
    try:
        data = read_document(file)
    except DocumentError as exc:
        raise FlowValidationError(
            [Problem(None, exc.field, exc.message)], source=str(path)
        ) from None
    return flow_from_data(
        data,
        flow_model=flow_model,
        step_model=step_model,
        base_dir=file.parent,
        source=str(path),
        name=file.stem,
        chain=((file.resolve(), file.name),),
    )
