"""The checks between steps: ids, `needs`, cycles, and what expressions may read.

The models check each field on its own; these checks need the whole flow.
`check_flow` runs when a `Flow` is validated and reports every problem it
finds. `check_usage` finds the mistakes a run would trip over (a model spec
the provider layer cannot read, a placeholder naming nothing its prompt
sees, inputs that do not fit a script's `main`); it runs when a flow is
loaded or submitted, not when a stored definition is read back.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping, Sequence

from tidemill.flows._expr import Expression, compile_expression, placeholders
from tidemill.flows._node import StepNode
from tidemill.flows._problems import Problem
from tidemill.flows._scope import Placement, index_steps, resolved_needs

__all__ = ["STEP_NAMES", "check_flow", "check_usage"]

STEP_NAMES = ("flow_input", "results", "previous_result")
"""The names every step expression may use; `iter` and `result` are added where they apply."""


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _bodies(steps: Sequence[StepNode]) -> Iterator[Sequence[StepNode]]:
    """Yield `steps` and every nested list of steps."""
    yield steps
    for step in steps:
        for _path, body in step.bodies():
            yield from _bodies(body)


def _check_duplicates(duplicates: Sequence[Placement[StepNode]]) -> list[Problem]:
    return [
        Problem(
            place.step.id,
            "id",
            f"duplicate id {place.step.id!r}: ids must be unique in the whole flow, "
            "nested steps included",
        )
        for place in duplicates
    ]


def _check_needs(
    body: Sequence[StepNode], index: Mapping[str, Placement[StepNode]]
) -> list[Problem]:
    problems: list[Problem] = []
    siblings = [step.id for step in body]
    for step in body:
        for name in dict.fromkeys(step.needs or ()):
            if name == step.id:
                problems.append(Problem(step.id, "needs", "a step cannot need itself"))
            elif name in siblings:
                continue
            elif name in index:
                others = ", ".join(s for s in siblings if s != step.id) or "none"
                problems.append(
                    Problem(
                        step.id,
                        "needs",
                        f"{name!r} is in another list of steps; needs may only name steps "
                        f"of the same list (here: {others})",
                    )
                )
            else:
                hint = _did_you_mean(name, siblings) or _did_you_mean(name, index)
                problems.append(Problem(step.id, "needs", f"unknown step {name!r}{hint}"))
    return problems


def _find_cycles(graph: Mapping[str, Sequence[str]], order: Sequence[str]) -> list[list[str]]:
    """Return the dependency cycles of `graph` (each once), starting at their first node."""
    position = {node: i for i, node in enumerate(order)}
    cycles: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    done: set[str] = set()
    for root in order:
        if root in done:
            continue
        path: list[str] = [root]
        on_path = {root}
        pending = [iter(graph.get(root, ()))]
        while pending:
            nxt = next(pending[-1], None)
            if nxt is None:
                pending.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
            elif nxt in on_path:
                cycle = path[path.index(nxt) :]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    start = min(range(len(cycle)), key=lambda i: position[cycle[i]])
                    cycles.append(cycle[start:] + cycle[:start])
            elif nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                pending.append(iter(graph.get(nxt, ())))
    return cycles


def _check_cycles(body: Sequence[StepNode]) -> list[Problem]:
    siblings = [step.id for step in body]
    needs = resolved_needs(body)
    # A step runs after what it needs: edges go from a step to each of its needs.
    graph = {name: [n for n in deps if n in needs and n != name] for name, deps in needs.items()}
    return [
        Problem(cycle[0], "needs", "dependency cycle: " + " -> ".join([*cycle, cycle[0]]))
        for cycle in _find_cycles(graph, siblings)
    ]


class _Reach:
    """Which steps are sure to have finished before another one runs."""

    def __init__(self, index: Mapping[str, Placement[StepNode]]) -> None:
        self._index = index
        self._known: dict[tuple[str, str], bool] = {}

    def before(self, step_id: str, other: str) -> bool:
        """Whether `step_id` needs `other`, directly or through the steps it needs."""
        key = (step_id, other)
        found = self._known.get(key)
        if found is None:
            found = False
            seen: set[str] = set()
            todo = list(self._index[step_id].needs)
            while todo and not found:
                name = todo.pop()
                if name == other:
                    found = True
                elif name not in seen and name in self._index:
                    seen.add(name)
                    todo.extend(self._index[name].needs)
            self._known[key] = found
        return found

    def unreadable(self, reader: Placement[StepNode], target_id: str) -> str | None:
        """Say why `reader` may not read `results.<target_id>`, or None when it may."""
        target = self._index[target_id]
        chain_r = (*reader.ancestors, reader.step.id)
        chain_t = (*target.ancestors, target_id)
        i = 0
        while i < len(chain_r) and i < len(chain_t) and chain_r[i] == chain_t[i]:
            i += 1
        if i == len(chain_r) and i == len(chain_t):
            return "a step cannot read its own result (stop_after_if reads it as `result`)"
        if i == len(chain_t):
            return f"step {target_id!r} holds this step and has not finished while it runs"
        if i == len(chain_r):
            return f"step {target_id!r} is nested in this step and has not run yet"
        mine, theirs = chain_r[i], chain_t[i]
        if self._index[mine].body != self._index[theirs].body:
            parent = chain_r[i - 1]
            return (
                f"step {target_id!r} is in another branch of {parent!r}; "
                f"read it after {parent!r} finishes"
            )
        if not self.before(mine, theirs):
            whose = "this step's needs" if mine == reader.step.id else f"the needs of {mine!r}"
            return f"step {theirs!r} is not sure to have finished; add {theirs!r} to {whose}"
        for holder in chain_t[i:-1]:
            if self._index[holder].step.kind == "for_each":
                return (
                    f"step {target_id!r} runs once per item of for_each {holder!r}; "
                    f"read results.{holder} (the list of per-item results) instead"
                )
        return None


def _check_names(
    step: str | None,
    field: str,
    expression: Expression,
    allowed: set[str],
    *,
    here: str = "expressions here",
) -> list[Problem]:
    problems: list[Problem] = []
    for name in sorted(expression.names - allowed):
        if name == "iter":
            message = "`iter` is only set inside the steps of a for_each"
        elif name == "result":
            message = "`result` is only set in stop_after_if (the step's own result)"
        else:
            message = (
                f"unknown name {name!r}{_did_you_mean(name, allowed)} "
                f"({here} can use: {', '.join(sorted(allowed))})"
            )
        problems.append(Problem(step, field, message))
    return problems


def _check_results(
    place: Placement[StepNode],
    field: str,
    expression: Expression,
    index: Mapping[str, Placement[StepNode]],
    reach: _Reach,
) -> list[Problem]:
    problems: list[Problem] = []
    step_id = place.step.id
    for target in sorted(expression.results_used or ()):
        if target not in index:
            hint = _did_you_mean(target, index)
            problems.append(
                Problem(step_id, field, f"reads results.{target}: no step {target!r}{hint}")
            )
            continue
        why = reach.unreadable(place, target)
        if why:
            problems.append(Problem(step_id, field, f"reads results.{target}, but {why}"))
    return problems


def _check_step_expressions(
    place: Placement[StepNode], index: Mapping[str, Placement[StepNode]], reach: _Reach
) -> list[Problem]:
    problems: list[Problem] = []
    step = place.step
    for field, expression in step.expressions_by_field().items():
        allowed = set(STEP_NAMES)
        if place.in_for_each:
            allowed.add("iter")
        if field == "stop_after_if":
            allowed.add("result")
        if field.startswith("ai_agent.tools["):  # a tool's bindings also see the step's inputs
            allowed.update(step.inputs)
        problems.extend(_check_names(step.id, field, expression, allowed))
        problems.extend(_check_results(place, field, expression, index, reach))
    return problems


def _check_templates(
    place: Placement[StepNode], index: Mapping[str, Placement[StepNode]], reach: _Reach
) -> list[Problem]:
    """The placeholders of a step's prompts, which see the step's inputs by name too."""
    problems: list[Problem] = []
    step = place.step
    allowed = {*STEP_NAMES, *step.inputs}
    if place.in_for_each:
        allowed.add("iter")
    for field, template in step.templates_by_field().items():
        for text in dict.fromkeys(placeholders(template)):
            expression = compile_expression(text)  # its syntax was checked with the model
            found = _check_names(step.id, field, expression, allowed, here="this prompt")
            found.extend(_check_results(place, field, expression, index, reach))
            problems.extend(
                Problem(p.step, p.field, f"placeholder {{{{ {text} }}}}: {p.message}")
                for p in found
            )
    return problems


def _check_flow_expressions(
    result: Expression | None,
    concurrency_key: Expression | None,
    index: Mapping[str, Placement[StepNode]],
) -> list[Problem]:
    problems: list[Problem] = []
    if result is not None:
        problems.extend(_check_names(None, "result", result, {"flow_input", "results"}))
        for target in sorted(result.results_used or ()):
            place = index.get(target)
            if place is None:
                hint = _did_you_mean(target, index)
                message = f"reads results.{target}: no step {target!r}{hint}"
                problems.append(Problem(None, "result", message))
                continue
            for holder in place.ancestors:
                if index[holder].step.kind == "for_each":
                    message = (
                        f"reads results.{target}, but step {target!r} runs once per item "
                        f"of for_each {holder!r}; read results.{holder} instead"
                    )
                    problems.append(Problem(None, "result", message))
                    break
    if concurrency_key is not None:
        problems.extend(_check_names(None, "concurrency.key", concurrency_key, {"flow_input"}))
    return problems


def check_flow(
    steps: Sequence[StepNode],
    *,
    result: Expression | None = None,
    concurrency_key: Expression | None = None,
) -> list[Problem]:
    """Return every problem between the steps of a flow (empty when there is none).

    `steps` are the flow's steps, `result` and `concurrency_key` its compiled
    `result` and `concurrency.key`.

    Checks: ids are unique in the whole flow; `needs` name steps of the same
    list and form no cycle; expressions use only the names available where
    they run (`iter` inside for_each bodies, `result` in stop_after_if), and
    read `results.<id>` only of steps sure to have finished before them. A
    sub-flow is checked on its own, as the flow it is.
    """
    index, duplicates = index_steps(steps)
    problems = _check_duplicates(duplicates)
    for body in _bodies(steps):
        problems.extend(_check_needs(body, index))
        problems.extend(_check_cycles(body))
    reach = _Reach(index)
    for place in index.values():
        problems.extend(_check_step_expressions(place, index, reach))
    problems.extend(_check_flow_expressions(result, concurrency_key, index))
    return problems


def check_usage(steps: Sequence[StepNode]) -> list[Problem]:
    """Return the mistakes a run of these steps would trip over (empty when there is none).

    Each step's own (`StepNode.mistakes`: a model spec the provider layer
    cannot read, inputs that do not fit a script's `main`), and the `{{ ... }}`
    placeholders of its prompts: they may use the step's inputs by name,
    `flow_input`, `results`, `previous_result` and, inside a for_each,
    `iter`, and read `results.<id>` only of steps sure to have finished.
    `steps` must be a valid flow's (see `check_flow`).
    """
    index, _duplicates = index_steps(steps)
    reach = _Reach(index)
    problems: list[Problem] = []
    for place in index.values():
        problems.extend(place.step.mistakes())
        problems.extend(_check_templates(place, index, reach))
    return problems
