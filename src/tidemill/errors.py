"""Every error Tidemill raises, in one tree.

The tree is organised by what the caller can do about an error::

    TidemillError                  base: catch this to catch everything
    ├── ConfigurationError         the code or config is wrong; fix it and retry
    │   ├── MissingDependencyError an optional extra is missing; install it
    │   └── MissingCredentialsError a provider's key, token or region is not set
    ├── ToolArgumentsError         arguments do not fit a tool's schema
    ├── SerializationError         data could not be encoded, decoded or stored
    │   └── JournalConflict        another writer appended to the same thread first
    ├── AgentInterrupt             a run paused for human approval; resume it
    ├── AgentSuspended             tool calls wait for work done elsewhere; resume later
    ├── ToolSuspended              raised by a tool whose result is not ready yet
    └── AgentError                 a run could not proceed
        ├── ApprovalError          a resume decision was invalid; nothing was stored
        ├── ThreadBusy             another process is working on the same thread
        ├── LimitExceeded          a usage limit would be crossed (carries the partial run)
        │   └── MaxIterationsExceeded  the reason/act budget ran out
        ├── OutputValidationError  the final answer kept failing its schema
        ├── ToolRetriesExceeded    the model kept making bad tool calls
        ├── MalformedToolCall      the provider could not parse a tool call
        ├── ScriptExhausted        the scripted test model ran out of answers
        └── GuardrailViolation     a guardrail blocked the run's input or output

Errors from LLM providers (HTTP status, network, broken streams)::

    TidemillError
    └── ProviderError              a provider refused or failed a call
        ├── RateLimitError         too many requests or tokens; wait and retry
        ├── AuthenticationError    the API key is missing, wrong or lacks access
        ├── ContextWindowExceeded  the request is longer than the model accepts
        └── ProviderTimeout        no answer within the timeout

Errors from flows, the store and the engine (`tidemill.flows`, `tidemill.store`,
`tidemill.engine`)::

    TidemillError
    ├── ConfigurationError
    │   └── FlowValidationError    a flow is malformed; `problems` names each step and field
    ├── FlowInputError             a run's input does not fit the flow's input schema
    ├── ExpressionError            an expression could not be parsed or evaluated
    ├── StoreError                 the store could not be opened, migrated or reached
    │   └── SchemaVersionError     the database schema is older or newer than this code
    └── EngineError                a run or approval could not be found or changed
        ├── RunNotFound            no run (or approval) with that id
        ├── RunStateError          the run's state does not allow it (retry a running run)
        ├── RunFailed              the run failed; carries the failed step and its error
        ├── RunTimeout             `wait(timeout=...)` elapsed before the run finished
        ├── ApprovalDecisionError  the decision came too late, twice, or from the wrong person
        └── LeaseLost              a worker lost its claim on a job; its late write is refused

Errors from MCP servers (`tidemill.tools.mcp`)::

    TidemillError
    ├── ConfigurationError
    │   └── MCPConnectionError     an MCP server could not be started, reached or initialised
    └── MCPToolError               an MCP server failed a tool call, or the connection broke

Every error carries a `message`, an optional `hint` (what to do next) and a
`context` dict of JSON-safe facts. `str(error)` includes the hint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from tidemill.types import AgentResponse, ToolCall

__all__ = [
    "AgentError",
    "AgentInterrupt",
    "AgentSuspended",
    "ApprovalDecisionError",
    "ApprovalError",
    "AuthenticationError",
    "ConfigurationError",
    "ContextWindowExceeded",
    "EngineError",
    "ExpressionError",
    "FlowInputError",
    "FlowValidationError",
    "GuardrailViolation",
    "JournalConflict",
    "LeaseLost",
    "LimitExceeded",
    "MCPConnectionError",
    "MCPToolError",
    "MalformedToolCall",
    "MaxIterationsExceeded",
    "MissingCredentialsError",
    "MissingDependencyError",
    "OutputValidationError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimitError",
    "RunFailed",
    "RunNotFound",
    "RunStateError",
    "RunTimeout",
    "SchemaVersionError",
    "ScriptExhausted",
    "SerializationError",
    "StoreError",
    "ThreadBusy",
    "TidemillError",
    "ToolArgumentsError",
    "ToolRetriesExceeded",
    "ToolSuspended",
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


class MissingCredentialsError(ConfigurationError):
    """A provider needs a key, a token, a project or a region that was not given.

    The message names what is missing; `context["env"]`, when present, names
    the environment variable(s) that would supply it.
    """


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


class ToolSuspended(TidemillError):
    """Raised by a tool whose result is not ready: the run stops, the call stays open.

    A tool that hands its work to something slower or elsewhere (a job in a
    queue, a person) raises this instead of blocking. The call gets no
    result in the journal: it stays started, so resuming the thread with
    `retry_in_flight=True` calls the tool again, with the same call id and
    idempotency key; it then returns the result, or suspends again. The
    other calls of the same turn still run to the end first.

    Attributes:
        reason: What the call waits for, for whoever resumes the thread
            (any object; the engine passes its child-run request here).
    """

    def __init__(self, message: str, *, reason: object = None) -> None:
        super().__init__(message)
        self.reason = reason


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


# -- MCP errors -------------------------------------------------------------------------
# Raised by the MCP client tools (`tidemill.tools.mcp`). Messages name the server, the
# command or URL (never its environment, headers or query string) and what went wrong.


class MCPConnectionError(ConfigurationError):
    """An MCP server could not be started, reached or initialised.

    Raised when a connection opens, never later: a server that fails is an
    error, not an empty tool list.

    Attributes:
        server: The server's name (the prefix of its tools' names).
        target: The command line or URL that was tried (secrets left out).
        reason: What went wrong, in a few words.
        stderr: The last lines the server process wrote to stderr, if any.
        status_code: The HTTP status that refused the connection, if any.

    Example:
        >>> err = MCPConnectionError("fs", "npx -y server-fs", "command 'npx' was not found")
        >>> err.message
        "Could not connect to MCP server 'fs' (npx -y server-fs): command 'npx' was not found."
    """

    def __init__(
        self,
        server: str,
        target: str,
        reason: str,
        *,
        stderr: str | None = None,
        status_code: int | None = None,
        hint: str | None = None,
    ) -> None:
        message = f"Could not connect to MCP server {server!r} ({target}): {reason}."
        if stderr:
            message += f" Its stderr ended with:\n{stderr}\n"
        super().__init__(
            message,
            hint=hint,
            context={"server": server, "target": target, "status_code": status_code},
        )
        self.server = server
        self.target = target
        self.reason = reason
        self.stderr = stderr
        self.status_code = status_code


class MCPToolError(TidemillError):
    """An MCP server failed a tool call, or its connection broke during one.

    The server said the call failed (`isError`), refused the request, did not
    answer in time, or was no longer connected. During a run the model sees
    the message as the call's error result.

    Attributes:
        server: The server's name.
        tool: The tool's name on the server (without the server prefix).
    """

    def __init__(self, server: str, tool: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, context={"server": server, "tool": tool})
        self.server = server
        self.tool = tool


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
        side: `"input"` (the prompt or a tool result going to the model) or
            `"output"` (the model's text going to the caller).
        violations: What was found: category, span and masked sample of each.
        response: The run so far, when the runtime has one.

    Example:
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


# Flows, the store and the engine.


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

    Example:
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


class StoreError(TidemillError):
    """The store could not be opened, migrated or reached."""


class SchemaVersionError(StoreError):
    """The database's schema is not the one this version of Tidemill uses."""


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
            ``kind`` (approve/reject on a reconciliation, or the reverse) or
            ``result`` (a result given for a call that did not happen).
    """

    def __init__(self, message: str, *, reason: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, context={"reason": reason})
        self.reason = reason


class LeaseLost(EngineError):
    """A worker's claim on a job ended (expired and reclaimed, or the run was cancelled).

    The worker's late write was refused; the job's current holder owns it.
    """
