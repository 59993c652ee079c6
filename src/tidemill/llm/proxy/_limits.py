"""Bounds on a request body, checked before any work that grows with what the client sent.

A client chooses how big, how wide and how deep its JSON is; the proxy's work
must not grow without bound with it. `parse_body` reads a Chat Completions
body within `RequestLimits`:

- the number of JSON values, screened before the body is parsed by counting
  its commas and opening brackets (an upper bound on its values): Python's
  JSON decoder holds the interpreter while it runs, even in a thread, so
  this bound is what keeps the decoder's pause short (a 413);
- the number of messages (a 400 naming `messages`);
- how deeply objects and arrays nest, checked by a walk that does not
  recurse, before anything that recurses over the value (schema checks, the
  adapters' schema conversions, the offline model) sees it: a 400 naming the
  field and the limit. Python recurses some ten frames per level of a JSON
  Schema, so a schema nested 100 levels deep would exhaust the stack.

The body's size itself is bounded while it is read (`_app`), before this.
Bodies larger than `INLINE_BYTES` are parsed in a thread, so the requests
around them keep being served while a large one is read.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import TypeAlias

from tidemill.errors import ConfigurationError
from tidemill.llm.proxy._errors import InvalidRequest, ProxyError
from tidemill.llm.proxy._request import ChatCompletionRequest, parse_chat_request, parse_json

__all__ = [
    "INLINE_BYTES",
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "MAX_MESSAGES",
    "MAX_VALUES",
    "RequestLimits",
    "check_payload",
    "parse_body",
    "too_deep",
]

MAX_BODY_BYTES = 32 * 1024 * 1024
"""The largest request body accepted (images travel inline as `data:` URLs)."""

MAX_MESSAGES = 100_000
"""The most messages a request may hold."""

MAX_DEPTH = 64
"""How deeply objects and arrays may nest in a request body, the body itself counting one."""

MAX_VALUES = 1_000_000
"""The most JSON values a body may hold, counted before parsing as its commas and `[` and `{`."""

INLINE_BYTES = 64 * 1024
"""Bodies up to this size are parsed on the event loop; larger ones in a thread."""

_KEYS_NAMED = 3
"""How many object keys of a too-deep value's path its error names.

Three name `tools[0].function.parameters`."""
_KEY_CHARS = 40
"""How much of each key a path shows."""
_STEPS_NAMED = 8
"""How many keys and indices a path shows at most (a list of lists of lists...)."""

# Large bodies are parsed here, two at a time at most: they are CPU work, and the
# event loop's own executor is left to what it does (DNS lookups for upstream calls).
_parsers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tidemill-proxy-parse")


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """How big, long, deep and wide a request body may be.

    Raises:
        ConfigurationError: For a limit that is not a positive whole number.

    Examples:
        >>> RequestLimits().max_messages
        100000
        >>> RequestLimits(max_depth=0)
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: The limit max_depth must be a positive whole ...
    """

    max_body_bytes: int = MAX_BODY_BYTES
    """The largest request body, in bytes (a 413 past it)."""
    max_messages: int = MAX_MESSAGES
    """The most messages a request may hold (a 400 past it)."""
    max_depth: int = MAX_DEPTH
    """How deeply objects and arrays may nest in a body (a 400 past it)."""
    max_values: int = MAX_VALUES
    """The most JSON values a body may hold, counted as its commas and opening brackets (a 413)."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(
                    f"The limit {field.name} must be a positive whole number, not {value!r}.",
                    hint=f"Pass {field.name}= as a whole number of at least 1.",
                )


async def parse_body(body: bytes, limits: RequestLimits) -> tuple[object, ChatCompletionRequest]:
    """Read a Chat Completions body within `limits`: the decoded JSON and the request.

    A body larger than `INLINE_BYTES` is read in a thread, so that other
    requests are served while it is.

    Raises:
        ProxyError: A 413 for a body with more values than `max_values`.
        InvalidRequest: For too many messages, too deep a value, or any
            other fault `parse_json` and `parse_chat_request` find.
    """
    if len(body) <= INLINE_BYTES:
        return _parse(body, limits)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_parsers, _parse, body, limits)


def _parse(body: bytes, limits: RequestLimits) -> tuple[object, ChatCompletionRequest]:
    brackets = body.count(b"[") + body.count(b"{")
    # Each value but the first of each object or array follows a comma.
    if len(body) > limits.max_values and brackets + body.count(b",") > limits.max_values:
        raise ProxyError(
            f"The request body holds more JSON values than this proxy reads "
            f"({limits.max_values}, counting its commas and brackets).",
            status=413,
            code="request_too_large",
        )
    payload = parse_json(body)
    # Fewer brackets than the depth limit cannot nest deeper than it: no walk needed.
    check_payload(payload, limits, walk=brackets > limits.max_depth)
    return payload, parse_chat_request(payload)


def check_payload(payload: object, limits: RequestLimits, *, walk: bool = True) -> None:
    """Refuse a decoded body with too many messages or too deep a value.

    Args:
        payload: The decoded body.
        limits: The limits.
        walk: Whether to look for too deep a value (the caller may know there is none).

    Raises:
        InvalidRequest: Naming `messages`, or the field that nests too deeply.

    Examples:
        >>> check_payload({"messages": [[[]]]}, RequestLimits(max_depth=3))
        Traceback (most recent call last):
        ...
        tidemill.llm.proxy._errors.InvalidRequest: 'messages[0][0]' is nested too deeply: ...
    """
    if isinstance(payload, dict):
        messages = payload.get("messages")
        if isinstance(messages, list) and len(messages) > limits.max_messages:
            raise InvalidRequest(
                f"Invalid 'messages': array too long. Expected an array with at most "
                f"{limits.max_messages} messages, but got {len(messages)}.",
                param="messages",
                code="array_above_max_length",
            )
    where = too_deep(payload, limits.max_depth) if walk else None
    if where is not None:
        raise InvalidRequest(
            f"{where!r} is nested too deeply: objects and arrays may nest at most "
            f"{limits.max_depth} levels deep in a request body.",
            param=where,
            code="nested_too_deeply",
        )


_Path: TypeAlias = "tuple[str | int, _Path] | None"
"""The keys and indices from the body to a value, innermost first, as a linked list."""


def too_deep(value: object, limit: int) -> str | None:
    """Where `value` nests objects and arrays more than `limit` deep (itself counting one).

    The walk keeps its own stack, so no depth of input can exhaust Python's.

    Returns:
        The path of the first value found too deep, through its first few
        keys (`tools[0].function.parameters`); None when none is.

    Examples:
        >>> too_deep({"a": [{"b": {}}]}, 4) is None
        True
        >>> too_deep({"a": [{"b": {"c": {"d": {}}}}]}, 4)
        'a[0].b.c'
        >>> too_deep([[[]]], 2)
        '[0][0]'
    """
    stack: list[tuple[object, int, _Path]] = [(value, 1, None)]
    while stack:
        item, depth, path = stack.pop()
        if depth > limit:
            return _named(path)
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(child, dict | list):
                    stack.append((child, depth + 1, (key, path)))
        elif isinstance(item, list):
            for index, child in enumerate(item):
                if isinstance(child, dict | list):
                    stack.append((child, depth + 1, (index, path)))
    return None


def _named(path: _Path) -> str:
    """A path as a request field (`tools[0].function.parameters`), through its first few keys."""
    steps: list[str | int] = []
    while path is not None:
        step, path = path
        steps.append(step)
    text, keys = "", 0
    for shown, step in enumerate(reversed(steps)):
        if keys == _KEYS_NAMED or shown == _STEPS_NAMED:
            break
        if isinstance(step, int):
            text += f"[{step}]"
            continue
        keys += 1
        name = step if len(step) <= _KEY_CHARS else step[:_KEY_CHARS] + "..."
        text += f".{name}" if text else name
    return text
