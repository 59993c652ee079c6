"""`AgentLoop`: think, then act, until the model answers or a bound is crossed.

Every step is appended to the thread's journal before its effect, so the loop
can start from any journal: a fresh run, an approval just decided, or a run
whose process died. It first settles the open calls of the last model turn,
then checks the bounds, then asks the model.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

from tidemill.agents._limits import UsageLimits
from tidemill.agents._output import OutputSpec
from tidemill.agents._thread import ThreadWriter
from tidemill.agents._tool_runner import ToolRunner
from tidemill.agents.guardrails import Guardrail
from tidemill.agents.guardrails._screen import screen_response, screened_stream
from tidemill.agents.journal import (
    Correction,
    JournalEvent,
    ModelTurn,
    OutputRejected,
    RunFailed,
    RunFinished,
    ToolFinished,
)
from tidemill.agents.memory import BufferMemory, Memory, memory_events
from tidemill.agents.tracing import NullTracer, Tracer
from tidemill.errors import (
    AgentError,
    ConfigurationError,
    GuardrailViolation,
    InvalidOption,
    LimitExceeded,
    MalformedToolCall,
    MaxIterationsExceeded,
    OutputValidationError,
    ToolRetriesExceeded,
)
from tidemill.llm import Model, ModelRequest, ModelSettings, OutputFormat
from tidemill.types import (
    AgentResponse,
    ApprovalRequired,
    Message,
    ModelResponse,
    RunDone,
    RunStopped,
    StreamEvent,
    ToolResult,
)

__all__ = ["RUN_STOPS", "AgentLoop", "check_loop_options", "run_stopped"]

_log = logging.getLogger("tidemill.agents")


RunStop = LimitExceeded | ToolRetriesExceeded | OutputValidationError | GuardrailViolation
"""An error that stops a run at a bound, by the output type or by the guardrail."""
RUN_STOPS = (LimitExceeded, ToolRetriesExceeded, OutputValidationError, GuardrailViolation)
"""The errors a streamed run announces with `RunStopped` before raising them."""


def run_stopped(stop: RunStop, partial: Callable[[], AgentResponse]) -> RunStopped:
    """The `RunStopped` a streamed run yields before raising `stop`.

    Args:
        stop: The error the run stops with.
        partial: The run so far, asked for when `stop` carries no response.
    """
    return RunStopped(
        error=type(stop).__name__,
        message=stop.message,
        limit=stop.limit if isinstance(stop, LimitExceeded) else None,
        response=stop.response or partial(),
    )


def check_loop_options(*, max_iterations: int, tool_call_retries: int, max_parallel: int) -> None:
    """Check a runtime's loop options, as its constructor is given them.

    Raises:
        InvalidOption: When `max_iterations` or `max_parallel` is below 1, or
            `tool_call_retries` is negative.
    """
    if max_iterations < 1:
        raise InvalidOption(f"max_iterations must be at least 1, not {max_iterations}.")
    if tool_call_retries < 0:
        raise InvalidOption(f"tool_call_retries must not be negative, not {tool_call_retries}.")
    if max_parallel < 1:
        raise InvalidOption(f"max_parallel must be at least 1, not {max_parallel}.")


@dataclass(frozen=True, slots=True)
class RunBounds:
    """The bounds of one run: its iteration budget and its usage limits."""

    max_iterations: int
    limits: UsageLimits

    @classmethod
    def of(
        cls,
        max_iterations: int | None,
        limits: UsageLimits | None,
        default_iterations: int,
        default_limits: UsageLimits,
    ) -> RunBounds:
        """A run's bounds: the ones given for it, else the agent's.

        Raises:
            ConfigurationError: If `max_iterations` is less than 1.
        """
        if max_iterations is not None and max_iterations < 1:
            raise ConfigurationError("max_iterations must be at least 1.")
        return cls(max_iterations or default_iterations, limits or default_limits)


@dataclass(frozen=True)
class AgentLoop:
    """The reason/act loop of one agent configuration; holds no per-run state."""

    model: Model
    runner: ToolRunner
    system_prompt: str | None = None
    tool_call_retries: int = 2
    output: OutputSpec | None = None
    memory: Memory = field(default_factory=BufferMemory)
    guardrail: Guardrail | None = None
    tracer: Tracer = field(default_factory=NullTracer)
    _system: str = field(init=False, repr=False)
    _system_message: tuple[Message, ...] = field(init=False, repr=False)
    _output_format: OutputFormat | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        parts = [p for p in (self.system_prompt, self.output and self.output.instructions) if p]
        object.__setattr__(self, "_system", "\n\n".join(parts))
        message = (Message.system(self._system),) if self._system else ()
        object.__setattr__(self, "_system_message", message)
        # The output schema goes to models that take it natively, on every request
        # that may bring the final answer; the answer is still validated in `_finish`.
        native = self.output is not None and self.model.supports_output_format
        fmt = self.output.format if native and self.output is not None else None
        object.__setattr__(self, "_output_format", fmt)

    async def remember(self, writer: ThreadWriter) -> None:
        """At the start of a run, journal what the memory condenses or recalls, in one write."""
        events = memory_events(await self.memory.compact(writer.state, self.model))
        if events:
            await writer.append(*events)

    def _context(self, writer: ThreadWriter) -> tuple[Message, ...]:
        """The system prompt and the part of the thread the memory chooses."""
        view = self.memory.view(writer.state)
        if view.context:
            system = "\n\n".join(p for p in (self._system, view.context) if p)
            return (Message.system(system), *view.messages)
        return (*self._system_message, *view.messages)

    def response(self, writer: ThreadWriter) -> AgentResponse:
        """The run so far, its output turned back into the output type when it has one."""
        response = writer.state.response(latency_ms=writer.elapsed_ms())
        if self.output is not None and writer.state.status == "finished":
            response.output = self.output.load(writer.state.output)
        return response

    async def drive(
        self, writer: ThreadWriter, bounds: RunBounds, settings: ModelSettings, *, streaming: bool
    ) -> AsyncGenerator[StreamEvent, None]:
        """Run the loop from wherever the journal stands; `RunDone` or `ApprovalRequired` last."""
        state = writer.state
        with self.tracer.agent_span(
            self.runner.agent_name,
            thread_id=writer.thread_id,
            run_id=state.run_id,
            model=self.model.model_name,
            provider=self.model.provider,
        ) as run:
            writer.span = run
            try:
                async with aclosing(self._steps(writer, bounds, settings, streaming)) as steps:
                    async for event in steps:
                        yield event
            finally:
                run.record_usage(state.usage)

    async def _steps(  # noqa: C901 - the loop itself: run open calls, or ask the model
        self, writer: ThreadWriter, bounds: RunBounds, settings: ModelSettings, streaming: bool
    ) -> AsyncGenerator[StreamEvent, None]:
        state = writer.state
        limits = bounds.limits
        started: set[str] = set()
        while True:
            if state.open_calls:
                runnable = [
                    state.approved.get(cid, call)
                    for cid, call in state.open_calls.items()
                    if cid not in state.pending
                ]
                if not runnable:
                    yield ApprovalRequired(
                        thread_id=writer.thread_id, calls=tuple(state.pending.values())
                    )
                    return
                if len(runnable) == 1 and not streaming:  # no events to pass on
                    await self.runner.run_one(writer, runnable[0], started)
                else:
                    async for event in self.runner.act(
                        writer, runnable, started, streaming=streaming
                    ):
                        yield event
                continue  # decisions may have arrived meanwhile
            await self._check_bounds(writer, bounds)

            response: ModelResponse | None = None
            request = ModelRequest(
                self._context(writer),
                self.runner.tools.definitions(),
                settings,
                self._output_format,
            )
            request = await self._fit(request, writer, limits) if limits.tokens else request
            try:
                with self.tracer.model_span(
                    self.model.model_name,
                    provider=self.model.provider,
                    settings=request.settings,
                    messages=request.messages,
                    parent=writer.span,
                ) as span:
                    if streaming:
                        async with aclosing(
                            screened_stream(self.model, request, self.guardrail)
                        ) as chunks:
                            async for chunk in chunks:
                                if chunk.type == "response":
                                    response = chunk.response
                                yield chunk
                        if response is None:
                            raise AgentError("The model's stream ended without its final response.")
                    else:
                        response = screen_response(
                            self.guardrail, await self.model.request(request)
                        )
                    span.record_response(response)
            except MalformedToolCall as exc:
                _log.warning("Model produced an unparseable tool call: %s", exc)
                await writer.append(Correction(error=str(exc), feedback=exc.feedback))
                continue
            except GuardrailViolation as exc:
                await writer.append(RunFailed(reason="guardrail", message=exc.message))
                exc.response = self.response(writer)
                raise

            calls = response.message.tool_calls
            crossed = limits.after_turn(state.usage, request, response) if limits.tokens else None
            if crossed is not None:
                await self._stop(writer, crossed, response)
            if not calls:
                if await self._finish(writer, ModelTurn(response=response)):
                    yield RunDone(response=self.response(writer))
                    return
                continue
            admission = self.runner.admit(writer, calls)
            batch = len(admission.pending) + len(admission.runnable)
            crossed = limits.before_tools(state.tool_calls, batch)
            if crossed is not None:
                await self._stop(writer, crossed, response)
            started = set()
            await writer.append(*self.runner.admission_events(response, admission, started))

    async def _fit(
        self, request: ModelRequest, writer: ThreadWriter, limits: UsageLimits
    ) -> ModelRequest:
        """The call made to fit the token limits (`UsageLimits.fit_model`), or the run fails.

        Raises:
            LimitExceeded: As `fit` does, journaled, with the partial run as its `response`.
        """
        try:
            return limits.fit_model(request, writer.state.usage, self.model)
        except LimitExceeded as exc:
            await writer.append(RunFailed(reason="limit", limit=exc.limit, message=exc.message))
            exc.response = self.response(writer)
            raise

    async def _check_bounds(self, writer: ThreadWriter, bounds: RunBounds) -> None:
        """Fail the run before the next model call when a bound says so."""
        state = writer.state
        if state.corrections > self.tool_call_retries:
            detail = state.last_error or "unknown error"
            await writer.append(RunFailed(reason="tool_call_retries", message=detail))
            raise ToolRetriesExceeded(
                self.tool_call_retries, detail, response=self.response(writer)
            )
        if self.output is not None and state.output_retries > self.output.retries:
            detail = state.last_error or "invalid output"
            await writer.append(RunFailed(reason="output_validation", message=detail))
            raw = state.messages[-2].content if len(state.messages) > 1 else ""
            raise OutputValidationError(raw, detail.split("; "), response=self.response(writer))
        budget = bounds.max_iterations
        if state.iterations >= budget:
            await writer.append(
                RunFailed(
                    reason="limit", limit="max_iterations", message=f"{budget} iteration(s) used"
                )
            )
            raise MaxIterationsExceeded(budget, response=self.response(writer))
        limits = bounds.limits
        crossed = limits.before_request(state.usage) if limits.requests is not None else None
        if crossed is not None:
            await self._stop(writer, crossed)

    async def _finish(self, writer: ThreadWriter, turn: ModelTurn) -> bool:
        """Journal a final answer, or its rejection by the output schema; True when done."""
        text = turn.response.message.content
        if self.output is None:
            await writer.append(turn, RunFinished(output=text))
            return True
        value, errors = self.output.parse(text)
        if errors:
            feedback = self.output.feedback(errors)
            await writer.append(turn, OutputRejected(errors=tuple(errors), feedback=feedback))
            return False
        await writer.append(turn, RunFinished(output=value))
        return True

    async def _stop(
        self,
        writer: ThreadWriter,
        crossed: tuple[str, int],
        response: ModelResponse | None = None,
    ) -> None:
        """End the run at a limit. A turn that crossed it is kept, its calls answered unrun."""
        name, value = crossed
        events: list[JournalEvent] = []
        if response is not None:
            events.append(ModelTurn(response=response))
            note = f"Not run: the run reached its {name} limit of {value}."
            events += [
                ToolFinished(
                    result=ToolResult(call_id=c.id, name=c.name, content=note, is_error=True)
                )
                for c in response.message.tool_calls
            ]
        events.append(RunFailed(reason="limit", limit=name, message=f"{name} limit of {value}"))
        await writer.append(*events)
        raise LimitExceeded(name, value, response=self.response(writer))
