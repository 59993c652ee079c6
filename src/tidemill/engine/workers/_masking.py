"""What a step's action records, with the secrets its job resolved masked as `***`.

Logs, errors, usage records' errors, and the messages of pauses and approvals:
everything a job stores besides its result (an identity step's result is
masked where it is made).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tidemill.engine._outcome import Outcome, SpawnPlan
from tidemill.engine._step_env import ApprovalPlan, Secrets
from tidemill.engine.ai._child_runs import ChildWait
from tidemill.engine.ai._pause import AgentPause

__all__ = ["mask_action"]


def mask_action(
    action: Outcome | SpawnPlan | ApprovalPlan | ChildWait, secrets: Secrets
) -> Outcome | SpawnPlan | ApprovalPlan | ChildWait:
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
