"""Errors of flows (`tidemill.flows`) and of the engine that runs them (`tidemill.engine`).

A flow is malformed, a run's input does not fit, an expression fails, or a
run, job or approval could not be found or changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from tidemill.errors._base import ConfigurationError, TidemillError

__all__ = [
    "ApprovalDecisionError",
    "EngineError",
    "ExpressionError",
    "FlowInputError",
    "FlowValidationError",
    "InvalidSchedule",
    "LeaseLost",
    "RunFailed",
    "RunNotFound",
    "RunStateError",
    "RunTimeout",
]


class _FlowProblem(Protocol):
    """What `FlowValidationError` needs of one problem (`tidemill.flows.Problem`)."""

    @property
    def step(self) -> str | None: ...

    @property
    def field(self) -> str: ...

    @property
    def message(self) -> str: ...


class FlowValidationError(ConfigurationError):
    """A flow is malformed: nothing of it was run or stored.

    Attributes:
        problems: Every problem found, each naming its step (or None for the
            flow itself), the field, and what is wrong.
        source: The file the flow came from, when it came from one.

    Examples:
        >>> from types import SimpleNamespace as P
        >>> problem = P(step="fetch", field="needs", message="unknown step 'fech'")
        >>> error = FlowValidationError([problem])
        >>> print(error.message)
        The flow is not valid (1 problem):
          - step 'fetch', needs: unknown step 'fech'
    """

    def __init__(self, problems: Sequence[_FlowProblem], *, source: str | None = None) -> None:
        lines = [
            f"  - {'step ' + repr(p.step) + ', ' if p.step else ''}{p.field}: {p.message}"
            for p in problems
        ]
        where = f" ({source})" if source else ""
        count = f"{len(lines)} problem{'s' if len(lines) != 1 else ''}"
        super().__init__(
            f"The flow{where} is not valid ({count}):\n" + "\n".join(lines),
            hint="Fix the fields named above; `tidemill flow schema` prints the format.",
            context={
                "source": source,
                "problems": [
                    {"step": p.step, "field": p.field, "message": p.message} for p in problems
                ],
            },
        )
        self.problems = list(problems)
        self.source = source


class InvalidSchedule(ConfigurationError):
    """A schedule's cron expression or time zone is not valid; nothing was stored.

    The message names the field that is wrong (`hour`, `day of month`, ...)
    and the hint shows an expression or a zone that works.

    Attributes:
        expression: The cron expression (as given, for a bad time zone too).
        reason: What is wrong with it.

    Examples:
        >>> error = InvalidSchedule("0 25 * * *", "hour: 25 is out of range (0-23)")
        >>> print(error.message)
        Schedule '0 25 * * *' is not valid: hour: 25 is out of range (0-23)
    """

    def __init__(self, expression: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(
            f"Schedule {expression!r} is not valid: {reason}",
            hint=hint,
            context={"expression": expression, "reason": reason},
        )
        self.expression = expression
        self.reason = reason


class FlowInputError(TidemillError):
    """A run's input does not fit the flow's `inputs` schema; no run was created.

    Attributes:
        errors: One line per violation, naming the input field.
    """

    def __init__(self, errors: Sequence[str], *, flow: str | None = None) -> None:
        name = f" of flow {flow!r}" if flow else ""
        super().__init__(
            f"The input{name} is not valid: " + "; ".join(errors),
            hint="Pass inputs that match the flow's `inputs` JSON Schema.",
            context={"flow": flow, "errors": list(errors)},
        )
        self.errors = list(errors)


class ExpressionError(TidemillError):
    """An expression could not be parsed, or failed when evaluated.

    Attributes:
        expression: The expression's text.
    """

    def __init__(self, expression: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(
            f"Expression {expression!r}: {reason}",
            hint=hint,
            context={"expression": expression, "reason": reason},
        )
        self.expression = expression
        self.reason = reason


class EngineError(TidemillError):
    """A run, job or approval could not be found or changed."""


class RunNotFound(EngineError):
    """No run (or approval) has that id in this store."""


class RunStateError(EngineError):
    """The run's state does not allow the operation; nothing was changed."""


class RunFailed(EngineError):
    """The run failed.

    Attributes:
        run_id: The failed run.
        step: The step that failed, when one did.
        error: The step's error as stored: `type`, `message` and, for
            scripts, `traceback`.
    """

    def __init__(self, run_id: str, step: str | None, error: Mapping[str, Any]) -> None:
        where = f" at step {step!r}" if step else ""
        kind = error.get("type", "Error")
        super().__init__(
            f"Run {run_id} failed{where}: {kind}: {error.get('message', '')}",
            hint=f"See its logs with `tidemill runs logs {run_id}`; "
            f"retry it from the failed step with `tidemill runs retry {run_id}`.",
            context={"run_id": run_id, "step": step, "error": dict(error)},
        )
        self.run_id = run_id
        self.step = step
        self.error = dict(error)


class RunTimeout(EngineError):
    """`wait(timeout=...)` elapsed before the run finished; the run goes on."""


class ApprovalDecisionError(EngineError):
    """An approval decision was refused; the approval is unchanged.

    Attributes:
        reason: ``expired``, ``decided`` (already decided), ``actor`` (not an
            allowed approver), ``cancelled``, ``mismatch`` (the agent's journal
            moved on), ``arguments`` (edited arguments do not fit the tool),
            ``kind`` (approve/reject on a reconciliation, or the reverse),
            ``result`` (a result given for a call that did not happen) or
            ``self`` (the run's own user, on a step that forbids self-approval).
    """

    def __init__(self, message: str, *, reason: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, context={"reason": reason})
        self.reason = reason


class LeaseLost(EngineError):
    """A worker's claim on a job ended (expired and reclaimed, or the run was cancelled).

    The worker's late write was refused; the job's current holder owns it.
    """
