"""`Flow` and `Step`: a flow definition (from YAML, JSON or Python) and its steps.

A step's kind may hold more steps or a whole flow (the kinds in `_nesting`),
so this module and `_nesting` import each other. What the models call
(walking, checking, reading files, the JSON Schema) sits below both and
knows a step only as a `StepNode`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from jsonschema import exceptions as jsonschema_exceptions
from jsonschema import validators as jsonschema_validators
from jsonschema.protocols import Validator
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tidemill.errors import FlowInputError, FlowValidationError
from tidemill.flows._ai import AIAction, attachment_problems
from tidemill.flows._approval import Approval
from tidemill.flows._base import Expr, ExpressionText, FlowModel, InputValue
from tidemill.flows._check import check_flow, check_usage
from tidemill.flows._concurrency import Concurrency
from tidemill.flows._duration import Duration
from tidemill.flows._expr import Expression, compile_expression
from tidemill.flows._identity import Identity
from tidemill.flows._load import Includes, flow_from_data, load_flow, parse_flow
from tidemill.flows._nesting import (
    AgentToolSpec,
    AIAgent,
    Body,
    Branch,
    Case,
    ForEach,
    Parallel,
    SubFlow,
)
from tidemill.flows._node import ID_PATTERN, KINDS
from tidemill.flows._problems import FLOW_ERROR, Problem, problem_error
from tidemill.flows._retry import Retry
from tidemill.flows._schema import flow_json_schema
from tidemill.flows._scope import Placement, index_steps, iter_steps
from tidemill.flows._script import ScriptStep
from tidemill.flows._waiting import Sleep, WaitForEvent

__all__ = ["Flow", "Step", "StepSettings"]

_ID = re.compile(ID_PATTERN)


StepSettings = (
    ScriptStep
    | SubFlow
    | Branch
    | Parallel
    | ForEach
    | Approval
    | Sleep
    | WaitForEvent
    | Identity
    | AIAction
    | AIAgent
)
"""The model behind a step's kind key."""


class Step(FlowModel):
    r"""One step of a flow: an id, one kind key, and what applies to every kind.

    Examples:
        >>> step = Step.model_validate(
        ...     {"id": "double", "script": "def main(x):\n    return 2 * x\n",
        ...      "inputs": {"x": {"expr": "flow_input.n"}}, "timeout": "30s"}
        ... )
        >>> step.kind, step.timeout, list(step.expressions_by_field())
        ('script', 30.0, ['inputs.x'])
    """

    KINDS: ClassVar[tuple[str, ...]] = KINDS
    """The kind keys; a step sets exactly one. A new kind is a new field listed in `_node.KINDS`."""

    id: str
    """Unique in the whole flow: letters, digits, `_` and `-`, not starting with a digit."""

    summary: str = ""
    """What the step does, for people."""

    inputs: dict[str, InputValue] = Field(default_factory=dict)
    """Named inputs: static JSON values, or `{expr: ...}` evaluated when the step runs."""

    needs: list[str] | None = None
    """Steps of the same list that must finish first; by default the step just before."""

    retry: Retry | None = None
    """Retries when the step fails."""

    timeout: Duration | None = None
    """The longest one try may take (seconds, or `500ms`, `30s`, `5m`, `2h`, `3d`)."""

    skip_if: ExpressionText | None = None
    """Skip the step (its result is null) when this expression is true."""

    stop_after_if: ExpressionText | None = None
    """After the step, stop the run successfully when this is true; `result` is its result."""

    script: ScriptStep | None = None
    """Run Python."""

    flow: SubFlow | None = None
    """Run another flow."""

    branch: Branch | None = None
    """Run the steps of the first matching case."""

    parallel: Parallel | None = None
    """Run branches at the same time."""

    for_each: ForEach | None = None
    """Run steps once per item of a list."""

    approval: Approval | None = None
    """Wait for a person's decision."""

    sleep: Sleep | None = None
    """Wait for a while, or until a time, holding no worker."""

    wait_for_event: WaitForEvent | None = None
    """Wait for an event sent from outside (its payload is the result)."""

    identity: Identity | None = None
    """Pass data through: the inputs, or the previous result."""

    ai_action: AIAction | None = None
    """Call a model once; validate its answer against an output schema."""

    ai_agent: AIAgent | None = None
    """Run an agent durably: model calls and tool calls, journaled in the store."""

    @model_validator(mode="before")
    @classmethod
    def _identity_shorthand(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "identity" not in data:
            return data
        value = data["identity"]
        others = any(data.get(kind) is not None for kind in cls.KINDS if kind != "identity")
        if value is True or (value is None and not others):
            return {**data, "identity": {}}
        return data

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError(
                f"{value!r} is not a valid id: use letters, digits, '_' and '-', "
                "not starting with a digit or '-'"
            )
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> Step:
        kinds = [kind for kind in self.KINDS if getattr(self, kind) is not None]
        if not kinds:
            raise problem_error("kind", "the step has no kind; set one of " + ", ".join(self.KINDS))
        if len(kinds) > 1:
            raise problem_error(
                "kind", f"the step has {len(kinds)} kinds ({', '.join(kinds)}); set exactly one"
            )
        return self

    @property
    def kind(self) -> str:
        """The kind key that is set (`script`, `flow`, `branch`, ...)."""
        return next(kind for kind in self.KINDS if getattr(self, kind) is not None)

    @property
    def settings(self) -> StepSettings:
        """The model of the step's kind (`self.script` for a script step, ...)."""
        settings: StepSettings = getattr(self, self.kind)
        return settings

    def bodies(self) -> tuple[tuple[str, Sequence[Step]], ...]:
        """The lists of nested steps, each with its field path (`for_each.steps`).

        A sub-flow's steps are not included: a sub-flow is a flow of its own.
        """
        kind = self.kind
        settings = self.settings
        # Only these kinds hold steps, and narrowing types them as `Step`: the base
        # `StepKind.bodies` sits below `Step` and knows them only as `StepNode`.
        if not isinstance(settings, Branch | Parallel | ForEach):
            return ()
        return tuple((f"{kind}.{path}", steps) for path, steps in settings.bodies())

    @functools.cached_property
    def _expressions(self) -> dict[str, Expression]:
        found: dict[str, Expression] = {}
        for name, value in self.inputs.items():
            if isinstance(value, Expr):
                found[f"inputs.{name}"] = value.compiled
        if self.skip_if is not None:
            found["skip_if"] = compile_expression(self.skip_if)
        if self.stop_after_if is not None:
            found["stop_after_if"] = compile_expression(self.stop_after_if)
        kind = self.kind
        for path, expression in self.settings.expressions().items():
            found[f"{kind}.{path}"] = expression
        return found

    def expressions(self) -> tuple[Expression, ...]:
        """Every expression of the step itself (not of its nested steps), compiled once."""
        return tuple(self._expressions.values())

    def expressions_by_field(self) -> Mapping[str, Expression]:
        """Every expression of the step itself, keyed by field path.

        Keys are `inputs.<name>`, `skip_if`, `stop_after_if`, `for_each.items`
        and `branch.branches[<i>].when`.
        """
        return self._expressions

    def templates_by_field(self) -> Mapping[str, str]:
        """The prompt templates of its kind, keyed by field path (`ai_action.prompt`)."""
        kind = self.kind
        return {f"{kind}.{path}": text for path, text in self.settings.templates().items()}

    def mistakes(self) -> list[Problem]:
        """What its kind's settings tell of it alone, and the mistakes of the flows it holds.

        Model specs the provider layer cannot read; inputs that do not fit a
        script's `main`; and, with a prefix naming where they are, the
        mistakes of a sub-flow and of an agent's `flow` tools (see `Flow.check`).
        """
        kind, settings = self.kind, self.settings
        found: list[tuple[str, str]] = []
        held: list[tuple[str, SubFlow]] = []
        if isinstance(settings, ScriptStep):
            found = settings.input_problems(self.inputs)
        elif isinstance(settings, AIAction | AIAgent):
            found = [(f"{kind}.{path}", text) for path, text in settings.model_problems()]
            if isinstance(settings, AIAgent):  # the flow-local input, when it is static
                found.extend(attachment_problems(self.inputs))
        if isinstance(settings, SubFlow):
            held.append((f"the sub-flow of step {self.id!r}", settings))
        elif isinstance(settings, AIAgent):
            held.extend(
                (f"the flow of step {self.id!r}, ai_agent.tools[{index}]", tool.flow)
                for index, tool in enumerate(settings.tools)
                if tool.flow is not None
            )
        problems = [Problem(self.id, field, message) for field, message in found]
        for where, sub in held:
            if sub.flow is not None:
                source = f" ({sub.source_path})" if sub.source_path else ""
                problems.extend(
                    Problem(p.step, p.field, f"in {where}{source}: {p.message}")
                    for p in sub.flow._usage_problems
                )
        return problems

    @property
    def skip_condition(self) -> Expression | None:
        """`skip_if`, compiled."""
        return self._expressions.get("skip_if")

    @property
    def stop_condition(self) -> Expression | None:
        """`stop_after_if`, compiled; evaluate it with `result` set to the step's result."""
        return self._expressions.get("stop_after_if")

    @functools.cached_property
    def _results_used(self) -> frozenset[str] | None:
        used: set[str] = set()
        for expression in self._expressions.values():
            if expression.results_used is None:
                return None
            used |= expression.results_used
        return frozenset(used)

    @property
    def results_used(self) -> frozenset[str] | None:
        """The step ids whose results the step's own expressions read; None when unknowable."""
        return self._results_used


def _check_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    try:
        jsonschema_validators.validator_for(schema).check_schema(schema)
    except jsonschema_exceptions.SchemaError as exc:
        where = exc.json_path if exc.path else "the schema"
        raise ValueError(f"not a valid JSON Schema: {exc.message} (at {where})") from None
    return schema


class Flow(FlowModel):
    """A flow: steps to run, with an input schema and an optional result.

    Validating a flow checks its shape: each step, ids, `needs`, cycles and
    what expressions read. `Flow.load`, `Flow.parse` and `Flow.from_dict`
    report every problem as one `FlowValidationError`, and then check what its
    steps use (`check`: model specs, placeholders, script inputs);
    `Flow.model_validate` and `Flow.model_validate_json` raise pydantic's
    `ValidationError` for shape problems and do not check use, so a flow
    stored by an earlier version still reads back.

    Examples:
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

    description: str = ""
    """More on what the flow does and how to use it (the workspace shows and searches it)."""

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
        concurrency_key = None if self.concurrency is None else self.concurrency.key_expression
        problems = check_flow(
            self.steps, result=self.result_expression, concurrency_key=concurrency_key
        )
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
        return load_flow(path, flow_model=Flow, step_model=Step)._checked(str(path))

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
        flow = parse_flow(
            text,
            flow_model=Flow,
            step_model=Step,
            format=format,
            base_dir=base_dir,
            source=source,
        )
        return flow._checked(source)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        base_dir: str | Path | None = None,
        source: str | None = None,
        includes: Includes | None = None,
    ) -> Flow:
        """Build a flow from plain data (as parsed from YAML or JSON).

        Like `parse`, this reads script and sub-flow files (relative to
        `base_dir`, the current directory by default) and inlines them, and
        the workspace scripts and flows it names by path from `includes`
        (the workspace does this when it validates and runs a flow).

        Raises:
            FlowValidationError: Listing every problem found.
        """
        flow = flow_from_data(
            data,
            flow_model=Flow,
            step_model=Step,
            base_dir=base_dir,
            source=source,
            includes=includes,
        )
        return flow._checked(source)

    @functools.cached_property
    def _usage_problems(self) -> tuple[Problem, ...]:
        """The mistakes `check` reports (empty when there is none), found once."""
        return tuple(check_usage(self.steps))

    def check(self) -> None:
        """Refuse the mistakes a run would trip over, which the flow's shape does not show.

        A model spec the provider layer cannot read (`opnai:gpt-4o`, with its
        did-you-mean), a `{{ placeholder }}` naming nothing its prompt sees, a
        parameter of a script's `main` that no input fills, an input that
        names no parameter of `main`; in sub-flows and `flow` tools too.
        `load`, `parse`, `from_dict` and the engine's `submit` run it.

        Raises:
            FlowValidationError: Listing every such problem.
        """
        self._checked(None)

    def _checked(self, source: str | None) -> Flow:
        if self._usage_problems:
            raise FlowValidationError(list(self._usage_problems), source=source)
        return self

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """Return the JSON Schema of flow files, for editors and other tools.

        It accepts the shorthands (`script: "code"`, `flow: file.yaml`,
        `identity:`, durations as strings); `schemas/flow.schema.json` holds a copy.
        """
        return flow_json_schema(Flow)

    # -- Steps --------------------------------------------------------------------------

    @functools.cached_property
    def _placements(self) -> dict[str, Placement[Step]]:
        return index_steps(self.steps)[0]

    def walk(self) -> Iterator[Step]:
        """Yield every step, nested ones included, depth first in document order.

        A sub-flow's steps are not included; walk `step.flow.flow` for those.
        """
        return iter_steps(self.steps)

    def placement(self, step_id: str) -> Placement[Step]:
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
