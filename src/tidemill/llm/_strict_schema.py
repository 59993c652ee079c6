"""JSON Schema rewritten for OpenAI's strict mode (Structured Outputs).

With `strict: true` OpenAI constrains decoding to the schema, but only
accepts a subset of JSON Schema
(https://platform.openai.com/docs/guides/structured-outputs#supported-schemas):

- the root is an object (not an `anyOf`);
- every object sets `additionalProperties: false` and lists *all* its
  properties in `required`; an optional property is made nullable (a union
  with `null`), OpenAI's documented way to let the model leave it out;
- `anyOf`, `enum`, `const`, `$defs`/`$ref` (also recursive) are supported,
  `oneOf` is not, nor `allOf`, `not`, `if`/`then`/`else`, dependencies or
  `patternProperties`;
- string `pattern`, number bounds and `minItems`/`maxItems` are kept;
  `format` is kept only for the formats OpenAI lists.

`strict_json_schema` makes those changes: it closes every object, requires
every property, turns `oneOf` into `anyOf`, unwraps a one-branch `allOf`,
inlines a `$ref` that has sibling keywords, and drops keywords outside the
subset that only narrow values (`default`, `minLength`, `uniqueItems`, an
unknown `format`, ...) — Tidemill still validates the answer against the
original schema, so nothing is lost but the provider's guarantee of them.
What cannot be made strict (a free-form or `dict`-like object, a root that
is not an object, `not`, conditionals) raises `ConfigurationError`.

`inline_root_ref` serves every provider: it turns pydantic's schema of a
recursive model (`{"$ref": "#/$defs/Node", "$defs": {...}}`) into one whose
root is the referenced object, as forced tools and native formats need.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from tidemill.errors import ConfigurationError

__all__ = ["inline_root_ref", "openai_schema", "strict_json_schema"]

Schema = dict[str, JsonValue]

_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# Keywords outside the strict subset that only narrow (or annotate) values: dropped.
_DROPPED = frozenset(
    {
        "default",
        "examples",
        "discriminator",
        "minLength",
        "maxLength",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "unevaluatedProperties",
        "readOnly",
        "writeOnly",
        "deprecated",
        "$schema",
        "$id",
        "$comment",
    }
)
# Keywords whose meaning strict mode cannot express: refused.
_REFUSED = {
    "not": "'not'",
    "if": "'if'/'then'/'else'",
    "then": "'if'/'then'/'else'",
    "else": "'if'/'then'/'else'",
    "dependentRequired": "'dependentRequired'",
    "dependentSchemas": "'dependentSchemas'",
    "dependencies": "'dependencies'",
    "patternProperties": "'patternProperties' (a dict-like object)",
}
# Keywords whose value is one schema, a list of schemas, or a map of schemas.
_ONE = ("items", "additionalItems")
_MANY = ("anyOf", "prefixItems")
_MAP = ("properties", "$defs", "definitions")
_HINT = (
    "Use strict=False (Tidemill still validates the answer), or change the schema: "
    "give every object fixed 'properties', and make the root an object."
)


def inline_root_ref(schema: Mapping[str, JsonValue]) -> Schema:
    """`schema` with a root `$ref` into its `$defs` replaced by the schema it names.

    The `$defs` stay, for references further down (a recursive model's). A
    schema without such a `$ref`, or whose target is missing, comes back as
    a plain copy; the input is left unchanged.

    Examples:
        >>> inline_root_ref({
        ...     "$ref": "#/$defs/Node",
        ...     "$defs": {"Node": {"type": "object",
        ...                        "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        ... })  # doctest: +NORMALIZE_WHITESPACE
        {'$defs': {'Node': {'type': 'object', 'properties': {'next': {'$ref': '#/$defs/Node'}}}},
         'type': 'object', 'properties': {'next': {'$ref': '#/$defs/Node'}}}
    """
    out = dict(schema)
    ref = out.get("$ref")
    defs = out.get("$defs")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/") or not isinstance(defs, dict):
        return out
    target = defs.get(ref.removeprefix("#/$defs/"))
    if not isinstance(target, dict):
        return out
    del out["$ref"]
    return {**out, **target}


def strict_json_schema(schema: Mapping[str, JsonValue]) -> Schema:
    """Rewrite `schema` for OpenAI's strict mode; the input is left unchanged.

    Raises:
        ConfigurationError: When the schema cannot be made strict, naming where.

    Examples:
        >>> strict_json_schema({
        ...     "type": "object",
        ...     "properties": {"name": {"type": "string", "minLength": 1},
        ...                    "age": {"type": "integer", "default": 0}},
        ...     "required": ["name"],
        ... })  # doctest: +NORMALIZE_WHITESPACE
        {'type': 'object', 'properties': {'name': {'type': 'string'},
         'age': {'type': ['integer', 'null']}}, 'required': ['name', 'age'],
         'additionalProperties': False}
        >>> strict_json_schema({"type": "object", "additionalProperties": {"type": "integer"}})
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: The schema cannot be made strict: the object at \
'(root)' allows extra properties ... Hint: Use strict=False ...
    """
    if not isinstance(schema, Mapping):
        raise ConfigurationError(
            f"A strict schema must be a JSON Schema object, not {type(schema).__name__}.",
            hint=_HINT,
        )
    root = _unwrapped(schema, schema, "(root)", ())  # pydantic's {"$ref", "$defs"} root
    if "anyOf" in root or "oneOf" in root or not _is_object(root):
        raise ConfigurationError(
            "The schema cannot be made strict: OpenAI's strict mode needs an object "
            "(with 'type': 'object') at the root.",
            hint="Wrap the value in an object model, or use strict=False.",
        )
    return _node(root, schema, "(root)", ())


def _is_object(node: Mapping[str, JsonValue]) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def _refuse(where: str, why: str) -> ConfigurationError:
    return ConfigurationError(f"The schema cannot be made strict: {why} at '{where}'.", hint=_HINT)


def _node(
    node: Mapping[str, JsonValue], root: Mapping[str, JsonValue], where: str, seen: tuple[str, ...]
) -> Schema:
    node = _unwrapped(node, root, where, seen)
    for keyword, name in _REFUSED.items():
        if keyword in node:
            raise _refuse(where, f"{name} is not supported")
    out: Schema = {}
    for key, value in node.items():
        if key in _DROPPED or key in ("required", "additionalProperties"):
            continue
        if key == "format" and value not in _FORMATS:
            continue
        if key == "oneOf":
            key = "anyOf"
        if key in _ONE and isinstance(value, dict):
            out[key] = _node(value, root, f"{where}.{key}", seen)
        elif key in ("anyOf", "prefixItems") and isinstance(value, list):
            out[key] = [
                _node(item, root, f"{where}.{key}[{i}]", seen) if isinstance(item, dict) else item
                for i, item in enumerate(value)
            ]
        elif key in _MAP and isinstance(value, dict):
            base = where if key == "properties" else f"{where}.{key}"
            out[key] = {
                name: _node(sub, root, f"{base}.{name}", seen) if isinstance(sub, dict) else sub
                for name, sub in value.items()
            }
        else:
            out[key] = value
    if _is_object(node):
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise ConfigurationError(
                f"The schema cannot be made strict: the object at '{where}' allows extra "
                "properties ('additionalProperties' is not false).",
                hint=_HINT,
            )
        properties = out.get("properties")
        if not isinstance(properties, dict):
            raise _refuse(where, "an object without 'properties' (a free-form object)")
        required = node.get("required")
        given = required if isinstance(required, list) else []
        for name, sub in properties.items():
            if name not in given and isinstance(sub, dict) and not _takes_null(sub, root):
                properties[name] = _or_null(sub)
        out["required"] = list(properties)
        out["additionalProperties"] = False
    return out


def _takes_null(
    node: Mapping[str, JsonValue], root: Mapping[str, JsonValue], depth: int = 0
) -> bool:
    ref = node.get("$ref")
    if isinstance(ref, str) and depth < 16:
        try:
            return _takes_null(_resolve(root, ref, ""), root, depth + 1)
        except ConfigurationError:
            return False
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    branches = node.get("anyOf")
    return isinstance(branches, list) and any(
        isinstance(branch, dict) and _takes_null(branch, root, depth) for branch in branches
    )


def _or_null(node: Schema) -> Schema:
    """An optional property made nullable: strict mode's way to leave it out."""
    kind = node.get("type")
    if isinstance(kind, str) and "enum" not in node and "const" not in node:
        return {**node, "type": [kind, "null"]}
    return {"anyOf": [node, {"type": "null"}]}


def _unwrapped(
    node: Mapping[str, JsonValue], root: Mapping[str, JsonValue], where: str, seen: tuple[str, ...]
) -> Mapping[str, JsonValue]:
    """A one-branch `allOf` merged into its node; a `$ref` with siblings inlined."""
    all_of = node.get("allOf")
    if all_of is not None:
        if not isinstance(all_of, list) or len(all_of) != 1 or not isinstance(all_of[0], dict):
            raise _refuse(where, "'allOf' with more than one schema is not supported")
        merged = {k: v for k, v in node.items() if k != "allOf"}
        node = {**all_of[0], **merged}
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        if ref in seen:
            raise _refuse(where, f"the recursive reference {ref!r} has sibling keywords")
        target = _resolve(root, ref, where)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _unwrapped({**target, **siblings}, root, where, (*seen, ref))
    return node


def _resolve(root: Mapping[str, JsonValue], ref: str, where: str) -> Mapping[str, JsonValue]:
    if not ref.startswith("#/"):
        raise _refuse(where, f"the reference {ref!r} is not local")
    found: JsonValue = dict(root)
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(found, dict) or part not in found:
            raise _refuse(where, f"the reference {ref!r} points nowhere")
        found = found[part]
    if not isinstance(found, dict):
        raise _refuse(where, f"the reference {ref!r} is not a schema")
    return found


def openai_schema(schema: Mapping[str, JsonValue], *, strict: bool) -> Schema:
    """The schema to send OpenAI: made strict when `strict`, else a plain copy.

    Examples:
        >>> openai_schema({"type": "object", "properties": {}}, strict=True)
        {'type': 'object', 'properties': {}, 'required': [], 'additionalProperties': False}
    """
    return strict_json_schema(schema) if strict else dict(schema)
