"""What a step's action records, with the secrets its job resolved masked as `***`.

Logs, errors, usage records' errors, and the messages of pauses and approvals:
everything a job stores besides its result (an identity step's result is
masked where it is made). The result is stored as it is, since later steps
read it; `shown_copy` is the masked copy of a leaf step's inputs and result
the job records beside it for the API to show. When masking changed the
result, the run is marked (`Tx.record_masked`) and its result as the API
shows it is built from the masked copies when it ends (`RunInfo.shown_result`).

A later step of a marked run that reads such a result did not resolve the
secret in it, so it would not know to mask it: `carried_secrets` gives it
the strings of those results that masking changed (each one whole), to
mask as its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tidemill.engine._outcome import Outcome, SpawnPlan, WaitPlan
from tidemill.engine._step_env import ApprovalPlan, Secrets
from tidemill.engine.ai._child_runs import ChildWait
from tidemill.engine.ai._pause import AgentPause

__all__ = ["carried_secrets", "differing_strings", "mask_action", "shown_copy"]


def mask_action(
    action: Outcome | SpawnPlan | ApprovalPlan | ChildWait | WaitPlan, secrets: Secrets
) -> Outcome | SpawnPlan | ApprovalPlan | ChildWait | WaitPlan:
    """What a step's action records (logs, error, usage errors), with the job's secrets masked."""
    if isinstance(action, Outcome):
        action.error = secrets.mask_value(action.error)
        action.logs = tuple((stream, secrets.mask(text)) for stream, text in action.logs)
        action.usage = tuple(secrets.mask_value(dict(record)) for record in action.usage)
        return action
    if isinstance(action, AgentPause | ChildWait):
        changes: dict[str, Any] = {
            "logs": tuple((stream, secrets.mask(text)) for stream, text in action.logs),
            "usage": tuple(secrets.mask_value(dict(record)) for record in action.usage),
        }
        if isinstance(action, AgentPause):
            changes["message"] = secrets.mask(action.message)
        return dataclasses.replace(action, **changes)
    if isinstance(action, ApprovalPlan):
        return dataclasses.replace(action, message=secrets.mask(action.message))
    return action


def shown_copy(outcome: Outcome, secrets: Secrets) -> dict[str, Any] | None:
    """`{"inputs", "result"}` of a leaf step's outcome, the job's secrets masked (None: nothing).

    `result` is None unless the step succeeded; a step that was not called
    (skipped, or its inputs failed) has nothing to show.
    """
    if outcome.inputs is None:
        return None
    result = outcome.result if outcome.status == "succeeded" else None
    return {"inputs": secrets.mask_value(outcome.inputs), "result": secrets.mask_value(result)}


def differing_strings(real: Any, shown: Any) -> set[str]:
    """The strings of `real` (keys too) that are not as they are in its masked copy `shown`.

    Examples:
        >>> sorted(differing_strings({"key": "sk-1", "n": 2, "a": ["x", "t-9"]},
        ...                          {"key": "***", "n": 2, "a": ["x", "***"]}))
        ['sk-1', 't-9']
    """
    if isinstance(real, str):
        return {real} if real != shown else set()
    found: set[str] = set()
    if isinstance(real, Mapping) and isinstance(shown, Mapping):
        for (key, value), (shown_key, shown_value) in zip(
            real.items(), shown.items(), strict=False
        ):
            if isinstance(key, str) and key != shown_key:
                found.add(key)
            found |= differing_strings(value, shown_value)
    elif isinstance(real, list | tuple) and isinstance(shown, list | tuple):
        for value, shown_value in zip(real, shown, strict=False):
            found |= differing_strings(value, shown_value)
    return found


def carried_secrets(results: Mapping[str, Any], masked: Mapping[str, Any]) -> set[str]:
    """The strings of the step results a job reads that held a secret, from their masked copies.

    `results` are the results the job's expressions see, `masked` the run's
    masked results by step (`Tx.masked_results`).
    """
    found: set[str] = set()
    for step_id, shown in masked.items():
        if step_id in results:
            found |= differing_strings(results[step_id], shown)
    return found
