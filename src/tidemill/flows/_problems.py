"""`Problem`: one thing wrong with a flow, naming its step and field."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_core import PydanticCustomError

__all__ = ["FLOW_ERROR", "PROBLEM_ERROR", "Problem", "problem_error"]

PROBLEM_ERROR = "tidemill_problem"
"""The pydantic error type of a problem raised inside a model validator."""

FLOW_ERROR = "tidemill_flow"
"""The pydantic error type carrying the problems found between a flow's steps."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a flow.

    Examples:
        >>> str(Problem("fetch", "needs", "unknown step 'fech'; did you mean 'fetch'?"))
        "step 'fetch', needs: unknown step 'fech'; did you mean 'fetch'?"
    """

    step: str | None
    """The id of the step it is about, or None for the flow itself.

    None too for a step that has no usable id; `field` then says where it is."""
    field: str
    """The field, as a path inside the step or flow.

    For example `needs`, `retry.attempts`, `script.code`, `inputs.text`."""
    message: str
    """What is wrong, and often how to fix it."""

    def __str__(self) -> str:
        where = f"step {self.step!r}, " if self.step else ""
        return f"{where}{self.field}: {self.message}"


def problem_error(field: str, message: str) -> PydanticCustomError:
    """Return a pydantic error that becomes `Problem(step, <loc>.field, message)`.

    Raise it from a model validator when the problem is about one field of the
    model (`field`, relative to the model) rather than the model as a whole.
    """
    return PydanticCustomError(PROBLEM_ERROR, "{message}", {"field": field, "message": message})
