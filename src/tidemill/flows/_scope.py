"""Scopes: each list of steps, the default `needs`, and where every step sits.

The functions take any `StepNode` (in practice `Step`) and give back the
same type, so `Flow` calls them and they need not import it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from tidemill.flows._node import StepNode

__all__ = ["Placement", "index_steps", "iter_steps", "resolved_needs"]

S = TypeVar("S", bound=StepNode)


def resolved_needs(steps: Sequence[StepNode]) -> dict[str, tuple[str, ...]]:
    """Return each step's dependencies within one list of steps.

    A step without `needs` depends on the step just before it in the list
    (the first step on nothing); `needs: []` depends on nothing.

    Examples:
        >>> from tidemill.flows import Step
        >>> steps = [
        ...     Step(id="a", identity={}),
        ...     Step(id="b", identity={}),
        ...     Step(id="c", identity={}, needs=["a"]),
        ...     Step(id="d", identity={}, needs=[]),
        ... ]
        >>> resolved_needs(steps)
        {'a': (), 'b': ('a',), 'c': ('a',), 'd': ()}
    """
    needs: dict[str, tuple[str, ...]] = {}
    previous: str | None = None
    for step in steps:
        if step.needs is not None:
            needs[step.id] = tuple(dict.fromkeys(step.needs))
        else:
            needs[step.id] = (previous,) if previous is not None else ()
        previous = step.id
    return needs


@dataclass(frozen=True)
class Placement(Generic[S]):
    """Where a step sits in its flow."""

    step: S
    """The step."""
    parent: str | None
    """The id of the step whose body holds it, or None at the top level."""
    body: str
    """The field path of its list inside `parent`, or `steps` at the top level.

    For example `for_each.steps`, `branch.branches[0].steps`,
    `parallel.branches[1].steps`, `branch.default`."""
    siblings: tuple[str, ...]
    """The ids of its list, in order (itself included)."""
    needs: tuple[str, ...]
    """Its resolved dependencies (see `resolved_needs`)."""
    ancestors: tuple[str, ...]
    """The ids of the steps whose bodies hold it, outermost first."""
    in_for_each: bool
    """Whether it runs inside a `for_each` body (so `iter` is set)."""


def iter_steps(steps: Sequence[S]) -> Iterator[S]:
    """Yield every step of `steps` and of their bodies, depth first, in document order."""
    for step in steps:
        yield step
        for _path, body in step.bodies():
            yield from iter_steps(body)


def index_steps(steps: Sequence[S]) -> tuple[dict[str, Placement[S]], list[Placement[S]]]:
    """Place every step of a flow; return the places by id and the duplicates.

    The first step with an id wins; later steps with the same id are returned
    as duplicates.
    """
    index: dict[str, Placement[S]] = {}
    duplicates: list[Placement[S]] = []

    def visit(
        body: Sequence[S],
        parent: str | None,
        path: str,
        ancestors: tuple[str, ...],
        in_for_each: bool,
    ) -> None:
        needs = resolved_needs(body)
        siblings = tuple(step.id for step in body)
        for step in body:
            place = Placement(step, parent, path, siblings, needs[step.id], ancestors, in_for_each)
            if step.id in index:
                duplicates.append(place)
            else:
                index[step.id] = place
            for inner_path, inner in step.bodies():
                inside = in_for_each or step.kind == "for_each"
                visit(inner, step.id, inner_path, (*ancestors, step.id), inside)

    visit(steps, None, "steps", (), False)
    return index, duplicates
