"""`FallbackModel`: try the next model when one provider is down or out of capacity.

A wrapper over the same `Model` interface, like retries are a policy of the
HTTP layer: each model still retries on its own first, and only the error it
finally raises decides whether the next model is tried.

It falls back on what another provider may well not share: a rate limit or
an exhausted quota (`RateLimitError`), a timeout (`ProviderTimeout`), a 5xx,
a dropped connection or a stream that broke before its first event. It does
not fall back on what would fail the same way everywhere or needs fixing:
a refused key (`AuthenticationError`), a prompt too long
(`ContextWindowExceeded`), or any other 4xx (a bad request); those are
raised at once. Once a stream has yielded an event, its failure is raised:
the caller has already shown part of one model's answer.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing

from pydantic import JsonValue

from tidemill.errors import (
    AuthenticationError,
    ConfigurationError,
    ContextWindowExceeded,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
)
from tidemill.llm._model import Model, ModelRequest, ModelStreamEvent
from tidemill.types import ModelResponse, ResponseDone

__all__ = ["FallbackModel", "should_fall_back"]

_log = logging.getLogger("tidemill.llm")


def should_fall_back(error: ProviderError) -> bool:
    """Whether another model may succeed where this error's model failed.

    Examples:
        >>> should_fall_back(RateLimitError("slow down", provider="openai"))
        True
        >>> should_fall_back(AuthenticationError("bad key", provider="openai", status_code=401))
        False
        >>> should_fall_back(ProviderError("HTTP 503", provider="openai", status_code=503))
        True
        >>> should_fall_back(ProviderError("HTTP 400", provider="openai", status_code=400))
        False
    """
    if isinstance(error, AuthenticationError | ContextWindowExceeded):
        return False
    if isinstance(error, RateLimitError | ProviderTimeout):
        return True
    if error.status_code is not None:
        return error.status_code >= 500
    # No HTTP status: the connection failed or the stream broke before its end.
    return error.retryable


class FallbackModel(Model):
    """Several models tried in order: the first that answers wins.

    Use it to ride out one provider's outage or rate limit. The response
    says which model answered (`ModelResponse.provider` and `.model`).
    `resolve_model` builds one from a list of spec strings.

    Args:
        models: The models, in the order they are tried.
        fallback_on: Which failures move on to the next model (default
            `should_fall_back`); the others are raised at once.
        owned: Models to close in `aclose` (those built for this wrapper,
            as `resolve_model` does); the rest stay the caller's.

    Raises:
        ConfigurationError: With no models.

    Examples:
        >>> from tidemill.llm import resolve_model
        >>> model = resolve_model(["anthropic:claude-sonnet-4-5", "openai:gpt-4o"], api_key="k")
        >>> model.provider, model.model_name
        ('fallback', 'anthropic:claude-sonnet-4-5,openai:gpt-4o')
    """

    provider = "fallback"

    def __init__(
        self,
        models: Sequence[Model],
        /,
        *,
        fallback_on: Callable[[ProviderError], bool] = should_fall_back,
        owned: Sequence[Model] = (),
    ) -> None:
        if not models:
            raise ConfigurationError(
                "A fallback model needs at least one model.",
                hint="Pass the models in the order to try them: FallbackModel([first, second]).",
            )
        self.models = tuple(models)
        self.fallback_on = fallback_on
        self._owned = tuple(owned)
        self.model_name = ",".join(f"{m.provider}:{m.model_name}" for m in self.models)
        self.supports_tools = all(m.supports_tools for m in self.models)
        self.supports_output_format = all(m.supports_output_format for m in self.models)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Ask each model in turn until one answers.

        Raises:
            ProviderError: The first failure that is no reason to fall back,
                or the last model's failure when every model failed (the
                earlier failures are listed in its notes).
        """
        failures: list[ProviderError] = []
        for model in self.models:
            try:
                response = await model.request(request)
            except ProviderError as exc:
                self._fail(model, exc, failures)
                continue
            return _answered(model, response)
        raise _exhausted(failures)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        """Stream from each model in turn until one starts answering.

        A model that fails before its first event is left for the next one;
        once an event has been yielded, a failure is raised as it is.

        Raises:
            ProviderError: As `request` does, or a failure after the first event.
        """
        failures: list[ProviderError] = []
        for model in self.models:
            started = False
            events = model.stream(request)
            async with aclosing(events):
                try:
                    async for event in events:
                        started = True
                        if isinstance(event, ResponseDone):
                            event = ResponseDone(response=_answered(model, event.response))
                        yield event
                except ProviderError as exc:
                    if started:
                        raise
                    self._fail(model, exc, failures)
                    continue
            return
        raise _exhausted(failures)

    async def aclose(self) -> None:
        """Close the models this wrapper owns; the others stay open."""
        for model in self._owned:
            await model.aclose()

    def describe(self) -> dict[str, JsonValue]:
        """Describe the wrapper and each of its models, in order."""
        return {**super().describe(), "models": [model.describe() for model in self.models]}

    def _fail(self, model: Model, error: ProviderError, failures: list[ProviderError]) -> None:
        """Raise `error` unless it is a reason to try the next model."""
        if not self.fallback_on(error):
            raise error
        failures.append(error)
        if len(failures) < len(self.models):
            _log.warning(
                "%s:%s failed (%s); trying the next model.",
                model.provider,
                model.model_name,
                type(error).__name__,
            )


def _answered(model: Model, response: ModelResponse) -> ModelResponse:
    """`response`, saying which model gave it."""
    return response.model_copy(
        update={
            "provider": response.provider or model.provider,
            "model": response.model or model.model_name,
        }
    )


def _exhausted(failures: list[ProviderError]) -> ProviderError:
    last = failures[-1]
    for earlier in failures[:-1]:
        last.add_note(f"Tried before it: {earlier.provider}: {earlier}")
    return last
