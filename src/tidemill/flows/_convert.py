"""Turn pydantic's validation errors into `Problem`s that name the step and field.

The flow and step models are arguments (`Flow` and `Step`, which call this
module), so the walk from an error's location down the models needs neither.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from tidemill.flows._node import KINDS
from tidemill.flows._problems import FLOW_ERROR, PROBLEM_ERROR, Problem

__all__ = ["problems_from_error"]


def _shape(annotation: Any) -> Any:
    """Reduce a field annotation to a model class, ("list", inner), ("dict", inner) or None."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _shape(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        models = [_shape(arg) for arg in get_args(annotation) if arg is not type(None)]
        known = [shape for shape in models if shape is not None]
        return known[0] if len(known) == 1 else None
    if origin is list:
        return ("list", _shape(get_args(annotation)[0]))
    if origin is dict:
        return ("dict", _shape(get_args(annotation)[1]))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _model(shape: Any) -> type[BaseModel] | None:
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        return shape
    return None


def _path_text(parts: Sequence[str | int]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


class _Where:
    """What a pydantic `loc` points at: the innermost step, the field inside it, the model."""

    def __init__(
        self,
        loc: Sequence[str | int],
        data: Any,
        flow_model: type[BaseModel],
        step_model: type[BaseModel],
    ) -> None:
        self.step_model = step_model
        self.step: str | None = None
        self.parts: list[str | int] = []  # the field path since the innermost step (or flow)
        self.prefix = ""  # set when the location is inside a sub-flow
        self.model: type[BaseModel] | None = None  # the model holding the last part
        shape: Any = flow_model
        node = data
        for part in loc:
            self.model = _model(shape)
            if self.model is not None and isinstance(part, str) and part in self.model.model_fields:
                shape = _shape(self.model.model_fields[part].annotation)
            elif isinstance(shape, tuple) and isinstance(part, int | str):
                shape = shape[1]
            else:
                shape = None
            holder = node
            node = node.get(part) if isinstance(node, dict) else _item(node, part)
            self.parts.append(part)
            if shape is step_model:
                self._enter_step(node)
            elif shape is flow_model:
                self._enter_sub_flow(holder)

    def _enter_step(self, node: Any) -> None:
        step_id = node.get("id") if isinstance(node, dict) else None
        if isinstance(step_id, str) and step_id:
            self.step = step_id
            self.parts = []
        else:
            self.step = None  # keep the path (`steps[2]`) so the step can be found

    def _enter_sub_flow(self, holder: Any) -> None:
        source = holder.get("source_path") if isinstance(holder, dict) else None
        owner = f"step {self.step!r}" if self.step else _path_text(self.parts[:-2]) or "a step"
        file = f" ({source})" if isinstance(source, str) else ""
        self.prefix += f"in the sub-flow of {owner}{file}: "
        self.step = None
        self.parts = []

    @property
    def field(self) -> str:
        return _path_text(self.parts)


def _item(node: Any, part: str | int) -> Any:
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def _unknown_field(where: _Where, name: str) -> str:
    message = f"unknown field {name!r}"
    candidates = list(where.model.model_fields) if where.model is not None else []
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if close:
        return f"{message}; did you mean {close[0]!r}?"
    if where.model is where.step_model:
        return f"{message}; a step's kind is one of: {', '.join(KINDS)}"
    if candidates:
        return f"{message}; the fields here are: {', '.join(candidates)}"
    return message


def _message(error: ErrorDetails, where: _Where) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return _unknown_field(where, str(error["loc"][-1]))
    if kind == "missing":
        return "this field is required"
    if kind in {"model_type", "model_attributes_type", "dict_type"}:
        return f"expected a mapping, got {type(error['input']).__name__}"
    if kind == "too_short" and isinstance(error["input"], list):
        return "must not be empty"
    message = error["msg"]
    return message.removeprefix("Value error, ")


def _convert(
    error: ErrorDetails, data: Any, flow_model: type[BaseModel], step_model: type[BaseModel]
) -> list[Problem]:
    where = _Where(error["loc"], data, flow_model, step_model)
    context = error.get("ctx") or {}
    if error["type"] == FLOW_ERROR:
        return [
            Problem(item["step"], item["field"], where.prefix + item["message"])
            for item in context.get("problems", [])
        ]
    field = where.field
    if error["type"] == PROBLEM_ERROR:
        extra = str(context.get("field", ""))
        field = f"{field}.{extra}" if field and extra else field or extra
        return [Problem(where.step, field, where.prefix + str(context.get("message", "")))]
    return [Problem(where.step, field or "flow", where.prefix + _message(error, where))]


def problems_from_error(
    error: ValidationError,
    data: Any,
    *,
    flow_model: type[BaseModel],
    step_model: type[BaseModel],
) -> list[Problem]:
    """Return the problems in a `ValidationError` raised while validating `data` as a flow.

    Each problem names the innermost step at the error's location (by id; by
    its path, as `steps[2]`, when it has none) and the field inside it.
    `flow_model` is the model `data` was validated as (`Flow`), `step_model`
    the model of its steps (`Step`).
    """
    problems: list[Problem] = []
    for details in error.errors(include_url=False):
        for problem in _convert(details, data, flow_model, step_model):
            if problem not in problems:
                problems.append(problem)
    return problems
