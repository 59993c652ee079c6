"""`Flow`: a flow definition, loaded from YAML or JSON or built in Python."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from jsonschema import exceptions as jsonschema_exceptions
from jsonschema import validators as jsonschema_validators
from jsonschema.protocols import Validator
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tidemill.errors import FlowInputError
from tidemill.flows._ai import AgentToolSpec, AIAgent
from tidemill.flows._base import Expr, ExpressionText, FlowModel
from tidemill.flows._check import check_flow
from tidemill.flows._expr import Expression, compile_expression
from tidemill.flows._scope import Placement, index_steps, iter_steps
from tidemill.flows._step import Body, Branch, Case, ForEach, Parallel, Step, SubFlow

__all__ = ["FLOW_ERROR", "Concurrency", "Flow"]

FLOW_ERROR = "tidemill_flow"
"""The pydantic error type carrying the problems found between a flow's steps."""


class Concurrency(FlowModel):
    """How many runs of the flow may be active at once.

    Example:
        >>> Concurrency(limit=2, key="flow_input.customer").key_expression
        Expression('flow_input.customer')
    """

    limit: int = Field(ge=1)
    """The most runs active at the same time (per key, when `key` is set)."""

    key: ExpressionText | None = None
    """An expression over `flow_input`; runs with different keys do not limit each other."""

    @property
    def key_expression(self) -> Expression | None:
        """`key`, compiled."""
        return None if self.key is None else compile_expression(self.key)


def _check_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    try:
        jsonschema_validators.validator_for(schema).check_schema(schema)
    except jsonschema_exceptions.SchemaError as exc:
        where = exc.json_path if exc.path else "the schema"
        raise ValueError(f"not a valid JSON Schema: {exc.message} (at {where})") from None
    return schema


class Flow(FlowModel):
    """A flow: steps to run, with an input schema and an optional result.

    Validating a flow checks everything that can be checked before running:
    the shape of each step, ids, `needs`, cycles and what expressions read.
    `Flow.load`, `Flow.parse` and `Flow.from_dict` report every problem as one
    `FlowValidationError`; `Flow.model_validate` and `Flow.model_validate_json`
    raise pydantic's `ValidationError` instead (with the same problems inside).

    Example:
        >>> flow = Flow.parse('''
        ... summary: Double a number
        ... inputs: {type: object, properties: {n: {type: number}}, required: [n]}
        ... steps:
        ...   - id: double
        ...     script: |
        ...       def main(n):
        ...           return 2 * n
        ...     inputs: {n: {expr: flow_input.n}}
        ... ''')
        >>> [step.id for step in flow.walk()], flow.find("double").kind
        (['double'], 'script')
        >>> flow.validate_input({"n": 2})
        {'n': 2}
        >>> Flow.model_validate_json(flow.model_dump_json()).digest() == flow.digest()
        True
    """

    name: str = ""
    """A display name; `Flow.load` uses the file's stem when it is empty."""

    summary: str = ""
    """What the flow does, for people."""

    inputs: dict[str, Any] = Field(default_factory=dict)
    """The JSON Schema of the flow's input (`{}` accepts anything)."""

    steps: list[Step] = Field(min_length=1)
    """The steps; each one by default needs the one before it."""

    result: Expr | None = None
    """The flow's result; by default the result of the last step in `steps`."""

    concurrency: Concurrency | None = None
    """A limit on how many runs of this flow are active at once."""

    @field_validator("inputs")
    @classmethod
    def _inputs_is_a_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_input_schema(value)

    @model_validator(mode="after")
    def _check_steps(self) -> Flow:
        problems = check_flow(self)
        if problems:
            raise PydanticCustomError(
                FLOW_ERROR,
                "{detail}",
                {
                    "detail": "; ".join(str(problem) for problem in problems),
                    "problems": [dataclasses.asdict(problem) for problem in problems],
                },
            )
        return self

    # -- Loading ------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> Flow:
        """Load a flow from a `.yaml`, `.yml` or `.json` file.

        Script `path`s and sub-flow files are read relative to the file and
        stored inline, so the loaded flow needs no files. `name` defaults to
        the file's stem.

        Raises:
            FlowValidationError: When the file is missing or unreadable, or the
                flow (or an included file) is not valid.
        """
        from tidemill.flows._load import load_flow

        return load_flow(path)

    @classmethod
    def parse(
        cls,
        text: str,
        *,
        format: Literal["yaml", "json"] = "yaml",
        base_dir: str | Path | None = None,
        source: str | None = None,
    ) -> Flow:
        """Parse a flow from YAML (the default) or JSON text.

        Args:
            text: The document.
            format: `yaml` or `json`.
            base_dir: Where relative script and sub-flow paths are read from;
                the current directory by default.
            source: Where the text came from, for error messages.

        Raises:
            FlowValidationError: When the text cannot be parsed or the flow is not valid.
        """
        from tidemill.flows._load import parse_flow

        return parse_flow(text, format=format, base_dir=base_dir, source=source)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        base_dir: str | Path | None = None,
        source: str | None = None,
    ) -> Flow:
        """Build a flow from plain data (as parsed from YAML or JSON).

        Like `parse`, this reads script and sub-flow files (relative to
        `base_dir`, the current directory by default) and inlines them.

        Raises:
            FlowValidationError: Listing every problem found.
        """
        from tidemill.flows._load import flow_from_data

        return flow_from_data(data, base_dir=base_dir, source=source)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """Return the JSON Schema of flow files, for editors and other tools.

        It accepts the shorthands (`script: "code"`, `flow: file.yaml`,
        `identity:`, durations as strings); `schemas/flow.schema.json` holds a copy.
        """
        from tidemill.flows._schema import flow_json_schema

        return flow_json_schema()

    # -- Steps --------------------------------------------------------------------------

    @functools.cached_property
    def _placements(self) -> dict[str, Placement]:
        return index_steps(self.steps)[0]

    def walk(self) -> Iterator[Step]:
        """Yield every step, nested ones included, depth first in document order.

        A sub-flow's steps are not included; walk `step.flow.flow` for those.
        """
        return iter_steps(self.steps)

    def placement(self, step_id: str) -> Placement:
        """Return where a step sits: its parent, list, resolved needs and ancestors.

        Raises:
            KeyError: When no step has that id.
        """
        try:
            return self._placements[step_id]
        except KeyError:
            raise KeyError(f"the flow has no step {step_id!r}") from None

    def find(self, step_id: str) -> Step:
        """Return the step with that id, wherever it is nested.

        Raises:
            KeyError: When no step has that id.
        """
        return self.placement(step_id).step

    def needs_of(self, step: Step | str) -> tuple[str, ...]:
        """Return the ids a step (or the step with that id) waits for, in its own list.

        See `resolved_needs` for the defaults.
        """
        return self.placement(step if isinstance(step, str) else step.id).needs

    @property
    def result_expression(self) -> Expression | None:
        """`result`, compiled; None means the result of the last step in `steps`."""
        return None if self.result is None else self.result.compiled

    # -- Data ---------------------------------------------------------------------------

    def digest(self) -> str:
        """Return the SHA-256 (hex) of the flow's canonical JSON form.

        Equal flows have equal digests, whatever the key order or formatting
        of the files they came from.
        """
        data = self.model_dump(mode="json", exclude_defaults=False)
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @functools.cached_property
    def _input_validator(self) -> Validator:
        validator_class = jsonschema_validators.validator_for(self.inputs)
        return validator_class(self.inputs)

    def validate_input(self, data: Mapping[str, Any] | None) -> dict[str, Any]:
        """Check a run's input against `inputs` and return it as a dict.

        Defaults in the schema are not filled in.

        Raises:
            FlowInputError: Listing each violation with its JSON path (`$.ticket`).
        """
        flow_name = self.name or None
        given: object = {} if data is None else data
        if not isinstance(given, Mapping):
            message = f"$: the input must be an object, not {type(given).__name__}"
            raise FlowInputError([message], flow=flow_name)
        value = dict(given)
        errors = sorted(
            self._input_validator.iter_errors(value), key=lambda e: (e.json_path, e.message)
        )
        if errors:
            raise FlowInputError([f"{e.json_path}: {e.message}" for e in errors], flow=flow_name)
        return value


_NAMESPACE = {"Flow": Flow, "Step": Step, "SubFlow": SubFlow, "AIAgent": AIAgent}
for _model in (AgentToolSpec, AIAgent, SubFlow, Case, Branch, Body, Parallel, ForEach, Step, Flow):
    _model.model_rebuild(_types_namespace=_NAMESPACE)
