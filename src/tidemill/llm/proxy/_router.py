"""`ModelRouter`: the `model` string of a request, turned into a `Model` once and reused.

A name is looked up in the alias map first (`ModelAliases`: an alias names a
spec string or a ready `Model`, and `*` stands for every name without one),
then read as a spec string (`anthropic:claude-sonnet-4-5`, `gpt-4o-mini`) by
`resolve_model`. The offline model (`fake`) is served only under a name the
operator chose, an alias or a listed model: a client cannot ask for it on its
own. Nor can it reach, by a spec string alone, a vendor whose default base
URL is a service on the proxy's own host (`ollama:`, `vllm:`): those are
served only when the operator named them or set their base URL. A provider
the proxy has no key or base URL for is not served (404); the operator is
told once, in the log, what to set.

Models built here share one `httpx` client with a large connection pool
(over `StreamingTransport`, which costs a tenth of `httpx`'s own transport
per streamed chunk, unless the environment configures an HTTP proxy; `relay`
then gives the fast path for OpenAI-format models), take their credentials
from the environment (`OPENAI_API_KEY`, ...), from per-provider options or
from an alias's own options, and are closed by `aclose`; `Model` objects
passed in stay the caller's. Models built for the spec strings clients name
themselves are kept in a bounded cache, the least recently used dropped
first; those of aliases and listed names are kept for as long as the router.
A name that cannot be served is an `UnknownModel` (404) with the closest
names the proxy can serve, never the name asked for itself.
"""

from __future__ import annotations

import difflib
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from tidemill.errors import ConfigurationError, MissingCredentialsError
from tidemill.llm._adapter import HttpModel
from tidemill.llm._aliases import EVERY_MODEL, ModelAliases
from tidemill.llm._credentials import CredentialSource
from tidemill.llm._model import Model
from tidemill.llm._retry import RetryPolicy
from tidemill.llm._spec import ModelSpec, parse_model_spec, resolve_model
from tidemill.llm.http._client import DEFAULT_TIMEOUT, no_cookies
from tidemill.llm.http._transport import StreamingTransport, use_streaming_transport
from tidemill.llm.openai._chat import OpenAIChatModel
from tidemill.llm.openai._dialects import DIALECTS
from tidemill.llm.proxy._errors import InvalidRequest, ProxyError, UnknownModel, not_served
from tidemill.llm.proxy._notices import note_unconfigured, setup_detail, unconfigured_provider
from tidemill.llm.proxy._relay import ChatRelay
from tidemill.llm.proxy._secrets import SecretSet

__all__ = ["DEFAULT_MAX_MODELS", "MAX_MODEL_NAME", "ModelRouter"]

_OFFLINE = frozenset({"fake", "scripted"})

POOL_LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
"""Connections of the shared upstream client: a proxy holds one per open stream."""

MAX_MODEL_NAME = 256
"""The longest `model` a request may name; a longer one is refused before any lookup."""

DEFAULT_MAX_MODELS = 128
"""How many models built for clients' own spec strings a router keeps."""

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


def _is_local(url: str | None) -> bool:
    return url is not None and (urlsplit(url).hostname or "") in _LOCAL_HOSTS


_LOCAL_DEFAULTS: dict[str, CredentialSource] = {
    name: dialect.source
    for name, dialect in DIALECTS.items()
    if _is_local(dialect.source.default_base_url)
}
"""Vendors whose default base URL is the proxy's own host (`ollama`, `vllm`)."""


class ModelRouter:
    """Turns the `model` of a request into a `Model`, built once and reused.

    Args:
        aliases: Names clients may use, each mapped to a spec string or a
            `Model`; `*` serves every name that has no alias of its own.
        models: Names to list at `/v1/models` (aliases are listed too).
        provider_options: Options for the models of each provider, passed to
            `resolve_model` (e.g. `{"anthropic": {"base_url": ...}}`).
        alias_options: Options for the model of one alias, over its
            provider's (e.g. `{"local": {"base_url": "http://10.0.0.5:8000/v1"}}`),
            so that aliases to one provider may reach different servers.
        allow_unlisted: Serve any spec string, not only aliases and listed models.
        max_models: How many models built for spec strings clients name
            themselves are kept; the least recently used is dropped first.
        retry: Upstream retries. None by default: the client's SDK retries
            the proxy's 429 and 5xx answers itself, honouring `retry-after`.
        http_client: The `httpx` client models use; by default one is made on
            first use and closed by `aclose`.

    Raises:
        ConfigurationError: For options of a name that is no alias to a spec
            string, or a `max_models` below 1.

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
        alias_options: Mapping[str, Mapping[str, Any]] | None = None,
        allow_unlisted: bool = True,
        max_models: int = DEFAULT_MAX_MODELS,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.aliases = aliases if isinstance(aliases, ModelAliases) else ModelAliases(aliases or {})
        self.models = list(models)
        self.provider_options = {
            name: dict(opts) for name, opts in (provider_options or {}).items()
        }
        self.alias_options = _checked_alias_options(self.aliases, alias_options or {})
        self.allow_unlisted = allow_unlisted
        if max_models < 1:
            raise ConfigurationError(
                f"max_models must be at least 1, not {max_models!r}.",
                hint="Keep the default, or pass how many models to keep built.",
            )
        self.max_models = max_models
        self.retry = retry or RetryPolicy(max_retries=0)
        self._client = http_client
        self._owns_client = http_client is None
        self._transport: StreamingTransport | None = None
        # Models of aliases and listed names, by (the alias whose options apply, target).
        self._named: dict[tuple[str, str], Model] = {}
        # Models of spec strings clients named themselves, least recently used first.
        self._open: OrderedDict[str, Model] = OrderedDict()
        self._relays: dict[int, ChatRelay] = {}
        self._secrets = SecretSet()
        for name in self.aliases:
            target = self.aliases[name]
            if isinstance(target, HttpModel):
                self._secrets.add(target.credentials.secrets())

    def listed(self) -> list[str]:
        """The names shown at `/v1/models`: the listed models, then the aliases."""
        names = list(dict.fromkeys(self.models))
        names += [name for name in self.aliases.names() if name not in names]
        return names

    def secrets(self) -> tuple[str, ...]:
        """Every credential the models hold, in each encoded form, to scrub from answers."""
        return self._secrets.values()

    def resolve(self, name: str) -> Model:
        """The model serving `name`, built on first use.

        Raises:
            InvalidRequest: When `name` is longer than `MAX_MODEL_NAME`.
            UnknownModel: When `name` is no alias, listed model or spec string
                the proxy can serve (with the closest names), or names a
                provider the proxy is not set up for.
            ProxyError: When the options given for a provider are wrong (500).
        """
        if len(name) > MAX_MODEL_NAME:
            raise InvalidRequest(
                f"The model name is {len(name)} characters long; this proxy takes names of at "
                f"most {MAX_MODEL_NAME} characters.",
                param="model",
                code="string_above_max_length",
            )
        aliased = self.aliases.target(name)
        if isinstance(aliased, Model):
            return aliased
        if aliased is not None or name in self.models:
            return self._named_model(name, name if aliased is None else aliased)
        model = self._open.get(name)
        if model is not None:
            self._open.move_to_end(name)
            return model
        return self._open_model(name)

    def check(self) -> None:
        """Build every alias and listed model once, so a broken setup fails now.

        A setup that would fail every request (no base URL for
        `openai-compatible:`, no endpoint for `azure:`, a mistyped option, an
        alias naming a provider but no model) raises. A missing key does not:
        its provider is not served until the key is set, and the log says so.

        Raises:
            ConfigurationError: Naming the alias or listed model and what to fix.
        """
        targets = [(name, self.aliases[name]) for name in self.aliases]
        targets += [(name, name) for name in self.models if name not in self.aliases]
        for label, target in targets:
            if not isinstance(target, str):
                continue
            what = "model alias" if label in self.aliases else "listed model"
            try:
                spec = parse_model_spec(target)
                if spec.provider in _OFFLINE:
                    continue
                if spec.model is None:
                    raise ConfigurationError(
                        f"{target!r} names a provider but no model.",
                        hint=f"Write it as '{spec.provider}:<model id>'.",
                    )
                resolve_model(target, **self._options(spec.provider, label))
            except MissingCredentialsError as exc:
                note_unconfigured(str(exc.context.get("provider", target)), setup_detail(exc))
            except ConfigurationError as exc:
                raise ConfigurationError(
                    f"The {what} {label!r} cannot be served: {exc.message}",
                    hint=exc.hint,
                    context={"alias": label, **exc.context},
                ) from None

    def relay(self, model: Model) -> ChatRelay | None:
        """The fast streaming path for `model`, when it has one.

        Only OpenAI-format models built here, on the router's own client and
        `StreamingTransport`, have one; any other model streams through `model.stream()`.
        """
        return self._relays.get(id(model))

    async def aclose(self) -> None:
        """Close the models built here and the shared client; passed-in models stay open.

        A model dropped from the cache earlier was not closed then (a request
        may still be using it); it holds nothing of its own to close, since
        every model built here uses the shared client or one given in its options.
        """
        self._relays = {}
        built = {id(m): m for m in [*self._named.values(), *self._open.values()]}
        self._named, self._open = {}, OrderedDict()
        for model in built.values():
            await model.aclose()
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None
            self._transport = None

    def _named_model(self, name: str, target: str) -> Model:
        """The model of an alias or listed name, built on first use and kept."""
        owner = self._options_owner(name)
        key = (owner, target)
        model = self._named.get(key)
        if model is not None:
            return model
        spec = self._spec(name, target)
        if spec.provider in _OFFLINE:
            # Not `record`ed: a proxy answers for as long as it runs.
            model = resolve_model(target, record=False)
        else:
            self._require_model(name, spec)
            model = self._build(name, target, spec.provider, owner)
        self._named[key] = model
        return model

    def _open_model(self, name: str) -> Model:
        """The model of a spec string a client named itself, when the proxy serves it."""
        if not self.allow_unlisted:
            raise self.unknown(name, f"The model {name!r} is not served by this proxy.")
        spec = self._spec(name, name)
        if spec.provider in _OFFLINE:
            raise self.unknown(
                name,
                f"The offline model {name!r} is served only under a name the proxy's "
                "operator chose.",
                "Its operator can serve it with --model-alias NAME=fake.",
            )
        self._require_model(name, spec)
        self._require_reachable(name, spec.provider)
        model = self._named.get(("", name)) or self._build(name, name, spec.provider, "")
        self._open[name] = model
        if len(self._open) > self.max_models:
            dropped_name, dropped = self._open.popitem(last=False)
            if self._named.get(("", dropped_name)) is not dropped:
                self._relays.pop(id(dropped), None)
        return model

    def _spec(self, name: str, target: str) -> ModelSpec:
        try:
            return parse_model_spec(target)
        except ConfigurationError as exc:
            raise self.unknown(
                name,
                f"The model {name!r} does not exist: {exc.message}",
                _servable_hint(exc, target),
            ) from None

    def _require_model(self, name: str, spec: ModelSpec) -> None:
        if spec.model is None:
            # A client names the model it wants; a provider's default is the library's convenience.
            raise self.unknown(
                name,
                f"The model {name!r} names a provider but no model.",
                f"Ask for '{spec.provider}:<model id>'.",
            )

    def _require_reachable(self, name: str, provider: str) -> None:
        """Refuse a vendor on the proxy's own host that its operator did not set up."""
        source = _LOCAL_DEFAULTS.get(provider)
        if source is None or provider in self.provider_options:
            return
        variable = source.base_url_env
        if variable and os.environ.get(variable, "").strip():
            return
        note_unconfigured(
            provider,
            f"its default base URL ({source.default_base_url}) is on the proxy's own host, "
            f"which a client may not reach unless the operator asks: set {variable}, or "
            f"serve it by name with --model-alias NAME={provider}:<model> or "
            f"--model {provider}:<model>.",
        )
        raise self.unknown(name, not_served(name, provider), _LISTED_HINT)

    def _options_owner(self, name: str) -> str:
        """The alias whose own options serve `name` ("" for none)."""
        owner = name if name in self.aliases else EVERY_MODEL
        return owner if owner in self.alias_options else ""

    def _options(self, provider: str, owner: str) -> dict[str, Any]:
        return {
            "retry": self.retry,
            **self.provider_options.get(provider, {}),
            **self.alias_options.get(owner, {}),
        }

    def _build(self, name: str, target: str, provider: str, owner: str) -> Model:
        options = self._options(provider, owner)
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
        if isinstance(model, HttpModel):
            self._secrets.add(model.credentials.secrets())
        return model

    def _refusal(self, name: str, provider: str, exc: ConfigurationError) -> ProxyError:
        """Whose problem a model that cannot be built is: the client's name, or the setup."""
        unconfigured = unconfigured_provider(exc)
        if unconfigured is not None or isinstance(exc, MissingCredentialsError):
            # Not the client's fault, nor its key's: the operator is told what to set.
            note_unconfigured(unconfigured or provider, setup_detail(exc))
            return self.unknown(name, not_served(name, provider), _LISTED_HINT)
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
        close = (
            difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
            if len(name) <= MAX_MODEL_NAME  # what is compared stays small
            else []
        )
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


_LISTED_HINT = "The models it serves are listed at /v1/models."


def _checked_alias_options(
    aliases: ModelAliases, options: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """`alias_options`, each for an alias to a spec string."""
    checked: dict[str, dict[str, Any]] = {}
    for name, given in options.items():
        if name not in aliases:
            raise ConfigurationError(
                f"Options were given for {name!r}, which is not an alias.",
                hint="Define the alias first (--model-alias NAME=SPEC, or aliases=).",
            )
        if isinstance(aliases[name], Model):
            raise ConfigurationError(
                f"The alias {name!r} is a Model object; its options cannot be changed here.",
                hint="Set them when you construct the model.",
            )
        if not isinstance(given, Mapping):
            raise ConfigurationError(
                f"The options of the alias {name!r} must be a mapping of options, "
                f"not {type(given).__name__}.",
                hint="Pass e.g. {'base_url': 'http://10.0.0.5:8000/v1'}.",
            )
        checked[name] = dict(given)
    return checked


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
