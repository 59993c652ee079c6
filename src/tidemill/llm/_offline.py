"""What the offline model answers with no script: the user's last words, or a value of the schema.

`offline_answer` is the answer of `ScriptedModel()` given neither a script nor
a handler (the `"fake"` spec with no options, the proxy's `--model-alias
NAME=fake`, `tidemill run --model-alias '*=fake'`). It echoes the last user
message; when the request asks for JSON of a schema it answers the simplest
value the schema accepts instead (`example_value`), so a flow's structured
steps get an answer they can validate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from tidemill.llm._model import ModelRequest
from tidemill.types import Role

__all__ = ["example_value", "offline_answer", "requested_schema"]

_FORMATS: dict[str, str] = {
    "date-time": "2000-01-01T00:00:00Z",
    "date": "2000-01-01",
    "time": "00:00:00Z",
    "duration": "P1D",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/",
    "iri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri-reference": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-0000-0000-000000000000",
}
"""A value of each string format a JSON Schema may name."""

_MAX_DEPTH = 64
"""How deep an example is built before the branch is given up (a guard against cycles)."""

_MAX_SIZE = 1000
"""The most items or characters a `minItems` or `minLength` is honoured for."""

_SCHEMA_WORDS = "JSON Schema"
"""What the line before a schema in a system prompt says (see `requested_schema`)."""


class _NoExample(Exception):
    """This branch of the schema has no simple value (a cycle, `false`, a broken `$ref`)."""


def offline_answer(request: ModelRequest) -> str:
    """The offline model's answer: a value of the requested schema as JSON, else an echo.

    Examples:
        >>> from tidemill.llm import OutputFormat
        >>> from tidemill.types import Message
        >>> offline_answer(ModelRequest([Message.user("tide tables")]))
        'tide tables'
        >>> schema = {"type": "object", "properties": {"label": {"enum": ["refund", "bug"]}}}
        >>> ask = ModelRequest([Message.user("?")], output_format=OutputFormat("t", schema))
        >>> offline_answer(ask)
        '{"label": "refund"}'
    """
    schema = requested_schema(request)
    if schema is not None:
        return json.dumps(example_value(schema), ensure_ascii=False)
    for message in reversed(request.messages):
        if message.role is Role.USER:
            return message.content
    return ""


def requested_schema(request: ModelRequest) -> JsonValue | None:
    """The JSON Schema the answer must match, or None when the request asks for none.

    It is the request's `output_format` (JSON mode asks for any object), or
    else a schema written in a system message on a line of its own, after a
    line that mentions a JSON Schema: how an `OutputSpec` asks models that
    take no native format (an `ai_action`'s `output_schema`).
    """
    output = request.output_format
    if output is not None:
        return dict(output.schema) if output.schema is not None else {"type": "object"}
    for message in request.messages:
        if message.role is not Role.SYSTEM:
            continue
        before = ""
        for line in message.content.splitlines():
            text = line.strip()
            if text.startswith("{") and _SCHEMA_WORDS in before:
                try:
                    schema = json.loads(text)
                except ValueError:
                    schema = None
                if isinstance(schema, dict):
                    return schema
            if text:
                before = text
    return None


def example_value(schema: JsonValue) -> JsonValue:
    """The simplest value `schema` accepts, as far as a plain walk of it can tell.

    Objects get every property they list; arrays their `minItems`; strings
    are empty (padded to `minLength`, or an example of their `format`);
    numbers are 0 moved into their bounds; `const` and `enum` give their
    first value, `anyOf` and `oneOf` their first branch that has a value,
    `allOf` the merge of its parts; local `$ref`s are followed. `pattern`,
    `not` and conditionals are not looked at, and a schema that accepts
    nothing (`false`, a required cycle) gives `null`.

    Examples:
        >>> example_value({"type": "object", "required": ["n"], "properties": {
        ...     "n": {"type": "integer", "minimum": 3}, "tags": {"type": "array"}}})
        {'n': 3, 'tags': []}
        >>> example_value({"anyOf": [{"type": "null"}, {"type": "string", "format": "date"}]})
        '2000-01-01'
    """
    try:
        return _Walk(schema).value(schema, 0)
    except _NoExample:
        return None


class _Walk:
    """One walk of a schema, with its root for `$ref`s and the refs being expanded."""

    def __init__(self, root: JsonValue) -> None:
        self.root = root
        self.expanding: list[str] = []

    def value(self, schema: JsonValue, depth: int) -> JsonValue:
        if depth > _MAX_DEPTH or schema is False:
            raise _NoExample
        if not isinstance(schema, dict):
            return None  # `true`, or not a schema: anything goes
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self.follow(ref, schema, depth)
        if "const" in schema:
            return schema["const"]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return enum[0]
        parts = schema.get("allOf")
        if isinstance(parts, list) and parts:
            return self.value(self.merged(schema, parts, depth), depth + 1)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                return self.first(branches, depth)
        return self.typed(schema, _type_of(schema), depth)

    def follow(self, ref: str, schema: dict[str, JsonValue], depth: int) -> JsonValue:
        if ref in self.expanding:
            raise _NoExample  # a cycle: only a branch that avoids it has a value
        target = _pointer(self.root, ref)
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        if siblings and isinstance(target, dict):
            target = {**target, **siblings}
        self.expanding.append(ref)
        try:
            return self.value(target, depth + 1)
        finally:
            self.expanding.pop()

    def merged(
        self, schema: dict[str, JsonValue], parts: list[JsonValue], depth: int
    ) -> dict[str, JsonValue]:
        merged: dict[str, JsonValue] = {k: v for k, v in schema.items() if k != "allOf"}
        properties: dict[str, JsonValue] = dict(_mapping(merged.get("properties")))
        required: list[JsonValue] = list(_sequence(merged.get("required")))
        for part in parts:
            if isinstance(part, dict) and isinstance(part.get("$ref"), str):
                ref = str(part["$ref"])
                if ref in self.expanding or depth > _MAX_DEPTH:
                    raise _NoExample
                part = _pointer(self.root, ref)
            if part is False:
                raise _NoExample
            if not isinstance(part, dict):
                continue
            properties.update(_mapping(part.get("properties")))
            required += _sequence(part.get("required"))
            merged = {**part, **merged}
        merged["properties"] = properties
        merged["required"] = required
        return merged

    def first(self, branches: list[JsonValue], depth: int) -> JsonValue:
        """The first branch with a value, preferring one that is not only `null`."""
        ordered = sorted(branches, key=lambda b: isinstance(b, dict) and b.get("type") == "null")
        for branch in ordered:
            try:
                return self.value(branch, depth + 1)
            except _NoExample:
                continue
        raise _NoExample

    def typed(self, schema: dict[str, JsonValue], kind: str, depth: int) -> JsonValue:
        if kind == "object":
            return self.object(schema, depth)
        if kind == "array":
            return self.array(schema, depth)
        if kind == "string":
            return _string(schema)
        if kind in ("integer", "number"):
            return _number(schema, integer=kind == "integer")
        if kind == "boolean":
            return False
        return None

    def object(self, schema: dict[str, JsonValue], depth: int) -> JsonValue:
        required = {name for name in _sequence(schema.get("required")) if isinstance(name, str)}
        result: dict[str, JsonValue] = {}
        for name, sub in _mapping(schema.get("properties")).items():
            try:
                result[name] = self.value(sub, depth + 1)
            except _NoExample:
                if name in required:
                    raise
        extra = schema.get("additionalProperties")
        for name in sorted(required - set(result)):
            result[name] = self.value(extra, depth + 1) if isinstance(extra, dict) else None
        return result

    def array(self, schema: dict[str, JsonValue], depth: int) -> JsonValue:
        items: list[JsonValue] = [
            self.value(s, depth + 1) for s in _sequence(schema.get("prefixItems"))
        ]
        least = _count(schema.get("minItems"))
        contains = schema.get("contains")
        if isinstance(contains, dict) and not items and least == 0:
            items.append(self.value(contains, depth + 1))
        each = schema.get("items")
        while len(items) < least:
            value = self.value(each, depth + 1) if isinstance(each, dict) else None
            if schema.get("uniqueItems") is True:
                value = _varied(value, len(items))
            items.append(value)
        return items


def _type_of(schema: Mapping[str, JsonValue]) -> str:
    """The schema's type: the first one it names that is not `null`, else guessed from its words."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        named = [k for k in kind if isinstance(k, str)]
        return next((k for k in named if k != "null"), "null")
    if any(k in schema for k in ("properties", "required", "additionalProperties")):
        return "object"
    if any(k in schema for k in ("items", "prefixItems", "minItems", "contains")):
        return "array"
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return "string"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return "number"
    return "null"


def _string(schema: Mapping[str, JsonValue]) -> str:
    form = schema.get("format")
    text = _FORMATS.get(form, "") if isinstance(form, str) else ""
    least = _count(schema.get("minLength"))
    return text if len(text) >= least else text + "x" * (least - len(text))


def _number(schema: Mapping[str, JsonValue], *, integer: bool) -> int | float:
    """0, moved up to the lower bound (past an exclusive one), then down to the upper bound."""
    value = 0.0
    low, low_open = _bound(schema, "minimum"), _bound(schema, "exclusiveMinimum")
    high, high_open = _bound(schema, "maximum"), _bound(schema, "exclusiveMaximum")
    if low is not None and value < low:
        value = low
    if low_open is not None and value <= low_open:
        value = low_open + 1
        if high_open is not None and value >= high_open and not integer:
            value = (low_open + high_open) / 2
    if high is not None and value > high:
        value = high
    if high_open is not None and value >= high_open:
        value = high_open - 1
    step = _bound(schema, "multipleOf")
    if step is not None and step > 0:
        value = math.ceil(value / step) * step
    if integer:
        return math.ceil(value)
    return float(value)


def _bound(schema: Mapping[str, JsonValue], key: str) -> float | None:
    value = schema.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _varied(value: JsonValue, index: int) -> JsonValue:
    """The `index`-th of distinct values like `value`, for an array whose items must be unique."""
    if isinstance(value, bool) or index == 0:
        return value
    if isinstance(value, int | float):
        return value + index
    if isinstance(value, str):
        return f"{value}{index}"
    return value


def _count(value: JsonValue) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return min(value, _MAX_SIZE)


def _mapping(value: JsonValue) -> dict[str, JsonValue]:
    return value if isinstance(value, dict) else {}


def _sequence(value: JsonValue) -> Sequence[JsonValue]:
    return value if isinstance(value, list) else ()


def _pointer(root: JsonValue, ref: str) -> JsonValue:
    """What a local `$ref` (`#/$defs/name`) points at; any other ref has no example."""
    if not ref.startswith("#"):
        raise _NoExample
    node: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else ():
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise _NoExample
    result: JsonValue = node
    return result
