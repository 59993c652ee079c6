"""Errors of agent runs: a pause, and a run that could not proceed.

A run pauses for human approval (`AgentInterrupt`) or for work done elsewhere
(`AgentSuspended`); it cannot proceed when a bound is crossed, its answer or
tool calls keep failing, another process holds its thread, or a guardrail
blocks it (`AgentError` and its subclasses).

Guardrail violations are raised by the agent runtime when a guardrail
(`tidemill.agents.guardrails`) blocks a run's input or output. A violation
carries only a masked sample, never the matched text itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from tidemill.errors._base import TidemillError
from tidemill.errors._tools import ToolSuspended

if TYPE_CHECKING:
    from tidemill.types import AgentResponse, ToolCall

__all__ = [
    "AgentError",
    "AgentInterrupt",
    "AgentSuspended",
    "ApprovalError",
    "GuardrailViolation",
    "LimitExceeded",
    "MalformedToolCall",
    "MaxIterationsExceeded",
    "OutputValidationError",
    "ScriptExhausted",
    "ThreadBusy",
    "ToolRetriesExceeded",
]


class AgentInterrupt(TidemillError):
    """A run paused because tool calls need human approval.

    Nothing is lost: the pause is stored in the thread's journal. Decide each
    pending call and continue with `resume(thread_id, decisions=...)`, in this
    process or another one sharing the checkpointer.

    Attributes:
        thread_id: The paused thread.
        pending: The tool calls awaiting a decision, in the order the model made them.
        response: The run so far (transcript, steps, usage).
    """

    def __init__(
        self,
        *,
        thread_id: str,
        pending: Sequence[ToolCall],
        response: AgentResponse | None = None,
    ) -> None:
        names = ", ".join(f"{call.name} ({call.id})" for call in pending)
        super().__init__(
            f"{len(pending)} tool call(s) need approval: {names}.",
            hint=f"Decide them with resume({thread_id!r}, decisions={{call_id: ...}}).",
            context={"thread_id": thread_id, "pending": [call.id for call in pending]},
        )
        self.thread_id = thread_id
        self.pending = list(pending)
        self.response = response


class AgentSuspended(TidemillError):
    """A run stopped because tool calls suspended (see `ToolSuspended`).

    Nothing is lost: the journal holds the turn and the finished calls.
    Resume the thread with `retry_in_flight=True` once what the calls wait
    for is done.

    Attributes:
        thread_id: The suspended thread.
        suspended: Each suspended call, with the `ToolSuspended` it raised.
    """

    def __init__(
        self, *, thread_id: str, suspended: Sequence[tuple[ToolCall, ToolSuspended]]
    ) -> None:
        names = ", ".join(f"{call.name} ({call.id})" for call, _ in suspended)
        super().__init__(
            f"{len(suspended)} tool call(s) wait for work done elsewhere: {names}.",
            hint=f"Resume with aresume({thread_id!r}, retry_in_flight=True) once it is done.",
            context={"thread_id": thread_id, "calls": [call.id for call, _ in suspended]},
        )
        self.thread_id = thread_id
        self.suspended = list(suspended)


class AgentError(TidemillError):
    """A run could not proceed."""


class ApprovalError(AgentError):
    """A resume was asked to do something the thread's state does not allow.

    Examples: the thread is not paused, a decision names a call that is not
    pending, or edited arguments fail the tool's schema. Nothing is stored.
    """


class ThreadBusy(AgentError):
    """Another process appended to the thread while this one was working on it.

    The other writer won; this run stopped without repeating any effect.
    """


class _RunEnded(AgentError):
    """A run stopped before an answer; carries what it produced so far."""

    def __init__(
        self,
        message: str,
        *,
        response: AgentResponse | None,
        hint: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, hint=hint, context=context)
        self.response = response


class LimitExceeded(_RunEnded):
    """A run stopped before work that would cross one of its usage limits.

    Attributes:
        limit: Which limit: `requests`, `tool_calls`, `input_tokens`,
            `output_tokens`, `total_tokens` or `max_iterations`.
        value: The limit's value.
        response: The partial run: transcript, steps and usage so far.
    """

    def __init__(
        self,
        limit: str,
        value: int,
        *,
        response: AgentResponse | None = None,
        message: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(
            message or f"The run would cross its {limit} limit of {value}.",
            response=response,
            hint=hint or f"Raise the limit with .limits({limit}=...), or narrow the task.",
            context={"limit": limit, "value": value},
        )
        self.limit = limit
        self.value = value


class MaxIterationsExceeded(LimitExceeded):
    """The reason/act loop used its whole iteration budget without an answer.

    Attributes:
        value: The budget that was crossed.
        response: The partial run: transcript, steps and usage so far.
    """

    def __init__(self, value: int, *, response: AgentResponse | None = None) -> None:
        super().__init__(
            "max_iterations",
            value,
            response=response,
            message=f"The agent did not answer within {value} iteration(s).",
            hint="Raise max_iterations(), or make the task or tools simpler.",
        )


class OutputValidationError(_RunEnded):
    """The model's final answer failed its output schema more often than allowed.

    Attributes:
        raw_output: The last answer, as the model wrote it.
        errors: What was wrong with it.
        response: The partial run.
    """

    def __init__(
        self, raw_output: str, errors: Sequence[str], *, response: AgentResponse | None = None
    ) -> None:
        super().__init__(
            "The final answer did not match the output schema: " + "; ".join(errors),
            response=response,
            hint="Raise the output retries, loosen the schema, or describe it in the prompt.",
            context={"errors": list(errors)},
        )
        self.raw_output = raw_output
        self.errors = list(errors)


class ToolRetriesExceeded(_RunEnded):
    """The model made more failing tool calls than `tool_call_retries` allows.

    Attributes:
        limit: The retry budget.
        last_error: What went wrong with the last failing call.
        response: The partial run.
    """

    def __init__(
        self, limit: int, last_error: str, *, response: AgentResponse | None = None
    ) -> None:
        super().__init__(
            f"The model's tool calls failed more than {limit} time(s); last error: {last_error}",
            response=response,
            hint="Raise tool_call_retries(), or check the tool's schema and description.",
            context={"limit": limit, "last_error": last_error},
        )
        self.limit = limit
        self.last_error = last_error


class MalformedToolCall(AgentError):
    """A model produced a tool call the provider could not parse.

    Provider adapters raise it; the runtime shows `feedback` to the model and
    lets it try again, within `tool_call_retries`.

    Attributes:
        feedback: What to tell the model so it can correct itself.
    """

    def __init__(self, message: str, *, feedback: str | None = None) -> None:
        super().__init__(message)
        self.feedback = feedback or (
            f"Your last tool call could not be parsed: {message} "
            "Call one tool at a time, with a JSON object as its arguments."
        )


class ScriptExhausted(AgentError):
    """The scripted model was asked for more answers than it was given.

    Attributes:
        scripted: How many answers the script held.
    """

    def __init__(self, scripted: int) -> None:
        super().__init__(
            f"The scripted model was called {scripted + 1} time(s) "
            f"but its script has {scripted} answer(s).",
            hint="Add responses= or tool_calls= entries, or pass a handler=.",
            context={"scripted": scripted},
        )
        self.scripted = scripted


# -- Guardrail errors -------------------------------------------------------------------
# Raised by the agent runtime when a guardrail (`tidemill.agents.guardrails`) blocks a run's
# input or output. A violation carries only a masked sample, never the matched text itself.


class _MaskedFinding(Protocol):
    """What the error needs of a guardrail's violation (`guardrails.Violation`)."""

    @property
    def category(self) -> str: ...

    @property
    def span(self) -> tuple[int, int]: ...

    @property
    def sample(self) -> str: ...


class GuardrailViolation(AgentError):
    """A guardrail found sensitive data and its policy is to block.

    Nothing from the blocked side reached the model (input) or the caller
    (output). The violations hold masked samples only (`j***@e***.com`), so
    the error is safe to log.

    Attributes:
        side: `"input"` (the prompt a run starts with, checked before it is
            journaled) or `"output"` (the model's answer text, checked before
            it is journaled or streamed to the caller). Tool results are not
            checked.
        violations: What was found: category, span and masked sample of each.
        response: The run so far, when the runtime has one.

    Examples:
        >>> from tidemill.agents.guardrails import RuleGuardrail
        >>> result = RuleGuardrail(on_violation="block").check_output("Mail bob@example.com")
        >>> error = GuardrailViolation("output", result.violations)
        >>> str(error).split(" Hint:")[0]
        'The guardrail blocked the output: it contains email (1).'
        >>> error.violations[0].sample
        'b***@e***.com'
    """

    def __init__(
        self,
        side: Literal["input", "output"],
        violations: Sequence[_MaskedFinding],
        *,
        response: AgentResponse | None = None,
    ) -> None:
        counts: dict[str, int] = {}
        for violation in violations:
            counts[violation.category] = counts.get(violation.category, 0) + 1
        found = ", ".join(f"{category} ({n})" for category, n in counts.items()) or "nothing"
        where = "the prompt" if side == "input" else "the model's answer"
        super().__init__(
            f"The guardrail blocked the {side}: it contains {found}.",
            hint=f"Remove the sensitive data from {where}, or use "
            "guardrails(on_violation='redact') to replace it with placeholders.",
            context={
                "side": side,
                "violations": [
                    {"category": v.category, "span": list(v.span), "sample": v.sample}
                    for v in violations
                ],
            },
        )
        self.side = side
        self.violations = tuple(violations)
        self.response = response
