"""Expressions: the small, safe language of `{expr: ...}`, `skip_if`, `when` and placeholders.

An expression is one line of Python syntax over plain data: names such as
`flow_input` and `results`, field access (`results.fetch.text`), indexing,
comparisons, `and`/`or`/`not`, arithmetic, `x if c else y`, literals and
f-strings, a few functions (`len`, `str`, `min`, ...) and string methods
(`.lower()`, `.split()`, ...). Everything else (imports, lambdas,
comprehensions, `_private` names, other calls) is refused when the expression
is compiled, so a flow with one fails validation before it runs.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from typing import Any

import simpleeval  # type: ignore[import-untyped]

from tidemill.errors import ExpressionError
from tidemill.flows._safe_eval import (
    FUNCTIONS,
    MAX_STRING_LENGTH,
    STRING_METHODS,
    Refused,
    evaluator,
)

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "PLACEHOLDER",
    "Expression",
    "compile_expression",
    "evaluate_condition",
    "placeholders",
]

MAX_EXPRESSION_LENGTH = 10_000
"""The longest expression text accepted."""

PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
"""A `{{ expression }}` placeholder of a prompt template; group 1 is the expression."""


def placeholders(template: str) -> list[str]:
    """The expressions inside `{{ ... }}` in a prompt template, stripped.

    Examples:
        >>> placeholders("Classify: {{ ticket.text }} ({{ lang }})")
        ['ticket.text', 'lang']
    """
    return [match.strip() for match in PLACEHOLDER.findall(template)]


_ALLOWED = (
    ast.Expression,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.Call,
    ast.keyword,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.In,
    ast.NotIn,
    ast.Is,
    ast.IsNot,
    ast.IfExp,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.JoinedStr,
    ast.FormattedValue,
)

_FORBIDDEN_NAMES = {
    ast.Lambda: "lambda is",
    ast.NamedExpr: "assignment (:=) is",
    ast.ListComp: "comprehensions are",
    ast.SetComp: "comprehensions are",
    ast.DictComp: "comprehensions are",
    ast.GeneratorExp: "generator expressions are",
    ast.Starred: "unpacking (*) is",
    ast.Await: "await is",
    ast.Yield: "yield is",
    ast.YieldFrom: "yield is",
    ast.Set: "set literals are",
}

_CONSTANT_TYPES = (str, int, float, bool, type(None))


class Expression:
    """A compiled expression; build one with `compile_expression`.

    Evaluating never parses again, so compile once and evaluate often.

    Examples:
        >>> expr = compile_expression("results.fetch.total * 2 if flow_input.double else 0")
        >>> sorted(expr.names), expr.results_used
        (['flow_input', 'results'], frozenset({'fetch'}))
        >>> expr.evaluate({"flow_input": {"double": True}, "results": {"fetch": {"total": 21}}})
        42
    """

    __slots__ = ("_names", "_node", "_results_used", "_text")

    def __init__(
        self,
        text: str,
        node: ast.expr,
        names: frozenset[str],
        results_used: frozenset[str] | None,
    ) -> None:
        self._text = text
        self._node = node
        self._names = names
        self._results_used = results_used

    @property
    def text(self) -> str:
        """The expression as written."""
        return self._text

    @property
    def names(self) -> frozenset[str]:
        """The top-level names it reads (`flow_input`, `results`, ...)."""
        return self._names

    @property
    def results_used(self) -> frozenset[str] | None:
        """The step ids read as `results.<id>` or `results["<id>"]`.

        Empty when `results` is not used; None when it is used in a way that
        cannot be known before running (`results[flow_input.key]`, or `results`
        on its own), so every result may be needed.
        """
        return self._results_used

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        """Evaluate against `context`, which maps names to plain (JSON-like) data.

        Raises:
            ExpressionError: For an unknown name, a missing key or index, a wrong
                type, or a value that would be too large.
        """
        engine = evaluator()
        engine.names = context
        try:
            return engine.eval(self._text, previously_parsed=self._node)
        except Refused as exc:
            raise ExpressionError(self._text, exc.reason, hint=exc.hint) from None
        except simpleeval.InvalidExpression as exc:
            raise ExpressionError(self._text, str(exc)) from None
        except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as exc:
            raise ExpressionError(self._text, f"{type(exc).__name__}: {exc}") from exc
        finally:
            engine.names = {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        return f"Expression({self._text!r})"


def _refuse(text: str, reason: str, hint: str | None = None) -> ExpressionError:
    return ExpressionError(text, reason, hint=hint)


def _check_name(text: str, node: ast.Name, called: bool) -> None:
    if node.id.startswith("_"):
        raise _refuse(text, f"names starting with '_' are not allowed ({node.id})")
    if called and node.id not in FUNCTIONS:
        hint = "Functions: " + ", ".join(sorted(FUNCTIONS)) + "."
        raise _refuse(text, f"unknown function {node.id!r}", hint=hint)
    if not called and node.id in FUNCTIONS:
        raise _refuse(text, f"{node.id} is a function; call it, as in {node.id}(...)")


def _check_attribute(text: str, node: ast.Attribute, called: bool) -> None:
    if node.attr.startswith("_"):
        raise _refuse(text, f"names starting with '_' are not allowed ({node.attr})")
    if called and node.attr not in STRING_METHODS:
        hint = "String methods: " + ", ".join(sorted(STRING_METHODS)) + "."
        raise _refuse(text, f"unknown method .{node.attr}()", hint=hint)


def _check_node(text: str, node: ast.AST, callees: set[int]) -> None:
    """Refuse one node that is not part of the expression language."""
    if not isinstance(node, _ALLOWED):
        what = _FORBIDDEN_NAMES.get(type(node), f"{type(node).__name__} is")
        raise _refuse(text, f"{what} not allowed in expressions")
    if isinstance(node, ast.Name):
        _check_name(text, node, id(node) in callees)
    elif isinstance(node, ast.Attribute):
        _check_attribute(text, node, id(node) in callees)
    elif isinstance(node, ast.Call) and not isinstance(node.func, ast.Name | ast.Attribute):
        raise _refuse(text, f"cannot call {ast.unparse(node.func)}")
    elif (isinstance(node, ast.Call) and any(kw.arg is None for kw in node.keywords)) or (
        isinstance(node, ast.Dict) and any(key is None for key in node.keys)
    ):
        raise _refuse(text, "unpacking (**) is not allowed in expressions")
    elif isinstance(node, ast.Constant):
        if not isinstance(node.value, _CONSTANT_TYPES):
            raise _refuse(text, f"{type(node.value).__name__} literals are not allowed")
        if isinstance(node.value, str) and len(node.value) > MAX_STRING_LENGTH:
            raise _refuse(text, "a string literal is too long")
    elif isinstance(node, ast.FormattedValue) and (node.conversion != -1 or node.format_spec):
        raise _refuse(text, "f-string conversions and format specs (!r, :>10) are not supported")


def _results_used(tree: ast.AST) -> frozenset[str] | None:
    used: set[str] = set()
    counted: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Subscript):
            base = node.value
            if not (isinstance(base, ast.Name) and base.id == "results"):
                continue
            if isinstance(node, ast.Attribute):
                used.add(node.attr)
                counted.add(id(base))
            elif isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                used.add(node.slice.value)
                counted.add(id(base))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "results" and id(node) not in counted:
            return None
    return frozenset(used)


@functools.lru_cache(maxsize=4096)
def _compile(text: str) -> Expression:
    if not text.strip():
        raise _refuse(text, "the expression is empty")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise _refuse(text, f"the expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        raise _refuse(text, f"invalid syntax{where}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise _refuse(text, f"cannot be parsed: {exc}") from None
    callees = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        _check_node(text, node, callees)
    names = frozenset(
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and id(node) not in callees
    )
    return Expression(text, tree.body, names, _results_used(tree))


def compile_expression(text: str) -> Expression:
    """Parse and check an expression once; evaluate the result as often as needed.

    Compiling the same text again returns the cached expression.

    Raises:
        ExpressionError: On a syntax error or a construct the language does not
            allow (imports, lambdas, comprehensions, `_private` names, calls of
            anything but the allowed functions and string methods).

    Examples:
        >>> compile_expression("flow_input.name.upper()").evaluate({"flow_input": {"name": "ada"}})
        'ADA'
        >>> compile_expression("open('x')")
        Traceback (most recent call last):
          ...
        tidemill.errors.ExpressionError: Expression "open('x')": unknown function 'open' ...
    """
    if not isinstance(text, str):
        raise ExpressionError(repr(text), "an expression must be a string")
    return _compile(text)


def evaluate_condition(expression: Expression | str, context: Mapping[str, Any]) -> bool:
    """Evaluate a condition and apply Python truthiness.

    Empty strings, lists and objects, `0`, `None` and `False` are false.

    Examples:
        >>> evaluate_condition("flow_input.amount > 100", {"flow_input": {"amount": 250}})
        True
        >>> evaluate_condition("flow_input.tags", {"flow_input": {"tags": []}})
        False
    """
    compiled = compile_expression(expression) if isinstance(expression, str) else expression
    return bool(compiled.evaluate(context))
