"""`evaluate_inputs`: a step's inputs, with expressions evaluated."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tidemill.flows._base import Expr
from tidemill.flows._flow import Step

__all__ = ["evaluate_inputs"]


def evaluate_inputs(step: Step, context: Mapping[str, Any]) -> dict[str, Any]:
    """Return a step's inputs: each `{expr: ...}` evaluated, static values copied.

    Only the top-level values of `inputs` are expressions; a `{expr: ...}`
    nested inside a static value is data.

    Raises:
        ExpressionError: When an expression fails; its message names the expression.

    Examples:
        >>> inputs = {"n": {"expr": "flow_input.n * 2"}, "mode": "fast"}
        >>> step = Step.model_validate({"id": "s", "identity": {}, "inputs": inputs})
        >>> evaluate_inputs(step, {"flow_input": {"n": 21}})
        {'n': 42, 'mode': 'fast'}
    """
    values: dict[str, Any] = {}
    for name, value in step.inputs.items():
        if isinstance(value, Expr):
            values[name] = value.compiled.evaluate(context)
        elif isinstance(value, dict | list):
            values[name] = copy.deepcopy(value)
        else:
            values[name] = value
    return values
