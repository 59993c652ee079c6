"""An OpenAI-format Chat Completions request, read into a Tidemill `ModelRequest`.

`parse_chat_request` takes the decoded JSON body and returns the model name,
the `ModelRequest` (messages, tools, tool choice, settings, output format,
options) and how to answer (streamed or not, with a usage chunk or not). A
`response_format` of `json_schema` or `json_object` becomes the request's
`OutputFormat`, which every upstream adapter sends in its own vendor's form.
Every other field travels in `ModelRequest.options` under its own name
(`user`, `presence_penalty`, a server's own such as vLLM's `top_k`): an
OpenAI-format upstream gets it as it is, another the field its API has
for it. What no answer of the proxy can carry is refused with a 400 naming
the field (`n` above 1, audio output, the legacy `functions`), as is a
malformed field; `check_fields` refuses, once the upstream is known, what
its API has no equivalent for (`seed` for Anthropic, `logprobs` where no
log probabilities come back). `null` is the same as leaving a field out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar, cast

import jsonschema
from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.llm._json import loads
from tidemill.llm._model import (
    ForcedTool,
    Model,
    ModelRequest,
    ModelSettings,
    OutputFormat,
    ToolChoice,
)
from tidemill.llm._options import RequestFields, request_fields, shown, without_logprobs
from tidemill.llm._strict_schema import strict_json_schema
from tidemill.llm.proxy._errors import InvalidRequest
from tidemill.llm.proxy._messages import describe_type, parse_messages, wrong_type
from tidemill.types import ToolDefinition

__all__ = ["ChatCompletionRequest", "check_fields", "parse_chat_request", "parse_json"]

_Body = dict[str, object]
_T = TypeVar("_T")

_PLAIN = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice"})
"""Fields that neither ask for something refused nor carry settings."""

_TYPED = frozenset(
    {
        *_PLAIN,
        "response_format",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        # Refused whatever their value (`_refuse_unsupported`): never options.
        "audio",
        "functions",
        "function_call",
    }
)
"""Fields with a place of their own in a `ModelRequest`; every other one is an option."""


_WITHOUT_LOGPROBS = without_logprobs("its answers carry no log probabilities.")
"""The rules of a model without `request_fields`: every field as it is, but log probabilities."""


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
    sent: Mapping[str, object] = field(default_factory=dict)
    """Every field the client sent (not `null`) but `model`, `messages` and `stream`, as
    it sent it (`stream_options` without `include_usage`): what `check_fields` checks."""


def parse_json(body: bytes) -> object:
    r"""Decode a request body, its strings made valid Unicode (`tidemill.llm._json.loads`).

    Raises:
        InvalidRequest: When the body is not valid JSON, or not valid UTF-8
            (a surrogate encoded as bytes included).

    Examples:
        >>> parse_json(b'{"model": "m"}')
        {'model': 'm'}
        >>> parse_json(b'"x\xed\xa0\x80"')
        Traceback (most recent call last):
        ...
        tidemill.llm.proxy._errors.InvalidRequest: The request body is not valid UTF-8 ...
    """
    try:
        # Strictly: `json.loads` would let the UTF-8 form of a surrogate through as one,
        # which no upstream request can then be encoded with.
        encoding = json.detect_encoding(body)
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding.startswith("utf-8") else encoding.upper()
        raise InvalidRequest(
            f"The request body is not valid {name} ({exc.reason} at byte {exc.start}).",
            code="invalid_json",
        ) from None
    try:
        value = loads(text)
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
    tool_choice = _tool_choice(payload.get("tool_choice"), tools)
    stream = _optional(payload, "stream", bool) or False
    include_usage = False
    options: dict[str, JsonValue] = {}
    stream_options = payload.get("stream_options")
    if stream_options is not None:
        if not isinstance(stream_options, dict):
            raise wrong_type("stream_options", "an object", stream_options)
        include_usage = _optional(stream_options, "include_usage", bool, "stream_options.") or False
        extra = {k: v for k, v in stream_options.items() if k != "include_usage"}
        if extra:  # the rest is the upstream's, like any other field
            options["stream_options"] = extra
    output_format = None if plain else _response_format(payload.get("response_format"))
    settings = ModelSettings() if plain else _settings(payload)
    if not plain:
        options.update(
            (key, value)
            for key, value in payload.items()
            if key not in _TYPED and value is not None
        )
    sent = {
        key: value
        for key, value in payload.items()
        if key not in ("model", "messages", "stream", "stream_options") and value is not None
    }
    if "stream_options" in options:
        sent["stream_options"] = options["stream_options"]
    return ChatCompletionRequest(
        model=model.strip(),
        request=ModelRequest(
            messages, tools, settings, output_format, tool_choice=tool_choice, options=options
        ),
        stream=stream,
        include_usage=include_usage and stream,
        sent=sent,
    )


def check_fields(parsed: ChatCompletionRequest, model: object) -> None:
    """Refuse, before anything is sent, a field the upstream's API has no equivalent for.

    The model's `request_fields` (`tidemill.llm._options`) say what its API
    makes of each field; a model without them (scripted, offline, your own)
    takes the request as it is, but for log probabilities: it returns none
    that the proxy knows of, so `logprobs: true` and `top_logprobs` are refused.

    Raises:
        InvalidRequest: Naming the field and why, with code
            `unsupported_parameter` (or `unsupported_value` for a value).

    Examples:
        >>> from tidemill.llm import resolve_model
        >>> claude = resolve_model("anthropic:claude-sonnet-4-5", api_key="sk-ant-test")
        >>> parsed = parse_chat_request({"model": "claude", "seed": 7,
        ...                              "messages": [{"role": "user", "content": "Hi"}]})
        >>> try:
        ...     check_fields(parsed, claude)
        ... except InvalidRequest as error:
        ...     print(error.status, error.param, error.code)
        400 seed unsupported_parameter
    """
    fields = request_fields(model)
    if fields is None:
        provider = model.provider if isinstance(model, Model) else "this model"
        fields = RequestFields(provider, _WITHOUT_LOGPROBS)
    for name, value in parsed.sent.items():
        error = fields.refusal(name, cast(JsonValue, value))
        if error is not None:
            raise InvalidRequest(
                str(error), param=error.context["param"], code=error.context["code"]
            )


def _refuse_unsupported(payload: _Body) -> None:
    n = payload.get("n")
    if n is not None and n != 1:
        raise InvalidRequest(
            f"Invalid value for 'n': {n!r}. This proxy answers with one choice; "
            "send n=1 or leave it out.",
            param="n",
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


def _tool_choice(value: object, tools: tuple[ToolDefinition, ...]) -> ToolChoice:
    """`tool_choice`: `auto`, `none`, `required`, or `{"type": "function", "function": {name}}`."""
    if value is None or value == "auto":
        return "auto"
    if value == "none":
        return "none"
    choice: ToolChoice
    if value == "required":
        choice = "required"
    elif isinstance(value, dict) and value.get("type", "function") == "function":
        function = value.get("function")
        if not isinstance(function, dict):
            raise wrong_type("tool_choice.function", "an object with a 'name'", function)
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise wrong_type("tool_choice.function.name", "a non-empty string", name)
        if all(tool.name != name for tool in tools):
            raise InvalidRequest(
                f"'tool_choice' names the function {shown(name)!r}, which is not one of 'tools'.",
                param="tool_choice.function.name",
            )
        choice = ForcedTool(name)
    else:
        kind = value.get("type") if isinstance(value, dict) else value
        raise InvalidRequest(
            f"Invalid value for 'tool_choice': {shown(repr(kind))}. Supported values are "
            "'auto', 'none', 'required' and {'type': 'function', 'function': {'name': ...}}.",
            param="tool_choice",
        )
    if not tools:
        raise InvalidRequest(
            "'tool_choice' asks for a tool call, but the request has no 'tools'.",
            param="tool_choice",
        )
    return choice


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
