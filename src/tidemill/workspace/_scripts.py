r"""What a workspace script tells about itself: its summary, description and input schema.

A script item is Python source defining a top-level `main(...)`, the same rule
as an inline `script` step (`tidemill.flows.ScriptStep`). Its module docstring
describes it: the first line is the summary, the rest the description. Its
inputs are the parameters of `main`, typed by their hints; the JSON Schema is
read from the parsed source by `tidemill.flows._signature`, the code is never
run to learn it.

Examples:
    >>> code = (
    ...     "'''Refund an order.\n\nCalls the payments API; idempotent.'''\n"
    ...     "def main(order_id: str, amount: float = 0.0):\n"
    ...     "    return {'refunded': order_id}\n"
    ... )
    >>> meta = script_metadata(code, path="f/billing/refund")
    >>> meta.summary, meta.description
    ('Refund an order.', 'Calls the payments API; idempotent.')
    >>> meta.schema["properties"]["amount"], meta.schema["required"]
    ({'type': 'number', 'default': 0.0}, ['order_id'])
    >>> script_metadata("def main(:\n", path="f/billing/broken")
    Traceback (most recent call last):
    ...
    tidemill.errors.ConfigurationError: Script f/billing/broken, line 1: syntax error: ...
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Any

from tidemill.errors import ConfigurationError
from tidemill.flows._signature import signature_schema

__all__ = ["ScriptMetadata", "script_metadata"]


@dataclass(frozen=True, slots=True)
class ScriptMetadata:
    """What a script's source says about it.

    Attributes:
        summary: The first line of the module docstring ("" without one).
        description: The rest of the module docstring, stripped ("" without one).
        schema: The JSON Schema of the arguments object `main(...)` takes
            (`type: object`, its `properties`, `required` and
            `additionalProperties`, which is true when `main` takes `**kwargs`).
    """

    summary: str
    description: str
    schema: dict[str, Any] = field(default_factory=dict)


def _main(tree: ast.Module) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The top-level `main` that `signature_schema` reads (the first one)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "main":
            return node
    return None


def script_metadata(code: str, *, path: str) -> ScriptMetadata:
    """Read the summary, description and input schema of the script at `path`.

    Args:
        code: The script's Python source.
        path: The script's workspace path, named in errors.

    Returns:
        The script's metadata; `schema` is a fresh copy, the caller may change it.

    Raises:
        ConfigurationError: The source does not parse (naming the path and
            the line), defines no top-level `main`, or `main` takes
            positional-only parameters or `*args` (which inputs given by name
            cannot fill).

    Examples:
        >>> script_metadata("def main(**kwargs): ...", path="u/ann/any").schema
        {'type': 'object', 'properties': {}, 'additionalProperties': True}
        >>> script_metadata("x = 1", path="u/ann/nothing")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: Script u/ann/nothing must define a top-level ...
    """
    try:
        tree = ast.parse(code, filename=path)
    except SyntaxError as exc:
        raise ConfigurationError(
            f"Script {path}, line {exc.lineno}: syntax error: {exc.msg}.",
            hint="Fix the Python source of the script.",
            context={"path": path, "line": exc.lineno},
        ) from None
    except ValueError as exc:  # a null byte in the source
        raise ConfigurationError(
            f"Script {path} cannot be parsed: {exc}.",
            hint="Fix the Python source of the script.",
            context={"path": path},
        ) from None
    main = _main(tree)
    if main is None:
        raise ConfigurationError(
            f"Script {path} must define a top-level function main().",
            hint="Define `def main(...)`; its parameters are the script's inputs.",
            context={"path": path},
        )
    line = main.lineno
    if main.args.posonlyargs or main.args.vararg is not None:
        raise ConfigurationError(
            f"Script {path}, line {line}: main({ast.unparse(main.args)}) takes "
            "positional-only parameters or *args, which inputs given by name cannot fill.",
            hint="Use named parameters (and **kwargs for extra ones).",
            context={"path": path, "line": line},
        )
    try:
        found = signature_schema(code, "main", where=f"script {path}")
    except ConfigurationError as exc:
        raise ConfigurationError(
            f"Script {path}, line {line}: {exc.message}",
            hint=exc.hint,
            context={"path": path, "line": line},
        ) from None
    doc = ast.get_docstring(tree) or ""
    summary, _, rest = doc.strip().partition("\n")
    return ScriptMetadata(summary.strip(), rest.strip(), copy.deepcopy(found.parameters))
