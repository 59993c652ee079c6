"""`ProxyRouting`: the model a proxy request names, routed to a provider resource as its caller.

A `model` is a provider resource's path (`f/team/openai`, served with the
resource's default `model`), a path and a model id (`f/team/openai:gpt-4o`;
the id may hold colons of its own, `f/ai/ollama:llama3:8b`), or an alias an
admin wrote in the workspace variable `f/proxy/aliases` (a JSON object,
written as text, alias to one of the two forms). The resource is read, and its `$var:`
references resolved, as the token's user, exactly as a run resolves an AI
step's `provider: $res:<path>`: whoever may not read it, or the secret its
key is in, is refused, and the answer never holds the key. The model is
built from the resource's fields alone (`credentials_from_resource`): its
`base_url` is the only upstream; no field or header of the request reaches it.

Each request gets a `ModelRouter` of its own, serving that one name, over
the proxy's shared `httpx` client; the router scrubs the key from whatever
the upstream sends back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.types import Scope

from tidemill.errors import (
    ConfigurationError,
    ItemNotFound,
    MissingCredentialsError,
    PermissionDenied,
    TidemillError,
)
from tidemill.llm import resolve_model
from tidemill.llm.proxy import (
    MAX_MODEL_NAME,
    AccessRecord,
    InvalidRequest,
    ModelRouter,
    ProxyError,
    UnknownModel,
)
from tidemill.workspace import AsyncWorkspace, InvalidPath, builtin_type
from tidemill.workspace import Scope as TokenScope
from tidemill.workspace._credentials import allowed_by
from tidemill.workspace._resource_types import credentials_from_resource

__all__ = ["ALIASES_PATH", "ProxyCaller", "ProxyRouting", "caller_of"]

ALIASES_PATH = "f/proxy/aliases"
"""The workspace variable holding the proxy's aliases (alias -> `path[:model]`)."""

_SCOPE_KEY = "tidemill.proxy"
_LISTED = 1000  # the most provider resources `/v1/models` lists
_log = logging.getLogger("tidemill.server.proxy")


@dataclass(slots=True)
class ProxyCaller:
    """Who a proxy request is from, and what routing it found (for its usage row)."""

    user: str
    token_id: str | None
    scopes: tuple[TokenScope, ...] | None
    ws: AsyncWorkspace = field(repr=False)
    record: AccessRecord = field(repr=False)
    resource: str | None = None
    provider: str | None = None

    def allows(self, action: str, path: str | None = None) -> bool:
        """Whether the token's scopes allow `proxy:<action>` (on `path`)."""
        return allowed_by(self.scopes, "proxy", action, path)


def caller_of(scope: Scope) -> ProxyCaller:
    """The caller the proxy's door put in `scope`."""
    found = scope.get(_SCOPE_KEY)
    if not isinstance(found, ProxyCaller):  # pragma: no cover - the door always sets it
        raise ProxyError("The request was not authenticated.", status=401, code="invalid_api_key")
    return found


def admit(scope: Scope, caller: ProxyCaller) -> None:
    """Let `caller` through, for `ProxyRouting` to find."""
    scope[_SCOPE_KEY] = caller


def _not_yours(name: str) -> UnknownModel:
    # The same answer for "no such resource" and "not yours": a path is not a secret
    # worth probing for, but an answer should not tell them apart.
    return UnknownModel(
        f"The model {name!r} names no provider resource you may use. The models you may use "
        "are listed at /v1/models."
    )


def _refused(message: str) -> ProxyError:
    return ProxyError(message, status=403, type="permission_denied", code="permission_denied")


class ProxyRouting:
    """The `routing` hook of the server's proxy: a router per request, as its caller.

    Args:
        http_client: The client every model uses (one connection pool).
        aliases_path: The workspace variable holding the aliases.
    """

    def __init__(self, http_client: httpx.AsyncClient, *, aliases_path: str = ALIASES_PATH):
        self.http_client = http_client
        self.aliases_path = aliases_path

    async def __call__(self, scope: Scope, model: str | None) -> ModelRouter:
        caller = caller_of(scope)
        if model is None:
            return await self._listing(caller)
        if len(model) > MAX_MODEL_NAME:
            raise InvalidRequest(
                f"The model name is {len(model)} characters long; this proxy takes names of at "
                f"most {MAX_MODEL_NAME} characters.",
                param="model",
                code="string_above_max_length",
            )
        path, model_id = await self._target(caller, model)
        if not caller.allows("write", path):
            raise _refused(
                f"This token may not call models on {path}; it needs the scope proxy:write "
                f"(or proxy:write:{path})."
            )
        try:
            item = await caller.ws.get(path)
        except (ItemNotFound, PermissionDenied, InvalidPath):
            raise _not_yours(model) from None
        kind = builtin_type(item.resource_type or "")
        if item.kind != "resource" or kind is None or kind.provider is None:
            raise UnknownModel(f"{path} is not an LLM provider resource, so it serves no model.")
        try:
            resolved = await caller.ws.resolve(item.value, purpose=f"proxy {model}")
        except TidemillError:
            raise _refused(
                f"You may read {path}, but not the credentials it references; ask a folder "
                "admin for the viewer role on them."
            ) from None
        value: Mapping[str, Any] = resolved.value if isinstance(resolved.value, Mapping) else {}
        model_id = model_id or value.get("model")
        if not isinstance(model_id, str) or not model_id:
            raise UnknownModel(
                f"{path} has no default model; ask for '{path}:<model id>'.",
            )
        try:
            credentials = credentials_from_resource(kind.name, value, path=path)
        except ConfigurationError as exc:  # the resource does not fit its type
            raise ProxyError(
                f"{path} cannot be used: {exc.message}",
                status=500,
                type="api_error",
                code="proxy_misconfigured",
            ) from None
        caller.resource, caller.provider = path, kind.provider
        try:
            built = resolve_model(
                f"{kind.provider}:{model_id}", **credentials, http_client=self.http_client
            )
        except MissingCredentialsError as exc:  # e.g. its own base_url, and no key of its own
            raise InvalidRequest(
                f"{path} cannot be called: {exc.message} Give the resource a key of its own "
                "(a $var: reference to a secret variable).",
                param="model",
                code="missing_credentials",
            ) from None
        except ConfigurationError as exc:  # a model id the provider cannot be asked for
            raise InvalidRequest(
                f"{model!r} cannot be called: {exc.message}", param="model"
            ) from None
        return ModelRouter(aliases={model: built}, allow_unlisted=False)

    async def _target(self, caller: ProxyCaller, model: str) -> tuple[str, str | None]:
        """The resource path and model id (None: the resource's default) `model` names."""
        if not model.startswith(("f/", "u/")):
            target = (await self._aliases(caller)).get(model)
            if target is None:
                raise UnknownModel(
                    f"The model {model!r} is no provider resource path and no alias. Name a "
                    "provider resource, as 'f/<folder>/<name>[:<model id>]'; the models you may "
                    "use are listed at /v1/models."
                )
            model = target
        path, _, model_id = model.partition(":")
        return path, model_id or None

    async def _aliases(self, caller: ProxyCaller) -> dict[str, str]:
        """The aliases the caller may read (none when the variable is absent or not theirs)."""
        try:
            item = await caller.ws.get(self.aliases_path)
        except (ItemNotFound, PermissionDenied):
            return {}
        try:
            value = json.loads(item.value) if isinstance(item.value, str) else None
        except ValueError:
            value = None
        if not isinstance(value, Mapping):
            _log.warning("%s is not a JSON object of aliases; it is ignored.", self.aliases_path)
            return {}
        return {
            str(name): target
            for name, target in value.items()
            if isinstance(target, str) and target.startswith(("f/", "u/"))
        }

    async def _listing(self, caller: ProxyCaller) -> ModelRouter:
        """A router that only lists: each provider resource the caller may use, and aliases."""
        if not caller.allows("read"):
            raise _refused("This token may not list the proxy's models; it needs proxy:read.")
        providers: dict[str, str] = {}
        after: str | None = None
        while len(providers) < _LISTED:
            page = await caller.ws.list("", kind="resource", after=after, limit=200)
            for item in page:
                kind = builtin_type(item.resource_type or "")
                if kind is not None and kind.provider and caller.allows("read", item.path):
                    providers[item.path] = kind.provider
            if len(page) < 200:
                break
            after = page[-1].path
        listed = dict(providers)
        for alias, target in (await self._aliases(caller)).items():
            provider = providers.get(target.partition(":")[0])
            if provider is not None:
                listed.setdefault(alias, provider)
        # Each name maps to its provider, for the listing's `owned_by`; it is never resolved.
        return ModelRouter(aliases=listed, allow_unlisted=False, http_client=self.http_client)
