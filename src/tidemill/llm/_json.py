"""Checked access to decoded JSON.

Provider responses are untrusted input: a field may be missing, `null`, or of
another type than documented (and a corrupted stream can put anything
anywhere). Parsers read them through these helpers, which never raise on a
wrong shape and return a typed value or a neutral default instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

__all__ = [
    "JsonObject",
    "dumps",
    "get_int",
    "get_list",
    "get_object",
    "get_str",
    "iter_objects",
    "loads_object",
]

JsonObject = dict[str, object]
"""A decoded JSON object whose values are not trusted yet."""


def loads_object(text: str | bytes) -> JsonObject | None:
    """Decode `text` as JSON; return the object, or `None` if it is not a JSON object.

    Example:
        >>> loads_object('{"a": 1}   ')
        {'a': 1}
        >>> loads_object("[1]") is None, loads_object("{oops") is None
        (True, True)
    """
    try:
        value: object = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def dumps(value: object) -> str:
    """Encode `value` as compact JSON, keeping non-ASCII text readable."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def get_object(obj: JsonObject, key: str) -> JsonObject:
    """Return `obj[key]` if it is an object, else an empty dict."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def get_list(obj: JsonObject, key: str) -> list[object]:
    """Return `obj[key]` if it is a list, else an empty list."""
    value = obj.get(key)
    return value if isinstance(value, list) else []


def get_str(obj: JsonObject, key: str) -> str | None:
    """Return `obj[key]` if it is a string, else `None`."""
    value = obj.get(key)
    return value if isinstance(value, str) else None


def get_int(obj: JsonObject, key: str) -> int | None:
    """Return `obj[key]` if it is a whole number (not a bool), else `None`."""
    value = obj.get(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def iter_objects(values: list[object]) -> Iterator[JsonObject]:
    """Yield the items of `values` that are JSON objects, skipping the rest."""
    for value in values:
        if isinstance(value, dict):
            yield value
