"""An Anthropic Messages API request, read into a Tidemill `ModelRequest`.

`parse_messages_request` takes the decoded body and returns the model name,
the `ModelRequest` and whether to stream. It reads `system`, the turns
(`_anthropic_content`), `max_tokens`, `temperature`, `top_p`,
`stop_sequences`, `stream` and:

- `tools`: each a `name`, an optional `description` and an `input_schema`
  (a JSON Schema of `type: "object"`), as a `ToolDefinition`. Anthropic's
  server tools (a `type` such as `web_search_20250305`) run on Anthropic's
  side and are refused; so is a tool's `cache_control`, quietly: it is a
  caching hint, not forwarded.
- `tool_choice`: `auto`, `any` (a call is `required`), `tool` (that one,
  `ForcedTool`) or `none`; `disable_parallel_tool_use: true` becomes the
  `parallel_tool_calls: false` option, which an upstream without such a
  switch refuses (`check_fields`, with the param renamed).

`metadata` is taken and not forwarded. Any other field (`thinking`, `top_k`,
`service_tier`...) is refused with a 400 naming it, never dropped unseen.

Examples:
    >>> name, request, stream = parse_messages_request({
    ...     "model": "claude", "max_tokens": 64,
    ...     "tools": [{"name": "add", "input_schema": {"type": "object"}}],
    ...     "tool_choice": {"type": "any"},
    ...     "messages": [{"role": "user", "content": "1 + 2?"}]})
    >>> [tool.name for tool in request.tools], request.tool_choice
    (['add'], 'required')
"""

from __future__ import annotations

import math

from pydantic import JsonValue

from tidemill.llm._model import ForcedTool, ModelRequest, ModelSettings, ToolChoice
from tidemill.llm._options import shown
from tidemill.llm.proxy._anthropic_content import TurnReader, system_text
from tidemill.llm.proxy._errors import InvalidRequest
from tidemill.llm.proxy._files import FilePolicy
from tidemill.llm.proxy._messages import describe_type, wrong_type
from tidemill.llm.proxy._request import _check_schema
from tidemill.types import Message, ToolDefinition

__all__ = ["PARALLEL_PARAM", "parse_messages_request"]

_FIELDS = frozenset(
    {"model", "messages", "max_tokens", "system", "stream", "temperature", "top_p"}
    | {"stop_sequences", "metadata", "tools", "tool_choice"}
)
_CHOICES = "'auto', 'any', 'tool' and 'none'"

PARALLEL_PARAM = "tool_choice.disable_parallel_tool_use"
"""Where `parallel_tool_calls: false` came from, for an upstream that refuses it."""


def parse_messages_request(
    body: object, files: FilePolicy | None = None
) -> tuple[str, ModelRequest, bool]:
    """The model name, the request and whether to stream, from a Messages API body.

    Args:
        body: The decoded JSON body.
        files: Which image URLs may be passed upstream (by default no stored file).

    Raises:
        InvalidRequest: A field this endpoint does not serve, or a malformed one.
    """
    if not isinstance(body, dict):
        raise InvalidRequest(f"The request body must be a JSON object, not {describe_type(body)}.")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise InvalidRequest(
            f"The field {shown(unknown[0])!r} is not served by this proxy's Messages endpoint; "
            "/v1/chat/completions serves the other options.",
            param=unknown[0],
        )
    name = body.get("model")
    if not isinstance(name, str) or not name.strip():
        raise wrong_type("model", "a non-empty string", name)
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidRequest(
            "'max_tokens' must be a whole number of at least 1.", param="max_tokens"
        )
    messages: list[Message] = []
    if body.get("system") is not None:
        messages.append(Message.system(system_text(body["system"])))
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise InvalidRequest("'messages' must be a non-empty array.", param="messages")
    reader = TurnReader(files or FilePolicy())
    for index, turn in enumerate(turns):
        messages += reader.turn(turn, f"messages[{index}]")
    tools = _tools(body.get("tools"))
    choice, single = _tool_choice(body.get("tool_choice"), tools)
    options: dict[str, JsonValue] = {"parallel_tool_calls": False} if single else {}
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise wrong_type("stream", "a boolean", stream)
    request = ModelRequest(
        messages, tools, _settings(body, max_tokens), tool_choice=choice, options=options
    )
    return name.strip(), request, bool(stream)


def _settings(body: dict[str, object], max_tokens: int) -> ModelSettings:
    settings = ModelSettings(max_tokens=max_tokens)
    temperature, top_p = _number(body, "temperature"), _number(body, "top_p")
    if temperature is not None:
        settings["temperature"] = temperature
    if top_p is not None:
        settings["top_p"] = top_p
    stop = body.get("stop_sequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise wrong_type("stop_sequences", "an array of strings", stop)
        if stop:
            settings["stop"] = [str(s) for s in stop]
    return settings


def _number(body: dict[str, object], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise wrong_type(key, "a number", value)
    return float(value)


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
        kind = item.get("type")
        if kind not in (None, "custom"):
            raise InvalidRequest(
                f"'{param}.type' is {shown(repr(kind))}: Anthropic's server tools run on "
                "Anthropic's side and are not served by this proxy. Define the tool with a "
                "'name', a 'description' and an 'input_schema'.",
                param=f"{param}.type",
            )
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise wrong_type(f"{param}.name", "a non-empty string", name)
        if name in seen:
            raise InvalidRequest(
                f"Duplicate tool name {shown(name)!r} in '{param}.name'.", param=f"{param}.name"
            )
        seen.add(name)
        description = item.get("description")
        if description is not None and not isinstance(description, str):
            raise wrong_type(f"{param}.description", "a string", description)
        schema = item.get("input_schema")
        where = f"{param}.input_schema"
        if not isinstance(schema, dict):
            raise wrong_type(where, "a JSON Schema object", schema)
        if schema.get("type") != "object":
            raise InvalidRequest(
                f"'{where}.type' must be 'object': a tool takes an object of arguments.",
                param=f"{where}.type",
            )
        _check_schema(schema, where)
        tools.append(ToolDefinition(name=name, description=description or "", parameters=schema))
    return tuple(tools)


def _tool_choice(value: object, tools: tuple[ToolDefinition, ...]) -> tuple[ToolChoice, bool]:
    """The tool choice, and whether at most one call may be made."""
    if value is None:
        return "auto", False
    if not isinstance(value, dict):
        raise wrong_type("tool_choice", "an object with a 'type'", value)
    single = value.get("disable_parallel_tool_use")
    if single is not None and not isinstance(single, bool):
        raise wrong_type(PARALLEL_PARAM, "a boolean", single)
    kind = value.get("type")
    choice: ToolChoice
    if kind == "auto":
        choice = "auto"
    elif kind == "none":
        return "none", False
    elif kind == "any":
        choice = "required"
    elif kind == "tool":
        name = value.get("name")
        if not isinstance(name, str) or not name:
            raise wrong_type("tool_choice.name", "a non-empty string", name)
        if all(tool.name != name for tool in tools):
            raise InvalidRequest(
                f"'tool_choice.name' names the tool {shown(name)!r}, which is not one of 'tools'.",
                param="tool_choice.name",
            )
        choice = ForcedTool(name)
    else:
        raise InvalidRequest(
            f"Invalid value for 'tool_choice.type': {shown(repr(kind))}. Supported values are "
            f"{_CHOICES}.",
            param="tool_choice.type",
        )
    if choice != "auto" and not tools:
        raise InvalidRequest(
            "'tool_choice' asks for a tool call, but the request has no 'tools'.",
            param="tool_choice",
        )
    return choice, bool(single)
