"""`Step` and the kinds that hold other steps: branch, parallel, for_each and sub-flows."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, field_validator, model_validator

from tidemill.flows._ai import AIAction, AIAgent
from tidemill.flows._approval import Approval
from tidemill.flows._base import (
    Expr,
    ExpressionText,
    FlowModel,
    InputValue,
    ItemsValue,
    StepKind,
)
from tidemill.flows._duration import Duration
from tidemill.flows._expr import Expression, compile_expression
from tidemill.flows._identity import Identity
from tidemill.flows._problems import problem_error
from tidemill.flows._retry import Retry
from tidemill.flows._script import ScriptStep

if TYPE_CHECKING:
    from tidemill.flows._flow import Flow

__all__ = [
    "ID_PATTERN",
    "Body",
    "Branch",
    "Case",
    "ForEach",
    "Parallel",
    "Step",
    "StepSettings",
    "SubFlow",
]

ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"
"""What a step id looks like."""

_ID = re.compile(ID_PATTERN)


class Case(FlowModel):
    """One case of a `branch`: its steps run when `when` is true."""

    when: ExpressionText
    """The condition, e.g. `results.classify.label == 'refund'`."""

    summary: str = ""
    """What the case is for."""

    steps: list[Step] = Field(min_length=1)
    """The steps to run; the case's result is the last one's."""


class Branch(StepKind):
    """Run the steps of the first case whose `when` is true, else `default`.

    The branch step's result is the result of the last step that ran.
    """

    branches: list[Case] = Field(min_length=1)
    """The cases, tried in order."""

    default: list[Step] = Field(default_factory=list)
    """The steps to run when no case matches (none: the result is null)."""

    def bodies(self) -> tuple[tuple[str, Sequence[Step]], ...]:
        """Each case's steps, then the default steps."""
        cases = tuple((f"branches[{i}].steps", case.steps) for i, case in enumerate(self.branches))
        return (*cases, ("default", self.default)) if self.default else cases

    def expressions(self) -> dict[str, Expression]:
        """Each case's `when`."""
        return {
            f"branches[{i}].when": compile_expression(case.when)
            for i, case in enumerate(self.branches)
        }


class Body(FlowModel):
    """One branch of a `parallel` step."""

    summary: str = ""
    """What the branch does."""

    steps: list[Step] = Field(min_length=1)
    """The steps of the branch; its result is the last one's."""


class Parallel(StepKind):
    """Run every branch at the same time; the result is the list of the branches' results."""

    branches: list[Body] = Field(min_length=1)
    """The branches."""

    def bodies(self) -> tuple[tuple[str, Sequence[Step]], ...]:
        """Each branch's steps."""
        return tuple((f"branches[{i}].steps", body.steps) for i, body in enumerate(self.branches))


class ForEach(StepKind):
    """Run `steps` once per item; the result is the list of each run's result, in item order.

    Inside the steps, the name `iter` is `{"value": item, "index": i}`.
    """

    items: ItemsValue
    """A static list, or `{expr: ...}` giving a list."""

    parallelism: int = Field(default=1, ge=1)
    """How many items run at the same time."""

    steps: list[Step] = Field(min_length=1)
    """The steps run for each item; each run's result is the last one's."""

    def bodies(self) -> tuple[tuple[str, Sequence[Step]], ...]:
        """The steps run per item."""
        return (("steps", self.steps),)

    def expressions(self) -> dict[str, Expression]:
        """`items`, when it is an expression."""
        return {"items": self.items.compiled} if isinstance(self.items, Expr) else {}


class SubFlow(StepKind):
    """Run another flow with the step's inputs as its `flow_input`.

    `flow: child.yaml` is short for `flow: {path: child.yaml}`. `Flow.load`
    reads the file (relative to the parent flow's file) and stores the flow
    inline, so a loaded flow needs no files.
    """

    path: str | None = None
    """The flow file, relative to this flow's file; `Flow.load` inlines it into `flow`."""

    flow: Flow | None = None
    """The sub-flow itself."""

    source_path: str | None = None
    """The file `flow` was read from, for display; set by `Flow.load`."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _check(self) -> SubFlow:
        if (self.path is None) == (self.flow is None):
            raise problem_error("", "set exactly one of path and flow")
        if self.source_path is not None and self.flow is None:
            raise problem_error("source_path", "source_path is only allowed with flow")
        return self


StepSettings = (
    ScriptStep | SubFlow | Branch | Parallel | ForEach | Approval | Identity | AIAction | AIAgent
)
"""The model behind a step's kind key."""


class Step(FlowModel):
    r"""One step of a flow: an id, one kind key, and what applies to every kind.

    Example:
        >>> step = Step.model_validate(
        ...     {"id": "double", "script": "def main(x):\n    return 2 * x\n",
        ...      "inputs": {"x": {"expr": "flow_input.n"}}, "timeout": "30s"}
        ... )
        >>> step.kind, step.timeout, list(step.expressions_by_field())
        ('script', 30.0, ['inputs.x'])
    """

    KINDS: ClassVar[tuple[str, ...]] = (
        "script",
        "flow",
        "branch",
        "parallel",
        "for_each",
        "approval",
        "identity",
        "ai_action",
        "ai_agent",
    )
    """The kind keys; a step sets exactly one. A new kind is a new field listed here."""

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
        return tuple((f"{kind}.{path}", steps) for path, steps in self.settings.bodies())

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
