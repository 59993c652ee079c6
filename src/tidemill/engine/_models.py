"""Which `Model` an AI step talks to: a plain function from the step's model settings.

Workers take a `ModelResolver` as an argument (`engine.worker(models=...)`,
`Worker(models=...)`). The default builds the model from its spec with the
provider layer; tests and offline demos pass one that returns scripted models.
A worker that builds its own models hands every one of them the worker's
one `httpx` client (`default_models(choice, http_client=...)`), so all its
steps share one connection pool. `aliased_models` puts the proxy's model
aliases (`ModelAliases`) in front of a resolver: `tidemill run` and
`tidemill worker` take `--model-alias` with it, so a flow's AI steps can run
offline (`--model-alias '*=fake'`) or on another model than they name.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from tidemill.errors import ConfigurationError, MissingCredentialsError
from tidemill.llm import Model, ModelAliases, parse_model_spec, resolve_model

__all__ = [
    "ModelCache",
    "ModelChoice",
    "ModelResolver",
    "aliased_models",
    "default_models",
    "sends_requests",
]


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """An AI step's model settings, as a resolver sees them."""

    spec: str
    """The model spec (`openai:gpt-4o-mini`, `fake`, ...)."""
    base_url: str | None = None
    """Another endpoint, if the step names one."""
    api_key: str | None = None
    """`env:NAME` (read from the worker's environment), or None: the provider's usual variable."""
    step_id: str = ""
    """The step asking, for resolvers that script per step."""
    agent: str = ""
    """The specialist asking, when an `ai_agent` step delegated; empty for the step's own model."""
    credentials: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    """Keyword arguments of `tidemill.llm.resolve_model` (an `api_key`, a `base_url`,
    `headers`, ...), resolved as the run's identity from the step's `provider`
    resource and `api_key: $var:`; None: none. Never logged: it holds secrets.
    The step's own `base_url` and `api_key: env:` win over them."""

    def credentials_digest(self) -> str | None:
        """A digest of `credentials`, to tell models built with other ones apart (None: none).

        Examples:
            >>> ModelChoice("fake").credentials_digest() is None
            True
            >>> len(ModelChoice("fake", credentials={"api_key": "k"}).credentials_digest())
            64
        """
        if not self.credentials:
            return None
        text = json.dumps(dict(self.credentials), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


ModelResolver = Callable[[ModelChoice], Model]
"""Builds the model for an AI step."""


def default_models(choice: ModelChoice, *, http_client: httpx.AsyncClient | None = None) -> Model:
    """Build the model from its spec with the provider layer.

    The offline model (`fake`) answers each request as `offline_answer`
    does: the last user message, or the simplest value of the schema the
    step asks for (an `ai_action`'s `output_schema`). It keeps no record of
    its requests, since a worker runs for a long time.

    Args:
        choice: The step's model settings.
        http_client: The `httpx` client the model sends its requests with,
            left open when the model is closed; None: the model makes its
            own. Offline models (`fake`) take none.

    Raises:
        MissingCredentialsError: `api_key: env:NAME` names an unset variable.

    Examples:
        >>> import asyncio, httpx
        >>> default_models(ModelChoice("fake")).provider
        'scripted'
        >>> client = httpx.AsyncClient()
        >>> model = default_models(ModelChoice("ollama:llama3"), http_client=client)
        >>> model.http.owns_client
        False
        >>> asyncio.run(client.aclose())
    """
    offline = not sends_requests(choice.spec)
    options: dict[str, Any] = {} if offline else dict(choice.credentials or {})
    if choice.base_url:
        options["base_url"] = choice.base_url
    if choice.api_key:
        name = choice.api_key.removeprefix("env:")
        key = os.environ.get(name)
        if not key:
            raise MissingCredentialsError(
                f"Step {choice.step_id!r} reads its API key from ${name}, which is not set "
                "on this worker.",
                hint=f"Set {name} in the worker's environment.",
                context={"env": [name]},
            )
        options["api_key"] = key
    if offline:
        options["record"] = False
    elif http_client is not None:
        options["http_client"] = http_client
    return resolve_model(choice.spec, **options)


def aliased_models(
    resolve: ModelResolver,
    aliases: ModelAliases | Mapping[str, str | Model] | Iterable[tuple[str, str | Model]],
) -> ModelResolver:
    """`resolve`, with the model a step names looked up in `aliases` first.

    The lookup is the proxy's (`ModelAliases.target`): the spec as the step
    writes it (`openai:gpt-4o-mini`), else `*`. An aliased step gets its
    alias's model, built by `resolve` from the alias's spec (or the `Model`
    given), without the step's `base_url`, `api_key` and credentials: they belong to the
    model the step names, not to the one serving it. With no aliases,
    `resolve` itself is returned.

    Raises:
        ConfigurationError: An alias's spec cannot be read (checked now, not
            at the first step).

    Examples:
        >>> resolve = aliased_models(default_models, {"openai:gpt-4o-mini": "fake"})
        >>> resolve(ModelChoice("openai:gpt-4o-mini", api_key="env:UNSET_KEY")).provider
        'scripted'
        >>> resolve(ModelChoice("ollama:llama3")).provider
        'ollama'
        >>> aliased_models(default_models, {}) is default_models
        True
    """
    table = aliases if isinstance(aliases, ModelAliases) else ModelAliases(aliases)
    table.check()
    if not table:
        return resolve

    def resolver(choice: ModelChoice) -> Model:
        target = table.target(choice.spec)
        if target is None:
            return resolve(choice)
        if isinstance(target, Model):
            return target
        return resolve(replace(choice, spec=target, base_url=None, api_key=None, credentials=None))

    return resolver


def sends_requests(spec: str) -> bool:
    """Whether the model of `spec` calls a provider over HTTP (the scripted one does not).

    Examples:
        >>> sends_requests("openai:gpt-4o-mini"), sends_requests("fake")
        (True, False)
    """
    try:
        return parse_model_spec(spec).provider not in {"fake", "scripted"}
    except ConfigurationError:
        return True  # resolve_model raises the same error, with its hint


class ModelCache:
    """Builds each model once and reuses it for every step that names it.

    A worker wraps its default resolver in one: each model (its settings,
    its retries) is built once, not per step, and the worker closes them
    when it stops. The models all send through the worker's one `httpx`
    client (building a client costs tens of milliseconds: it loads the
    certificate store). Models are keyed by spec, base URL, key variable
    and a digest of their resolved credentials (another identity's key is
    another model), not by step.

    Examples:
        >>> import asyncio
        >>> cache = ModelCache(default_models)
        >>> cache(ModelChoice("fake", step_id="a")) is cache(ModelChoice("fake", step_id="b"))
        True
        >>> asyncio.run(cache.aclose())
    """

    def __init__(self, resolve: ModelResolver) -> None:
        self._resolve = resolve
        self._models: dict[tuple[str, str | None, str | None, str | None], Model] = {}

    def __call__(self, choice: ModelChoice) -> Model:
        key = (choice.spec, choice.base_url, choice.api_key, choice.credentials_digest())
        model = self._models.get(key)
        if model is None:
            model = self._resolve(choice)
            self._models[key] = model
        return model

    async def aclose(self) -> None:
        """Close every model built (their HTTP clients)."""
        models, self._models = list(self._models.values()), {}
        for model in models:
            await model.aclose()
