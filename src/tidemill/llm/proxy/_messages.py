"""The `messages` of an OpenAI-format request, read into Tidemill `Message`s.

Roles: `system` and `developer` become system messages; `user` messages keep
their text and `image_url` parts (as `ImageRef`s, by reference); `assistant`
messages keep their text, `tool_calls` (arguments parsed from their JSON
text) and any `reasoning_content` a client echoes back; `tool` messages
become tool results, named after the call they answer. Anything the proxy
cannot carry (audio, files, the legacy `function` role) is refused with an
`InvalidRequest` naming the field, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import JsonValue

from tidemill.llm._assembly import parse_arguments
from tidemill.llm.proxy._errors import InvalidRequest
from tidemill.types import ImageRef, Message, Reasoning, Role, ToolCall

__all__ = ["describe_type", "parse_messages", "wrong_type"]

_DETAILS = ("auto", "low", "high")


def describe_type(value: object) -> str:
    """Name a JSON value's type the way an error message should.

    Examples:
        >>> describe_type(None), describe_type(True), describe_type([1])
        ('null', 'a boolean', 'an array')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def wrong_type(param: str, expected: str, value: object) -> InvalidRequest:
    """The error for a field of the wrong type."""
    return InvalidRequest(
        f"Invalid type for '{param}': expected {expected}, but got {describe_type(value)}.",
        param=param,
    )


def parse_messages(value: object) -> list[Message]:
    """Read the `messages` array of a request.

    Raises:
        InvalidRequest: Naming the first field that cannot be read.

    Examples:
        >>> [m.role.value for m in parse_messages([
        ...     {"role": "developer", "content": "Be brief."},
        ...     {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        ... ])]
        ['system', 'user']
    """
    if not isinstance(value, list):
        raise wrong_type("messages", "an array of messages", value)
    if not value:
        raise InvalidRequest(
            "'messages' must contain at least one message.", param="messages", code="empty_array"
        )
    names: dict[str, str] = {}
    messages: list[Message] = []
    for index, item in enumerate(value):
        param = f"messages[{index}]"
        if not isinstance(item, dict):
            raise wrong_type(param, "a message object", item)
        message = _message(item, param, names)
        for call in message.tool_calls:
            names[call.id] = call.name
        messages.append(message)
    return messages


def _message(item: dict[str, object], param: str, names: dict[str, str]) -> Message:
    role = item.get("role")
    if role in ("system", "developer"):
        text = _text(item.get("content"), f"{param}.content")
        return Message(role=Role.SYSTEM, content=text, name=_name(item, param))
    if role == "user":
        text, images = _user_content(item.get("content"), f"{param}.content")
        return Message(role=Role.USER, content=text, images=images, name=_name(item, param))
    if role == "assistant":
        return _assistant(item, param)
    if role == "tool":
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise wrong_type(f"{param}.tool_call_id", "a non-empty string", call_id)
        return Message(
            role=Role.TOOL,
            content=_text(item.get("content"), f"{param}.content"),
            tool_call_id=call_id,
            name=names.get(call_id),
        )
    if role == "function":
        raise InvalidRequest(
            f"'{param}.role': the legacy 'function' role is not supported; "
            "send tool results as 'tool' messages with a 'tool_call_id'.",
            param=f"{param}.role",
        )
    raise InvalidRequest(
        f"Invalid value for '{param}.role': {role!r}. Supported roles are "
        "'system', 'developer', 'user', 'assistant' and 'tool'.",
        param=f"{param}.role",
    )


def _name(item: dict[str, object], param: str) -> str | None:
    name = item.get("name")
    if name is None or isinstance(name, str):
        return name or None
    raise wrong_type(f"{param}.name", "a string", name)


def _parts(
    content: list[object], param: str, noun: str = "content part"
) -> Iterator[tuple[str, dict[str, object]]]:
    """Each item of `content` with its place, checked to be an object with a string `type`."""
    for index, part in enumerate(content):
        where = f"{param}[{index}]"
        if not isinstance(part, dict):
            raise wrong_type(where, f"a {noun} object", part)
        kind = part.get("type")
        if not isinstance(kind, str):
            raise wrong_type(f"{where}.type", "a string", kind)
        yield where, part


def _text(content: object, param: str, *, refusal: bool = False) -> str:
    """Content that may only hold text: a string, `null`, or an array of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise wrong_type(param, "a string or an array of text parts", content)
    texts: list[str] = []
    for where, part in _parts(content, param):
        kind = part["type"]
        key = "refusal" if refusal and kind == "refusal" else "text" if kind == "text" else None
        if key is None:
            raise InvalidRequest(
                f"Invalid content part type {kind!r} in '{where}': only 'text' parts "
                "are allowed in this message.",
                param=f"{where}.type",
            )
        texts.append(_string(part.get(key), f"{where}.{key}"))
    return "".join(texts)


def _user_content(content: object, param: str) -> tuple[str, tuple[ImageRef, ...]]:
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise wrong_type(param, "a string or an array of content parts", content)
    texts: list[str] = []
    images: list[ImageRef] = []
    for where, part in _parts(content, param):
        kind = part["type"]
        if kind == "text":
            texts.append(_string(part.get("text"), f"{where}.text"))
        elif kind == "image_url":
            images.append(_image(part.get("image_url"), f"{where}.image_url"))
        else:
            raise InvalidRequest(
                f"Content part type {kind!r} in '{where}' is not supported by this proxy; "
                "send 'text' and 'image_url' parts.",
                param=f"{where}.type",
            )
    return "".join(texts), tuple(images)


def _image(value: object, param: str) -> ImageRef:
    if isinstance(value, str):  # some clients send the URL itself
        value = {"url": value}
    if not isinstance(value, dict):
        raise wrong_type(param, "an object with a 'url'", value)
    url = value.get("url")
    if not isinstance(url, str) or not url:
        raise wrong_type(f"{param}.url", "a non-empty string", url)
    detail = value.get("detail")
    if detail is not None and detail not in _DETAILS:
        raise InvalidRequest(
            f"Invalid value for '{param}.detail': {detail!r}. "
            "Supported values are 'auto', 'low' and 'high'.",
            param=f"{param}.detail",
        )
    media_type = None
    if url.startswith("data:"):
        media_type = url[len("data:") :].split(";", 1)[0].split(",", 1)[0] or None
    return ImageRef(url=url, media_type=media_type, detail=detail)


def _assistant(item: dict[str, object], param: str) -> Message:
    if item.get("function_call") is not None:
        raise InvalidRequest(
            f"'{param}.function_call' is the legacy form of a tool call and is not "
            "supported; send 'tool_calls'.",
            param=f"{param}.function_call",
        )
    text = _text(item.get("content"), f"{param}.content", refusal=True)
    raw_calls = item.get("tool_calls")
    calls: list[ToolCall] = []
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            raise wrong_type(f"{param}.tool_calls", "an array of tool calls", raw_calls)
        calls = [_tool_call(call, f"{param}.tool_calls[{i}]") for i, call in enumerate(raw_calls)]
    reasoning: tuple[Reasoning, ...] = ()
    thinking = item.get("reasoning_content")
    if isinstance(thinking, str) and thinking:
        reasoning = (Reasoning(text=thinking),)
    return Message(
        role=Role.ASSISTANT,
        content=text,
        tool_calls=tuple(calls),
        reasoning=reasoning,
        name=_name(item, param),
    )


def _tool_call(value: object, param: str) -> ToolCall:
    if not isinstance(value, dict):
        raise wrong_type(param, "a tool call object", value)
    kind = value.get("type", "function")
    if kind != "function":
        raise InvalidRequest(
            f"Invalid value for '{param}.type': {kind!r}. Only 'function' tool calls are "
            "supported.",
            param=f"{param}.type",
        )
    call_id = value.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise wrong_type(f"{param}.id", "a non-empty string", call_id)
    function = value.get("function")
    if not isinstance(function, dict):
        raise wrong_type(f"{param}.function", "an object", function)
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise wrong_type(f"{param}.function.name", "a non-empty string", name)
    raw = function.get("arguments")
    arguments: dict[str, JsonValue]
    kept: str | None = None
    if isinstance(raw, str):
        arguments, kept = parse_arguments(raw)
    elif isinstance(raw, dict):
        arguments = raw
    elif raw is None:
        arguments = {}
    else:
        raise wrong_type(f"{param}.function.arguments", "a string of JSON", raw)
    return ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=kept)


def _string(value: object, param: str) -> str:
    if not isinstance(value, str):
        raise wrong_type(param, "a string", value)
    return value
