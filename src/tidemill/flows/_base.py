"""The pieces every flow model shares: the base model, `Expr`, and input values."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainValidator,
    WithJsonSchema,
)

from tidemill.errors import ExpressionError
from tidemill.flows._expr import Expression, compile_expression
from tidemill.flows._node import StepNode

__all__ = [
    "Expr",
    "ExpressionText",
    "FlowModel",
    "InputValue",
    "ItemsValue",
    "StepKind",
    "check_expression",
    "expr_or_value",
]


class FlowModel(BaseModel):
    """Base of the flow models: unknown keys are errors, and instances do not change.

    Derived values (compiled expressions, the step index) are cached on first
    use, so build changed flows by validating new data, not with
    `model_copy(update=...)`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def check_expression(text: str) -> str:
    """Validate an expression's syntax; a pydantic validator (raises ValueError)."""
    try:
        compile_expression(text)
    except ExpressionError as exc:
        hint = f" ({exc.hint})" if exc.hint else ""
        raise ValueError(f"invalid expression {text!r}: {exc.reason}{hint}") from None
    return text


ExpressionText = Annotated[
    str,
    AfterValidator(check_expression),
    WithJsonSchema({"type": "string", "description": "An expression, e.g. `flow_input.x > 1`."}),
]
"""A field holding an expression's text, checked when the model is validated."""


class Expr(FlowModel):
    """A value computed from an expression when the step runs: `{expr: "results.fetch.text"}`.

    Examples:
        >>> Expr(expr="flow_input.n + 1").evaluate({"flow_input": {"n": 41}})
        42
    """

    expr: ExpressionText
    """The expression, e.g. `results.fetch.text` or `flow_input.amount > 100`."""

    @functools.cached_property
    def compiled(self) -> Expression:
        """The compiled expression."""
        return compile_expression(self.expr)

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        """Evaluate the expression against `context`."""
        return self.compiled.evaluate(context)


_EXPR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"expr": {"type": "string"}},
    "required": ["expr"],
    "additionalProperties": False,
}


def _check_json(value: Any, where: str = "the value") -> None:
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value}, which JSON cannot hold")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has the key {key!r}; keys must be strings")
            _check_json(item, f"{where}.{key}")
        return
    raise ValueError(f"{where} is {type(value).__name__}, which is not a JSON value")


def expr_or_value(value: Any) -> Any:
    """Return `{expr: text}` as an `Expr`, and check anything else is a JSON value.

    Examples:
        >>> expr_or_value({"expr": "flow_input.x"}), expr_or_value({"mode": "fast"})
        (Expr(expr='flow_input.x'), {'mode': 'fast'})
    """
    if isinstance(value, Expr):
        return value
    if isinstance(value, dict) and set(value) == {"expr"}:
        text = value["expr"]
        if not isinstance(text, str):
            raise ValueError("'expr' must be a string holding an expression")
        return Expr(expr=check_expression(text))
    _check_json(value)
    return value


InputValue = Annotated[
    Any,
    PlainValidator(expr_or_value),
    WithJsonSchema(
        {"description": "A static JSON value, or `{expr: ...}` to compute it when the step runs."}
    ),
]
"""A step input: a static JSON value, or an `Expr` (a mapping whose only key is `expr`)."""


def _items(value: Any) -> list[Any] | Expr:
    if isinstance(value, list | tuple):
        items = list(value)
        _check_json(items, "items")
        return items
    converted = expr_or_value(value) if isinstance(value, dict | Expr) else None
    if not isinstance(converted, Expr):
        raise ValueError("items must be a list, or {expr: ...} giving a list")
    return converted


ItemsValue = Annotated[
    list[Any] | Expr,
    BeforeValidator(_items),
    WithJsonSchema({"anyOf": [{"type": "array"}, _EXPR_SCHEMA]}),
]
"""`for_each.items`: a static list, or an `Expr` that gives one."""


class StepKind(FlowModel):
    """Base of the models behind a step's kind key (`script:`, `branch:`, ...).

    A kind with nested steps overrides `bodies`; a kind with expressions of
    its own overrides `expressions`, and one with prompt templates `templates`.
    """

    def bodies(self) -> tuple[tuple[str, Sequence[StepNode]], ...]:
        """The lists of nested steps, each with its field path inside the kind."""
        return ()

    def expressions(self) -> dict[str, Expression]:
        """The kind's own expressions, keyed by field path inside the kind."""
        return {}

    def templates(self) -> dict[str, str]:
        """The kind's prompt templates (with `{{ ... }}` placeholders), keyed by field path."""
        return {}
