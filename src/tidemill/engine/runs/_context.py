"""What a step sees, read from the store: its flow's definition and its expressions' context.

`context_for` gives a step's expressions `flow_input`, `results`,
`previous_result` and `iter`, reading only the results they name: the run's
own, its ancestors' (from inside branches and loops) and those of steps
nested in finished branches of the same (sub-)flow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tidemill.engine.ai._child_runs import is_tool_child, own_path
from tidemill.engine.runs._scope import Definitions, Scope
from tidemill.errors import RunNotFound
from tidemill.flows import Flow, Step, compile_expression, placeholders
from tidemill.store import RunRow, Tx

__all__ = ["context_for", "load_definition", "step_reads", "top_run_or_error"]


def load_definition(tx: Tx, defs: Definitions, digest: str) -> Flow:
    """The flow `digest`, from the cache or the store."""
    if defs.known(digest):
        return defs.flow(digest, None)
    return defs.flow(digest, tx.definition(digest))


def context_for(
    tx: Tx,
    defs: Definitions,
    run: RunRow,
    step: Step,
    payload: dict[str, Any] | None = None,
    known: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What the step's expressions see: `flow_input`, `results`, `previous_result`, `iter`.

    Only the results the step's expressions name are read, unless one of
    them uses `results` as a whole. `payload` is the run's stored context,
    when the caller has it already; `known` holds results of this run the
    caller has in hand (recorded in the same transaction).
    """
    load_definition(tx, defs, run.digest)
    scope = defs.scope(run.digest, run.scope)
    if payload is None:
        payload = tx.payload(run.id, "context", {})
    needs = scope.needs[step.id]
    wanted = step_reads(step)
    if wanted is not None:
        wanted = set(wanted) | set(needs)
    results = _results(tx, run, scope, wanted, known or {})
    if len(needs) == 1:
        previous = results.get(needs[0])
    elif needs:
        previous = {need: results.get(need) for need in needs}
    else:
        previous = payload.get("previous_result")
    context: dict[str, Any] = {
        "flow_input": payload.get("flow_input", {}),
        "results": results,
        "previous_result": previous,
    }
    if "iter" in payload:
        context["iter"] = payload["iter"]
    return context


def step_reads(step: Step) -> set[str] | None:
    """The result ids a step's expressions name; None when they read `results` whole.

    The `{{ ... }}` placeholders of an AI step's prompts count too.
    """
    wanted: set[str] = set()
    expressions = list(step.expressions())
    for template in _templates(step):
        expressions.extend(compile_expression(text) for text in placeholders(template))
    for expression in expressions:
        used = expression.results_used
        if used is None:
            return None
        wanted |= used
    return wanted


def _templates(step: Step) -> list[str]:
    if step.ai_action is not None:
        return [step.ai_action.prompt, step.ai_action.system]
    if step.ai_agent is not None:
        return [step.ai_agent.system]
    return []


def _results(
    tx: Tx, run: RunRow, scope: Scope, wanted: set[str] | None, known: Mapping[str, Any]
) -> dict[str, Any]:
    """Results visible from `run`.

    Its own, its ancestors' (from inside branches and loops), and those of
    steps nested in finished branches (a join may read `results.<inner step>`).
    """
    results: dict[str, Any] = (
        {} if wanted is None else {key: value for key, value in known.items() if key in wanted}
    )
    current: RunRow | None = run
    inherits = scope.inherits
    while current is not None:
        missing = None if wanted is None else wanted - results.keys()
        if missing is not None and not missing:
            return results
        for key, value in tx.results(current.id, missing).items():
            results.setdefault(key, value)
        if not inherits or current.parent_id is None:
            break
        current = tx.run(current.parent_id)
        inherits = current is not None and _inherits(current)
    missing = set() if wanted is None else wanted - results.keys()
    if missing:
        results.update(_nested_results(tx, run, missing))
    return results


def _namespace(scope: str) -> list[list[str]]:
    """The path to the (sub-)flow a scope belongs to: up to its last `flow` part."""
    path: list[list[str]] = own_path(json.loads(scope))
    cut = max((i + 1 for i, (_step, part) in enumerate(path) if part == "flow"), default=0)
    return path[:cut]


def _nested_results(tx: Tx, run: RunRow, wanted: set[str]) -> dict[str, Any]:
    """Results of steps inside branches of the same (sub-)flow as `run`."""
    prefix = _namespace(run.scope)
    found: dict[str, Any] = {}
    for other in tx.tree(run.root_id):
        if other.digest != run.digest:
            continue  # a tool call's child run: another flow
        path = own_path(json.loads(other.scope))
        if path[: len(prefix)] != prefix or any(p == "flow" for _s, p in path[len(prefix) :]):
            continue
        if other.id == run.id:
            continue
        for key, value in tx.results(other.id, wanted - found.keys()).items():
            found.setdefault(key, value)
        if not wanted - found.keys():
            break
    return found


def _inherits(run: RunRow) -> bool:
    path = run.scope
    return path != "[]" and not path.endswith('"flow"]]') and not is_tool_child(path)


def top_run_or_error(tx: Tx, run_id: str) -> RunRow:
    """A run by id, or `RunNotFound` with a hint."""
    run = tx.run(run_id)
    if run is None:
        raise RunNotFound(
            f"No run {run_id} in this store.", hint="List runs with `tidemill runs list`."
        )
    return run
