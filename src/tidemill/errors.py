"""Every error Tidemill raises, in one tree.

The tree is organised by what the caller can do about an error::

    TidemillError                  base: catch this to catch everything
    ├── ConfigurationError         the code or config is wrong; fix it and retry
    │   └── MissingDependencyError an optional extra is missing; install it
    ├── ToolArgumentsError         arguments do not fit a tool's schema
    ├── SerializationError         data could not be encoded, decoded or stored
    │   └── JournalConflict        another writer appended to the same thread first
    ├── AgentInterrupt             a run paused for human approval; resume it
    └── AgentError                 a run could not proceed
        ├── ApprovalError          a resume decision was invalid; nothing was stored
        ├── ThreadBusy             another process is working on the same thread
        ├── MaxIterationsExceeded  the reason/act budget ran out (carries the partial run)
        ├── ToolRetriesExceeded    the model kept making bad tool calls
        ├── MalformedToolCall      the provider could not parse a tool call
        └── ScriptExhausted        the scripted test model ran out of answers

Errors from LLM providers (HTTP status, network, broken streams)::

    TidemillError
    └── ProviderError              a provider refused or failed a call
        ├── RateLimitError         too many requests or tokens; wait and retry
        ├── AuthenticationError    the API key is missing, wrong or lacks access
        ├── ContextWindowExceeded  the request is longer than the model accepts
        └── ProviderTimeout        no answer within the timeout

Every error carries a `message`, an optional `hint` (what to do next) and a
`context` dict of JSON-safe facts. `str(error)` includes the hint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidemill.types import AgentResponse, ToolCall

__all__ = [
    "AgentError",
    "AgentInterrupt",
    "ApprovalError",
    "AuthenticationError",
    "ConfigurationError",
    "ContextWindowExceeded",
    "JournalConflict",
    "MalformedToolCall",
    "MaxIterationsExceeded",
    "MissingDependencyError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimitError",
    "ScriptExhausted",
    "SerializationError",
    "ThreadBusy",
    "TidemillError",
    "ToolArgumentsError",
    "ToolRetriesExceeded",
]


class TidemillError(Exception):
    """Base class of every error Tidemill raises.

    Args:
        message: What happened.
        hint: What to do about it, shown after the message.
        context: JSON-safe facts that help diagnose the error.

    Example:
        >>> err = TidemillError("No such thread.", hint="List threads with threads().")
        >>> str(err)
        'No such thread. Hint: List threads with threads().'
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.context: dict[str, Any] = dict(context or {})

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} Hint: {self.hint}"
        return self.message


class ConfigurationError(TidemillError):
    """The agent, tool or component was set up wrongly.

    Raised while configuring or building, before anything runs or is stored.
    """


class MissingDependencyError(ConfigurationError):
    """An optional dependency is not installed.

    Args:
        package: The importable package that is missing.
        extra: The `tidemill` extra that installs it.
        feature: What needs it, for the message.
    """

    def __init__(self, package: str, *, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the {package!r} package, which is not installed.",
            hint=f"Install it with: pip install 'tidemill[{extra}]'",
            context={"package": package, "extra": extra},
        )
        self.package = package
        self.extra = extra


class ToolArgumentsError(TidemillError):
    """Arguments do not fit a tool's schema.

    During a run the model sees this message as the call's error result and
    may correct itself; when an approver's edited arguments fail, `resume`
    raises it wrapped in an `ApprovalError`.

    Attributes:
        tool: The tool's name.
        errors: One line per problem, naming the argument.
    """

    def __init__(self, tool: str, errors: Sequence[str]) -> None:
        super().__init__(
            f"Invalid arguments for tool {tool!r}: " + "; ".join(errors),
            context={"tool": tool, "errors": list(errors)},
        )
        self.tool = tool
        self.errors = list(errors)


class SerializationError(TidemillError):
    """Data could not be turned into JSON, read back, or written to a store."""


class JournalConflict(SerializationError):
    """An append to a thread's journal lost a race with another writer.

    The journal is append-only and every append names the sequence number it
    expects to follow. When another writer got there first, nothing of this
    append is stored.

    Attributes:
        thread_id: The thread whose journal moved on.
        expected_seq: The sequence number this writer expected to be last.
    """

    def __init__(self, thread_id: str, expected_seq: int) -> None:
        super().__init__(
            f"Thread {thread_id!r} changed while appending after entry {expected_seq}.",
            hint="Another writer appended first. Re-read the thread and try again.",
            context={"thread_id": thread_id, "expected_seq": expected_seq},
        )
        self.thread_id = thread_id
        self.expected_seq = expected_seq


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


class MaxIterationsExceeded(_RunEnded):
    """The reason/act loop used its whole iteration budget without an answer.

    Attributes:
        limit: The budget that was crossed.
        response: The partial run: transcript, steps and usage so far.
    """

    def __init__(self, limit: int, *, response: AgentResponse | None = None) -> None:
        super().__init__(
            f"The agent did not answer within {limit} iteration(s).",
            response=response,
            hint="Raise max_iterations(), or make the task or tools simpler.",
            context={"limit": limit},
        )
        self.limit = limit


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


# -- Provider errors --------------------------------------------------------------------
# Raised by the provider layer (`tidemill.llm`). The adapters build them from an HTTP
# response, a transport failure or an error inside a stream; the API key is scrubbed from
# every message and body before they get here.


class ProviderError(TidemillError):
    """An LLM provider refused or failed a call.

    Catch this to handle every provider failure; the subclasses say what to
    do about the common ones. A failure the provider layer may retry (a 429,
    a 5xx, a dropped connection before the first streamed byte) is only
    raised once the retries are spent.

    Attributes:
        provider: The provider's name, as in a spec string (`openai`, `anthropic`, ...).
        status_code: The HTTP status, or `None` when no response arrived
            (a network failure, an error event inside a 200 stream).
        body: The response body as received (shortened, API key removed), or `None`.
        code: The provider's error code or type (`model_not_found`,
            `overloaded_error`), when it sent one.
        retryable: Whether the same request may succeed later.

    Example:
        >>> err = ProviderError("HTTP 404: no such model.", provider="openai", status_code=404)
        >>> err.status_code, err.retryable
        (404, False)
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        body: str | None = None,
        code: str | None = None,
        retryable: bool = False,
        hint: str | None = None,
    ) -> None:
        super().__init__(
            message,
            hint=hint,
            context={"provider": provider, "status_code": status_code, "code": code},
        )
        self.provider = provider
        self.status_code = status_code
        self.body = body
        self.code = code
        self.retryable = retryable


class RateLimitError(ProviderError):
    """The provider refused the call because of a rate limit or an exhausted quota.

    Attributes:
        retry_after: Seconds the provider asked to wait, when it said.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = 429,
        body: str | None = None,
        code: str | None = None,
        retryable: bool = True,
        retry_after: float | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(
            message,
            provider=provider,
            status_code=status_code,
            body=body,
            code=code,
            retryable=retryable,
            hint=hint or "Wait and try again, send fewer requests, or raise max_retries.",
        )
        self.retry_after = retry_after
        self.context["retry_after"] = retry_after


class AuthenticationError(ProviderError):
    """The API key is missing, wrong, revoked, or not allowed to use this model."""


class ContextWindowExceeded(ProviderError):
    """The request (conversation, tools and `max_tokens`) is longer than the model accepts."""


class ProviderTimeout(ProviderError):
    """The provider did not answer, or stopped sending, within the timeout."""
