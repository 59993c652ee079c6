"""The evaluator behind expressions: `simpleeval`, narrowed to plain data.

`simpleeval` walks the parsed tree and applies its operators; this module
narrows what it may reach. Attribute access reads mapping keys only, calls go
to a short list of functions and string methods, and operators that could
build huge values (powers, repetition, `%` formatting, `str()` of a shared
nested list) are bounded. The static checks in `tidemill.flows._expr` refuse
everything else before an expression is ever evaluated.
"""

from __future__ import annotations

import ast
import difflib
import operator
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import simpleeval  # type: ignore[import-untyped]

__all__ = [
    "FUNCTIONS",
    "MAX_INT_BITS",
    "MAX_STRING_LENGTH",
    "STRING_METHODS",
    "Refused",
    "evaluator",
]

MAX_STRING_LENGTH = 100_000
"""The longest string or list an expression may build."""

MAX_INT_BITS = 100_000
"""The largest integer (in bits) a power or a product may build."""


class Refused(Exception):
    """An expression did something it may not; `Expression` turns this into an ExpressionError."""

    def __init__(self, reason: str, *, hint: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.hint = hint


def _where(node: ast.AST) -> str:
    return ast.unparse(node)


def _a(value: object) -> str:
    name = type(value).__name__
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _check_size(value: object) -> None:
    """Refuse to turn a value into text when it (or what it shares) is too large."""
    budget = MAX_STRING_LENGTH
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            budget -= len(item)
        elif isinstance(item, Mapping):
            budget -= len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            budget -= len(item)
            stack.extend(item)
        else:
            budget -= 1
        if budget < 0:
            raise Refused(f"the value is too large to turn into text (over {MAX_STRING_LENGTH})")


def _safe_str(value: object = "") -> str:
    if isinstance(value, str):
        return value
    _check_size(value)
    return str(value)


def _safe_sum(values: Iterable[Any]) -> int | float:
    total: int | float = 0
    for value in values:
        if not isinstance(value, int | float):
            raise Refused(f"sum() adds numbers only, got {_a(value)}")
        total += value
    return total


def _safe_join(separator: str, items: Iterable[Any]) -> str:
    parts = list(items)
    length = len(separator) * max(len(parts) - 1, 0)
    for part in parts:
        if not isinstance(part, str):
            raise Refused(f"join() needs strings, got {_a(part)}")
        length += len(part)
    if length > MAX_STRING_LENGTH:
        raise Refused(f"join() would build a string longer than {MAX_STRING_LENGTH}")
    return separator.join(parts)


def _int_bits(value: object) -> int:
    return value.bit_length() if isinstance(value, int) else 0


def _safe_pow(base: Any, exponent: Any) -> Any:
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and abs(base) > 1
        and _int_bits(base) * exponent > MAX_INT_BITS
    ):
        raise Refused(f"{base} ** {exponent} is too large")
    result = base**exponent
    if isinstance(result, complex):
        raise Refused(f"({base}) ** {exponent} is not a real number")
    return result


def _safe_mult(left: Any, right: Any) -> Any:
    if _int_bits(left) + _int_bits(right) > MAX_INT_BITS:
        raise Refused("the product is too large")
    return simpleeval.safe_mult(left, right)


def _safe_mod(left: Any, right: Any) -> Any:
    if isinstance(left, str):
        raise Refused("'%' formatting is not supported", hint="Build strings with + or f'...'.")
    return left % right


OPERATORS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: simpleeval.safe_add,
    ast.Sub: operator.sub,
    ast.Mult: _safe_mult,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: _safe_mod,
    ast.Pow: _safe_pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda item, container: item in container,
    ast.NotIn: lambda item, container: item not in container,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
"""The operators expressions may use, with the bounded ones swapped in."""

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "all": all,
    "any": any,
    "bool": bool,
    "float": float,
    "int": int,
    "len": len,
    "max": max,
    "min": min,
    "round": round,
    "sorted": sorted,
    "str": _safe_str,
    "sum": _safe_sum,
}
"""The functions expressions may call."""

STRING_METHODS: dict[str, Callable[..., Any]] = {
    "endswith": str.endswith,
    "join": _safe_join,
    "lower": str.lower,
    "split": str.split,
    "startswith": str.startswith,
    "strip": str.strip,
    "upper": str.upper,
}
"""The string methods expressions may call, as `text.lower()`."""

_REMOVED_NODES = (
    ast.Assign,
    ast.AugAssign,
    ast.Import,
    ast.Expr,
    ast.Set,
    ast.ListComp,
    ast.GeneratorExp,
    ast.DictComp,
)


def _keys_text(mapping: Mapping[Any, Any]) -> str:
    keys = [str(key) for key in list(mapping)[:20]]
    more = ", ..." if len(mapping) > 20 else ""
    return ", ".join(keys) + more


def _lookup(mapping: Mapping[Any, Any], key: Any, where: ast.AST) -> Any:
    try:
        return mapping[key]
    except KeyError:
        pass
    except TypeError:
        raise Refused(f"{key!r} cannot be a key of {_where(where)}") from None
    if not mapping:
        raise Refused(f"{_where(where)} has no key {key!r}; it is empty")
    close = difflib.get_close_matches(str(key), [str(k) for k in mapping], n=1, cutoff=0.6)
    raise Refused(
        f"{_where(where)} has no key {key!r}; it has: {_keys_text(mapping)}",
        hint=f"Did you mean {close[0]!r}?" if close else None,
    )


class _Evaluator(simpleeval.EvalWithCompoundTypes):  # type: ignore[misc]
    """`EvalWithCompoundTypes` reading plain data only."""

    def __init__(self) -> None:
        super().__init__(operators=dict(OPERATORS), functions=dict(FUNCTIONS), names={})
        self.functions = dict(FUNCTIONS)
        for node_type in _REMOVED_NODES:
            self.nodes.pop(node_type, None)

    def _eval(self, node: ast.AST) -> Any:
        # The base class also walks every intermediate value looking for modules and
        # forbidden functions. Here names hold plain data and calls are allow-listed, so
        # that walk would only cost time (it is linear in the size of `results`).
        handler = self.nodes.get(type(node))
        if handler is None:
            raise Refused(f"{type(node).__name__} is not allowed in expressions")
        return handler(node)

    def _eval_name(self, node: ast.Name) -> Any:
        try:
            return self.names[node.id]
        except KeyError:
            available = ", ".join(sorted(self.names)) or "none"
            raise Refused(f"unknown name {node.id!r}; available: {available}") from None

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        if node.attr.startswith("_"):
            raise Refused(f"names starting with '_' are not allowed ({node.attr})")
        value = self._eval(node.value)
        if isinstance(value, Mapping):
            return _lookup(value, node.attr, node.value)
        raise Refused(
            f"cannot read .{node.attr} of {_where(node.value)}: it is {_a(value)}, not an object"
        )

    def _eval_subscript(self, node: ast.Subscript) -> Any:
        container = self._eval(node.value)
        key = self._eval(node.slice)
        if isinstance(container, Mapping):
            return _lookup(container, key, node.value)
        if not isinstance(container, list | tuple | str):
            raise Refused(f"cannot index {_where(node.value)}: it is {_a(container)}")
        if not isinstance(key, int | slice):
            raise Refused(f"{_where(node.value)} is a list; its index must be a number")
        try:
            return container[key]
        except IndexError:
            raise Refused(
                f"{_where(node.value)} has no index {key}; it has {len(container)} items"
            ) from None

    def _eval_call(self, node: ast.Call) -> Any:
        function = node.func
        if isinstance(function, ast.Attribute):
            target = self._eval(function.value)
            method = STRING_METHODS.get(function.attr)
            if method is None or not isinstance(target, str):
                raise Refused(
                    f"cannot call .{function.attr}() on {_where(function.value)}: "
                    f"it is {_a(target)}; only strings have methods"
                )
            bound: Callable[..., Any] = lambda *a, **k: method(target, *a, **k)  # noqa: E731
        elif isinstance(function, ast.Name) and function.id in FUNCTIONS:
            bound = FUNCTIONS[function.id]
        else:
            raise Refused(f"cannot call {_where(function)}")
        args = [self._eval(arg) for arg in node.args]
        kwargs = {kw.arg: self._eval(kw.value) for kw in node.keywords if kw.arg}
        return bound(*args, **kwargs)

    def _eval_formattedvalue(self, node: ast.FormattedValue) -> str:
        return _safe_str(self._eval(node.value))


_local = threading.local()


def evaluator() -> _Evaluator:
    """Return this thread's evaluator (evaluation is synchronous, so one per thread suffices)."""
    found = getattr(_local, "evaluator", None)
    if found is None:
        found = _local.evaluator = _Evaluator()
    return found
