"""Scopes: the list of steps a run executes, found in a flow by a path.

A top-level run executes its flow's `steps`. A child run executes one body
of a container step: a branch's case, one parallel branch, the loop body of
a `for_each` (once per item), or a sub-flow. Its scope is the path to that
body from the top, a list of `[step_id, part]` pairs stored with the run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from tidemill.engine.ai._child_runs import own_path
from tidemill.errors import EngineError
from tidemill.flows import Expression, Flow, Step, compile_expression, resolved_needs

__all__ = ["Definitions", "Scope", "body_parts", "child_scope"]


@dataclass(frozen=True, slots=True)
class Scope:
    """The steps of one body, with what each needs and how the body's result is found.

    Attributes:
        steps: The body's steps, in their declared order.
        needs: Each step's resolved `needs`.
        by_id: The steps by id.
        result: The expression that gives the body's result; None means the
            last step's result.
        inherits: True for the bodies of branches and loops, which see their
            parent's `flow_input` and results; False for a (sub-)flow.
    """

    steps: tuple[Step, ...]
    needs: dict[str, tuple[str, ...]]
    by_id: dict[str, Step]
    result: Expression | None
    inherits: bool
    last: str = field(init=False)
    dependents: dict[str, tuple[str, ...]] = field(init=False)
    """For each step, the steps that need it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "last", self.steps[-1].id)
        dependents: dict[str, list[str]] = {step.id: [] for step in self.steps}
        for step in self.steps:
            for need in self.needs[step.id]:
                dependents[need].append(step.id)
        object.__setattr__(self, "dependents", {k: tuple(v) for k, v in dependents.items()})

    @classmethod
    def of(cls, steps: Sequence[Step], result: Expression | None, *, inherits: bool) -> Scope:
        """Build a scope over a list of steps."""
        return cls(
            tuple(steps),
            {k: tuple(v) for k, v in resolved_needs(list(steps)).items()},
            {step.id: step for step in steps},
            result,
            inherits,
        )

    def ready(self, states: dict[str, str]) -> list[Step]:
        """Steps not started whose needs are all done (succeeded or skipped)."""
        done = {step for step, status in states.items() if status in ("succeeded", "skipped")}
        return [
            step
            for step in self.steps
            if step.id not in states and all(need in done for need in self.needs[step.id])
        ]

    def complete(self, states: dict[str, str]) -> bool:
        """True when every step of the body is done."""
        return all(states.get(step.id) in ("succeeded", "skipped") for step in self.steps)


def body_parts(step: Step) -> list[str]:
    """The names of a container step's bodies (`case:0`, `default`, `branch:1`, `body`, `flow`).

    A step of another kind has none.
    """
    kind = step.kind
    if kind == "branch":
        settings = step.branch
        assert settings is not None
        parts = [f"case:{i}" for i in range(len(settings.branches))]
        return [*parts, "default"] if settings.default else parts
    if kind == "parallel":
        assert step.parallel is not None
        return [f"branch:{i}" for i in range(len(step.parallel.branches))]
    if kind == "for_each":
        return ["body"]
    if kind == "flow":
        return ["flow"]
    return []


def _body(step: Step, part: str) -> tuple[Sequence[Step], Expression | None, bool]:
    if step.branch is not None:
        if part == "default":
            return step.branch.default, None, True
        return step.branch.branches[int(part.removeprefix("case:"))].steps, None, True
    if step.parallel is not None:
        return step.parallel.branches[int(part.removeprefix("branch:"))].steps, None, True
    if step.for_each is not None:
        return step.for_each.steps, None, True
    if step.flow is not None and step.flow.flow is not None:
        sub = step.flow.flow
        return sub.steps, _result_of(sub), False
    raise EngineError(f"Step {step.id!r} has no body {part!r}.")


def _result_of(flow: Flow) -> Expression | None:
    return None if flow.result is None else compile_expression(flow.result.expr)


def child_scope(parent: str, step_id: str, part: str) -> str:
    """The scope path of a child run, as stored.

    Examples:
        >>> child_scope("[]", "each", "body")
        '[["each","body"]]'
    """
    path = json.loads(parent)
    path.append([step_id, part])
    return json.dumps(path, separators=(",", ":"))


class Definitions:
    """Flows by digest and their scopes, parsed once per process and kept."""

    def __init__(self) -> None:
        self._flows: dict[str, Flow] = {}
        self._scopes: dict[tuple[str, str], Scope] = {}

    def add(self, digest: str, flow: Flow) -> None:
        """Remember a flow this process already has (the one it submitted)."""
        self._flows.setdefault(digest, flow)

    def flow(self, digest: str, body: str | None) -> Flow:
        """The flow with `digest`, parsed from `body` (its stored JSON) the first time."""
        flow = self._flows.get(digest)
        if flow is None:
            if body is None:
                raise EngineError(f"The store has no flow definition {digest}.")
            flow = Flow.model_validate_json(body)
            self._flows[digest] = flow
        return flow

    def known(self, digest: str) -> bool:
        """True when the flow is already parsed here."""
        return digest in self._flows

    def scope(self, digest: str, path: str) -> Scope:
        """The scope at `path` in the flow `digest` (which must be known)."""
        key = (digest, path)
        scope = self._scopes.get(key)
        if scope is None:
            flow = self._flows[digest]
            steps: Sequence[Step] = flow.steps
            result, inherits = _result_of(flow), False
            for step_id, part in own_path(json.loads(path)):
                step = next(s for s in steps if s.id == step_id)
                steps, result, inherits = _body(step, part)
            scope = Scope.of(steps, result, inherits=inherits)
            self._scopes[key] = scope
        return scope
