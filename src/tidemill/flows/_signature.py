r"""The JSON Schema of a Python function's parameters, read from its source with `ast`.

An `ai_agent` tool is inline Python (or a `module:function`) that runs in the
worker's script pool. Its arguments are the parameters of its function, typed
by their hints. The schema the model sees is built from the parsed source:
the code is never executed in the worker to learn its signature. A workspace
script (`tidemill.workspace`) describes its inputs the same way.

This module sits at the bottom of `tidemill.flows` (it imports no other flows
module), so the layers above it, the workspace and the engine, can share it.

A worker describes the same tools for every step of a flow, so both the
parse and the module's source are cached: `signature_schema` by the source
text, `function_source` by the module's file and its modification time (an
edited file is read again).

Examples:
    >>> code = (
    ...     "def main(order_id: str, amount: float = 0.0, tags: list[str] | None = None):\n"
    ...     "    '''Refund an order.\n\n    Args:\n"
    ...     "        order_id: The order to refund.\n    '''\n"
    ... )
    >>> found = signature_schema(code)
    >>> found.description
    'Refund an order.'
    >>> found.parameters["required"], found.parameters["properties"]["order_id"]
    (['order_id'], {'type': 'string', 'description': 'The order to refund.'})
    >>> found.parameters["properties"]["tags"]
    {'anyOf': [{'type': 'array', 'items': {'type': 'string'}}, {'type': 'null'}], 'default': None}
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidemill.errors import ConfigurationError
from tidemill.tools import parse_docstring

__all__ = ["SignatureSchema", "annotation_schema", "function_source", "signature_schema"]

_NAMED: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "dict": {"type": "object"},
    "Dict": {"type": "object"},
    "Mapping": {"type": "object"},
    "list": {"type": "array"},
    "List": {"type": "array"},
    "Sequence": {"type": "array"},
    "Iterable": {"type": "array"},
    "tuple": {"type": "array"},
    "Tuple": {"type": "array"},
    "set": {"type": "array", "uniqueItems": True},
    "Set": {"type": "array", "uniqueItems": True},
    "frozenset": {"type": "array", "uniqueItems": True},
    "None": {"type": "null"},
    "NoneType": {"type": "null"},
}
"""Type names and their schemas; any other name accepts any JSON value."""

_ARRAYS = {"list", "List", "Sequence", "Iterable", "set", "Set", "frozenset", "tuple", "Tuple"}
_OBJECTS = {"dict", "Dict", "Mapping"}


@dataclass(frozen=True, slots=True)
class SignatureSchema:
    """What a tool's function tells the model about it.

    Attributes:
        parameters: The JSON Schema of the arguments object.
        description: The docstring's summary (empty without one).
        names: Every parameter the model fills, in order.
        context: The parameter annotated `ToolContext` (`ToolContext[...]`), which
            the caller fills and the schema leaves out, when asked for with
            `signature_schema(..., context=True)`; None otherwise.
    """

    parameters: dict[str, Any]
    description: str = ""
    names: tuple[str, ...] = field(default=())
    context: str | None = None


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr  # typing.List, t.Optional
    return None


def _union(options: list[dict[str, Any]]) -> dict[str, Any]:
    flat: list[dict[str, Any]] = []
    for option in options:
        if option == {}:
            return {}  # anything goes
        flat.extend(option["anyOf"] if list(option) == ["anyOf"] else [option])
    return flat[0] if len(flat) == 1 else {"anyOf": flat}


def annotation_schema(node: ast.expr | None) -> dict[str, Any]:
    """The JSON Schema of a type hint, read from its syntax tree.

    Unknown names (classes of the script, `Any`) accept any JSON value.

    Examples:
        >>> hint = ast.parse("dict[str, int] | Literal['a', 'b']", mode="eval").body
        >>> annotation_schema(hint)["anyOf"]
        [{'type': 'object', 'additionalProperties': {'type': 'integer'}}, {'enum': ['a', 'b']}]
    """
    if node is None:
        return {}
    if isinstance(node, ast.Constant):
        if node.value is None:
            return {"type": "null"}
        if isinstance(node.value, str):  # a quoted hint: "list[int]"
            try:
                return annotation_schema(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                return {}
        return {}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([annotation_schema(node.left), annotation_schema(node.right)])
    if isinstance(node, ast.Subscript):
        return _generic(node)
    name = _name(node)
    return dict(_NAMED.get(name, {})) if name is not None else {}


def _generic(node: ast.Subscript) -> dict[str, Any]:
    base = _name(node.value)
    args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    if base == "Optional":
        return _union([annotation_schema(args[0]), {"type": "null"}])
    if base == "Union":
        return _union([annotation_schema(arg) for arg in args])
    if base == "Annotated":
        return annotation_schema(args[0])
    if base == "Literal":
        return {"enum": [arg.value for arg in args if isinstance(arg, ast.Constant)]}
    if base in _ARRAYS:
        schema = dict(_NAMED[base])
        if base in ("tuple", "Tuple") and not (
            len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is Ellipsis
        ):
            if len(args) > 1 or not isinstance(args[0], ast.Tuple):
                schema["prefixItems"] = [annotation_schema(arg) for arg in args]
                schema["minItems"] = schema["maxItems"] = len(args)
            return schema
        items = annotation_schema(args[0])
        if items:
            schema["items"] = items
        return schema
    if base in _OBJECTS:
        schema = {"type": "object"}
        values = annotation_schema(args[-1]) if len(args) == 2 else {}
        if values:
            schema["additionalProperties"] = values
        return schema
    return dict(_NAMED.get(base or "", {}))


def _default(node: ast.expr) -> tuple[bool, Any]:
    """A parameter's default, when it is a JSON literal."""
    try:
        value = ast.literal_eval(node)
        json.dumps(value)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False, None
    return True, value


def _find(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node
    return None


@functools.lru_cache(maxsize=256)
def signature_schema(
    source: str, function: str = "main", *, where: str = "the script", context: bool = False
) -> SignatureSchema:
    """Parse `source` and describe the parameters of its top-level `function`.

    Parameters with a default are optional; `**kwargs` lets the model pass
    other arguments too. Positional-only parameters and `*args` cannot be
    filled by name, so they are refused.

    With `context`, a parameter annotated `ToolContext` (or `ToolContext[...]`)
    is the call's context, not an argument: it is left out of the schema and
    named in `SignatureSchema.context` (an in-process tool is given one).

    The result is cached by the arguments (parsing a module for each agent
    step dominated its setup) and shared: copy `parameters` before changing it.

    Raises:
        ConfigurationError: The source does not parse, has no such function,
            or the function takes what a model cannot fill.

    Examples:
        >>> found = signature_schema("def main(q: str, *, limit: int = 5): ...")
        >>> found.parameters["properties"]
        {'q': {'type': 'string'}, 'limit': {'type': 'integer', 'default': 5}}
        >>> found.parameters["required"], found.parameters["additionalProperties"]
        (['q'], False)
        >>> tool = signature_schema("def f(q: str, ctx: ToolContext[Deps]): ...", "f", context=True)
        >>> list(tool.parameters["properties"]), tool.context
        (['q'], 'ctx')
        >>> signature_schema("x = 1")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: The script defines no function main(...). ...
    """
    subject = where[:1].upper() + where[1:]
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ConfigurationError(
            f"{subject} does not parse: {exc.msg} (line {exc.lineno}).",
            hint="Fix the Python source of the tool.",
        ) from None
    node = _find(tree, function)
    if node is None:
        raise ConfigurationError(
            f"{subject} defines no function {function}(...).",
            hint=f"Define `def {function}(...)`; its parameters are the tool's arguments.",
        )
    spec = node.args
    if spec.posonlyargs or spec.vararg is not None:
        raise ConfigurationError(
            f"{function}(...) in {where} takes positional-only parameters or *args, "
            "which a model cannot fill by name.",
            hint="Use named parameters (and **kwargs for extra ones).",
        )
    doc = parse_docstring(ast.get_docstring(node))
    properties: dict[str, Any] = {}
    required: list[str] = []
    defaults: list[ast.expr | None] = [None] * (len(spec.args) - len(spec.defaults))
    defaults.extend(spec.defaults)
    positional = list(zip(spec.args, defaults, strict=True))
    keyword = list(zip(spec.kwonlyargs, spec.kw_defaults, strict=True))
    context_name: str | None = None
    for arg, default in [*positional, *keyword]:
        if context and context_name is None and _is_context(arg.annotation):
            context_name = arg.arg
            continue
        schema = annotation_schema(arg.annotation)
        if arg.arg in doc.params:
            schema["description"] = doc.params[arg.arg]
        if default is None:
            required.append(arg.arg)
        else:
            known, value = _default(default)
            if known:
                schema["default"] = value
        properties[arg.arg] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    parameters["additionalProperties"] = spec.kwarg is not None
    return SignatureSchema(parameters, doc.description, tuple(properties), context_name)


def _is_context(node: ast.expr | None) -> bool:
    """Whether a hint is `ToolContext`, `ToolContext[...]` (or `tools.ToolContext`, quoted)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return False
    if isinstance(node, ast.Subscript):
        node = node.value
    return node is not None and _name(node) == "ToolContext"


def function_source(reference: str) -> tuple[str, str]:
    """The source of the module a `module:function` reference names, and the function's name.

    The module's file is found without importing it (a dotted name imports
    its parent packages, as finding any module does).

    Raises:
        ConfigurationError: The reference is malformed or its source is not found.

    Examples:
        >>> source, name = function_source("json:dumps")
        >>> name, "def dumps(" in source
        ('dumps', True)
    """
    module, _, name = reference.partition(":")
    if not module or not name or "." in name:
        raise ConfigurationError(
            f"Bad tool function reference {reference!r}.",
            hint="Write it as 'package.module:function' (a top-level function).",
        )
    where = (module, tuple(sys.path))
    origin = _ORIGINS.get(where)
    if origin is not None:
        source = _read_source(origin)
        if source is not None:
            return source, name
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    origin = None if spec is None else spec.origin
    source = None if origin is None or not origin.endswith(".py") else _read_source(origin)
    if origin is None or source is None:
        raise ConfigurationError(
            f"Cannot find the Python source of module {module!r} "
            f"(for tool function {reference!r}).",
            hint="The module must be importable on the worker, as a .py file.",
        )
    _remember(_ORIGINS, where, origin)
    return source, name


_ORIGINS: dict[tuple[str, tuple[str, ...]], str] = {}
"""Where a module's file was found, by the module's name and the import path searched."""
_SOURCES: dict[str, tuple[tuple[int, int], str]] = {}
"""A module file's text, with the (modification time, size) it was read at."""
_CACHED = 256


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """Keep `value` under `key`, dropping the oldest entry beyond `_CACHED`."""
    cache.pop(key, None)
    if len(cache) >= _CACHED:
        cache.pop(next(iter(cache)))
    cache[key] = value


def _read_source(path: str) -> str | None:
    """The text of the file at `path`, read again only when it changed; None when it is gone."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    version = (status.st_mtime_ns, status.st_size)
    found = _SOURCES.get(path)
    if found is not None and found[0] == version:
        return found[1]
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    _remember(_SOURCES, path, (version, text))
    return text
