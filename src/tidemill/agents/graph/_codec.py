"""Turning LangGraph's values into journal JSON and back, never through pickle.

Most of a graph's state is plain data: Tidemill messages, strings, numbers,
lists and dicts. Those are stored as readable JSON, a Tidemill model as
`{"$model": "Message", "data": {...}}`, so a journal stays data that any
version of Tidemill (or `jq`) can read. What is left is LangGraph's own
bookkeeping (an `Interrupt`, a `Send`) or a value a user node put in the
state: LangGraph's serializer turns it into msgpack bytes, stored as
`{"$serde": "msgpack", "data": "<base64>"}`. The serializer must not fall
back to pickle; a value it could only pickle is refused.

A plain dict never has a key starting with `$`: such a dict is stored opaque,
so the tags above cannot be mistaken for data.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from pydantic import BaseModel, JsonValue, ValidationError

from tidemill.errors import SerializationError
from tidemill.types import Decision, Message, ModelResponse, ToolCall, ToolResult, Usage

__all__ = ["decode", "encode"]

_MODELS: dict[str, type[BaseModel]] = {
    model.__name__: model
    for model in (Message, ToolCall, ToolResult, ModelResponse, Usage, Decision)
}
_TAGS = {model: name for name, model in _MODELS.items()}
_REFUSED = frozenset({"pickle"})
_SCALARS = (str, int, bool)


def encode(value: object, serde: SerializerProtocol) -> JsonValue:
    """Return `value` as JSON: plain data as it is, the rest tagged.

    Types are matched exactly: a `str` enum or a `dict` subclass is not plain
    data, and is stored opaque so that it reads back as what it was.

    Raises:
        SerializationError: When the value can only be pickled.
    """
    kind = type(value)
    if value is None:
        return None
    if isinstance(value, str | int) and kind in _SCALARS:
        return value
    if isinstance(value, float) and kind is float and math.isfinite(value):
        return value
    if isinstance(value, list) and kind is list:
        return [encode(item, serde) for item in value]
    if isinstance(value, dict) and kind is dict and all(_plain_key(key) for key in value):
        return {key: encode(item, serde) for key, item in value.items()}
    if isinstance(value, BaseModel) and kind in _TAGS:
        return {"$model": _TAGS[kind], "data": value.model_dump(mode="json")}
    if isinstance(value, tuple) and kind is tuple:
        return {"$tuple": [encode(item, serde) for item in value]}
    return _opaque(value, serde)


def _plain_key(key: object) -> bool:
    return isinstance(key, str) and not key.startswith("$")


def decode(data: JsonValue, serde: SerializerProtocol) -> Any:
    """Return the value `encode` stored as `data`.

    Raises:
        SerializationError: When a tag is unknown or its payload is damaged.
    """
    if isinstance(data, list):
        return [decode(item, serde) for item in data]
    if not isinstance(data, dict):
        return data
    if "$model" in data:
        model = _MODELS.get(str(data["$model"]))
        if model is None:
            raise SerializationError(f"Unknown model {data['$model']!r} in a graph checkpoint.")
        try:
            return model.model_validate(data.get("data"))
        except ValidationError as exc:
            raise SerializationError(
                f"A stored {data['$model']} does not validate: {exc.errors()[0]['msg']}"
            ) from exc
    if "$tuple" in data:
        items = data["$tuple"]
        return tuple(decode(item, serde) for item in (items if isinstance(items, list) else []))
    if "$serde" in data:
        return _load(data, serde)
    return {key: decode(item, serde) for key, item in data.items()}


def _opaque(value: object, serde: SerializerProtocol) -> JsonValue:
    try:
        kind, payload = serde.dumps_typed(value)
    except Exception as exc:  # the serializer's own errors have no common base
        raise SerializationError(
            f"A {type(value).__name__} in the graph's state cannot be stored: {exc}",
            hint="Keep graph state to JSON values and Tidemill messages.",
        ) from exc
    if kind in _REFUSED:
        raise SerializationError(
            f"A {type(value).__name__} in the graph's state could only be pickled; "
            "journals are data, never pickle.",
            hint="Keep graph state to JSON values and Tidemill messages.",
        )
    return {"$serde": kind, "data": base64.b64encode(payload).decode("ascii")}


def _load(data: dict[str, JsonValue], serde: SerializerProtocol) -> Any:
    kind = str(data["$serde"])
    if kind in _REFUSED:
        raise SerializationError(f"A graph checkpoint holds a {kind!r} value; it is not loaded.")
    try:
        payload = base64.b64decode(str(data.get("data", "")), validate=True)
    except binascii.Error as exc:
        raise SerializationError(f"A stored {kind} value is not valid base64.") from exc
    return serde.loads_typed((kind, payload))
