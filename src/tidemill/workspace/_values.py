r"""Checking a resource's value against its type's JSON Schema, without showing its secrets.

A resource type's schema marks its secret fields `writeOnly: true` (standard
JSON Schema: the value may be written, and is never to be read back). A
value that does not fit is refused with `InvalidValue`, listing every problem
as `at <JSON path>: <message>`, sorted by path. The messages of `jsonschema`
often quote the value they refuse; a problem under a secret field, or whose
message would quote a secret's value, is told in words taken from the schema
instead (`must be a string`), so the error can be logged and shown.

Formats (`format: uri`) are annotations, as JSON Schema 2020-12 has them by
default: they are not checked (a `pattern` is).

Examples:
    >>> schema = {
    ...     "type": "object",
    ...     "properties": {
    ...         "api_key": {"type": "string", "minLength": 8, "writeOnly": True},
    ...         "region": {"type": "string"},
    ...     },
    ...     "required": ["api_key"],
    ... }
    >>> check_resource_value(schema, {"api_key": "sk-secret-key", "region": "eu"}, path="f/ai/x")
    >>> try:
    ...     check_resource_value(schema, {"api_key": "sk-1", "region": 3}, path="f/ai/x")
    ... except InvalidValue as exc:
    ...     print(exc.problems)
    ['at $.api_key: must be at least 8 characters long', "at $.region: 3 is not of type 'string'"]
    >>> sorted(secret_fields(schema))
    ['api_key']
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import jsonschema.exceptions
import referencing.exceptions
from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from tidemill.errors import ConfigurationError

__all__ = [
    "InvalidValue",
    "check_resource_type_schema",
    "check_resource_value",
    "secret_fields",
]


class InvalidValue(ConfigurationError, ValueError):
    """A resource value that does not fit its type, or a resource type that is no JSON Schema.

    Attributes:
        problems: Each problem, as `at <JSON path>: <message>`, sorted by path.
            Secret (`writeOnly`) values are never quoted.
    """

    def __init__(
        self,
        message: str,
        *,
        problems: Sequence[str] = (),
        hint: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, hint=hint, context=context)
        self.problems: list[str] = list(problems)


def _validator_class(schema: Mapping[str, Any]) -> type[Validator] | None:
    """The validator of the draft `$schema` names (2020-12 without one); None for an unknown one."""
    if "$schema" not in schema:
        return Draft202012Validator
    dialect = schema["$schema"]
    if not isinstance(dialect, str):
        return None
    found: type[Validator] | None = validator_for(dict(schema), default=None)  # type: ignore[arg-type]
    return found


def check_resource_type_schema(schema: Any) -> None:
    """Check that `schema` is a JSON Schema object a resource type may have.

    It must be a JSON object that is a valid schema of the draft its
    `$schema` names (2020-12 when it names none).

    Raises:
        InvalidValue: Naming what is wrong, with the location in the schema.

    Examples:
        >>> check_resource_type_schema({"type": "object", "properties": {"url": {}}})
        >>> check_resource_type_schema({"type": "strnig"})
        Traceback (most recent call last):
        ...
        tidemill.workspace._values.InvalidValue: The resource type's schema is not a valid ...
    """
    if not isinstance(schema, Mapping):
        raise InvalidValue(
            f"A resource type's schema must be a JSON object, not {type(schema).__name__}.",
            hint='Write a JSON Schema such as {"type": "object", "properties": {...}}.',
        )
    cls = _validator_class(schema)
    if cls is None:
        raise InvalidValue(
            f"The resource type's schema names an unknown $schema {schema['$schema']!r}.",
            hint="Use https://json-schema.org/draft/2020-12/schema, or leave $schema out.",
        )
    try:
        cls.check_schema(dict(schema))
    except jsonschema.exceptions.SchemaError as exc:
        problem = f"at {exc.json_path}: {exc.message}"
        raise InvalidValue(
            f"The resource type's schema is not a valid JSON Schema: {problem}",
            problems=[problem],
            hint="Fix the schema; https://json-schema.org/draft/2020-12 describes the keywords.",
        ) from None


def secret_fields(schema: Mapping[str, Any]) -> set[str]:
    """The names of the top-level properties of `schema` that are `writeOnly` (secrets).

    Examples:
        >>> secret_fields({"properties": {"token": {"writeOnly": True}, "host": {}}})
        {'token'}
        >>> secret_fields({"type": "string"})
        set()
    """
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return set()
    return {
        name
        for name, sub in properties.items()
        if isinstance(sub, Mapping) and sub.get("writeOnly") is True
    }


_MAX_DEPTH = 32
"""How deep `_secrets` follows a schema (and its `$ref`s) into a value."""

Path = tuple[str | int, ...]


def _resolve(root: Mapping[str, Any], ref: Any) -> Mapping[str, Any] | None:
    """The subschema a local `$ref` (`#/$defs/name`) points to; None for any other."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node: Any = root
    for raw in ref[1:].split("/")[1:] if ref != "#" else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node if isinstance(node, Mapping) else None


def _secrets(
    root: Mapping[str, Any], schema: Any, value: Any, path: Path, depth: int = 0
) -> Iterator[tuple[Path, Any]]:
    """The (path, value) of every part of `value` that a `writeOnly` subschema describes."""
    if depth > _MAX_DEPTH or not isinstance(schema, Mapping):
        return
    if schema.get("writeOnly") is True:
        yield path, value
        return
    nested: list[Any] = [schema.get(key) for key in ("if", "then", "else", "not")]
    for key in ("allOf", "anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            nested.extend(options)
    nested.append(_resolve(root, schema.get("$ref")))
    for sub in nested:
        yield from _secrets(root, sub, value, path, depth + 1)
    if isinstance(value, Mapping):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        patterns = schema.get("patternProperties")
        patterns = patterns if isinstance(patterns, Mapping) else {}
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            matched = [sub for pattern, sub in patterns.items() if _matches(pattern, name)]
            subs = [properties[name]] if name in properties else []
            subs.extend(matched)
            for sub in subs or [extra]:
                yield from _secrets(root, sub, item, (*path, name), depth + 1)
    elif isinstance(value, list):
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else schema.get("items")
            yield from _secrets(root, sub, item, (*path, index), depth + 1)


def _matches(pattern: Any, name: Any) -> bool:
    try:
        return isinstance(pattern, str) and re.search(pattern, str(name)) is not None
    except re.error:
        return False


def _texts(value: Any) -> Iterator[str]:
    """How a secret value could show in a message: itself, its repr, the strings inside it."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    yield repr(value)


_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}

_BOUNDS = {
    "minimum": "at least",
    "maximum": "at most",
    "exclusiveMinimum": "more than",
    "exclusiveMaximum": "less than",
}


def _told(error: jsonschema.exceptions.ValidationError) -> str:
    """A message for `error` made only of the schema's words, never of the value."""
    keyword, expected = error.validator, error.validator_value
    if keyword == "type":
        names = expected if isinstance(expected, list) else [expected]
        return "must be " + " or ".join(_TYPES.get(str(name), repr(name)) for name in names)
    if keyword == "minLength":
        return f"must be at least {expected} characters long"
    if keyword == "maxLength":
        return f"must be at most {expected} characters long"
    if keyword == "pattern":
        return f"must match the pattern {expected!r}"
    if keyword == "format":
        return f"must be a valid {expected}"
    if keyword == "enum":
        return "is not one of the allowed values"
    if keyword == "const":
        return "is not the allowed value"
    if keyword in _BOUNDS:
        return f"must be {_BOUNDS[str(keyword)]} {expected}"
    if keyword == "required" and isinstance(expected, list):
        given = error.instance if isinstance(error.instance, Mapping) else {}
        missing = [str(name) for name in expected if name not in given]
        return f"lacks the required properties {', '.join(missing)}"
    if keyword == "additionalProperties":
        return "has properties the schema does not allow"
    return f"does not fit the schema ({keyword})"


def _covers(secret: Path, path: Path) -> bool:
    return path[: len(secret)] == secret


def check_resource_value(schema: Mapping[str, Any], value: Any, *, path: str) -> None:
    """Check `value` against the resource type's `schema`, never quoting a secret.

    Args:
        schema: The resource type's JSON Schema (see `check_resource_type_schema`).
        value: The resource's value.
        path: The resource's workspace path, named in the error.

    Raises:
        InvalidValue: Listing every problem as `at <JSON path>: <message>`,
            sorted by path; also when `schema` is not a valid schema or refers
            to what cannot be resolved.

    Examples:
        >>> schema = {"type": "object", "properties": {"token": {"type": "string",
        ...     "writeOnly": True}}, "additionalProperties": False}
        >>> try:
        ...     check_resource_value(schema, {"token": ["hunter2"], "x": 1}, path="u/ann/db")
        ... except InvalidValue as exc:
        ...     print(exc.message, "hunter2" in str(exc))
        u/ann/db does not fit its resource type: at $: Additional properties are not allowed
        ('x' was unexpected); at $.token: must be a string False
    """
    check_resource_type_schema(schema)
    cls = _validator_class(schema)
    assert cls is not None  # checked above
    validator = cls(dict(schema))
    secrets = list(_secrets(schema, schema, value, ()))
    texts = {text for _, found in secrets for text in _texts(found) if text}
    found: list[tuple[str, str]] = []
    try:
        for error in validator.iter_errors(value):
            where: Path = tuple(error.absolute_path)
            message = error.message
            hidden = any(_covers(secret, where) for secret, _ in secrets)
            if hidden or any(text in message for text in texts):
                message = _told(error)
            found.append((error.json_path, message))
    except referencing.exceptions.Unresolvable as exc:
        raise InvalidValue(
            f"The schema of {path}'s resource type refers to what cannot be resolved: {exc}.",
            hint="Keep $ref local to the schema (#/$defs/...).",
            context={"path": path},
        ) from None
    if not found:
        return
    problems = [f"at {where}: {message}" for where, message in sorted(found)]
    raise InvalidValue(
        f"{path} does not fit its resource type: {'; '.join(problems)}",
        problems=problems,
        hint="Fix the value so it fits the resource type's schema.",
        context={"path": path, "problems": problems},
    )
