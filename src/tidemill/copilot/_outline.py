"""The step structure of a flow document, as the copilot shows it to the model.

`outline` walks a flow's steps as written (not inlined: a step that names a
workspace script or flow keeps its path) and answers, for each, its `id`,
`summary`, `kind`, the path of the script or flow it references, and the
outline of the steps it holds (`branch`, `parallel`, `for_each`).

Examples:
    >>> outline([
    ...     {"id": "load", "script": {"path": "f/billing/load_invoice"}},
    ...     {"id": "notify", "summary": "Tell the team", "flow": "f/ops/notify"},
    ...     {"id": "each", "for_each": {"items": [1], "steps": [{"id": "x", "identity": {}}]}},
    ... ])  # doctest: +NORMALIZE_WHITESPACE
    [{'id': 'load', 'summary': '', 'kind': 'script', 'script': 'f/billing/load_invoice'},
     {'id': 'notify', 'summary': 'Tell the team', 'kind': 'flow', 'flow': 'f/ops/notify'},
     {'id': 'each', 'summary': '', 'kind': 'for_each',
      'steps': [{'id': 'x', 'summary': '', 'kind': 'identity'}]}]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tidemill.flows import Step

__all__ = ["STEP_KINDS", "find_step", "outline"]

STEP_KINDS = Step.KINDS
"""The keys that say what a step does: a step has exactly one."""


def _kind(step: Mapping[str, Any]) -> str:
    return next((k for k in STEP_KINDS if step.get(k) is not None), "unknown")


def _reference(value: Any) -> tuple[str | None, bool]:
    """The path a `script` or `flow` value names, and whether it is inline code."""
    if isinstance(value, str):
        # `flow: f/x/y` and `script: "def main(): ..."`: a path has no newline.
        return (None, True) if "\n" in value else (value, False)
    if isinstance(value, Mapping):
        path = value.get("path")
        if isinstance(path, str):
            return path, False
        return None, isinstance(value.get("code"), str)
    return None, False


def _children(step: Mapping[str, Any], kind: str) -> Iterator[tuple[str, list[Any]]]:
    """Each list of steps `step` holds, with a label: `branches[0]`, `default`, `steps`."""
    body = step.get(kind)
    if not isinstance(body, Mapping):
        return
    if kind == "for_each" and isinstance(body.get("steps"), list):
        yield "steps", body["steps"]
    for n, branch in enumerate(body.get("branches") or ()):
        if isinstance(branch, Mapping) and isinstance(branch.get("steps"), list):
            yield f"branches[{n}]", branch["steps"]
    if kind == "branch" and isinstance(body.get("default"), list):
        yield "default", body["default"]


def outline(steps: Any) -> list[dict[str, Any]]:
    """The structure of a list of steps as written; anything that is no step is left out."""
    shown: list[dict[str, Any]] = []
    for step in steps if isinstance(steps, list) else ():
        if not isinstance(step, Mapping):
            continue
        kind = _kind(step)
        entry: dict[str, Any] = {
            "id": step.get("id"),
            "summary": step.get("summary", ""),
            "kind": kind,
        }
        if kind in ("script", "flow"):
            path, inline = _reference(step[kind])
            if path is not None:
                entry[kind] = path
            elif inline:
                entry["inline"] = True
        if kind == "approval" and isinstance(step["approval"], Mapping):
            entry["message"] = step["approval"].get("message", "")
        children = list(_children(step, kind))
        if len(children) == 1 and children[0][0] == "steps":
            entry["steps"] = outline(children[0][1])
        elif children:
            entry["branches"] = {label: outline(body) for label, body in children}
        shown.append(entry)
    return shown


def find_step(steps: Any, step_id: str) -> dict[str, Any] | None:
    """The step with id `step_id` anywhere in `steps` (nested ones too), or None."""
    for step in steps if isinstance(steps, list) else ():
        if not isinstance(step, Mapping):
            continue
        if step.get("id") == step_id:
            return dict(step)
        for _, body in _children(step, _kind(step)):
            found = find_step(body, step_id)
            if found is not None:
                return found
    return None
