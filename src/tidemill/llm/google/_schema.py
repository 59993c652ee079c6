"""JSON Schema turned into the schema subset Gemini's function declarations take.

Gemini's `parameters` is an OpenAPI-style `Schema`, not JSON Schema: it
refuses `$schema`, `$ref`/`$defs`, `additionalProperties`, `const`, type
lists and most `format`s, and spells types in capitals. Tool schemas are
generated from Python signatures and Pydantic models, which use all of
those, so each one is rewritten here:

- `$ref` is replaced by its definition (a recursive one by a plain object);
- `anyOf`/`oneOf`/type lists with `null` become the other branch plus
  `nullable: true`; with several other branches they stay an `anyOf`;
- `const` becomes a one-value `enum`, and enums of anything but strings
  are dropped (Gemini only has string enums);
- every keyword outside Gemini's `Schema` (`title`, `default`, `examples`,
  `additionalProperties`, ...) is dropped, while property *names* are kept
  whatever they are (a property may well be called `title`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

__all__ = ["gemini_parameters", "gemini_schema"]

_TYPES = {
    "string": "STRING",
    "integer": "INTEGER",
    "number": "NUMBER",
    "boolean": "BOOLEAN",
    "array": "ARRAY",
    "object": "OBJECT",
}
# Keywords copied as they are (after their values are converted where needed).
_PLAIN = (
    "description",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minProperties",
    "maxProperties",
    "pattern",
)
_FORMATS = {
    "STRING": {"enum", "date-time"},
    "INTEGER": {"int32", "int64"},
    "NUMBER": {"float", "double"},
}

Schema = dict[str, JsonValue]


def gemini_parameters(schema: Mapping[str, JsonValue]) -> Schema | None:
    """The `parameters` of a function declaration, or `None` for a tool without arguments.

    Gemini refuses an `OBJECT` whose `properties` are empty, so a tool that
    takes nothing is declared without parameters.

    Examples:
        >>> gemini_parameters({"type": "object", "properties": {}}) is None
        True
    """
    converted = gemini_schema(schema)
    if converted.get("type") == "OBJECT" and not converted.get("properties"):
        return None
    return converted


def gemini_schema(schema: Mapping[str, JsonValue]) -> Schema:
    """Rewrite one JSON Schema for Gemini.

    Examples:
        >>> gemini_schema({
        ...     "$defs": {"Unit": {"enum": ["c", "f"], "type": "string"}},
        ...     "type": "object",
        ...     "additionalProperties": False,
        ...     "properties": {
        ...         "title": {"type": "string", "title": "Title", "default": "x"},
        ...         "unit": {"anyOf": [{"$ref": "#/$defs/Unit"}, {"type": "null"}]},
        ...     },
        ...     "required": ["title", "missing"],
        ... })  # doctest: +NORMALIZE_WHITESPACE
        {'type': 'OBJECT', 'properties': {'title': {'type': 'STRING'},
         'unit': {'type': 'STRING', 'enum': ['c', 'f'], 'nullable': True}}, 'required': ['title']}
    """
    defs: dict[str, JsonValue] = {}
    for key in ("definitions", "$defs"):
        found = schema.get(key)
        if isinstance(found, dict):
            defs.update(found)
    return _convert(schema, defs, ())


def _convert(
    node: Mapping[str, JsonValue], defs: Mapping[str, JsonValue], seen: tuple[str, ...]
) -> Schema:
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _inline(node, ref, defs, seen)
    for combiner in ("anyOf", "oneOf"):
        branches = node.get(combiner)
        if isinstance(branches, list):
            return _union(node, branches, defs, seen)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        merged = {**all_of[0], **{k: v for k, v in node.items() if k != "allOf"}}
        return _convert(merged, defs, seen)
    kind = node.get("type")
    if isinstance(kind, list):
        return _type_list(node, kind, defs, seen)
    out = _scalar(node)
    for key in _PLAIN:
        if key in node:
            out[key] = node[key]
    properties = node.get("properties")
    if isinstance(properties, dict) and properties:
        out["properties"] = {
            name: _convert(sub if isinstance(sub, dict) else {}, defs, seen)
            for name, sub in properties.items()
        }
        required = node.get("required")
        if isinstance(required, list):
            kept: list[JsonValue] = [r for r in required if isinstance(r, str) and r in properties]
            if kept:
                out["required"] = kept
    items = node.get("items")
    if isinstance(items, list):  # the tuple form: Gemini has one item schema
        items = items[0] if items else None
    if isinstance(items, dict):
        out["items"] = _convert(items, defs, seen)
    values = node.get("enum")
    if node.get("nullable") is True or (isinstance(values, list) and None in values):
        out["nullable"] = True
    return out


def _scalar(node: Mapping[str, JsonValue]) -> Schema:
    """The `type`, `format` and `enum` of one node."""
    kind = node.get("type")
    out: Schema = {}
    gemini_type = _TYPES.get(kind) if isinstance(kind, str) else None
    enum = _enum(node)
    if gemini_type is None and enum is not None:
        gemini_type = "STRING"
    if gemini_type is not None:
        out["type"] = gemini_type
    elif kind == "null":
        out["type"], out["nullable"] = "STRING", True
    fmt = node.get("format")
    if gemini_type in _FORMATS and isinstance(fmt, str) and fmt in _FORMATS[gemini_type]:
        out["format"] = fmt
    if enum is not None and gemini_type == "STRING":
        out["enum"] = list(enum)
    return out


def _inline(
    node: Mapping[str, JsonValue], ref: str, defs: Mapping[str, JsonValue], seen: tuple[str, ...]
) -> Schema:
    name = ref.rsplit("/", 1)[-1]
    target = defs.get(name)
    siblings = {k: v for k, v in node.items() if k != "$ref"}
    if name in seen or not isinstance(target, dict):
        # A recursive (or dangling) reference: Gemini has no way to say it, so any object.
        out: Schema = {"type": "OBJECT"}
        description = siblings.get("description")
        if isinstance(description, str):
            out["description"] = description
        return out
    return _convert({**target, **siblings}, defs, (*seen, name))


def _union(
    node: Mapping[str, JsonValue],
    branches: list[JsonValue],
    defs: Mapping[str, JsonValue],
    seen: tuple[str, ...],
) -> Schema:
    options = [b for b in branches if isinstance(b, dict)]
    rest = [b for b in options if b.get("type") != "null"]
    nullable = len(rest) < len(options)
    siblings = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
    if len(rest) == 1:
        out = _convert({**rest[0], **siblings}, defs, seen)
    else:
        out = _convert(siblings, defs, seen)
        out["anyOf"] = [_convert(b, defs, seen) for b in rest]
    if nullable:
        out["nullable"] = True
    return out


def _type_list(
    node: Mapping[str, JsonValue],
    kinds: list[JsonValue],
    defs: Mapping[str, JsonValue],
    seen: tuple[str, ...],
) -> Schema:
    branches: list[JsonValue] = [{"type": k} for k in kinds if isinstance(k, str)]
    rest = {k: v for k, v in node.items() if k != "type"}
    if sum(1 for k in kinds if k != "null") == 1:
        # ["string", "null"]: one real type, so keywords like `items` stay on it.
        real = next(k for k in kinds if k != "null")
        converted = _convert({**rest, "type": real}, defs, seen)
        if "null" in kinds:
            converted["nullable"] = True
        return converted
    return _union({**rest, "anyOf": branches}, branches, defs, seen)


def _enum(node: Mapping[str, JsonValue]) -> list[str] | None:
    if "const" in node:
        const = node["const"]
        return [const] if isinstance(const, str) else None
    values = node.get("enum")
    if not isinstance(values, list):
        return None
    strings = [v for v in values if v is not None]
    if strings and all(isinstance(v, str) for v in strings):
        return [v for v in strings if isinstance(v, str)]
    return None
