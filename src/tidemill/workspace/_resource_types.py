"""The resource types every workspace has: LLM providers, `ai_agent`, `mcp_server`.

A resource is a named JSON value (`f/ai/openai`) of a resource type, whose
JSON Schema (draft 2020-12) its value must fit. The built-in provider types
hold what `tidemill.llm` needs to reach a provider, one type for each
provider name of a model spec (`openai`, `anthropic`, `gemini`, `bedrock`,
...; a spec's `-` is a `_` in a type name: `anthropic-vertex` is
`anthropic_vertex`). A provider type holds only the fields its adapter takes:
`api_key`, `base_url`, `headers`, and what the provider adds (`organization`
and `project` for OpenAI, a `region` and AWS keys for Bedrock, ...), plus
an optional default `model`.

Secret fields (API keys, tokens, AWS secret keys) are `writeOnly: true`,
standard JSON Schema for "written, never read back": they are hidden when a
resource is shown and never quoted in errors (`tidemill.workspace._values`).
Every provider type refuses other properties (`additionalProperties: false`);
the hosted vendors that need a key require `api_key`, local servers
(`ollama`, `vllm`) and cloud platforms (`bedrock`, `vertex`, whose
credentials may come from the environment) require nothing.

`credentials_from_resource` turns a provider resource's value into the
keyword arguments of `tidemill.llm.resolve_model`.

Examples:
    >>> openai = builtin_type("openai")
    >>> openai.summary
    'OpenAI: an API key, and optionally a base URL, organization and project.'
    >>> openai.schema["required"], openai.schema["properties"]["api_key"]["writeOnly"]
    (['api_key'], True)
    >>> credentials_from_resource("openai", {"api_key": "sk-test", "model": "gpt-4o"})
    {'api_key': 'sk-test'}
    >>> from tidemill.llm import resolve_model
    >>> arguments = credentials_from_resource("openai", {"api_key": "sk-test"})
    >>> model = resolve_model("openai:gpt-4o", **arguments)
    >>> model.provider, model.model_name
    ('openai', 'gpt-4o')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidemill.errors import ConfigurationError
from tidemill.workspace._values import check_resource_value

__all__ = ["BUILTIN_TYPES", "ResourceType", "builtin_type", "credentials_from_resource"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The `$schema` of every built-in type."""


@dataclass(frozen=True, slots=True)
class ResourceType:
    """A kind of resource: its name, what it is for, and the JSON Schema of its values.

    Attributes:
        name: The type's name (`openai`, `anthropic_vertex`).
        summary: One line on what a resource of this type holds.
        schema: The JSON Schema (draft 2020-12) a value must fit; secret
            fields are `writeOnly: true`. A built-in type's schema is shared:
            copy it before changing it.
        provider: For an LLM provider type, the provider's name in model
            specs (`anthropic-vertex`); None for the other types. A
            resource's model is then `f"{provider}:{value['model']}"`.
    """

    name: str
    summary: str
    schema: dict[str, Any]
    provider: str | None = None


def _secret(description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "writeOnly": True, "description": description}


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "description": description}


_FIELDS: dict[str, dict[str, Any]] = {
    "api_key": _secret("The API key, sent as the provider's auth header."),
    "base_url": {
        "type": "string",
        "format": "uri",
        "pattern": "^https?://",
        "description": "The API's root URL (default: the provider's).",
    },
    "organization": _text("The OpenAI organization id, sent as OpenAI-Organization."),
    "project": _text("The OpenAI project id, sent as OpenAI-Project."),
    "headers": {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": "Extra HTTP headers sent with every request (gateways, HTTP-Referer).",
    },
    "model": _text("The default model id, for a model spec naming only this resource."),
}
"""The fields shared by provider types, by name."""


def _provider(
    name: str,
    title: str,
    summary: str,
    *,
    required: tuple[str, ...] = (),
    fields: tuple[str, ...] = ("api_key", "base_url", "headers", "model"),
    own: Mapping[str, dict[str, Any]] | None = None,
    provider: str | None = None,
) -> ResourceType:
    properties = {field: dict(_FIELDS[field]) for field in fields}
    properties.update(own or {})
    schema: dict[str, Any] = {
        "$schema": DIALECT,
        "title": title,
        "description": summary,
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return ResourceType(name, summary, schema, provider or name)


def _hosted(name: str, title: str) -> ResourceType:
    """An OpenAI-compatible vendor reached with an API key."""
    return _provider(
        name,
        title,
        f"{title}: an API key, and optionally a base URL.",
        required=("api_key",),
    )


def _local(name: str, title: str, url: str) -> ResourceType:
    """An OpenAI-compatible server that may run without a key."""
    return _provider(
        name,
        title,
        f"{title}: a base URL (default {url}), and an API key if the server wants one.",
    )


_GOOGLE_CLOUD: dict[str, dict[str, Any]] = {
    "project": _text("The Google Cloud project (default: GOOGLE_CLOUD_PROJECT)."),
    "region": _text("The location, a region or 'global' (default: GOOGLE_CLOUD_LOCATION)."),
    "access_token": _secret("The OAuth bearer token (default: GOOGLE_OAUTH_ACCESS_TOKEN)."),
}

_AGENT_KEYS: dict[str, dict[str, Any]] = {
    "model": _text("The model spec ('openai:gpt-4o-mini')."),
    "provider": {"type": "string", "description": "`$res:<path>`: a provider resource."},
    "base_url": {"type": "string", "description": "Another endpoint for the provider."},
    "api_key": {"type": "string", "description": "`env:NAME` or `$var:<path>`, never a key."},
    "temperature": {"type": "number", "description": "Sampling temperature."},
    "max_tokens": {"type": "integer", "description": "The most tokens one answer may have."},
    "metadata": {"type": "object", "description": "Inference metadata recorded with usage."},
    "system": {"type": "string", "description": "The system prompt."},
    "max_iterations": {"type": "integer", "description": "The most model calls."},
    "tools": {"type": "array", "description": "The tools, as an inline step's `tools`."},
    "output_schema": {"type": "object", "description": "A JSON Schema the answer must match."},
    "limits": {"type": "object", "description": "Execution bounds."},
    "approval_timeout": {"description": "How long a tool call waits for a decision."},
    "specialists": {"type": "array", "description": "Agents it may delegate tasks to."},
    "delegation": {"type": "object", "description": "Bounds on delegation."},
    "memory": {"type": "object", "description": "Managed memory: {kind: window, ...}."},
    "questions": {"type": "object", "description": "Let the model ask a person."},
}
"""The keys of an agent: those of an inline `ai_agent` step but `agent`, `tool_inputs`
and `enabled_tools` (they belong to one use of the agent). The types are loose: the
value is validated in full as the step's model (`tidemill.workspace._agents`)."""

_AGENT_SCHEMA: dict[str, Any] = {
    "$schema": DIALECT,
    "title": "AI agent",
    "description": "A reusable agent: the keys of an inline ai_agent step (brain and tools).",
    "type": "object",
    "properties": _AGENT_KEYS,
    "required": ["model"],
    "additionalProperties": False,
}

_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}

_MCP_SCHEMA: dict[str, Any] = {
    "$schema": DIALECT,
    "title": "MCP server",
    "description": "How to reach an MCP server: a command (stdio) or a URL (streamable HTTP).",
    "type": "object",
    "properties": {
        "command": _text("The program that runs the server (stdio)."),
        "args": {"type": "array", "items": {"type": "string"}, "description": "Its arguments."},
        "env": {**_STRINGS, "description": "Variables for the server process ($var: allowed)."},
        "url": {
            "type": "string",
            "pattern": "^https?://",
            "description": "The endpoint of a running streamable HTTP server.",
        },
        "headers": {**_STRINGS, "description": "HTTP headers for every request ($var: allowed)."},
    },
    "oneOf": [{"required": ["command"]}, {"required": ["url"]}],
    "additionalProperties": False,
}
"""An `mcp` tool names one with `resource: $res:<path>`; its `$var:` values (a token
in `headers`, a key in `env`) are resolved as the run's identity when the step starts."""

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _provider(
        "openai",
        "OpenAI",
        "OpenAI: an API key, and optionally a base URL, organization and project.",
        required=("api_key",),
        fields=("api_key", "base_url", "organization", "project", "headers", "model"),
    ),
    _provider(
        "azure",
        "Azure OpenAI",
        "Azure OpenAI: the resource's endpoint, and an API key or an Entra ID token.",
        required=("base_url",),
        own={
            "base_url": {
                **_FIELDS["base_url"],
                "description": "The endpoint, https://<resource>.openai.azure.com.",
            },
            "api_version": _text("The api-version (default: OPENAI_API_VERSION, else built in)."),
            "azure_ad_token": _secret("An Entra ID token, instead of the API key."),
            "model": _text("The default deployment name."),
        },
    ),
    _provider(
        "anthropic",
        "Anthropic",
        "Anthropic: an API key, and optionally a base URL.",
        required=("api_key",),
    ),
    _provider(
        "anthropic_vertex",
        "Claude on Vertex AI",
        "Claude on Google Vertex AI: a project, a region and an access token.",
        fields=("base_url", "headers", "model"),
        own=_GOOGLE_CLOUD,
        provider="anthropic-vertex",
    ),
    _provider(
        "gemini",
        "Google Gemini",
        "Google Gemini (AI Studio): an API key, and optionally a base URL.",
        required=("api_key",),
    ),
    _provider(
        "vertex",
        "Gemini on Vertex AI",
        "Gemini on Google Vertex AI: a project, a region and an access token.",
        fields=("base_url", "headers", "model"),
        own=_GOOGLE_CLOUD,
    ),
    _provider(
        "bedrock",
        "Amazon Bedrock",
        "Amazon Bedrock: a region, and AWS keys or a Bedrock API key (else the AWS environment's).",
        fields=("api_key", "base_url", "headers", "model"),
        own={
            "region": _text("The AWS region (default: AWS_REGION)."),
            "aws_access_key_id": _text("The AWS access key id."),
            "aws_secret_access_key": _secret("The AWS secret access key."),
            "aws_session_token": _secret("The AWS session token, for temporary credentials."),
            "api_key": _secret("A Bedrock API key, instead of AWS keys."),
        },
    ),
    _hosted("mistral", "Mistral"),
    _hosted("deepseek", "DeepSeek"),
    _hosted("groq", "Groq"),
    _hosted("together", "Together AI"),
    _hosted("openrouter", "OpenRouter"),
    _local("ollama", "Ollama", "http://localhost:11434/v1"),
    _local("vllm", "vLLM", "http://localhost:8000/v1"),
    _provider(
        "openai_compatible",
        "OpenAI-compatible server",
        "Any OpenAI-compatible server: its base URL, and an API key if it wants one.",
        required=("base_url",),
        provider="openai-compatible",
    ),
    ResourceType(
        "ai_agent",
        "A reusable agent: the keys of an inline ai_agent step (model or provider, "
        "system prompt, memory, limits, tools), linked from steps with `agent: <path>`.",
        _AGENT_SCHEMA,
    ),
    ResourceType(
        "mcp_server",
        "An MCP server an agent's `mcp` tool connects to (`resource: $res:<path>`): "
        "a command and its args and env, or a URL and its headers.",
        _MCP_SCHEMA,
    ),
)
"""Every built-in resource type, providers first.

The `openai` type serves `openai-responses:` specs too (the same credentials).
"""

_BY_NAME = {kind.name: kind for kind in BUILTIN_TYPES}

_ARGUMENTS: dict[str, dict[str, str]] = {
    "anthropic_vertex": {"region": "location"},
    "vertex": {"region": "location"},
    "bedrock": {
        "aws_access_key_id": "access_key_id",
        "aws_secret_access_key": "secret_access_key",
        "aws_session_token": "session_token",
    },
}
"""The fields whose `resolve_model` argument has another name, by type."""


def builtin_type(name: str) -> ResourceType | None:
    """The built-in resource type called `name`, or None.

    Examples:
        >>> builtin_type("bedrock").provider, builtin_type("anthropic_vertex").provider
        ('bedrock', 'anthropic-vertex')
        >>> builtin_type("postgres") is None
        True
    """
    return _BY_NAME.get(name)


def credentials_from_resource(
    type_name: str, value: Mapping[str, Any], *, path: str | None = None
) -> dict[str, Any]:
    """The keyword arguments of `tidemill.llm.resolve_model` for a provider resource's value.

    Fields left out of the value are left out of the arguments (the adapter
    then reads its environment variables and defaults). The default `model`
    is not an argument: name it in the spec (`f"{type.provider}:{model}"`),
    or pass it as `model=` yourself.

    Args:
        type_name: The resource's type, a built-in provider type.
        value: The resource's value.
        path: The resource's path, for errors (default: the type's name).

    Raises:
        ConfigurationError: `type_name` is not a built-in provider type.
        InvalidValue: The value does not fit the type (secrets are not quoted).

    Examples:
        >>> credentials_from_resource("bedrock", {"region": "eu-west-1",
        ...     "aws_access_key_id": "AKID", "aws_secret_access_key": "secret"})
        {'region': 'eu-west-1', 'access_key_id': 'AKID', 'secret_access_key': 'secret'}
        >>> credentials_from_resource("ai_agent", {})
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: 'ai_agent' is not an LLM provider resource type. ...
    """
    kind = _BY_NAME.get(type_name)
    if kind is None or kind.provider is None:
        providers = [kind.name for kind in BUILTIN_TYPES if kind.provider is not None]
        raise ConfigurationError(
            f"{type_name!r} is not an LLM provider resource type.",
            hint=f"Use a resource of one of the types {', '.join(providers)}.",
            context={"type": type_name},
        )
    check_resource_value(kind.schema, value, path=path or f"a {type_name} resource")
    renamed = _ARGUMENTS.get(type_name, {})
    arguments: dict[str, Any] = {}
    for field, given in value.items():
        if field == "model" or given is None:
            continue
        arguments[renamed.get(field, field)] = dict(given) if field == "headers" else given
    return arguments
