"""`ScriptStep`: a step that runs Python: inline code, a file, or an importable function."""

from __future__ import annotations

import ast
import re
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
