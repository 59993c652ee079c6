"""`ScriptStep`: a step that runs Python: inline code, a file, or an importable function."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Mapping
from typing import Any

from pydantic import model_validator

from tidemill.flows._base import StepKind
from tidemill.flows._problems import problem_error

__all__ = ["ScriptStep"]

_FUNCTION = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def _defines_main(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "main"
        for node in tree.body
    )


def _binds_main(node: ast.AST) -> bool:
    """Whether `node` (re)binds the name `main` of the module, or may."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name == "main"
    if isinstance(node, ast.Name):
        return node.id == "main" and isinstance(node.ctx, ast.Store | ast.Del)
    if isinstance(node, ast.alias):
        return (node.asname or node.name) in ("main", "*")
    return isinstance(node, ast.Global) and "main" in node.names


def _main_signature(code: str) -> ast.arguments | None:
    """The parameters of `main`, when its one definition says what a call may pass.

    None when that cannot be known without running the code: `main` is bound
    more than once or by other means (an import, an assignment), or a
    decorator may change its signature.
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    binders = [node for node in ast.walk(tree) if _binds_main(node)]
    if len(binders) != 1:
        return None
    (main,) = binders
    if (
        not isinstance(main, ast.FunctionDef | ast.AsyncFunctionDef)
        or main not in tree.body
        or main.decorator_list
    ):
        return None
    return main.args


def _parameter_problems(spec: ast.arguments, names: list[str], where: str) -> list[tuple[str, str]]:
    """What `main(**inputs)` would refuse: (field path, message) pairs."""
    shown = f"main({ast.unparse(spec)}){where}"
    positional = [*spec.posonlyargs, *spec.args]
    defaulted = {arg.arg for arg in positional[len(positional) - len(spec.defaults) :]}
    keyword = zip(spec.kwonlyargs, spec.kw_defaults, strict=True)
    defaulted |= {arg.arg for arg, default in keyword if default is not None}
    by_name = [arg.arg for arg in [*spec.args, *spec.kwonlyargs]]
    found: list[tuple[str, str]] = []
    for arg in spec.posonlyargs:
        if arg.arg not in defaulted and arg.arg not in names:
            found.append(
                (
                    "inputs",
                    f"{shown} takes {arg.arg!r} only by position, which an input cannot fill; "
                    "make it a named parameter (remove the `/`)",
                )
            )
    for name in by_name:
        if name not in names and name not in defaulted:
            found.append(
                (
                    "inputs",
                    f"{shown} needs {name!r}, which no input gives and which has no default; "
                    "add the input, or give the parameter a default",
                )
            )
    if spec.kwarg is not None:
        return found
    for name in names:
        if name in by_name:
            continue
        if name in {arg.arg for arg in spec.posonlyargs}:
            message = f"{shown} takes {name!r} only by position, not by name; remove the `/`"
        else:
            close = difflib.get_close_matches(name, [n for n in by_name if n not in names], n=1)
            message = f"{shown} has no parameter {name!r}; " + (
                f"did you mean {close[0]!r}? Remove the input, or add the parameter (or **kwargs)"
                if close
                else "remove the input, or add the parameter (or **kwargs)"
            )
        found.append((f"inputs.{name}", message))
    return found


class ScriptStep(StepKind):
    r"""Python to run: set exactly one of `code`, `path` and `function`.

    `script: "..."` is short for `script: {code: "..."}`. Code (inline, or read
    from `path` when the flow is loaded) must define a top-level `main`
    function; the step's inputs are its keyword arguments and its return
    value is the step's result.

    Examples:
        >>> ScriptStep.model_validate("def main(x):\n    return x + 1\n").code
        'def main(x):\n    return x + 1\n'
        >>> ScriptStep(function="mypkg.steps:classify", in_process=True).in_process
        True
    """

    code: str | None = None
    """Python source defining `def main(...)`."""

    path: str | None = None
    """A Python file, relative to the flow file; `Flow.load` reads it into `code`."""

    function: str | None = None
    """An importable function, as `module.path:function`."""

    in_process: bool = False
    """Call `function` inside the worker process instead of a subprocess (only with `function`)."""

    source_path: str | None = None
    """The file `code` was read from, for display; set by `Flow.load`."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"code": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _check(self) -> ScriptStep:
        given = [name for name in ("code", "path", "function") if getattr(self, name) is not None]
        if len(given) != 1:
            found = f"got {' and '.join(given)}" if given else "got none"
            raise problem_error("", f"set exactly one of code, path and function ({found})")
        if self.in_process and self.function is None:
            raise problem_error("in_process", "in_process is only allowed with function")
        if self.source_path is not None and self.code is None:
            raise problem_error("source_path", "source_path is only allowed with code")
        if self.function is not None and not _FUNCTION.match(self.function):
            raise problem_error(
                "function", f"{self.function!r} is not of the form 'module.path:function'"
            )
        if self.code is not None:
            self._check_code(self.code)
        return self

    def input_problems(self, inputs: Mapping[str, Any]) -> list[tuple[str, str]]:
        r"""What calling `main(**inputs)` would refuse, read from the code: (field path, message).

        A parameter with no default that no input names, an input that names
        no parameter (when `main` takes no `**kwargs`), a positional-only
        parameter. The code is parsed, never run; a `function` reference, or
        a `main` whose signature only running it would show (decorated, bound
        twice, imported), is not checked.

        Examples:
            >>> script = ScriptStep(code="def main(x, y):\n    return x + y\n")
            >>> for field, message in script.input_problems({"x": 1, "yy": 2}):
            ...     print(f"{field}: {message}")
            inputs: main(x, y) needs 'y', which no input gives and which has no default; add ...
            inputs.yy: main(x, y) has no parameter 'yy'; did you mean 'y'? Remove the input, ...
        """
        spec = None if self.code is None else _main_signature(self.code)
        if spec is None:
            return []
        where = f" in {self.source_path}" if self.source_path else ""
        return _parameter_problems(spec, list(inputs), where)

    def _check_code(self, code: str) -> None:
        origin = f"{self.source_path}, " if self.source_path else ""
        try:
            tree = ast.parse(code, filename=self.source_path or "<script>")
        except SyntaxError as exc:
            raise problem_error(
                "code", f"{origin}line {exc.lineno}: syntax error: {exc.msg}"
            ) from None
        except ValueError as exc:
            raise problem_error("code", f"{origin}cannot be parsed: {exc}") from None
        if not _defines_main(tree):
            where = self.source_path or "the code"
            raise problem_error("code", f"{where} must define a top-level function main()")
