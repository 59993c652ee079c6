"""Resource values against their type's schema: every problem listed, no secret shown."""

from __future__ import annotations

from typing import Any

import pytest

from tidemill.errors import ConfigurationError
from tidemill.workspace._values import (
    InvalidValue,
    check_resource_type_schema,
    check_resource_value,
    secret_fields,
)

SECRET = "sk-live-7f3a9c1e-DO-NOT-LEAK"

_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "api_key": {"type": "string", "minLength": 40, "writeOnly": True},
        "token": {"type": "string", "pattern": "^tok_", "writeOnly": True},
        "region": {"type": "string", "enum": ["eu", "us"]},
        "port": {"type": "integer", "maximum": 65535},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["api_key"],
    "additionalProperties": False,
}


def _problems(schema: dict[str, Any], value: Any) -> InvalidValue:
    with pytest.raises(InvalidValue) as caught:
        check_resource_value(schema, value, path="f/ai/vendor")
    return caught.value


def test_a_fitting_value_passes() -> None:
    check_resource_value(_SCHEMA, {"api_key": "k" * 40, "region": "eu"}, path="f/ai/vendor")


def test_every_problem_is_listed_sorted_by_path() -> None:
    error = _problems(_SCHEMA, {"region": "asia", "port": 70000, "headers": {"X-A": 1}})
    assert error.problems == [
        "at $: 'api_key' is a required property",
        "at $.headers['X-A']: 1 is not of type 'string'",
        "at $.port: 70000 is greater than the maximum of 65535",
        "at $.region: 'asia' is not one of ['eu', 'us']",
    ]
    assert error.message.startswith("f/ai/vendor does not fit its resource type: at $: ")
    assert error.context["path"] == "f/ai/vendor"
    assert isinstance(error, ConfigurationError) and isinstance(error, ValueError)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"api_key": SECRET}, "at $.api_key: must be at least 40 characters long"),
        ({"api_key": "k" * 40, "token": SECRET}, "at $.token: must match the pattern '^tok_'"),
        ({"api_key": [SECRET]}, "at $.api_key: must be a string"),
        ({"api_key": {"nested": SECRET}}, "at $.api_key: must be a string"),
    ],
)
def test_a_secret_is_never_quoted(value: dict[str, Any], problem: str) -> None:
    error = _problems(_SCHEMA, value)
    assert problem in error.problems
    for text in (str(error), error.message, repr(error.context), repr(error.problems)):
        assert SECRET not in text


def test_a_secret_echoed_by_a_parent_error_is_not_quoted() -> None:
    # `not` at the root quotes the whole instance, secret included.
    schema = {
        "type": "object",
        "properties": {"password": {"type": "string", "writeOnly": True}},
        "not": {"required": ["password"]},
    }
    error = _problems(schema, {"password": SECRET})
    assert SECRET not in str(error)
    assert error.problems == ["at $: does not fit the schema (not)"]


def test_a_secret_in_an_alternative_or_a_definition_is_not_quoted() -> None:
    schema = {
        "$defs": {"key": {"type": "string", "minLength": 99, "writeOnly": True}},
        "type": "object",
        "properties": {"auth": {"anyOf": [{"$ref": "#/$defs/key"}, {"type": "null"}]}},
    }
    error = _problems(schema, {"auth": SECRET})
    assert error.problems == ["at $.auth: does not fit the schema (anyOf)"]
    assert SECRET not in str(error)


def test_a_secret_inside_an_array_is_not_quoted() -> None:
    schema = {"type": "array", "items": {"type": "integer", "writeOnly": True}}
    error = _problems(schema, [1, SECRET])
    assert error.problems == ["at $[1]: must be an integer"]


def test_a_secret_under_pattern_properties_is_not_quoted() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"_token$": {"type": "string", "maxLength": 4, "writeOnly": True}},
    }
    error = _problems(schema, {"github_token": SECRET})
    assert error.problems == ["at $.github_token: must be at most 4 characters long"]


def test_non_secret_fields_keep_jsonschemas_message() -> None:
    error = _problems(_SCHEMA, {"api_key": "k" * 40, "region": "mars"})
    assert error.problems == ["at $.region: 'mars' is not one of ['eu', 'us']"]


def test_an_invalid_schema_is_refused_before_the_value() -> None:
    with pytest.raises(InvalidValue, match="not a valid JSON Schema"):
        check_resource_value({"type": 3}, {}, path="f/ai/vendor")


def test_an_unresolvable_ref_is_an_invalid_value() -> None:
    schema = {"$ref": "https://example.com/elsewhere.json"}
    with pytest.raises(InvalidValue, match="cannot be resolved"):
        check_resource_value(schema, {}, path="f/ai/vendor")


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "object", "properties": {"a": {"type": "string", "writeOnly": True}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"},
        True,
    ],
)
def test_valid_type_schemas(schema: Any) -> None:
    if schema is True:  # a boolean is a schema, but not an object
        with pytest.raises(InvalidValue, match="must be a JSON object"):
            check_resource_type_schema(schema)
    else:
        check_resource_type_schema(schema)


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ([], "must be a JSON object, not list"),
        ({"type": "strnig"}, "at $.type:"),
        ({"properties": {"a": {"minLength": -1}}}, "at $.properties.a.minLength:"),
        ({"$schema": "https://example.com/my-draft"}, "unknown $schema"),
        ({"$schema": 7}, "unknown $schema"),
    ],
)
def test_invalid_type_schemas(schema: Any, words: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        check_resource_type_schema(schema)
    assert words in str(caught.value)


def test_secret_fields_are_the_top_level_write_only_properties() -> None:
    assert secret_fields(_SCHEMA) == {"api_key", "token"}
    assert secret_fields({"properties": {"a": {"writeOnly": "yes"}, "b": True}}) == set()
    assert secret_fields({"type": "object"}) == set()
