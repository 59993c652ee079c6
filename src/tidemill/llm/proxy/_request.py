"""An OpenAI-format Chat Completions request, read into a Tidemill `ModelRequest`.

`parse_chat_request` takes the decoded JSON body and returns the model name,
the `ModelRequest` (messages, tools, settings, output format) and how to
answer (streamed or not, with a usage chunk or not). A `response_format` of
`json_schema` or `json_object` becomes the request's `OutputFormat`, which
every upstream adapter sends in its own vendor's form. What a Tidemill model
cannot honour is refused with a 400 naming the field (`n` above 1,
`logprobs`, a `tool_choice` that forces a call, a malformed `response_format`);
fields that only tune or label a call upstream (`user`, `metadata`,
`presence_penalty`, `parallel_tool_calls`, ...) are accepted and not
forwarded.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TypeVar

import jsonschema
from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.llm._json import loads
from tidemill.llm._model import ModelRequest, ModelSettings, OutputFormat
from tidemill.llm._strict_schema import strict_json_schema
from tidemill.llm.proxy._errors import InvalidRequest
from tidemill.llm.proxy._messages import describe_type, parse_messages, wrong_type
from tidemill.types import ToolDefinition

__all__ = ["ChatCompletionRequest", "parse_chat_request", "parse_json"]

_Body = dict[str, object]
_T = TypeVar("_T")

_PLAIN = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice"})
"""Fields that neither ask for something refused nor carry settings."""


@dataclass(frozen=True, slots=True)
class ChatCompletionRequest:
    """A Chat Completions request, read and checked."""

    model: str
    """The `model` string as the client sent it (a spec, an alias or a listed name)."""
    request: ModelRequest
    """The messages, tools and settings, in Tidemill's types."""
    stream: bool = False
    """Whether to answer with `chat.completion.chunk` server-sent events."""
    include_usage: bool = False
    """Whether a streamed answer ends with a usage chunk (`stream_options.include_usage`)."""


def parse_json(body: bytes) -> object:
    """Decode a request body, its strings made valid Unicode (`tidemill.llm._json.loads`).

    Raises:
        InvalidRequest: When the body is not valid JSON.

    Examples:
        >>> parse_json(b'{"model": "m"}')
        {'model': 'm'}
    """
    try:
        value = loads(body)
    except (ValueError, RecursionError) as exc:
        detail = (
            f" ({exc.msg} at line {exc.lineno} column {exc.colno})"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        raise InvalidRequest(
            f"The request body is not valid JSON{detail}.", code="invalid_json"
        ) from None
    return value


def parse_chat_request(payload: object) -> ChatCompletionRequest:
    """Read a decoded Chat Completions request body.

    Raises:
        InvalidRequest: Naming the first field that is missing, of the wrong
            type, or asks for something the proxy cannot honour.

    Examples:
        >>> parsed = parse_chat_request({
        ...     "model": "openai:gpt-4o-mini",
        ...     "messages": [{"role": "user", "content": "Hi"}],
        ...     "max_completion_tokens": 50, "stop": "END", "stream": True,
        ...     "stream_options": {"include_usage": True},
        ... })
        >>> parsed.model, parsed.stream, parsed.include_usage
        ('openai:gpt-4o-mini', True, True)
        >>> parsed.request.settings
        {'max_tokens': 50, 'stop': ['END']}
        >>> parse_chat_request({
        ...     "model": "m", "messages": [{"role": "user", "content": "Hi"}],
        ...     "response_format": {"type": "json_object"},
        ... }).request.output_format
        OutputFormat(name='final_answer', schema=None, strict=False, description='')
    """
    if not isinstance(payload, dict):
        raise InvalidRequest(
            f"The request body must be a JSON object, not {describe_type(payload)}.",
            code="invalid_body",
        )
    model = payload.get("model")
    if model is None:
        raise InvalidRequest("You must provide a 'model' parameter.", param="model")
    if not isinstance(model, str) or not model.strip():
        raise wrong_type("model", "a non-empty string", model)
    # Most requests hold only these fields: nothing to refuse, no settings to read.
    plain = payload.keys() <= _PLAIN
    if not plain:
        _refuse_unsupported(payload)
    messages = parse_messages(payload.get("messages"))
    tools = _tools(payload.get("tools"))
    if _tool_choice(payload.get("tool_choice")) == "none":
        tools = ()
    stream = _optional(payload, "stream", bool) or False
    include_usage = False
    options = payload.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise wrong_type("stream_options", "an object", options)
        include_usage = _optional(options, "include_usage", bool, "stream_options.") or False
    output_format = None if plain else _response_format(payload.get("response_format"))
    settings = ModelSettings() if plain else _settings(payload)
    return ChatCompletionRequest(
        model=model.strip(),
        request=ModelRequest(messages, tools, settings, output_format),
        stream=stream,
        include_usage=include_usage and stream,
    )


def _refuse_unsupported(payload: _Body) -> None:
    n = payload.get("n")
    if n is not None and n != 1:
        raise InvalidRequest(
            f"Invalid value for 'n': {n!r}. This proxy answers with one choice; "
            "send n=1 or leave it out.",
            param="n",
        )
    if payload.get("logprobs") or payload.get("top_logprobs") is not None:
        param = "logprobs" if payload.get("logprobs") else "top_logprobs"
        raise InvalidRequest(
            f"'{param}' is not supported by this proxy; leave it out.", param=param
        )
    modalities = payload.get("modalities")
    if payload.get("audio") is not None or (
        isinstance(modalities, list) and any(m != "text" for m in modalities)
    ):
        raise InvalidRequest(
            "Audio output is not supported by this proxy; ask for text only.",
            param="audio" if payload.get("audio") is not None else "modalities",
        )
    for legacy in ("functions", "function_call"):
        if payload.get(legacy) is not None:
            raise InvalidRequest(
                f"'{legacy}' is the legacy form of tools and is not supported; send 'tools' "
                "and 'tool_choice'.",
                param=legacy,
            )


def _response_format(value: object) -> OutputFormat | None:
    """`response_format`: text (no format), `json_object`, or `json_schema`."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise wrong_type("response_format", "an object", value)
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return OutputFormat.json_object()
    if kind != "json_schema":
        raise InvalidRequest(
            f"Invalid value for 'response_format.type': {kind!r}. Supported values are "
            "'text', 'json_object' and 'json_schema'.",
            param="response_format.type",
        )
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise wrong_type("response_format.json_schema", "an object", spec)
    prefix = "response_format.json_schema."
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise wrong_type(prefix + "name", "a non-empty string", name)
    try:
        OutputFormat(name)
    except ConfigurationError:
        raise InvalidRequest(
            f"Invalid value for '{prefix}name': {name!r}. Use 1 to 64 letters, digits, '_' or '-'.",
            param=prefix + "name",
        ) from None
    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        raise wrong_type(prefix + "description", "a string", description)
    strict = _optional(spec, "strict", bool, prefix) or False
    schema = spec.get("schema")
    if schema is None:
        if strict:
            raise InvalidRequest(
                f"'{prefix}strict' needs a '{prefix}schema'.", param=prefix + "schema"
            )
        return OutputFormat(name, description=description or "")
    if not isinstance(schema, dict):
        raise wrong_type(prefix + "schema", "a JSON Schema object", schema)
    _check_schema(schema, prefix + "schema")
    if strict:
        try:
            strict_json_schema(schema)
        except ConfigurationError as exc:
            raise InvalidRequest(
                f"Invalid schema for '{prefix}schema' in strict mode: {exc.message}",
                param=prefix + "schema",
            ) from None
    return OutputFormat(name, schema, strict=strict, description=description or "")


def _check_schema(schema: dict[str, JsonValue], param: str) -> None:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        at = f" at '{where}'" if where else ""
        raise InvalidRequest(
            f"'{param}' is not a valid JSON Schema{at}: {exc.message}", param=param
        ) from None


def _tools(value: object) -> tuple[ToolDefinition, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise wrong_type("tools", "an array of tools", value)
    tools: list[ToolDefinition] = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        param = f"tools[{index}]"
        if not isinstance(item, dict):
            raise wrong_type(param, "a tool object", item)
        if item.get("type", "function") != "function":
            raise InvalidRequest(
                f"Invalid value for '{param}.type': {item.get('type')!r}. Only 'function' "
                "tools are supported.",
                param=f"{param}.type",
            )
        function = item.get("function")
        if not isinstance(function, dict):
            raise wrong_type(f"{param}.function", "an object", function)
        tool = _function(function, f"{param}.function")
        if tool.name in seen:
            raise InvalidRequest(
                f"Duplicate tool name {tool.name!r} in '{param}.function.name'.",
                param=f"{param}.function.name",
            )
        seen.add(tool.name)
        tools.append(tool)
    return tuple(tools)


def _function(function: _Body, param: str) -> ToolDefinition:
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise wrong_type(f"{param}.name", "a non-empty string", name)
    description = function.get("description")
    if description is not None and not isinstance(description, str):
        raise wrong_type(f"{param}.description", "a string", description)
    parameters = function.get("parameters")
    schema: dict[str, JsonValue] = {"type": "object", "properties": {}}
    if parameters is not None:
        if not isinstance(parameters, dict):
            raise wrong_type(f"{param}.parameters", "a JSON Schema object", parameters)
        _check_schema(parameters, f"{param}.parameters")
        schema = parameters
    return ToolDefinition(name=name, description=description or "", parameters=schema)


def _tool_choice(value: object) -> str:
    if value is None or value == "auto":
        return "auto"
    if value == "none":
        return "none"
    forced = "required" if value == "required" else "a named function"
    if value != "required" and not isinstance(value, dict):
        raise InvalidRequest(
            f"Invalid value for 'tool_choice': {value!r}. Supported values are 'auto' and 'none'.",
            param="tool_choice",
        )
    raise InvalidRequest(
        f"'tool_choice' {forced} cannot be honoured by this proxy, which cannot force a tool "
        "call on every provider; send 'auto' (or leave it out) and say in the prompt which "
        "tool to call.",
        param="tool_choice",
    )


def _settings(payload: _Body) -> ModelSettings:
    settings = ModelSettings()
    temperature = _number(payload, "temperature")
    if temperature is not None:
        settings["temperature"] = temperature
    top_p = _number(payload, "top_p")
    if top_p is not None:
        settings["top_p"] = top_p
    limit = _positive(payload, "max_completion_tokens")
    limit = limit if limit is not None else _positive(payload, "max_tokens")
    if limit is not None:
        settings["max_tokens"] = limit
    stop = payload.get("stop")
    if isinstance(stop, str):
        settings["stop"] = [stop]
    elif isinstance(stop, list):
        for index, item in enumerate(stop):
            if not isinstance(item, str):
                raise wrong_type(f"stop[{index}]", "a string", item)
        if stop:
            settings["stop"] = list(stop)
    elif stop is not None:
        raise wrong_type("stop", "a string or an array of strings", stop)
    seed = _optional(payload, "seed", int)
    if seed is not None:
        settings["seed"] = seed
    return settings


def _optional(body: _Body, key: str, kind: type[_T], prefix: str = "") -> _T | None:
    value = body.get(key)
    if value is None:
        return None
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = {bool: "a boolean", int: "an integer"}.get(kind, kind.__name__)
        raise wrong_type(prefix + key, expected, value)
    return value


def _number(body: _Body, key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise wrong_type(key, "a number", value)
    return float(value) if isinstance(value, int) else value


def _positive(body: _Body, key: str) -> int | None:
    value = _optional(body, key, int)
    if value is not None and value < 1:
        raise InvalidRequest(
            f"Invalid value for '{key}': {value}. It must be at least 1.", param=key
        )
    return value
