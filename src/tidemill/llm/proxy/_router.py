"""`ModelRouter`: the `model` string of a request, turned into a `Model` once and reused.

A name is looked up in the alias map first (`ModelAliases`: an alias names a
spec string or a ready `Model`, and `*` stands for every name without one),
then read as a spec string (`anthropic:claude-sonnet-4-5`, `gpt-4o-mini`) by
`resolve_model`. The offline model (`fake`) is served only under a name the
operator chose, an alias or a listed model: a client cannot ask for it on its
own. Models built here share one `httpx`
client with a large connection pool (over `StreamingTransport`, which costs
a tenth of `httpx`'s own transport per streamed chunk, unless the
environment configures an HTTP proxy; `relay` then gives the fast path for
OpenAI-format models), take their credentials from the
environment (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, ...) or from
per-provider options, and are closed by `aclose`; `Model` objects passed in
stay the caller's. A name that cannot be served is an `UnknownModel` (404)
with the closest names the proxy can serve, never the name asked for itself.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from tidemill.errors import ConfigurationError, MissingCredentialsError
from tidemill.llm._adapter import HttpModel
from tidemill.llm._aliases import ModelAliases
from tidemill.llm._model import Model
from tidemill.llm._retry import RetryPolicy
from tidemill.llm._spec import parse_model_spec, resolve_model
from tidemill.llm.http._client import DEFAULT_TIMEOUT, no_cookies
from tidemill.llm.http._transport import StreamingTransport, use_streaming_transport
from tidemill.llm.openai._chat import OpenAIChatModel
from tidemill.llm.proxy._errors import ProxyError, UnknownModel
from tidemill.llm.proxy._relay import ChatRelay

__all__ = ["ModelRouter"]

_OFFLINE = frozenset({"fake", "scripted"})

POOL_LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
"""Connections of the shared upstream client: a proxy holds one per open stream."""


class ModelRouter:
    """Turns the `model` of a request into a `Model`, built once and reused.

    Args:
        aliases: Names clients may use, each mapped to a spec string or a
            `Model`; `*` serves every name that has no alias of its own.
        models: Names to list at `/v1/models` (aliases are listed too).
        provider_options: Options for the models of each provider, passed to
            `resolve_model` (e.g. `{"anthropic": {"base_url": ...}}`).
        allow_unlisted: Serve any spec string, not only aliases and listed models.
        retry: Upstream retries. None by default: the client's SDK retries
            the proxy's 429 and 5xx answers itself, honouring `retry-after`.
        http_client: The `httpx` client models use; by default one is made on
            first use and closed by `aclose`.

    Examples:
        >>> from tidemill.llm import ScriptedModel
        >>> router = ModelRouter(aliases={"fast": "openai:gpt-4o-mini", "echo": ScriptedModel()})
        >>> router.listed()
        ['echo', 'fast']
        >>> router.resolve("echo").provider
        'scripted'
        >>> ModelRouter(aliases={"test": "fake"}).resolve("test").provider  # echoes, offline
        'scripted'
        >>> router.resolve("fats")
        Traceback (most recent call last):
        ...
        tidemill.llm.proxy._errors.UnknownModel: The model 'fats' ... Did you mean 'fast'?
    """

    def __init__(
        self,
        *,
        aliases: Mapping[str, str | Model] | ModelAliases | None = None,
        models: Sequence[str] = (),
        provider_options: Mapping[str, Mapping[str, Any]] | None = None,
        allow_unlisted: bool = True,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.aliases = aliases if isinstance(aliases, ModelAliases) else ModelAliases(aliases or {})
        self.models = list(models)
        self.provider_options = {
            name: dict(opts) for name, opts in (provider_options or {}).items()
        }
        self.allow_unlisted = allow_unlisted
        self.retry = retry or RetryPolicy(max_retries=0)
        self._client = http_client
        self._owns_client = http_client is None
        self._transport: StreamingTransport | None = None
        self._built: dict[str, Model] = {}
        self._offline: dict[str, Model] = {}
        self._relays: dict[int, ChatRelay] = {}
        self._secrets: tuple[str, ...] = ()

    def listed(self) -> list[str]:
        """The names shown at `/v1/models`: the listed models, then the aliases."""
        names = list(dict.fromkeys(self.models))
        names += [name for name in self.aliases.names() if name not in names]
        return names

    def secrets(self) -> tuple[str, ...]:
        """Every credential the built models hold, to scrub from what the proxy sends."""
        return self._secrets

    def resolve(self, name: str) -> Model:
        """The model serving `name`, built on first use.

        Raises:
            UnknownModel: When `name` is no alias, listed model or spec string
                the proxy can serve (with the closest names).
            ProxyError: When the proxy lacks the credentials for the provider (401).
        """
        aliased = self.aliases.target(name)
        if isinstance(aliased, Model):
            return aliased
        target = name if aliased is None else aliased
        model = self._built.get(target)
        if model is not None:
            return model
        named = aliased is not None or name in self.models
        if named and target in self._offline:
            return self._offline[target]
        if not self.allow_unlisted and not named:
            raise self.unknown(name, f"The model {name!r} is not served by this proxy.")
        try:
            spec = parse_model_spec(target)
        except ConfigurationError as exc:
            raise self.unknown(
                name,
                f"The model {name!r} does not exist: {exc.message}",
                _servable_hint(exc, target),
            ) from None
        if spec.provider in _OFFLINE:
            if not named:
                raise self.unknown(
                    name,
                    f"The offline model {name!r} is served only under a name the proxy's "
                    "operator chose.",
                    "Its operator can serve it with --model-alias NAME=fake.",
                )
            # Not `record`ed: a proxy answers for as long as it runs.
            model = resolve_model(target, record=False)
            self._offline[target] = model
            return model
        if spec.model is None:
            # A client names the model it wants; a provider's default is the library's convenience.
            raise self.unknown(
                name,
                f"The model {name!r} names a provider but no model.",
                f"Ask for '{spec.provider}:<model id>'.",
            )
        model = self._build(name, target, spec.provider)
        self._built[target] = model
        if isinstance(model, HttpModel):
            self._secrets += model.credentials.secrets()
        return model

    def relay(self, model: Model) -> ChatRelay | None:
        """The fast streaming path for `model`, when it has one.

        Only OpenAI-format models built here, on the router's own client and
        `StreamingTransport`, have one; any other model streams through `model.stream()`.
        """
        return self._relays.get(id(model))

    async def aclose(self) -> None:
        """Close the models built here and the shared client; passed-in models stay open."""
        self._relays = {}
        self._offline = {}
        built, self._built = self._built, {}
        for model in built.values():
            await model.aclose()
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None
            self._transport = None

    def _build(self, name: str, target: str, provider: str) -> Model:
        options: dict[str, Any] = {"retry": self.retry, **self.provider_options.get(provider, {})}
        own = "http_client" not in options
        if own:
            options["http_client"] = self._http_client()
        try:
            model = resolve_model(target, **options)
        except ConfigurationError as exc:
            raise self._refusal(name, provider, exc) from None
        client, transport = self._client, self._transport
        if own and isinstance(model, OpenAIChatModel) and client and transport:
            timeout = model.http.timeout or client.timeout
            self._relays[id(model)] = ChatRelay(model, transport, timeout)
        return model

    def _refusal(self, name: str, provider: str, exc: ConfigurationError) -> ProxyError:
        """Whose problem a model that cannot be built is: the client's name, or the setup."""
        if isinstance(exc, MissingCredentialsError):
            env = exc.context.get("env")
            where = f"set {env} where the proxy runs" if env else "configure its api_key"
            return ProxyError(
                f"The proxy has no credentials for the {provider!r} provider: "
                f"its operator must {where}.",
                status=401,
                type="authentication_error",
                code="missing_upstream_api_key",
            )
        if "cannot be called" in exc.message or "no model" in exc.message:
            return self.unknown(
                name, f"The model {name!r} cannot be served: {exc.message}", exc.hint
            )
        return ProxyError(
            f"The proxy is misconfigured for the {provider!r} provider: {exc}",
            status=500,
            type="api_error",
            code="proxy_misconfigured",
        )

    def _http_client(self) -> httpx.AsyncClient:
        if self._client is None:
            if not use_streaming_transport():  # an HTTP proxy, or asked for httpx's own
                self._client = httpx.AsyncClient(
                    timeout=DEFAULT_TIMEOUT, limits=POOL_LIMITS, cookies=no_cookies()
                )
            else:
                transport = StreamingTransport(max_idle=POOL_LIMITS.max_keepalive_connections or 0)
                self._client = httpx.AsyncClient(
                    timeout=DEFAULT_TIMEOUT, transport=transport, cookies=no_cookies()
                )
                self._transport = transport
        return self._client

    def unknown(self, name: str, message: str, hint: str | None = None) -> UnknownModel:
        """The error for a name the proxy cannot serve, with the closest names it knows."""
        # Only names the proxy serves, and never the one asked for (it could not be served).
        known = [n for n in self.listed() if n != name and self._servable(n)]
        # Listed specs count by their bare model id too: "gpt4o-mini" is close to "gpt-4o-mini".
        candidates = {**{n: n for n in known}, **{_bare(n): n for n in known}}
        close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
        suggestions = list(dict.fromkeys(candidates[c] for c in close))
        if suggestions:
            message += f" Did you mean {' or '.join(repr(s) for s in suggestions)}?"
        elif hint:
            message += f" {hint}"
        elif known:
            message += f" Available: {', '.join(known[:10])}."
        else:
            message += " Name it as 'provider:model', e.g. 'openai:gpt-4o-mini'."
        return UnknownModel(message)

    def _servable(self, name: str) -> bool:
        """Whether a listed name reads as something the proxy serves (it may still lack a key)."""
        target = self.aliases.target(name)
        if isinstance(target, Model):
            return True
        try:
            spec = parse_model_spec(name if target is None else target)
        except ConfigurationError:
            return False
        return spec.provider in _OFFLINE or spec.model is not None


def _servable_hint(exc: ConfigurationError, spec: str) -> str | None:
    """The spec error's hint, as whole model names a client can ask for.

    The spec parser suggests providers (`'anthropic'`); a bare provider or the
    offline model would be refused, so the suggestion is the spec with the
    provider put right (`'anthropic:claude-sonnet-4-5'`).
    """
    close = exc.context.get("close")
    if not isinstance(close, list):
        return exc.hint
    model = spec.partition(":")[2] or "<model id>"
    names = [f"{c}:{model}" for c in close if isinstance(c, str) and c not in _OFFLINE]
    if not names:
        return "Name it as 'provider:model', e.g. 'openai:gpt-4o-mini'."
    return f"Did you mean {' or '.join(repr(c) for c in names)}?"


def _bare(name: str) -> str:
    return name.partition(":")[2] or name
