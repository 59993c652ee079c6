"""Checked access to decoded JSON.

Provider responses are untrusted input: a field may be missing, `null`, or of
another type than documented (and a corrupted stream can put anything
anywhere). Parsers read them through these helpers, which never raise on a
wrong shape and return a typed value or a neutral default instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import TypeVar, cast

from tidemill.types._text import valid_text

__all__ = [
    "JsonObject",
    "dumps",
    "get_int",
    "get_list",
    "get_object",
    "get_str",
    "iter_objects",
    "loads",
    "loads_object",
]

JsonObject = dict[str, object]
"""A decoded JSON object whose values are not trusted yet."""

T = TypeVar("T")


def loads_object(text: str | bytes) -> JsonObject | None:
    """Decode `text` as JSON; return the object, or `None` if it is not a JSON object.

    Examples:
        >>> loads_object('{"a": 1}   ')
        {'a': 1}
        >>> loads_object("[1]") is None, loads_object("{oops") is None
        (True, True)
    """
    try:
        value: object = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    # What `loads` does, its first test kept inline: every chunk of every stream comes
    # this way, and a one-character search is the cheap one (a longer one scans slowly).
    escaped = "\\" in text if isinstance(text, str) else b"\\" in text
    return _repaired(value, text) if escaped else value


def loads(text: str | bytes) -> object:
    r"""Decode JSON from a provider, every string in it valid Unicode (`valid_text`).

    JSON can escape half a surrogate pair (`"\ud83d"`) with no other half;
    decoded, that is a lone surrogate no journal can store, so it becomes
    U+FFFD. Only text holding such an escape is walked.

    Raises:
        ValueError: When `text` is not JSON.

    Examples:
        >>> loads('{"lone": "a\\ud83d"}') == {"lone": "a\ufffd"}
        True
        >>> loads('{"pair": "\\ud83d\\ude00"}') == {"pair": "\U0001f600"}
        True
    """
    return _repaired(json.loads(text), text)


# A `\uD800`-`\uDFFF` escape: half of a surrogate pair, which may have no other half.
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _repaired(value: T, text: str | bytes) -> T:
    """`value` with its strings made valid, when `text` holds a surrogate's escape."""
    found = _ESCAPE.search(text) if isinstance(text, str) else _ESCAPE_BYTES.search(text)
    return value if found is None else cast(T, _valid(value))


def _valid(value: object) -> object:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_text(str(k)): _valid(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid(item) for item in value]
    return value


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
