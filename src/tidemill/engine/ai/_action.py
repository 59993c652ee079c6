"""The `ai_action` step: render a prompt, call a model once, check its answer.

`run_ai_action` is what a worker runs for an `ai_action` step. The prompt's
`{{ expression }}` placeholders are filled from the step's inputs and the
run's values; the model comes from the worker's `ModelResolver`; with an
`output_schema`, an answer that does not match is shown to the model again
(at most `output_retries` times). Every model call, failed ones included,
becomes one usage record, stored with the step's outcome.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tidemill.agents._output import OutputSpec
from tidemill.engine._models import ModelChoice
from tidemill.engine._outcome import Outcome
from tidemill.engine.ai._hints import flow_hint
from tidemill.errors import (
    AuthenticationError,
    ConfigurationError,
    ContextWindowExceeded,
    ExpressionError,
    OutputValidationError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    TidemillError,
    UnresolvedReference,
)
from tidemill.flows import compile_expression
from tidemill.flows._ai import _PLACEHOLDER
from tidemill.llm import Model, ModelRequest, ModelSettings
from tidemill.types import Message, ModelResponse

if TYPE_CHECKING:
    from tidemill.engine._step_env import StepEnv
    from tidemill.flows import AIAction, AIAgent, Step

__all__ = [
    "PlaceholderError",
    "model_choice",
    "provider_retryable",
    "render",
    "run_ai_action",
    "step_error",
    "step_settings",
    "step_values",
    "usage_record",
]

_RAW_LIMIT = 500
"""How much of the model's last answer a validation failure quotes."""

_ERROR_LIMIT = 1000
"""How much of an error's message a usage record keeps."""

_CONTEXT_NAMES = ("flow_input", "results", "previous_result", "iter")
"""The run's values a prompt may read besides the step's inputs."""


class PlaceholderError(ExpressionError):
    """A `{{ ... }}` placeholder of a prompt could not be evaluated.

    Attributes:
        field: `prompt` or `system`.
    """

    def __init__(self, field: str, cause: ExpressionError) -> None:
        super().__init__(cause.expression, cause.reason, hint=cause.hint)
        self.field = field
        self.message = f"{field} placeholder {{{{ {cause.expression} }}}}: {cause.reason}"
        self.args = (self.message,)


def render(template: str, values: Mapping[str, Any], *, field: str = "prompt") -> str:
    """Fill each `{{ expression }}` of `template` with its value over `values`.

    A string is inserted as is; any other value as compact JSON.

    Raises:
        PlaceholderError: A placeholder failed (a missing key, an unknown name).

    Examples:
        >>> render("{{ user.name }} asks: {{ q }} {{ tags }}", {
        ...     "user": {"name": "Ada"}, "q": "why?", "tags": ["a", 1]})
        'Ada asks: why? ["a",1]'
        >>> render("{{ user.age }}", {"user": {}})
        Traceback (most recent call last):
        ...
        tidemill.engine.ai._action.PlaceholderError: prompt placeholder {{ user.age }}: ...
    """

    def fill(match: Any) -> str:
        text = match.group(1).strip()
        try:
            value = compile_expression(text).evaluate(values)
        except ExpressionError as exc:
            raise PlaceholderError(field, exc) from None
        if isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)

    result: str = _PLACEHOLDER.sub(fill, template)
    return result


def usage_record(
    model: Model,
    metadata: Mapping[str, str],
    latency: float,
    response: ModelResponse | None = None,
    error: BaseException | None = None,
) -> dict[str, Any]:
    """One model call as a usage record (the keys `Tx.insert_usage` stores).

    `cost_usd` is None when the call was not priced, or failed before an answer.

    Examples:
        >>> from tidemill.llm import ScriptedModel
        >>> record = usage_record(ScriptedModel(), {"experiment_id": "e1"}, 0.0123)
        >>> record["provider"], record["latency_ms"], record["experiment_id"], record["cost_usd"]
        ('scripted', 12.3, 'e1', None)
    """
    usage = response.usage if response is not None else None
    cost = usage.cost_usd if usage is not None and usage.unpriced_requests == 0 else None
    return {
        "model": model.model_name,
        "provider": model.provider,
        "input_tokens": usage.input_tokens if usage is not None else 0,
        "output_tokens": usage.output_tokens if usage is not None else 0,
        "cost_usd": cost,
        "latency_ms": round(latency * 1000, 3),
        "error": None if error is None else _describe(error)[:_ERROR_LIMIT],
        "experiment_id": metadata.get("experiment_id"),
        "exposure_id": metadata.get("exposure_id"),
    }


def provider_retryable(error: ProviderError) -> bool:
    """Whether a retry of the step may get past a provider's failure.

    Rate limits, timeouts, server errors (5xx) and dropped connections may
    pass; a refused key, a bad request or a prompt too long will not.

    Examples:
        >>> provider_retryable(RateLimitError("slow down", provider="openai"))
        True
        >>> provider_retryable(ProviderError("bad request", provider="openai", status_code=400))
        False
    """
    if isinstance(error, AuthenticationError | ContextWindowExceeded):
        return False
    if isinstance(error, RateLimitError):
        return error.retryable
    if isinstance(error, ProviderTimeout):
        return True
    if error.status_code is not None and error.status_code >= 500:
        return True
    return error.retryable


def _describe(error: BaseException) -> str:
    message = error.message if isinstance(error, TidemillError) else str(error)
    return f"{type(error).__name__}: {message}"


def step_error(error: BaseException, **extra: Any) -> dict[str, Any]:
    """An AI step's error as recorded: its type, message, hint, and `extra` facts.

    The hint is said in the flow's words (`flow_hint`): what to set on the
    worker or in the step's model settings, not what to pass in Python.

    Examples:
        >>> step_error(ValueError("bad"), limit="max_requests")
        {'type': 'ValueError', 'message': 'bad', 'limit': 'max_requests'}
    """
    message = error.message if isinstance(error, TidemillError) else str(error)
    described: dict[str, Any] = {"type": type(error).__name__, "message": message}
    if isinstance(error, TidemillError) and error.hint:
        described["hint"] = flow_hint(error)
    described.update(extra)
    return described


def step_values(inputs: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """What an AI step's templates and bindings see: the run's values, then its inputs.

    Examples:
        >>> step_values({"ticket": "T"}, {"flow_input": {"a": 1}, "results": {}, "other": 2})
        {'flow_input': {'a': 1}, 'results': {}, 'ticket': 'T'}
    """
    values = {name: context[name] for name in _CONTEXT_NAMES if name in context}
    values.update(inputs)
    return values


def model_choice(step: AIAction | AIAgent, step_id: str, env: StepEnv) -> ModelChoice:
    """The `ModelChoice` of an AI step's own model, with the credentials resolved for it.

    `api_key: env:NAME` is the resolver's to read; `api_key: $var:` and
    `provider: $res:` were resolved, as the run's identity, into
    `env.credentials` before the step ran.

    Raises:
        UnresolvedReference: The step names a `provider` or a `$var:` key and
            nothing resolved them.
    """
    key = step.api_key
    needs = step.provider is not None or (key is not None and not key.startswith("env:"))
    if needs and env.credentials is None:
        raise UnresolvedReference(
            f"Step {step_id!r} names its model's credentials in the workspace "
            "(provider / api_key $var:), and they were not resolved.",
            hint="Run the step on a worker, as a run with an identity (submit_path or run_as=).",
            context={"step": step_id},
        )
    env_key = key if key is not None and key.startswith("env:") else None
    return ModelChoice(step.model, step.base_url, env_key, step_id, credentials=env.credentials)


def step_settings(step: AIAction | AIAgent) -> ModelSettings:
    """The model settings an AI step sets (`temperature`, `max_tokens`).

    Examples:
        >>> from tidemill.flows import AIAction
        >>> step_settings(AIAction(model="fake", prompt="Hi", temperature=0.2))
        {'temperature': 0.2}
    """
    settings = ModelSettings()
    if step.temperature is not None:
        settings["temperature"] = step.temperature
    if step.max_tokens is not None:
        settings["max_tokens"] = step.max_tokens
    return settings


async def run_ai_action(
    step: Step, inputs: dict[str, Any], context: dict[str, Any], env: StepEnv
) -> Outcome:
    """Run an `ai_action` step: one model call, or a few to correct its JSON answer.

    Returns a succeeded outcome with the answer's text (or its parsed JSON
    with `output_schema`), or a failed one: a placeholder or the model's
    configuration is wrong (not retryable), the provider failed (retryable
    when a later try may pass), the step's `timeout` elapsed, or the answer
    kept failing its schema (`OutputValidationError`). The outcome's `usage`
    holds one record per model call; with `env.metrics`, each is counted there.
    """
    outcome = await _run(step, inputs, context, env)
    if env.metrics is not None:
        for record in outcome.usage:
            env.metrics.action_request(record)
    return outcome


async def _run(
    step: Step, inputs: dict[str, Any], context: dict[str, Any], env: StepEnv
) -> Outcome:
    action = step.ai_action
    assert action is not None
    values = step_values(inputs, context)
    try:
        system = render(action.system, values, field="system")
        prompt = render(action.prompt, values, field="prompt")
    except PlaceholderError as exc:
        return Outcome("failed", error=step_error(exc), retryable=False)
    try:
        model = env.models(model_choice(action, step.id, env))
    except (ConfigurationError, UnresolvedReference) as exc:
        return Outcome("failed", error=step_error(exc), retryable=False)
    except Exception as exc:
        return Outcome("failed", error=step_error(exc))

    spec = None
    if action.output_schema is not None:
        spec = OutputSpec.of(action.output_schema, retries=action.output_retries)
        system = f"{system}\n\n{spec.instructions}" if system else spec.instructions
    messages = [Message.system(system)] if system else []
    messages.append(Message.user(prompt))
    settings = step_settings(action)
    deadline = None if step.timeout is None else time.monotonic() + step.timeout
    usage: list[dict[str, Any]] = []
    calls = 1 + (spec.retries if spec is not None else 0)
    answer = ""
    problems: list[str] = []

    for _ in range(calls):
        request = ModelRequest(messages=tuple(messages), settings=settings)
        await env.hold()  # each call is billed: not after another worker took the step over
        started = time.perf_counter()
        try:
            if deadline is None:
                response = await model.request(request)
            else:
                response = await asyncio.wait_for(
                    model.request(request), max(0.0, deadline - time.monotonic())
                )
        except TimeoutError:
            error = TimeoutError(f"the step ran longer than {step.timeout} s")
            usage.append(usage_record(model, action.metadata, _since(started), error=error))
            return Outcome(
                "failed",
                error={"type": "Timeout", "message": str(error)},
                usage=tuple(usage),
            )
        except ProviderError as exc:
            usage.append(usage_record(model, action.metadata, _since(started), error=exc))
            return Outcome(
                "failed",
                error=step_error(exc),
                retryable=provider_retryable(exc),
                usage=tuple(usage),
            )
        except Exception as exc:
            usage.append(usage_record(model, action.metadata, _since(started), error=exc))
            return Outcome(
                "failed",
                error=step_error(exc),
                retryable=not isinstance(exc, TidemillError),
                usage=tuple(usage),
            )
        usage.append(usage_record(model, action.metadata, _since(started), response))
        answer = response.message.content
        if spec is None:
            return Outcome("succeeded", answer, usage=tuple(usage))
        value, problems = spec.parse(answer)
        if not problems:
            return Outcome("succeeded", value, usage=tuple(usage))
        messages.append(response.message)
        messages.append(Message.user(spec.feedback(problems)))

    failure = OutputValidationError(answer, problems)
    quoted = answer if len(answer) <= _RAW_LIMIT else answer[:_RAW_LIMIT] + "..."
    return Outcome(
        "failed",
        error={
            "type": "OutputValidationError",
            "message": f"{failure.message} (after {calls} answer(s); the last was: {quoted})",
            "hint": failure.hint,
            "errors": problems,
        },
        usage=tuple(usage),
    )


def _since(started: float) -> float:
    return time.perf_counter() - started
